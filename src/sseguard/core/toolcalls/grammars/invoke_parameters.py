"""MiniMax-M2 / M2.1 / M2.5 / M2.7 tool calls (``minimax-m2``).

```
Let me check.
<minimax:tool_call>
<invoke name="get_weather">
<parameter name="city">Paris</parameter>
</invoke>
</minimax:tool_call>
```

``<minimax:tool_call>`` and its closer are single special tokens; ``<invoke …>``, ``<parameter …>`` and
their closers are plain text, so they are markup only inside a block (decision 2.9: an invoke
without the wrapper is the model's text). The parser therefore searches two marker sets: the block
tokens (and the reserved think tags) in content, every tag inside a block. One ``\\n`` before each
block is the template's separator (decision 2.2).

Values carry no type flag: the offered tool's schema types them (``_typed``); without a schema a value
is the raw string, and a value that is exactly ``null`` is null whatever its type (both engines).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

from sseguard.core.toolcalls.events import MarkupError, MarkupErrorKind
from sseguard.core.toolcalls.family import CallLike, Family, claim_openers
from sseguard.core.toolcalls.grammars.base import Call
from sseguard.core.toolcalls.grammars.blocks import END, RESUME, SWALLOW
from sseguard.core.toolcalls.grammars.markers import THINK_TAGS, Markers, first_non_ws
from sseguard.core.toolcalls.grammars.render import tag_values
from sseguard.core.toolcalls.grammars.strict_json import ASCII_WS
from sseguard.core.toolcalls.grammars.typed_values import TypedValueParser
from sseguard.core.toolcalls.schema import ANY_JSON, ToolSpec, ValueTyping

BLOCK = "<minimax:tool_call>"
BLOCK_END = "</minimax:tool_call>"
INVOKE = "<invoke"
INVOKE_END = "</invoke>"
PARAMETER = "<parameter"
PARAMETER_END = "</parameter>"
#: The special tokens: never text, wherever they stand.
FAMILY_MARKERS = (BLOCK, BLOCK_END)
#: What ``sseguard tokenizer`` checks: the tokens, and the plain-text tags as the template writes them.
TOKENIZER_MARKERS = (BLOCK, BLOCK_END, '<invoke name="', INVOKE_END, '<parameter name="',
                     PARAMETER_END)
REASONING_EXITS = (BLOCK,)
SEPARATOR = "\n"
CDATA, CDATA_END = "<![CDATA[", "]]>"


@dataclass(frozen=True, slots=True)
class InvokeTags:
    """The spelling of one invoke/parameter family (docs/design/markup.md class G): MiniMax-M2's, or another's
    names for the same elements. ``block``/``block_end``: the wrapper around the calls (``None``:
    calls stand alone in the text, MiniCPM); ``invoke``/``parameter``: the element names, prefix
    included (``steptml:invoke``); ``quotes``: the quotes a ``name=`` may use; ``wrap``: per-call
    tokens around each invoke (Step-3: call begin, the separator after the type word ``function``,
    call end); ``cdata``: a value may be one CDATA section, whose inside is taken as is;
    ``untyped_json``: GLM's rule for untyped values (strict JSON if it parses) instead of MiniMax's
    (the raw string); ``separator``/``frame``: what the template writes before a block and around
    the answer (decision 2.2; the families of docs/design/markup.md §3 keep text verbatim);
    ``json_body``: a block may hold a call written as one JSON object ``{"name", "arguments"}``
    instead of an invoke (dots, docs/design/markup.md §3.3), read up to the block's closer."""

    block: str | None = BLOCK
    block_end: str | None = BLOCK_END
    invoke: str = "invoke"
    parameter: str = "parameter"
    quotes: str = '"'
    wrap: tuple[str, str, str] | None = None
    cdata: bool = False
    untyped_json: bool = False
    separator: str = SEPARATOR
    frame: bool = True
    reserved: tuple[str, ...] = THINK_TAGS
    messages: tuple[str, ...] = ()  # message tokens read in content by a subclass (Muse's)
    json_body: bool = False

    @property
    def invoke_open(self) -> str:
        return f"<{self.invoke}"

    @property
    def invoke_end(self) -> str:
        return f"</{self.invoke}>"

    @property
    def param_open(self) -> str:
        return f"<{self.parameter}"

    @property
    def param_end(self) -> str:
        return f"</{self.parameter}>"

    def tag_pattern(self, element: str) -> re.Pattern[str]:
        """An opening tag of ``element`` with its ``name=`` attribute in one of the quotes."""
        names = "|".join(f"{re.escape(q)}([^{re.escape(q)}]+){re.escape(q)}" for q in self.quotes)
        return re.compile(rf"<{re.escape(element)}\s+name=(?:{names})\s*>")


