"""Class D of docs/design/markup.md: call lists written as Python, read incrementally, re-serialized as JSON.

``[get_weather(city="Paris", days=2), web.search(q='x')]`` (``pythonic``, ``lfm2``) or one call per
line (``olmo3``). The reader is a character-level state machine over the literal grammar the engines
accept (vLLM ``utils.py`` ``get_parameter_value``): strings in single, double and triple quotes with
Python escapes (``r``/``u`` prefixes), ints in any base, finite floats, one unary sign,
``True``/``False``/``None`` and ``true``/``false``/``null``, lists, tuples and sets (→ JSON arrays),
dicts with string keys. No ``ast`` on partial input and no ``eval`` ever: nothing is rescanned, so the
cost is linear however the text is cut.

Arguments stream as JSON built value by value (appends only): a string value goes out escaped as it
arrives, a scalar when it is complete. Only an undecided bracket holds output back: ``(`` may be a
tuple or a parenthesised value, ``{`` a dict or a set, until the first element is followed by ``,``,
``:`` or the closer.

Errors (decision 3.5): a positional argument, bytes, an f-string, a non-finite float or any
expression that is not a literal voids that call with ``bad_param_json`` (its siblings are kept: the
reader follows brackets and strings to the call's own ``)``); a repeated keyword or dict key is
``duplicate_parameter``; a broken structure (a missing ``,`` ``)`` ``]``, a bracket that does not
match) is ``malformed_tag`` and the rest of the list, up to its ``]`` or the block's closer, is void.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from sseguard.core.toolcalls.events import Event, MarkupError, MarkupErrorKind
from sseguard.core.toolcalls.grammars.base import CONTENT, PLAIN
from sseguard.core.toolcalls.grammars.python_values import (
    _CLOSERS,
    _IDENT,
    _SKIP_IN,
    AFTER_CALL,
    ARG,
    BAD,
    DUPLICATE,
    KEY,
    LIST,
    MALFORMED,
    NAME,
    NAME_CAP,
    NAME_RE,
    SKIP_CALL,
    SKIP_LIST,
    STRING,
    TAIL,
    VALUE,
    PyValueReader,
    _ws_end,
)
from sseguard.core.toolcalls.schema import ToolSpec

__all__ = ["PyCallsParser"]


class PyCallsParser(PyValueReader):
    """The call-list reader. A family subclass says how a list opens (its ``_opener`` calls
    ``_begin_list``; states of its own come from ``_extra_handlers``, numbered from ``N_STATES``)
    and what may follow one (``_close_tail``: the list's closer, if the family has one).

    ``_markers`` are the family's markers: met outside a string inside a list they break it
    (``malformed_tag``) and are then read as in content. ``_newline_calls``: calls are separated by
    newlines, not commas, and there is no ``]`` (OLMo 3).
    """

    _newline_calls = False
    _STRING = -1  # this reader's own hot path (``_hot``) knows Python strings
    _lead_char = "<"

    def __init__(self, tools: ToolSpec | None = None) -> None:
        super().__init__(tools)
        self._find, self._hold = self._markers.find, self._markers.hold
        self._lead_char = self._markers.lead or "<"
        self._skip_out = re.compile("[" + re.escape("'\"()[]{}" + self._lead_char) + "]")
        self._mark = 0  # where the current call's (or void unit's) unrecorded raw text starts
        self._skip_stack: list[str] = []
        self._skip_quote = ""
        self._skip_escape = False
        self._newline_seen = False
        self._handlers = (self._content, self._list, self._name, self._arg, self._kwarg,
                          self._value, self._string, self._number, self._bare_word, self._after,
                          self._after_call, self._skip_call, self._skip_list, self._after_list,
                          *self._extra_handlers())

    def _extra_handlers(self) -> tuple[Callable[[str, int], int], ...]:
        """The handlers of the states a family adds after ``N_STATES`` (none by default)."""
        return ()

    def _run(self, data: str) -> None:
        self._mark = 0
        pos, n = 0, len(data)
        handlers = self._handlers
        while pos < n:
            r = handlers[self._state](data, pos)
            if r < 0:
                pos = ~r
                break
            pos = r
        if self._call is not None and pos > self._mark:
            self._call.raw.append(data[self._mark:pos])
        self._pend = data[pos:]

    def _record(self, data: str, end: int) -> None:
        """The current unit's raw text runs to ``end``."""
        assert self._call is not None
        if end > self._mark:
            self._call.raw.append(data[self._mark:end])
        self._mark = end

    _HOT = True

    def _hot(self, text: str) -> list[Event] | None:
        """The middle of a long string value is the hot path: only its quote, a backslash and (in
        a one-line string) a line break end the run; a held bracket or key reads every chunk."""
        if self._state != STRING or self._held is not None or self._keybuf is not None:
            return None
        quote = self._quote
        if quote[0] in text or "\\" in text or (len(quote) != 3 and ("\n" in text or "\r" in text)):
            return None
        return PLAIN

    def _begin_list(self) -> None:
        """A list of calls starts (its opener is already markup): the next thing is a call."""
        self._state = LIST
        self._newline_seen = True

    def _list(self, data: str, pos: int) -> int:
        """Before a call: whitespace is markup; a name starts a call; ``]`` ends the list."""
        n = len(data)
        q = _ws_end(data, pos)
        if q > pos:
            if "\n" in data[pos:q]:
                self._newline_seen = True
            self._markup(data[pos:q])
            return q
        c = data[pos]
        if c == "]" and not self._newline_calls:
            self._markup(c)
            return self._end_list(data, pos + 1)
        if c == self._lead_char:
            found = self._is_marker(data, pos)
            if found < 0:
                return ~pos
            if found:
                if not self._newline_calls:  # the list never closed: a missing "]"
                    self._event(MarkupError(MALFORMED, ""))
                return self._end_list(data, pos)
        m = NAME_RE.match(data, pos)
        if m is None or not self._newline_seen or m.end() - pos > NAME_CAP:
            return self._break_list(data, pos)
        if m.end() == n or data[m.end()] == ".":
            return ~pos  # the name may go on
        self._new_unit("", in_block=True)
        self._mark = pos
        self._word = [m.group()]
        self._state = NAME
        return m.end()

    def _name(self, data: str, pos: int) -> int:
        """After the call's name: optional whitespace, then ``(``."""
        q = _ws_end(data, pos)
        if q == len(data):
            return q
        if data[q] != "(":
            return self._break_list(data, q)
        self._name_call("".join(self._word))
        self._frames, self._held, self._undecided = [], None, 0
        self._state = ARG
        self._may_close = True
        return q + 1

    def _end_of_call(self, data: str, end: int) -> int:
        self._record(data, end)
        self._end_call()
        self._state = AFTER_CALL
        self._newline_seen = False
        return end

    def _arg(self, data: str, pos: int) -> int:
        """Before an argument: a keyword, or ``)`` (after ``(`` or a trailing comma)."""
        q = _ws_end(data, pos)
        if q == len(data):
            return q
        c = data[q]
        if c == ")" and self._may_close:
            return self._end_of_call(data, q + 1)
        m = _IDENT.match(data, q)
        if m is None:
            return self._value_start_error(data, q)
        if m.end() - q > NAME_CAP:
            return self._void_call(data, q, BAD)
        if m.end() == len(data):
            return ~q
        self._word = [m.group()]
        self._state = KEY
        return m.end()

    def _kwarg(self, data: str, pos: int) -> int:
        """After a keyword: ``=`` (not ``==``), else it was a positional expression."""
        q = _ws_end(data, pos)
        if q + 1 >= len(data):
            return ~q
        if data[q] == "=" and data[q + 1] != "=":
            key = self._word[0]
            call = self._call
            assert call is not None
            if key in call.keys:
                return self._void_call(data, q + 1, DUPLICATE)
            call.keys.add(key)
            self._emit(call.key_prefix(key))
            self._state = VALUE
            self._may_close = False
            return q + 1
        return self._void_call(data, q, BAD)  # a positional argument (a name, a call, …)

    def _void_call(self, data: str, q: int, kind: MarkupErrorKind) -> int:
        """The call is void (``kind``) but the list goes on: skip to the call's own ``)``."""
        call = self._call
        assert call is not None
        call.error = call.error or kind
        self._held, self._undecided, self._keybuf = None, 0, None
        self._skip_stack = [")"] + [f.closer for f in self._frames]
        self._frames = []
        self._skip_quote, self._skip_escape, self._sign = "", False, ""
        self._state = SKIP_CALL
        return q

    def _break_list(self, data: str, q: int) -> int:
        """A broken structure at ``q``: the call (or a void unit) and the rest of the list are void,
        up to the list's ``]`` (or, for calls one per line, the block's closer)."""
        if self._call is None:
            self._void_unit(True)
            self._mark = q
        call = self._call
        assert call is not None
        call.error = call.error or MALFORMED
        self._skip_stack = ["\0"] if self._newline_calls else ["]"]  # "\0": no bracket ends it
        self._held, self._undecided, self._keybuf, self._frames = None, 0, None, []
        self._skip_quote, self._skip_escape, self._sign = "", False, ""
        self._state = SKIP_LIST
        return q

    def _marker_in_list(self, data: str, q: int) -> int:
        """A family marker where the list goes on: the call or void unit ends before it, void; the
        list ends there, and the marker is read by the state after the list."""
        assert self._call is not None
        self._record(data, q)
        self._call.error = self._call.error or MALFORMED
        self._fail_call()
        return self._end_list(data, q)

    def _skipping(self, data: str, pos: int) -> tuple[int, bool]:
        """Follow strings and brackets from ``pos``: (where it stopped, whether the skip stack
        emptied there — the ``)`` or ``]`` it waited for). Stops before a family marker; ``~k``:
        hold ``data[k:]`` (a quote that may become a triple one, a partial marker)."""
        n = len(data)
        i = pos
        stack = self._skip_stack
        while i < n:
            quote = self._skip_quote
            if quote:
                if self._skip_escape:
                    self._skip_escape = False
                    i += 1
                    continue
                hit = _SKIP_IN[quote[0]].search(data, i)
                if hit is None:
                    return n, False
                i = hit.start()
                c = data[i]
                if c == "\\":
                    self._skip_escape = True
                elif c == "\n":
                    if len(quote) == 1:
                        self._skip_quote = ""  # a one-line string ends at the line's end
                elif len(quote) == 1:
                    self._skip_quote = ""
                elif i + 3 > n:
                    return ~i, False
                elif data.startswith(quote, i):
                    self._skip_quote = ""
                    i += 3
                    continue
                i += 1
                continue
            hit = self._skip_out.search(data, i)
            if hit is None:
                return n, False
            i = hit.start()
            c = data[i]
            if c in "'\"":
                if self._quote_pending(data, i):
                    return ~i, False
                self._skip_quote = c * 3 if data.startswith(c * 3, i) else c
                i += len(self._skip_quote)
                continue
            if c in "([{":
                stack.append(_CLOSERS[c])
            elif c in ")]}":
                if c in stack:
                    while stack.pop() != c:
                        pass
                    if not stack:
                        return i + 1, True
            else:  # the lead
                found = self._is_marker(data, i)
                if found:
                    return (~i if found < 0 else i), False
            i += 1
        return i, False

    def _skip_call(self, data: str, pos: int) -> int:
        """A void call, swallowed up to its own ``)``; then the list goes on."""
        r, done = self._skipping(data, pos)
        if r < 0:
            return r
        if done:
            self._record(data, r)
            self._fail_call()
            self._state = AFTER_CALL
            self._newline_seen = False
            return r
        if r < len(data):  # a marker
            return self._marker_in_list(data, r)
        return r

    def _skip_list(self, data: str, pos: int) -> int:
        r, done = self._skipping(data, pos)
        if r < 0:
            return r
        if done:
            self._record(data, r)
            self._fail_call()
            self._state = TAIL
            return r
        if r < len(data):
            return self._marker_in_list(data, r)
        return r

    def _after_call(self, data: str, pos: int) -> int:
        """After a call: ``,`` then the next call, or ``]``; with ``_newline_calls`` a newline."""
        q = _ws_end(data, pos)
        if q > pos:
            if "\n" in data[pos:q]:
                self._newline_seen = True
            self._markup(data[pos:q])
            return q
        c = data[pos]
        if c == self._lead_char:
            found = self._is_marker(data, pos)
            if found < 0:
                return ~pos
            if found:
                if not self._newline_calls:
                    self._event(MarkupError(MALFORMED, ""))  # a missing "]"
                return self._end_list(data, pos)
        if self._newline_calls:
            self._state = LIST
            return pos
        if c == ",":
            self._markup(c)
            self._state = LIST
            self._newline_seen = True
            return pos + 1
        if c == "]":
            self._markup(c)
            return self._end_list(data, pos + 1)
        return self._break_list(data, pos)

    def _end_list(self, data: str, pos: int) -> int:
        self._state = TAIL
        return pos

    def _after_list(self, data: str, pos: int) -> int:
        """After the list: the family's closer, if it has one (``_close_tail``)."""
        return self._close_tail(data, pos)

    def _close_tail(self, data: str, pos: int) -> int:
        self._state = CONTENT
        return pos

    def _finish(self, rest: str) -> None:
        state = self._state
        if state in (CONTENT, TAIL):
            self._state = CONTENT
            super()._finish(rest)
            return
        if self._call is not None:
            self._call.raw.append(rest)
            self._fail_call(None if state in (SKIP_CALL, SKIP_LIST) else
                            MarkupErrorKind.UNTERMINATED)
            return
        self._event(MarkupError(MarkupErrorKind.UNTERMINATED, rest))
