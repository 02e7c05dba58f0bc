"""Qwen3-Coder / Qwen3.5 XML tool calls (``qwen3-coder``).

Values carry no type flag: each is wrapped in one leading and one trailing newline (removed) and typed
by the offered tool's JSON schema — JSON-decoded for integer/number/boolean/object/array, ``null`` is
null for any type, everything else (and everything when no tools are given) a string. A value ends at
``</parameter>``, or at the next ``<parameter=`` or ``</function>`` when the model forgot its closer, as
the serving engines do.

String values stream as they arrive; only the one newline that may be the wrapper is held back (and,
with tools, the first four characters while the value could still be ``null``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from functools import partial

from sseguard.core.toolcalls.events import MarkupError, MarkupErrorKind
from sseguard.core.toolcalls.family import CallLike, Claim, Family, claim_openers
from sseguard.core.toolcalls.grammars.base import Call
from sseguard.core.toolcalls.grammars.blocks import END, RESUME, SWALLOW, BlockParser
from sseguard.core.toolcalls.grammars.markers import Markers, first_non_ws
from sseguard.core.toolcalls.grammars.strict_json import json_string_body
from sseguard.core.toolcalls.grammars.thinking import ReasoningTags
from sseguard.core.toolcalls.schema import ToolSpec

TOOL_CALL = "<tool_call>"
TOOL_CALL_END = "</tool_call>"
FUNCTION = "<function="
FUNCTION_END = "</function>"
PARAMETER = "<parameter="
PARAMETER_END = "</parameter>"
REASONING_EXITS = (TOOL_CALL, FUNCTION)
FAMILY_MARKERS = (TOOL_CALL, TOOL_CALL_END, FUNCTION, FUNCTION_END, PARAMETER, PARAMETER_END)

CONTENT, BLOCK, FUNC, STRING_VALUE, JSON_VALUE, SKIP, THINK = range(7)
_MARKERS: dict[tuple[str, ...], Markers] = {}


class Qwen3CoderParser(ReasoningTags, BlockParser):
    """Incremental parser for the Qwen3-Coder XML tool-call format, and for the families that wrap
    the same body in another block (docs/design/markup.md class F): ``opener``/``closer`` are the block's
    tags, ``think`` the reasoning spans the family writes itself (opener, closer)."""

    _BLOCK, _SKIP, _THINK = BLOCK, SKIP, THINK

    def __init__(self, tools: ToolSpec | None = None, *, family: str = "qwen3-coder",
                 opener: str = TOOL_CALL, closer: str = TOOL_CALL_END,
                 think: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(tools)
        self.family = family
        self._open, self._close = opener, closer
        self._think_tags = dict(think)
        literals = (opener, closer, FUNCTION, FUNCTION_END, PARAMETER, PARAMETER_END,
                    *(t for pair in think for t in pair))
        markers = _MARKERS.get(literals)
        if markers is None:
            markers = _MARKERS[literals] = Markers(literals)
        # decision 1.8: "\n\n" before the first opener, "\n" before later ones
        self._sep = "\n\n"
        self._key = ""
        self._buf: list[str] = []
        self._fresh = True  # no character of the value seen yet (its leading newline is the wrapper)
        self._newline = False  # a held "\n" that is the wrapper if the value ends here
        self._maybe_null = False  # with tools: the string value so far could still be ``null``
        self._head = ""
        self._find, self._hold = markers.find, markers.hold
        self._handlers = (self._content, self._between_calls, self._function, self._string_value,
                          self._json_value, self._skip, self._in_reasoning)

    def _named_tag(self, data: str, m: int, prefix: str) -> tuple[int, str | None]:
        """Read ``<function=NAME>`` / ``<parameter=NAME>``: (end, name or None if malformed);
        end -1 when the tag is not complete yet."""
        end = self._tag_end(data, m)
        if end < 0:
            return -1, None
        name = data[m + len(prefix):end - 1] if data[end - 1] == ">" else ""
        return end, name or None

    def _opener(self, data: str, pos: int, m: int, lit: str) -> int:
        if lit == self._open:
            self._markup(data[pos:m + len(lit)])
            self._sep = "\n"
            self._state = BLOCK
            return m + len(lit)
        if lit in (FUNCTION, PARAMETER):
            end, name = self._named_tag(data, m, lit)
            if end < 0:
                return ~pos
            if lit == FUNCTION and name is not None:  # a call without <tool_call> is still a call
                self._markup(data[pos:m])
                self._sep = "\n"
                self._start_call(name, data[m:end], in_block=False)
                self._state = FUNC
                return end
            self._text(data[pos:m])
            self._event(MarkupError(MarkupErrorKind.MALFORMED_TAG, data[m:end]))
            return end
        if lit in self._think_tags:
            return self._enter_reasoning(data, pos, m, lit)
        self._text(data[pos:m])
        self._event(MarkupError(MarkupErrorKind.MALFORMED_TAG, lit))
        return m + len(lit)

    def _block_marker(self, data: str, m: int, lit: str) -> int | None:
        if lit == FUNCTION:
            tend, name = self._named_tag(data, m, lit)
            return self._call_opener(data, m, tend, name, FUNC)
        if lit == self._close:
            return self._close_block(lit, m + len(lit))
        return None

    def _function(self, data: str, pos: int) -> int:
        call = self._call
        assert call is not None
        r, lit = self._tag_in_call(data, pos)
        if lit is None:
            return r
        if lit == PARAMETER:
            tend, key = self._named_tag(data, pos, lit)
            if tend < 0:
                return ~pos
            if key is not None:
                call.raw.append(data[pos:tend])
                if not self._add_key(key):
                    return tend
                self._fresh, self._newline = True, False
                if self._tools is not None and self._tools.json_typed(call.name, key):
                    self._key, self._buf = key, []
                    self._state = JSON_VALUE
                else:
                    self._maybe_null = self._tools is not None
                    self._head = ""
                    self._delta(call.key_prefix(key) + ("" if self._maybe_null else '"'))
                    self._state = STRING_VALUE
                return tend
        elif lit == FUNCTION_END:
            call.raw.append(lit)
            self._end_call()
            self._after_call(call.in_block)
            return pos + len(lit)
        self._void(MarkupErrorKind.MALFORMED_TAG)
        return pos

    def _value_marker(self, m: int, lit: str, into: Callable[[str], None]) -> tuple[int, bool]:
        """At the marker ``lit`` at ``m`` inside a value: (where to go on, whether the value ended).
        It ends at ``</parameter>`` (consumed), or at ``<parameter=``/``</function>`` when the
        closer was forgotten (left for the function state); other markers are value text."""
        if lit in (PARAMETER, FUNCTION_END):
            return m, True
        assert self._call is not None
        self._call.raw.append(lit)
        if lit == PARAMETER_END:
            return m + len(lit), True
        into(lit)
        return m + len(lit), False

    def _string_text(self, seg: str) -> None:
        if self._fresh and seg:
            self._fresh = False
            if seg[0] == "\n":
                seg = seg[1:]
        if not seg:
            return
        if self._maybe_null:
            self._head += seg
            if "null\n".startswith(self._head):
                return
            self._maybe_null, seg, self._head = False, self._head, ""
            self._delta('"')
        if self._newline:
            seg = "\n" + seg
        self._newline = seg.endswith("\n")
        if self._newline:
            seg = seg[:-1]
        self._delta(json_string_body(seg))

    def _string_done(self) -> None:
        if self._maybe_null:
            value = self._head[:-1] if self._head.endswith("\n") else self._head
            self._delta("null" if value == "null" else f'"{json_string_body(value)}"')
            self._maybe_null, self._head = False, ""
        else:
            self._delta('"')  # a held newline was the wrapper
        self._state = FUNC

    def _string_value(self, data: str, pos: int) -> int:
        m, lit = self._find(data, pos)
        end = m if m != -1 else self._hold(data, pos)
        if end > pos:  # the value's text, inlined rather than _gather: this is the hot path
            s = data[pos:end]
            assert self._call is not None
            self._call.raw.append(s)
            self._string_text(s)
            return end if m != -1 else ~end
        if m == -1:
            return ~pos
        r, ended = self._value_marker(m, lit, self._string_text)
        if ended:
            self._string_done()
        return r

    def _json_value(self, data: str, pos: int) -> int:
        r, lit = self._gather(data, pos, self._buf.append)
        if r != pos:
            return r
        r, ended = self._value_marker(pos, lit, self._buf.append)
        if ended:
            buf, self._buf = self._buf, []
            self._json_param(self._key, buf, FUNC)
        return r

    def _skip_marker(self, data: str, m: int, lit: str, call: Call) -> tuple[int, int]:
        tend = m + len(lit)
        resume = lit == self._close if call.in_block else lit == self._open
        if lit == FUNCTION:  # resume only where the next state accepts the tag
            tend, name = self._named_tag(data, m, lit)
            resume = name is not None
        if resume:
            return tend, RESUME
        if lit == FUNCTION_END and not call.in_block:  # in a block, resume at the next function
            return tend, END
        return tend, SWALLOW


# ── the family descriptor ──────────────────────────────────────────────────────────────────────────


def claim(held: str, final: bool) -> Claim:
    """``<tool_call>`` then a tag: Qwen3-Coder's ``<function=`` (GLM, asked first, takes its own arg
    tags; Hermes writes a JSON object, GLM a bare name)."""
    if not held.startswith(TOOL_CALL):
        return Claim.NO
    q = first_non_ws(held, len(TOOL_CALL), len(held))
    if q == -1:
        return Claim.NO if final else Claim.MORE
    return Claim.YES if held[q] == "<" else Claim.NO


def render(calls: Sequence[CallLike], malformed: bool, opener: str = TOOL_CALL,
           closer: str = TOOL_CALL_END) -> str:
    """``\\n\\n`` before the first call and ``\\n`` before later ones; each value on its own lines
    (``opener``/``closer``: the block's tags, another family's in class F)."""
    parts = []
    for i, c in enumerate(calls):
        params = "".join(
            f"{PARAMETER}{k}>\n{v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}"
            f"\n{PARAMETER_END}\n" for k, v in c.values.items())
        sep = "\n\n" if i == 0 else "\n"
        parts.append(f"{sep}{opener}\n{FUNCTION}{c.name}>\n{params}{FUNCTION_END}\n{closer}")
    return "".join(parts)


def _make_in_block(name: str, opener: str, closer: str, think: tuple[tuple[str, str], ...],
          tools: ToolSpec | None = None) -> Qwen3CoderParser:
    return Qwen3CoderParser(tools, family=name, opener=opener, closer=closer, think=think)


def block_family(name: str, opener: str, closer: str, aliases: tuple[str, ...],
           think: tuple[tuple[str, str], ...] = (), rank: int = 100) -> Family:
    """A class F family: the Qwen3-Coder body inside ``opener`` … ``closer``. A family that reads its
    own reasoning span is noticed by its opener too (``auto`` hands the reasoning to it), and no
    call opener ends that reasoning (decision 3.9)."""
    think_tags = tuple(t for pair in think for t in pair)
    markers = (opener, closer, FUNCTION, FUNCTION_END, PARAMETER, PARAMETER_END)
    openers = (opener, *(pair[0] for pair in think))
    return Family(name=name, make=partial(_make_in_block, name, opener, closer, think),
                  # the block tokens are special; stripped, they leave Qwen3-Coder's plain tags
                  markers=(*markers, *think_tags),
                  leak_markers=(opener, closer, FUNCTION, FUNCTION_END, PARAMETER),
                  reasoning_exits=() if think else (opener,), auto_markers=(*markers, *think_tags),
                  claim=claim_openers(openers),
                  render=partial(_render_in_block, opener, closer), rank=rank, aliases=aliases,
                  grammar="F", reasoning_spans=think)


def _render_in_block(opener: str, closer: str, calls: Sequence[CallLike], malformed: bool) -> str:
    return render(calls, malformed, opener, closer)