MINIMAX_TAGS = InvokeTags()


class _Compiled:
    """What the parser searches for with one tag table, built once per table."""

    def __init__(self, t: InvokeTags) -> None:
        blocks = tuple(x for x in (t.block, t.block_end) if x is not None)
        call_tags = (t.invoke_open, t.invoke_end, t.param_open, t.param_end,
                     *((CDATA,) if t.cdata else ()), *(t.wrap or ()))
        # outside calls: the block tokens (Step-3's call wrappers too: special tokens, never text),
        # or (no block) the invoke opener itself
        self.content = Markers((*(blocks or (t.invoke_open,)), *(t.wrap or ()), *t.reserved,
                                *t.messages))
        self.inside = Markers(tuple(dict.fromkeys((*blocks, *call_tags, *t.reserved))))
        self.invoke_re = t.tag_pattern(t.invoke)
        self.param_re = t.tag_pattern(t.parameter)
        self.cdata_end = Markers((CDATA_END,))
        self.block_end = Markers((t.block_end,)) if t.block_end is not None else None


_COMPILED: dict[InvokeTags, _Compiled] = {}

(CONTENT, IN_BLOCK, INVOKE_BODY, VALUE, STRING, SKIP, IN_CDATA, WRAP_TYPE, WRAP_OPEN,
 WRAP_CLOSE, JSON_BODY) = range(11)


