"""Class E of docs/design/markup.md §3: Gemma's literal call syntax, ``call:NAME{key:value,…}``.

```
functiongemma:  <start_function_call>call:get_weather{city:<escape>Paris<escape>,days:2}<end_function_call>
gemma4:         <|tool_call>call:get_weather{city:<|"|>Paris<|"|>,n:42}<tool_call|>
```

Keys are bare (Gemma 4 may quote them with ``<|"|>``); a value is a delimited string (the delimiter is
reserved, so ``}`` and ``,`` inside one are text, and nothing else in it is markup), a bare scalar
(up to ``,``, ``}`` or ``]``), or a nested ``{…}``/``[…]``. Delimited strings are kept verbatim
(decision 3.11). How a value becomes JSON (decision 3.6): Gemma 4's ``<|"|>`` strings are
strings; FunctionGemma's ``<escape>`` values are typed by the offered tool's schema (docs/design/markup.md
decision 2.5), and untyped they are strict JSON if they parse, else the raw string (vLLM
``functiongemma_tool_parser.py`` L40-44: ``<escape>42<escape>`` is 42); bare values are strict JSON
scalars, ``None`` is null, any other bare word is the raw string. FunctionGemma may leave out the comma
after an ``<escape>``-closed value (vLLM's test). ``<|tool_call>`` (Gemma 4) and ``<|tool_call|>``
(Granite 3.0) differ in their last characters and are different markers (decision 3.3). Gemma 4's
``<turn|>`` is a stop token, not a closer: a call open at the end of the stream is ``unterminated``.

Arguments stream as JSON value by value: a value that is surely a string streams as it arrives,
anything else goes out when complete.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from sseguard.core.toolcalls.events import Event, MarkupError, MarkupErrorKind
from sseguard.core.toolcalls.family import CallLike, Family, claim_openers
from sseguard.core.toolcalls.grammars.base import CONTENT, PLAIN, MarkedRawParser
from sseguard.core.toolcalls.grammars.markers import TAG_CAP, Markers
from sseguard.core.toolcalls.grammars.strict_json import ASCII_WS, JSONProblem, json_string_body
from sseguard.core.toolcalls.schema import ANY_JSON, ToolSpec, ValueTyping

MALFORMED = MarkupErrorKind.MALFORMED_TAG
BAD = MarkupErrorKind.BAD_PARAM_JSON
DUPLICATE = MarkupErrorKind.DUPLICATE_PARAMETER
UNTERMINATED = MarkupErrorKind.UNTERMINATED

#: The GLM rule for values without a schema: strict JSON if it parses, else the raw string.
UNTYPED = ValueTyping(ANY_JSON, True)
CALL_WORD = "call:"

(NAME, KEY, QKEY, COLON, VALUE, STRING, BARE, AFTER, TAIL, SKIP, REASON, QCOLON) = range(1, 13)
_BARE_END = re.compile(r"[,}\]<]")
_KEY_END = re.compile(r"[:<,{}\[\]]")


@dataclass(frozen=True, slots=True)
class Syntax:
    """The markers of one class-E family. ``typed_strings``: delimited values are typed by the schema
    (FunctionGemma) rather than always strings (Gemma 4); ``quoted_keys``: keys may be delimited;
    ``comma_optional``: a key may follow a delimited value without a comma; ``think``: the reasoning
    channel's (opener, closer)."""

    opener: str
    closer: str
    delim: str
    typed_strings: bool
    quoted_keys: bool
    comma_optional: bool
    think: tuple[str, str] | None = None

    @property
    def literals(self) -> tuple[str, ...]:
        return (self.opener, self.closer, self.delim, *(self.think or ()))

    @property
    def noticed(self) -> tuple[str, ...]:
        """The markers ``auto`` looks for and the leak scan reports: not the delimiter, which means
        something only inside a call (and FunctionGemma's ``<escape>`` is a tag other answers
        mention: a Hermes answer that does must stay Hermes); the named parser still reports one out
        of place."""
        return tuple(m for m in self.literals if m != self.delim)


class _Frame:
    __slots__ = ("is_obj", "keys", "n")

    def __init__(self, is_obj: bool) -> None:
        self.is_obj = is_obj
        self.n = 0
        self.keys: set[str] = set()


