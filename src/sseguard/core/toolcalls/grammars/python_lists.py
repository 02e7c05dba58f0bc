"""The Python-literal families of docs/design/markup.md §3 (class D): ``pythonic``, ``olmo3`` and ``lfm2``.

```
pythonic:  [get_weather(city='Paris'), web.search(q="x")]           (Llama 3.2/4, ToolACE)
           <|python_start|>[get_weather(city='Paris')]<|python_end|>  (Llama 4)
olmo3:     <function_calls>get_weather(city='Paris')
           web.search(q="x")</function_calls>
lfm2:      <|tool_call_start|>[get_weather(city='Paris')]<|tool_call_end|>
```

``pythonic`` has no marker of its own: its list is a call list only where the answer starts (after
whitespace and an optional ``<|python_start|>``, vLLM's rule, decision 3.2). There the ``[``
is held until ``NAME(`` or ``NAME.NAME(`` decides (at most ``HEAD_CAP`` characters); anything else
releases the held text as text. ``<|python_start|>`` is a special token: wherever it stands, a call
list may follow it the same way; ``<|python_end|>`` right after the list's ``]`` is its closer.
``auto`` never takes a bare list for calls (it would find them in any answer that starts with a
Python-looking list); it takes ``pythonic`` only at ``<|python_start|>``.

``olmo3``'s block holds one call per line (docs/design/markup.md §3.3); ``<function_calls>`` is plain text in
the vocabulary, reserved only as the whole tag. ``lfm2`` puts a list in its tags; a JSON array there
(``[{"name": …}]``) is class B, read by the JSON array parser (``json_array``).

The literal grammar, the streaming and the errors are ``_pycalls``'.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sseguard.core.toolcalls.events import Event, MarkupError, MarkupErrorKind
from sseguard.core.toolcalls.family import CallLike, Claim
from sseguard.core.toolcalls.grammars.base import CONTENT
from sseguard.core.toolcalls.grammars.json_array import JSONArrayParser
from sseguard.core.toolcalls.grammars.json_array_embed import finish_embedded, run_embedded
from sseguard.core.toolcalls.grammars.json_array_tables import Body, Opener
from sseguard.core.toolcalls.grammars.markers import Markers
from sseguard.core.toolcalls.grammars.python_calls import PyCallsParser
from sseguard.core.toolcalls.grammars.python_values import N_STATES, NAME_RE, SKIP_LIST, TAIL, _ws_end
from sseguard.core.toolcalls.schema import ToolSpec

PYTHON_START = "<|python_start|>"
PYTHON_END = "<|python_end|>"
FUNCTION_CALLS = "<function_calls>"
FUNCTION_CALLS_END = "</function_calls>"
TOOL_CALL_START = "<|tool_call_start|>"
TOOL_CALL_END = "<|tool_call_end|>"

#: How much text at the start of the answer is held while it may still become a call list.
HEAD_CAP = 1024

MALFORMED = MarkupErrorKind.MALFORMED_TAG
UNTERMINATED = MarkupErrorKind.UNTERMINATED

HEAD = N_STATES  # pythonic: the answer's start, held until it is a call list or text
OPEN = N_STATES  # the block families: after the opener, before the list
JSON_BLOCK = N_STATES + 1  # lfm2: a JSON array, read by the class-B parser


def list_head(buf: str, final: bool) -> tuple[Claim, int, int]:
    """Whether ``buf`` (the answer's start, or text from a ``<|python_start|>``) opens a call list:
    (YES, where the first name starts, where ``<|python_start|>`` ends or -1), (NO, -, same) or
    MORE while it may still. ``final``: nothing more comes (MORE becomes NO)."""
    n = len(buf)
    more = Claim.NO if final or n > HEAD_CAP else Claim.MORE
    i = _ws_end(buf, 0)
    ps = -1
    if buf.startswith(PYTHON_START, i):
        ps = i + len(PYTHON_START)
        i = _ws_end(buf, ps)
    elif i < n and PYTHON_START.startswith(buf[i:]):
        return more, 0, ps
    if i == n:
        return more, 0, ps
    if buf[i] != "[":
        return Claim.NO, 0, ps
    j = _ws_end(buf, i + 1)
    if j == n:
        return more, 0, ps
    m = NAME_RE.match(buf, j)
    if m is None:
        return Claim.NO, 0, ps
    k = m.end()
    if k == n or (buf[k] == "." and k + 1 == n):
        return more, 0, ps
    # ``NAME(`` exactly, as the spec's lookahead says: "[see (x)]" opening an answer is prose
    return (Claim.YES, j, ps) if buf[k] == "(" else (Claim.NO, 0, ps)


class PythonicParser(PyCallsParser):
    """``pythonic``: a call list where the answer starts, or after ``<|python_start|>``."""

    family = "pythonic"
    _markers = Markers((PYTHON_START, PYTHON_END))

    def __init__(self, tools: ToolSpec | None = None) -> None:
        super().__init__(tools)
        self._state = HEAD

    def _extra_handlers(self) -> tuple[Callable[[str, int], int], ...]:
        return (self._head,)

    def mid_stream(self) -> None:
        """``auto`` replays from ``<|python_start|>``: the head is read from there all the same."""

    def _head(self, data: str, pos: int) -> int:
        """The answer's start (or a ``<|python_start|>``): held until it is a list or text."""
        claim, name_at, ps = list_head(data[pos:pos + HEAD_CAP + 1], final=False)
        if claim is Claim.MORE:
            return ~pos
        return self._head_decided(data, pos, claim, name_at, ps)

    def _head_decided(self, data: str, pos: int, claim: Claim, name_at: int, ps: int) -> int:
        if claim is Claim.YES:
            lead = _ws_end(data, pos) - pos
            self._text(data[pos:pos + lead])  # whitespace before the list is the answer's text
            self._markup(data[pos + lead:pos + name_at])
            self._begin_list()
            return pos + name_at
        self._state = CONTENT
        if ps == -1:
            return pos
        start = ps - len(PYTHON_START)
        self._text(data[pos:pos + start])
        self._event(MarkupError(MALFORMED, PYTHON_START))  # no call list after it: a stray
        return pos + ps

    def _opener(self, data: str, pos: int, m: int, lit: str) -> int:
        self._text(data[pos:m])
        if lit == PYTHON_START:
            self._state = HEAD
            return m
        self._event(MarkupError(MALFORMED, lit))  # a stray closer
        return m + len(lit)

    def _close_tail(self, data: str, pos: int) -> int:
        """After ``]``: ``<|python_end|>`` right there is the list's closer."""
        rest = data[pos:pos + len(PYTHON_END)]
        if rest == PYTHON_END:
            self._markup(rest)
            self._state = CONTENT
            return pos + len(rest)
        if PYTHON_END.startswith(rest):
            return ~pos
        self._state = CONTENT
        return pos

    def _finish(self, rest: str) -> None:
        if self._state == HEAD:
            _, _, ps = list_head(rest, final=True)
            self._state = CONTENT
            if ps != -1:
                start = ps - len(PYTHON_START)
                self._text(rest[:start])
                self._event(MarkupError(MALFORMED, PYTHON_START))
                rest = rest[ps:]
        super()._finish(rest)


class BlockCallsParser(PyCallsParser):
    """A call list between an opener and a closer (``olmo3``, ``lfm2``): nothing inside the block
    is visible text; a missing closer is ``unterminated`` (complete calls are kept)."""

    _open = ""
    _close = ""

    def _opener(self, data: str, pos: int, m: int, lit: str) -> int:
        self._text(data[pos:m])
        if lit == self._open:
            self._markup(lit)
            self._enter_block()
        else:
            self._event(MarkupError(MALFORMED, lit))  # a stray closer
        return m + len(lit)

    def _enter_block(self) -> None:
        self._begin_list()

    def _junk(self, q: int) -> int:
        """Text in the block that is no list: void up to the next marker."""
        self._void_unit(True)
        self._mark = q
        assert self._call is not None
        self._call.error = MALFORMED
        self._skip_stack = ["\0"]
        self._skip_quote, self._skip_escape = "", False
        self._state = SKIP_LIST
        return q

    def _close_tail(self, data: str, pos: int) -> int:
        """After the list: whitespace, then the closer."""
        q = _ws_end(data, pos)
        if q > pos:
            self._markup(data[pos:q])
            return q
        lit = self._markers.match(data, pos)
        if lit == self._close:
            self._markup(lit)
            self._state = CONTENT
            return pos + len(lit)
        if lit:  # the opener of another block: this one never closed
            self._event(MarkupError(UNTERMINATED, ""))
            self._state = CONTENT
            return pos
        if self._markers.hold(data, pos) == pos:
            return ~pos
        return self._junk(pos)

    def _finish(self, rest: str) -> None:
        if self._state in (OPEN, TAIL):
            self._event(MarkupError(UNTERMINATED, rest))
            return
        super()._finish(rest)


class Olmo3Parser(BlockCallsParser):
    """``olmo3``: ``<function_calls>`` one call per line ``</function_calls>``."""

    family = "olmo3"
    _newline_calls = True
    _open, _close = FUNCTION_CALLS, FUNCTION_CALLS_END
    _markers = Markers((FUNCTION_CALLS, FUNCTION_CALLS_END))


class Lfm2Parser(BlockCallsParser):
    """``lfm2``: ``<|tool_call_start|>`` a Python list or a JSON array ``<|tool_call_end|>``.

    The first non-blank character after ``[`` chooses (docs/design/markup.md §3.3): ``{`` hands the block to
    the class-B parser (``json_array``), driven state by state from here until its closer, so that call
    indexes run on across blocks of both kinds; anything else is a Python list.
    """

    family = "lfm2"
    _open, _close = TOOL_CALL_START, TOOL_CALL_END
    _markers = Markers((TOOL_CALL_START, TOOL_CALL_END))

    def __init__(self, tools: ToolSpec | None = None) -> None:
        super().__init__(tools)
        self._json: JSONArrayParser | None = None

    def _extra_handlers(self) -> tuple[Callable[[str, int], int], ...]:
        return (self._open_block, self._json_block)

    _HOT = True

    def _hot(self, text: str) -> list[Event] | None:
        """Inside a JSON array's streaming string the class-B grammar's own hot path takes the
        chunk (no state of its changes there); elsewhere the Python reader's."""
        inner = self._json
        if (self._state == JSON_BLOCK and inner is not None and inner._args_open and inner._inside
                and not inner._escape and not inner._pend and '"' not in text
                and "\\" not in text):
            return inner.feed(text)
        return super()._hot(text)

    def _enter_block(self) -> None:
        self._state = OPEN

    def _open_block(self, data: str, pos: int) -> int:
        """After the opener: whitespace, then ``[`` and what follows it."""
        q = _ws_end(data, pos)
        if q > pos:
            self._markup(data[pos:q])
            return q
        if data[pos] == "[":
            k = _ws_end(data, pos + 1)
            if k == len(data):
                return ~pos if k - pos <= HEAD_CAP else self._junk(pos)
            if data[k] == "{":
                return self._to_json(pos)
            self._markup("[")
            self._begin_list()
            return pos + 1
        lit = self._markers.match(data, pos)
        if lit == self._close:  # an empty block
            self._markup(lit)
            self._state = CONTENT
            return pos + len(lit)
        if lit or self._markers.hold(data, pos) == pos:
            return self._close_tail(data, pos)
        return self._junk(pos)

    def _to_json(self, pos: int) -> int:
        inner = self._json
        if inner is None:
            inner = self._json = JSONArrayParser(self._tools, family=self.family,
                                                 opener=TOOL_CALL_START, closer=TOOL_CALL_END)
        inner._next_index = self._next_index
        inner._begin_block(Opener(TOOL_CALL_START, Body.ARRAY, TOOL_CALL_END), "")
        self._state = JSON_BLOCK
        return pos

    def _json_block(self, data: str, pos: int) -> int:
        """The JSON array, read by the class-B parser up to the block's closer."""
        inner = self._json
        assert inner is not None
        pos, ended = run_embedded(self, inner, data, pos)
        if ended:
            self._state = CONTENT
        return pos

    def _finish(self, rest: str) -> None:
        if self._state == JSON_BLOCK:
            assert self._json is not None
            finish_embedded(self, self._json, rest)
            return
        super()._finish(rest)


# ── rendering ────────────────────────────────────────────────────────────────────────────────────


def py_literal(value: Any) -> str:
    """``value`` (a JSON value) as the Python literal a model writes for it."""
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int | float | str):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(py_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{py_literal(k)}: {py_literal(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"not a JSON value: {value!r}")  # pragma: no cover - values are JSON


def py_call(call: CallLike) -> str:
    """One call as Python: ``name(key=literal, …)``."""
    args = ", ".join(f"{k}={py_literal(v)}" for k, v in call.values.items())
    return f"{call.name}({args})"


def render_pythonic(calls: Sequence[CallLike], malformed: bool) -> str:
    """Llama 4's wrapped list (the bare list is the same without the two tokens)."""
    return PYTHON_START + "[" + ", ".join(py_call(c) for c in calls) + "]" + PYTHON_END


def render_olmo3(calls: Sequence[CallLike], malformed: bool) -> str:
    return FUNCTION_CALLS + "\n".join(py_call(c) for c in calls) + FUNCTION_CALLS_END


def render_lfm2(calls: Sequence[CallLike], malformed: bool) -> str:
    return TOOL_CALL_START + "[" + ", ".join(py_call(c) for c in calls) + "]" + TOOL_CALL_END


def claim_pythonic(held: str, final: bool) -> Claim:
    """``auto`` takes ``pythonic`` at ``<|python_start|>`` followed by a call list; a stray
    ``<|python_end|>`` is its too (the registry's first owner of a marker takes what no one
    claims)."""
    if not held.startswith(PYTHON_START):
        return Claim.NO
    return list_head(held, final)[0]


def claim_block(opener: str) -> Callable[[str, bool], Claim]:
    def claim(held: str, final: bool) -> Claim:
        return Claim.YES if held.startswith(opener) else Claim.NO
    return claim