class MiniMaxM2Parser(TypedValueParser):
    """Incremental parser for ``minimax-m2`` (see docs/design/markup.md §2 for the format and the decisions),
    and for the families that spell its elements otherwise (``InvokeTags``)."""

    _BLOCK, _SKIP, _VALUE, _STRING = IN_BLOCK, SKIP, VALUE, STRING
    _AFTER_VALUE = INVOKE_BODY
    _UNTYPED = ValueTyping(frozenset(), True, null_literal=True)
    _NULL_LITERAL = True

    def __init__(self, tools: ToolSpec | None = None, *, family: str = "minimax-m2",
                 tags: InvokeTags = MINIMAX_TAGS) -> None:
        super().__init__(tools)
        self.family = family
        self._t = tags
        c = _COMPILED.get(tags)
        if c is None:
            c = _COMPILED[tags] = _Compiled(tags)
        self._c = c
        self._VALUE_END = tags.param_end
        self._VALUE_BREAKS = tuple(x for x in (tags.invoke_end, tags.block_end,
                                               *(tags.wrap or ())[2:]) if x is not None)
        if tags.untyped_json:
            self._UNTYPED = ValueTyping(ANY_JSON, True)
            self._NULL_LITERAL = False
        self._sep = tags.separator
        self._frame = tags.frame  # decision 2.2: the whitespace that frames the answer is not text
        self._part: list[str] = []  # Step-3's type word
        self._cdata_from = VALUE  # the value state a CDATA section returns to
        self._find, self._hold = c.content.find, c.content.hold
        self._handlers = (self._content, self._between_calls, self._invoke_body, self._value,
                          self._value, self._skip, self._cdata, self._wrap_type, self._wrap_open,
                          self._wrap_close, self._json_body)
        self._body: list[str] = []  # a JSON-body call's text

    def _read_tag(self, data: str, m: int, pattern: re.Pattern[str]) -> tuple[int, str | None]:
        """The ``<invoke …>``/``<parameter …>`` tag at ``m``: (its end, its name or None when it is
        malformed); end -1 while the tag is incomplete."""
        end = self._tag_end(data, m)
        if end < 0:
            return -1, None
        a = pattern.fullmatch(data, m, end)
        return end, (a[a.lastindex or 1] if a else None)

    def _inside(self) -> None:
        self._find, self._hold = self._c.inside.find, self._c.inside.hold

    def _outside(self) -> None:
        self._find, self._hold = self._c.content.find, self._c.content.hold

    def _opener(self, data: str, pos: int, m: int, lit: str) -> int:
        t = self._t
        if lit == t.block:
            self._markup(data[pos:m + len(lit)])
            self._inside()
            self._state = IN_BLOCK
            return m + len(lit)
        if t.block is None and lit == t.invoke_open:  # no block: the call stands in the text
            end, name = self._read_tag(data, m, self._c.invoke_re)
            if end < 0:
                return ~pos
            if name is None:  # <function_calls>, <functionality>…: the text of other families
                self._text(data[pos:end])
                return end
            self._markup(data[pos:m])
            self._start_call(name, data[m:end], in_block=False)
            self._inside()
            self._state = INVOKE_BODY
            return end
        # decision 2.1: a stray block closer or think tag is reported; the text around it stays
        self._text(data[pos:m])
        self._event(MarkupError(MarkupErrorKind.MALFORMED_TAG, lit))
        return m + len(lit)

    def _after_call(self, in_block: bool) -> None:
        super()._after_call(in_block)
        if not in_block:
            self._outside()

    def _close_block(self, closer: str, end: int) -> int:
        self._outside()
        return super()._close_block(closer, end)

    def _block_marker(self, data: str, m: int, lit: str) -> int | None:
        t = self._t
        if t.wrap is not None:
            if lit == t.wrap[0]:  # Step-3: the call begins with its wrapper
                self._new_unit(lit, in_block=True)
                self._part = []
                self._state = WRAP_TYPE
                return m + len(lit)
        elif lit == t.invoke_open:
            tend, name = self._read_tag(data, m, self._c.invoke_re)
            return self._call_opener(data, m, tend, name, INVOKE_BODY)
        if lit == t.block_end:
            return self._close_block(lit, m + len(lit))
        return None

    def _between_calls(self, data: str, pos: int) -> int:
        """Between calls of a ``json_body`` block, a ``{`` opens a call written as one JSON object;
        the rest is read as in any block."""
        if self._t.json_body:
            q = first_non_ws(data, pos, len(data))
            if q != -1 and data[q] == "{":
                self._markup(data[pos:q])
                self._new_unit("", in_block=True)
                self._body = []
                self._state = JSON_BODY
                return q
        return super()._between_calls(data, pos)

    def _json_body(self, data: str, pos: int) -> int:
        """State ``JSON_BODY``: the object runs to the block's closer (as DSML's JSON-body invoke
        runs to its invoke closer: the closer is reserved, in strings too), then it is one call if
        it is one strict JSON object ``{"name": …, "arguments"|"parameters": {…}}`` — duplicate
        keys ``duplicate_parameter``, any other shape ``bad_param_json``, never text. The call goes
        out whole at the closer (its name may come last)."""
        call = self._call
        ends = self._c.block_end
        assert call is not None and ends is not None
        m, _ = ends.find(data, pos)
        end = m if m != -1 else ends.hold(data, pos)
        call.raw.append(data[pos:end])
        self._body.append(data[pos:end])
        if m == -1:
            return ~end
        body, self._body = "".join(self._body), []
        self._state = IN_BLOCK  # the closer is read there
        self._object_call(body)
        return m

    def _wrap_type(self, data: str, pos: int) -> int:
        """State ``WRAP_TYPE`` (Step-3): the type word up to the separator; only ``function``."""
        call = self._call
        assert call is not None and self._t.wrap is not None
        r, lit = self._gather(data, pos, self._part.append)
        if r != pos:
            return r
        if lit == self._t.wrap[1] and "".join(self._part).strip(ASCII_WS) == "function":
            call.raw.append(lit)
            self._state = WRAP_OPEN
            return pos + len(lit)
        self._void(MarkupErrorKind.MALFORMED_TAG)
        return pos

    def _wrap_open(self, data: str, pos: int) -> int:
        """State ``WRAP_OPEN`` (Step-3): whitespace, then the invoke the wrapper holds."""
        call = self._call
        assert call is not None
        r, lit = self._tag_in_call(data, pos)
        if lit is None:
            return r
        if lit == self._t.invoke_open:
            tend, name = self._read_tag(data, pos, self._c.invoke_re)
            if tend < 0:
                return ~pos
            if name is not None:
                call.raw.append(data[pos:tend])
                self._name_call(name)
                self._state = INVOKE_BODY
                return tend
        self._void(MarkupErrorKind.MALFORMED_TAG)
        return pos

    def _wrap_close(self, data: str, pos: int) -> int:
        """State ``WRAP_CLOSE`` (Step-3): whitespace, then the wrapper's call end."""
        call = self._call
        assert call is not None and self._t.wrap is not None
        r, lit = self._tag_in_call(data, pos)
        if lit is None:
            return r
        if lit == self._t.wrap[2]:
            call.raw.append(lit)
            self._end_call()
            self._after_call(True)
            return pos + len(lit)
        self._void(MarkupErrorKind.MALFORMED_TAG)
        return pos

    def _invoke_body(self, data: str, pos: int) -> int:
        """State ``INVOKE_BODY``: whitespace, then a parameter or the invoke's closer."""
        call = self._call
        assert call is not None
        r, lit = self._tag_in_call(data, pos)  # decision 2.7: only whitespace between tags
        if lit is None:
            return r
        t = self._t
        if lit == t.param_open:
            tend, key = self._read_tag(data, pos, self._c.param_re)
            if tend < 0:
                return ~pos
            if key is not None:
                call.raw.append(data[pos:tend])
                if self._add_key(key):
                    self._open_value(key)
                return tend
        elif lit == t.invoke_end:
            call.raw.append(lit)
            if t.wrap is not None:
                self._state = WRAP_CLOSE
            else:
                self._end_call()
                self._after_call(call.in_block)
            return pos + len(lit)
        self._void(MarkupErrorKind.MALFORMED_TAG)
        return pos

    def _value(self, data: str, pos: int) -> int:
        """A CDATA section that opens a value (``cdata`` families) is read as it is."""
        if self._t.cdata and data.startswith(CDATA, pos) and self._value_fresh():
            assert self._call is not None
            self._call.raw.append(CDATA)
            self._cdata_from, self._state = self._state, IN_CDATA
            return pos + len(CDATA)
        return super()._value(data, pos)

    def _value_fresh(self) -> bool:
        """No character of the current value read yet."""
        call = self._call
        assert call is not None
        return bool(call.raw) and call.raw[-1].endswith(">") and call.raw[-1].startswith(
            self._t.param_open)

    def _cdata(self, data: str, pos: int) -> int:
        """State ``IN_CDATA``: the section's inside is value text, markup included, up to ``]]>``;
        then the value goes on (only its closer may follow, as for any value)."""
        call = self._call
        assert call is not None
        m, _ = self._c.cdata_end.find(data, pos)
        end = m if m != -1 else self._c.cdata_end.hold(data, pos)
        if end > pos:
            seg = data[pos:end]
            call.raw.append(seg)
            self._state = self._cdata_from
            self._value_text(seg)
            self._cdata_from, self._state = self._state, IN_CDATA
        if m == -1:
            return ~end
        call.raw.append(CDATA_END)
        self._state = self._cdata_from
        return m + len(CDATA_END)

    def _skip_marker(self, data: str, m: int, lit: str, call: Call) -> tuple[int, int]:
        """Parsing resumes at the next well-formed invoke (Step-3: call wrapper) or at the block's
        closer; a call outside any block ends with its own closer."""
        t = self._t
        if t.wrap is not None and lit == t.wrap[0] and call.in_block:
            return m + len(lit), RESUME
        if lit == t.invoke_open and t.wrap is None:
            tend, name = self._read_tag(data, m, self._c.invoke_re)
            return tend, RESUME if name is not None else SWALLOW
        if lit == t.block_end and call.in_block:
            return m + len(lit), RESUME
        if lit == t.invoke_end and not call.in_block:
            return m + len(lit), END
        return m + len(lit), SWALLOW