class GemmaParser(MarkedRawParser):
    """Incremental parser of one class-E family (see the module docstring)."""

    def __init__(self, tools: ToolSpec | None = None, *, family: str, syntax: Syntax) -> None:
        super().__init__(tools)
        self.family = family
        self._s = syntax
        self._markers = markers = Markers(syntax.literals)
        self._find, self._hold = markers.find, markers.hold
        self._mark = 0
        self._buf: list[str] = []  # a name, key, bare value or buffered string
        self._size = 0
        self._frames: list[_Frame] = []
        self._key = ""
        self._typing = UNTYPED
        self._streaming = False  # the open string streams as it arrives
        self._after_string = False  # the last value was a delimited string (comma optional)
        self._handlers = (self._content, self._name, self._key_state, self._qkey, self._colon,
                          self._value, self._string, self._bare, self._after, self._args_end,
                          self._skip, self._reason, self._qcolon)

    _HOT = True

    def _hot(self, text: str) -> list[Event] | None:
        """A streaming string value is the hot path: only the marker lead ends it."""
        return PLAIN if self._state == STRING and self._streaming and "<" not in text else None

    # content and reasoning ------------------------------------------------------------------------

    def _opener(self, data: str, pos: int, m: int, lit: str) -> int:
        s = self._s
        self._text(data[pos:m])
        end = m + len(lit)
        if lit == s.opener:
            self._new_unit("", in_block=False)
            self._mark = m
            self._buf, self._size, self._frames = [], 0, []
            self._state = NAME
            return end
        if s.think and lit == s.think[0]:
            self._markup(lit)
            self._state = REASON
            return end
        self._event(MarkupError(MALFORMED, lit))  # a closer or delimiter out of place
        return end

    def _reason(self, data: str, pos: int) -> int:
        """Reasoning text up to its closer, or up to a call opener (which ends it implicitly)."""
        return self._reason_until(data, pos, self._s.think, (self._s.opener,))

    # the call's head ------------------------------------------------------------------------------

    def _name(self, data: str, pos: int) -> int:
        """``call:NAME`` up to the ``{`` of the arguments."""
        b = data.find("{", pos)
        m, _ = self._find(data, pos)
        end = b if b != -1 and (m == -1 or b < m) else (m if m != -1 else self._hold(data, pos))
        self._buf.append(data[pos:end])
        self._size += end - pos
        if self._size > TAG_CAP:
            return self._void(data, end, MALFORMED)
        if end == b:
            head = "".join(self._buf)
            name = head[len(CALL_WORD):].strip(ASCII_WS) if head.startswith(CALL_WORD) else ""
            if not name or any(c in name for c in "\n{}:,"):
                return self._void(data, b, MALFORMED)
            self._name_call(name)
            self._frames = [_Frame(True)]
            self._delta("{")
            self._after_string = False
            self._state = KEY
            return b + 1
        if m != -1 and end == m:
            return self._void(data, m, MALFORMED)
        return ~end

    # keys -----------------------------------------------------------------------------------------

    def _key_state(self, data: str, pos: int) -> int:
        """Before a key: whitespace, then a bare key up to ``:`` (or a delimited one), or ``}``."""
        n = len(data)
        q = _skip_ws(data, pos)
        if q == n:
            return q
        frame = self._frames[-1]
        if data[q] == "}" and frame.n == 0:
            return self._close(data, q)
        if data.startswith(self._s.delim, q) and self._s.quoted_keys:
            self._buf, self._size = [], 0
            self._state = QKEY
            return q + len(self._s.delim)
        if data[q] == "<" and self._hold(data, q) == q and not self._markers.match(data, q):
            return ~q
        hit = _KEY_END.search(data, q)
        end = hit.start() if hit else n
        self._buf, self._size = [data[q:end]], end - q
        if hit is None:
            self._state = COLON  # the key goes on in the next chunk
            return end
        return self._key_end(data, end)

    def _colon(self, data: str, pos: int) -> int:
        """A bare key cut by a chunk boundary: more of it, up to ``:``."""
        hit = _KEY_END.search(data, pos)
        end = hit.start() if hit else len(data)
        self._buf.append(data[pos:end])
        self._size += end - pos
        if self._size > TAG_CAP:
            return self._void(data, end, MALFORMED)
        if hit is None:
            return end
        return self._key_end(data, end)

    def _key_end(self, data: str, at: int) -> int:
        if data[at] != ":":
            if data[at] == "<" and self._hold(data, at) == at and not self._markers.match(data, at):
                self._state = COLON
                return ~at
            return self._void(data, at, MALFORMED)
        key = "".join(self._buf).strip(ASCII_WS)
        if not key:
            return self._void(data, at, MALFORMED)
        return self._keyed(data, key, at + 1)

    def _qkey(self, data: str, pos: int) -> int:
        """A delimited key (Gemma 4), verbatim up to the delimiter."""
        k = data.find(self._s.delim, pos)
        end = k if k != -1 else self._hold_delim(data, pos)
        self._buf.append(data[pos:end])
        self._size += end - pos
        if self._size > TAG_CAP:
            return self._void(data, end, MALFORMED)
        if k == -1:
            return ~end
        self._state = QCOLON
        return k + len(self._s.delim)

    def _qcolon(self, data: str, pos: int) -> int:
        """After a delimited key: its ``:``."""
        q = _skip_ws(data, pos)
        if q == len(data):
            return q
        if data[q] != ":":
            return self._void(data, q, MALFORMED)
        return self._keyed(data, "".join(self._buf), q + 1)

    def _keyed(self, data: str, key: str, then: int) -> int:
        """The key is read; its value starts at ``then``."""
        frame = self._frames[-1]
        if key in frame.keys:
            return self._void(data, then, DUPLICATE)
        frame.keys.add(key)
        call = self._call
        assert call is not None
        top = len(self._frames) == 1
        self._delta((", " if frame.n else "") + json.dumps(key, ensure_ascii=False) + ": ")
        frame.n += 1
        self._key = key
        if top and self._tools is not None:
            types = self._tools.types_of(call.name, key)
            self._typing = ValueTyping.of(types, UNTYPED, False)
        else:
            self._typing = UNTYPED
        self._state = VALUE
        return then

    # values ---------------------------------------------------------------------------------------

    def _value(self, data: str, pos: int) -> int:
        n = len(data)
        q = _skip_ws(data, pos)
        if q == n:
            return q
        frame = self._frames[-1]
        c = data[q]
        if not frame.is_obj and c == "]" and frame.n == 0:
            return self._close(data, q)
        delimited = data.startswith(self._s.delim, q)
        if c == "<" and not delimited and self._hold(data, q) == q:
            if self._markers.match(data, q):
                return self._void(data, q, MALFORMED)
            return ~q
        if not frame.is_obj:
            self._delta(", " if frame.n else "")
            frame.n += 1
        if delimited:
            self._buf, self._size = [], 0
            top = len(self._frames) == 1 and frame.is_obj
            typed = self._typing if top else UNTYPED
            self._streaming = not self._s.typed_strings or (top and typed.plain_string)
            if self._streaming:
                self._delta('"')
            self._state = STRING
            return q + len(self._s.delim)
        if c in "{[":
            self._frames.append(_Frame(c == "{"))
            self._delta(c)
            self._after_string = False
            self._state = KEY if c == "{" else VALUE
            return q + 1
        self._buf, self._size = [], 0
        self._state = BARE
        return q

    def _string(self, data: str, pos: int) -> int:
        """A delimited string: verbatim up to the delimiter (nothing else in it is markup)."""
        delim = self._s.delim
        k = data.find(delim, pos)
        end = k if k != -1 else self._hold_delim(data, pos)
        piece = data[pos:end]
        if self._streaming:
            self._delta(json_string_body(piece))
        else:
            self._buf.append(piece)
        if k == -1:
            return ~end
        if self._streaming:
            self._delta('"')
        else:
            try:
                self._delta(self._typing.encode("".join(self._buf)) if len(self._frames) == 1
                            else UNTYPED.encode("".join(self._buf)))
            except JSONProblem as problem:
                return self._void(data, k + len(delim), problem.kind)
        self._after_string = True
        self._state = AFTER
        return k + len(delim)

    def _hold_delim(self, data: str, pos: int) -> int:
        """Where a suffix that may still become the delimiter starts."""
        delim = self._s.delim
        n = len(data)
        for j in range(max(pos, n - len(delim) + 1), n):
            if delim.startswith(data[j:]):
                return j
        return n

    def _bare(self, data: str, pos: int) -> int:
        """A bare scalar, up to ``,``, ``}`` or ``]``."""
        hit = _BARE_END.search(data, pos)
        end = hit.start() if hit else len(data)
        self._buf.append(data[pos:end])
        self._size += end - pos
        if self._size > TAG_CAP:
            return self._void(data, end, BAD)
        if hit is None:
            return end
        if data[end] == "<":
            if self._markers.match(data, end):
                return self._void(data, end, MALFORMED)
            if self._hold(data, end) == end:
                return ~end
            self._buf.append("<")
            return end + 1
        raw = "".join(self._buf).strip(ASCII_WS)
        if not raw:
            return self._void(data, end, MALFORMED)
        typing = self._typing if len(self._frames) == 1 else UNTYPED
        try:
            if typing.plain_string:
                value = json.dumps(raw, ensure_ascii=False)
            else:
                value = typing.encode("null" if raw == "None" else raw)
        except JSONProblem as problem:
            return self._void(data, end, problem.kind)
        self._delta(value)
        self._after_string = False
        self._state = AFTER
        return end

    def _after(self, data: str, pos: int) -> int:
        """After a value: ``,``, the closer of its object or array, or (FunctionGemma, after a
        delimited string) the next key without a comma."""
        n = len(data)
        q = _skip_ws(data, pos)
        if q == n:
            return q
        frame = self._frames[-1]
        c = data[q]
        if c == ",":
            self._state = KEY if frame.is_obj else VALUE
            return q + 1
        if c == ("}" if frame.is_obj else "]"):
            return self._close(data, q)
        if frame.is_obj and self._after_string and self._s.comma_optional and c not in "<{}[]:":
            self._state = KEY
            return q
        if c == "<" and not self._markers.match(data, q) and self._hold(data, q) == q:
            return ~q
        return self._void(data, q, MALFORMED)

    def _close(self, data: str, q: int) -> int:
        frame = self._frames.pop()
        self._delta("}" if frame.is_obj else "]")
        self._after_string = False
        self._state = AFTER if self._frames else TAIL
        return q + 1

    def _args_end(self, data: str, pos: int) -> int:
        """After the arguments: whitespace, then the closer."""
        n = len(data)
        q = _skip_ws(data, pos)
        if q == n:
            return q
        lit = self._markers.match(data, q)
        if lit == self._s.closer:
            self._record(data, q + len(lit))
            self._end_call(close_object=False)
            self._state = CONTENT
            return q + len(lit)
        if not lit and self._hold(data, q) == q:
            return ~q
        return self._void(data, q, MALFORMED)

    # void calls and the end -----------------------------------------------------------------------

    def _void(self, data: str, at: int, kind: MarkupErrorKind) -> int:
        """The call is void: swallowed up to its closer (or the next opener)."""
        call = self._call
        assert call is not None
        call.error = call.error or kind
        self._state = SKIP
        return at

    def _skip(self, data: str, pos: int) -> int:
        m, lit = self._find(data, pos)
        if m == -1:
            return ~self._hold(data, pos)
        if lit == self._s.closer:
            self._record(data, m + len(lit))
            self._fail_call()
            self._state = CONTENT
            return m + len(lit)
        if lit == self._s.opener:
            self._record(data, m)
            self._fail_call()
            self._state = CONTENT
            return m
        return m + len(lit)

    def _finish(self, rest: str) -> None:
        state = self._state
        if state == REASON:
            self._reasoning(rest)
        elif state == CONTENT:
            super()._finish(rest)
        else:
            call = self._call
            assert call is not None
            call.raw.append(rest)
            self._fail_call(None if state == SKIP else UNTERMINATED)