# ── the family descriptor ──────────────────────────────────────────────────────────────────────────


def render(calls: Sequence[CallLike], malformed: bool) -> str:
    """``malformed`` misspells the first call's last value closer (no value: its invoke closer)."""
    out = [f"{SEPARATOR}{BLOCK}\n"]
    for i, call in enumerate(calls):
        out.append(f'{INVOKE} name="{call.name}">\n')
        broken = malformed and i == 0
        out.extend(f'{PARAMETER} name="{key}">{text}{closer}\n'
                   for key, text, closer in tag_values(call, broken, PARAMETER_END, "</parametr>"))
        out.append("</invok>\n" if broken and not call.values else f"{INVOKE_END}\n")
    out.append(BLOCK_END)
    return "".join(out)


def _make_tagged(name: str, tags: InvokeTags, tools: ToolSpec | None = None) -> MiniMaxM2Parser:
    return MiniMaxM2Parser(tools, family=name, tags=tags)


def render_tagged(tags: InvokeTags, calls: Sequence[CallLike], malformed: bool) -> str:
    """The calls as the family's template writes them; ``malformed`` misspells the first call's last
    value closer (no value: its invoke closer)."""
    out = [tags.block] if tags.block else []
    misspelt = f"</{tags.parameter[:-1]}>"
    for i, call in enumerate(calls):
        broken = malformed and i == 0
        if tags.wrap:
            out.append(f"{tags.wrap[0]}function{tags.wrap[1]}")
        out.append(f'<{tags.invoke} name="{call.name}">')
        out.extend(f'<{tags.parameter} name="{key}">{text}{closer}'
                   for key, text, closer in tag_values(call, broken, tags.param_end, misspelt))
        out.append(f"</{tags.invoke[:-1]}>" if broken and not call.values else tags.invoke_end)
        if tags.wrap:
            out.append(tags.wrap[2])
    if tags.block_end:
        out.append(tags.block_end)
    return "".join(out)


def invoke_family(name: str, tags: InvokeTags, openers: tuple[str, ...], aliases: tuple[str, ...],
           leak: tuple[str, ...], rank: int = 100) -> Family:
    """A class G family from its tag table: ``openers`` start its markup (what ``auto`` looks for
    and what ends reasoning), ``leak`` what in visible text means its markup leaked."""
    tokens = tuple(t for t in (tags.block, tags.block_end, *(tags.wrap or ())) if t)
    markers = (*tokens, f'<{tags.invoke} name="', tags.invoke_end, f'<{tags.parameter} name="',
               tags.param_end)
    return Family(name=name, make=partial(_make_tagged, name, tags), markers=markers, leak_markers=leak,
                  reasoning_exits=openers, auto_markers=tokens or openers,
                  claim=claim_openers(openers), render=partial(render_tagged, tags), malformable=True,
                  rank=rank, aliases=aliases, grammar="G")