def _skip_ws(data: str, pos: int) -> int:
    n = len(data)
    while pos < n and data[pos] in ASCII_WS:
        pos += 1
    return pos


# ── rendering and the families ───────────────────────────────────────────────────────────────────


_BARE_KEY = re.compile(r"[A-Za-z_][\w.-]*")


def gemma_value(value: Any, delim: str, quote_keys: bool = False) -> str:
    """A JSON value in Gemma's syntax: strings delimited, scalars bare, containers nested; a key
    that is no plain word is delimited where the family allows it (``quote_keys``, Gemma 4)."""
    if isinstance(value, str):
        return f"{delim}{value}{delim}"
    if isinstance(value, list):
        return "[" + ",".join(gemma_value(v, delim, quote_keys) for v in value) + "]"
    if isinstance(value, dict):
        def key(k: str) -> str:
            return k if not quote_keys or _BARE_KEY.fullmatch(k) else f"{delim}{k}{delim}"
        return "{" + ",".join(f"{key(k)}:{gemma_value(v, delim, quote_keys)}"
                              for k, v in value.items()) + "}"
    return json.dumps(value)


def _render(s: Syntax, calls: Sequence[CallLike], malformed: bool) -> str:
    return "".join(f"{s.opener}{CALL_WORD}{c.name}{gemma_value(c.values, s.delim, s.quoted_keys)}"
                   f"{s.closer}" for c in calls)


#: What a Gemma call leaves when a server strips its special tokens (the call tags and the string
#: delimiter): ``call:get_weather{city:Paris}``; the leak scan runs it where ``call:`` occurs.
LEAK_HINT = CALL_WORD
LEAK_SHAPE = r"(?<![\w.])call:[A-Za-z_][\w.\-]{0,63}\{"


def gemma_family(name: str, syntax: Syntax, rank: int) -> Family:
    """A class-E family for ``syntax``."""
    make: Callable[[ToolSpec | None], GemmaParser] = partial(GemmaParser, family=name,
                                                             syntax=syntax)
    return Family(name=name, make=make, markers=syntax.literals,
                  leak_markers=syntax.noticed, reasoning_exits=(syntax.opener,),
                  auto_markers=syntax.noticed, claim=claim_openers(syntax.noticed),
                  render=partial(_render, syntax), rank=rank, grammar="E",
                  leak_shape=LEAK_SHAPE, leak_hint=LEAK_HINT,
                  reasoning_spans=(syntax.think,) if syntax.think else ())
