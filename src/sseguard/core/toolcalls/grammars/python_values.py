"""The value half of class D (``_pycalls``): Python literals read character by character and
written out as JSON, value by value.

A value is a string (single, double or triple quotes, Python's escapes, ``r``/``u`` prefixes), a number
(ints in any base with underscores, finite floats, one unary sign), ``True``/``False``/``None`` or
``true``/``false``/``null``, or a bracket: a list, a tuple or a set (JSON arrays) or a dict with string
keys. A string streams escaped as it arrives, a scalar goes out when complete; only an undecided
bracket holds its own output back (``(``: a tuple or parentheses; ``{``: a dict or a set) until its
first element is followed by ``,``, ``:`` or the closer. What may not stand in a literal is handed to
the call reader (``_void_call``: an expression, ``bad_param_json``; ``_break_list``: a broken
structure, ``malformed_tag``).
"""

from __future__ import annotations

import math
import re
import unicodedata
from abc import abstractmethod

from sseguard.core.toolcalls.events import MarkupErrorKind
from sseguard.core.toolcalls.grammars.base import BaseParser
from sseguard.core.toolcalls.grammars.markers import Markers
from sseguard.core.toolcalls.grammars.strict_json import json_string_body
from sseguard.core.toolcalls.schema import ToolSpec

BAD = MarkupErrorKind.BAD_PARAM_JSON
MALFORMED = MarkupErrorKind.MALFORMED_TAG
DUPLICATE = MarkupErrorKind.DUPLICATE_PARAMETER

#: A call name: an identifier, or dotted identifiers (vLLM keeps dotted names, docs/design/markup.md §3.3).
NAME_RE = re.compile(r"[^\W\d]\w*(?:\.[^\W\d]\w*)*")
_IDENT = re.compile(r"[^\W\d]\w*")
_WORD = re.compile(r"\w*")
_WS = re.compile(r"\s*")


def _match_end(pattern: re.Pattern[str], data: str, pos: int) -> int:
    """End of ``pattern``'s match at ``pos``, for patterns that always match (possibly empty)."""
    m = pattern.match(data, pos)
    assert m is not None
    return m.end()


def _ws_end(data: str, pos: int) -> int:
    return _match_end(_WS, data, pos)


def _word_end(data: str, pos: int) -> int:
    return _match_end(_WORD, data, pos)
#: The characters a number literal is made of (its grammar is checked once it is complete).
_NUMBER_CHARS = re.compile(r"[0-9A-Za-z_.]*")
_INT = re.compile(r"0[xX](?:_?[0-9a-fA-F])+|0[oO](?:_?[0-7])+|0[bB](?:_?[01])+|"
                  r"[1-9](?:_?[0-9])*|0+(?:_?0)*")
_FLOAT = re.compile(r"(?:[0-9](?:_?[0-9])*)?(?:\.(?:[0-9](?:_?[0-9])*)?)?"
                    r"(?:[eE][+-]?[0-9](?:_?[0-9])*)?")
_CONSTANTS = {"True": "true", "False": "false", "None": "null", "true": "true", "false": "false",
              "null": "null"}
#: Words that continue an expression after a value (``x if y else z``, ``a in b``): not a missing
#: comma but an expression that is no literal.
_EXPR_WORDS = frozenset(("if", "else", "for", "in", "and", "or", "not", "is", "async"))
_SIMPLE_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "a": "\a", "b": "\b", "f": "\f", "n": "\n",
                   "r": "\r", "t": "\t", "v": "\v", "\n": ""}
_HEX_LEN = {"x": 2, "u": 4, "U": 8}
#: Where a string's plain text stops: its quote, a backslash, a line end.
_STOPS = {q: re.compile(f"[\\\\\n\r{q}]") for q in "'\""}
#: What the skip of a void call looks for inside a string: its end, an escape, a line end.
_SKIP_IN = {q: re.compile(f"[\\\\\n{q}]") for q in "'\""}
#: Longest name, keyword or bare word, and longest number literal, read before giving up.
NAME_CAP = 256
NUMBER_CAP = 4096
_CLOSERS = {"[": "]", "(": ")", "{": "}"}

#: String prefixes of literals: raw and unicode strings (bytes and f-strings are not: bad_param_json).
_PREFIXES = frozenset(("r", "u", "R", "U"))

# value frames
_LIST, _PAREN, _TUPLE, _BRACE, _DICT, _SET = range(6)
_OPENS = {_LIST: "[", _TUPLE: "[", _SET: "[", _DICT: "{"}
_ENDS = {_LIST: "]", _TUPLE: "]", _SET: "]", _DICT: "}"}


class _Frame:
    """One open bracket inside a value."""

    __slots__ = ("closer", "keys", "kind", "n", "phase", "slot")

    def __init__(self, kind: int, closer: str, slot: int) -> None:
        self.kind = kind
        self.closer = closer
        self.slot = slot  # where its opening text goes in the held output, once decided
        self.n = 0  # elements started
        self.keys: set[str] = set()
        self.phase = 0  # dict: 0 expecting a key, 1 after the key, 2 expecting the value


# states (CONTENT is 0, the base's)
(LIST, NAME, ARG, KEY, VALUE, STRING, NUMBER, WORD, AFTER, AFTER_CALL, SKIP_CALL, SKIP_LIST,
 TAIL) = range(1, 14)
N_STATES = 14


class PyValueReader(BaseParser):
    """The value states of the call reader; ``PyCallsParser`` adds the lists and the calls."""

    _markers: Markers

    def __init__(self, tools: ToolSpec | None = None) -> None:
        super().__init__(tools)
        self._frames: list[_Frame] = []
        self._held: list[str] | None = None  # output behind an undecided "(" or "{"
        self._undecided = 0
        self._word: list[str] = []  # a name, keyword, number or bare word being read
        self._sign = ""
        self._may_close = False  # a closer may follow (after "[", "(", "{" or a trailing comma)
        self._quote = ""  # the open string's quote ("'", '"', "'''" or '"""')
        self._raw_string = False
        self._keybuf: list[str] | None = None  # a dict key's decoded text, to find repeats
        self._pending_dup = False

    # what the call reader does when a value cannot be read ----------------------------------------

    @abstractmethod
    def _void_call(self, data: str, q: int, kind: MarkupErrorKind) -> int:
        """The call is void (``kind``); the list goes on after its own ``)``."""

    @abstractmethod
    def _break_list(self, data: str, q: int) -> int:
        """A broken structure at ``q``: the rest of the list is void."""

    @abstractmethod
    def _marker_in_list(self, data: str, q: int) -> int:
        """A family marker at ``q`` ends the list."""

    @abstractmethod
    def _end_of_call(self, data: str, end: int) -> int:
        """The call's ``)`` ends at ``end``."""

    def _emit(self, s: str) -> None:
        """Arguments JSON: streamed, or held while an enclosing bracket is undecided."""
        if self._held is not None:
            self._held.append(s)
        else:
            self._delta(s)

    def _decide(self, frame: _Frame, kind: int) -> None:
        assert self._held is not None
        frame.kind = kind
        self._held[frame.slot] = _OPENS.get(kind, "")
        self._undecided -= 1
        if not self._undecided:
            held, self._held = self._held, None
            self._delta("".join(held))

    def _open_frame(self, kind: int, closer: str) -> None:
        slot = -1
        if kind in (_PAREN, _BRACE):
            if self._held is None:
                self._held = []
            slot = len(self._held)
            self._held.append("")
            self._undecided += 1
        else:
            self._emit(_OPENS[kind])
        self._frames.append(_Frame(kind, closer, slot))

    def _element_start(self) -> None:
        """A value starts: the separator before it in an array, and a dict key's bookkeeping."""
        if self._frames:
            f = self._frames[-1]
            if f.kind == _DICT and f.phase == 2:
                return
            if f.n:
                self._emit(", ")
            f.n += 1

    def _value(self, data: str, pos: int) -> int:
        q = _ws_end(data, pos)
        n = len(data)
        if q == n:
            return q
        c = data[q]
        frame = self._frames[-1] if self._frames else None
        if frame is not None and c == frame.closer and self._may_close:
            return self._close_frame(data, q)
        if c in "'\"":
            if self._quote_pending(data, q):
                return ~q
            self._element_start()
            return self._open_string(data, q, c, "")
        if frame is not None and frame.kind == _DICT and frame.phase == 0 and not c.isalpha():
            return self._value_start_error(data, q, BAD)  # dict keys are strings
        if c.isdigit() or c == ".":
            if c == "." and q + 1 >= n:
                return ~q
            if c == "." and not data[q + 1].isdigit():
                return self._void_call(data, q, BAD)
            self._element_start()
            self._word, self._state = [], NUMBER
            return q
        if c in "-+":
            if self._sign:
                return self._void_call(data, q, BAD)
            self._sign = c
            return q + 1
        if self._sign:
            return self._void_call(data, q, BAD)  # a sign before something that is no number
        if c in "[({":
            self._element_start()
            self._open_frame({"[": _LIST, "(": _PAREN, "{": _BRACE}[c], _CLOSERS[c])
            self._may_close = True
            self._keybuf = None
            return q + 1
        if c.isalpha() or c == "_":
            self._word, self._state = [], WORD
            return q
        return self._value_start_error(data, q)

    def _quote_pending(self, data: str, q: int) -> bool:
        """Whether the quotes at the end of ``data`` may still become a triple quote."""
        rest = len(data) - q
        return rest < 3 and data.startswith(data[q] * rest, q)

    def _value_start_error(self, data: str, q: int,
                           kind: MarkupErrorKind | None = None) -> int:
        c = data[q]
        if c == self._lead_char:
            found = self._is_marker(data, q)
            if found < 0:
                return ~q
            if found:
                return self._marker_in_list(data, q)
        if kind is None:
            kind = MALFORMED if c in ",)]}:=\\#;" or c.isspace() else BAD
        if kind is MALFORMED:
            return self._break_list(data, q)
        return self._void_call(data, q, kind)

    def _bare_word(self, data: str, pos: int) -> int:
        """A word in value position: a constant, a string prefix, or an expression (void)."""
        m = _word_end(data, pos)
        q = m
        if q > pos:
            self._word.append(data[pos:q])
        if q == len(data):
            return q
        word = "".join(self._word)
        frame = self._frames[-1] if self._frames else None
        key_slot = frame is not None and frame.kind == _DICT and frame.phase == 0
        if data[q] in "'\"":
            if word not in _PREFIXES:
                return self._void_call(data, q, BAD)  # bytes, f-strings
            if self._quote_pending(data, q):
                return ~q
            self._element_start()
            return self._open_string(data, q, data[q], word)
        const = _CONSTANTS.get(word)
        if const is None or key_slot or len(word) > NAME_CAP:
            return self._void_call(data, q, BAD)
        self._element_start()
        self._emit(const)
        return self._value_done(q)

    def _open_string(self, data: str, q: int, c: str, prefix: str) -> int:
        self._quote = c * 3 if data.startswith(c * 3, q) else c
        self._raw_string = prefix in ("r", "R")
        frame = self._frames[-1] if self._frames else None
        if frame is not None and ((frame.kind == _DICT and frame.phase == 0)
                                  or (frame.kind == _BRACE and frame.n == 1)):
            self._keybuf = []
        else:
            self._keybuf = None
        self._emit('"')
        self._state = STRING
        return q + len(self._quote)

    def _string_text(self, s: str) -> None:
        if s:
            self._emit(json_string_body(s))
            if self._keybuf is not None:
                self._keybuf.append(s)

    def _string(self, data: str, pos: int) -> int:
        """Inside a string: text streams escaped; escapes are decoded; the quote ends it."""
        quote = self._quote
        triple = len(quote) == 3
        stops = _STOPS[quote[0]]
        n = len(data)
        i = pos
        while i < n:
            hit = stops.search(data, i)
            j = hit.start() if hit else n
            if j > i:
                self._string_text(data[i:j])
            if j == n:
                return n
            c = data[j]
            if c == quote[0]:
                if not triple:
                    self._emit('"')
                    return self._value_done(j + 1)
                if j + 3 > n:
                    return ~j
                if data.startswith(quote, j):
                    self._emit('"')
                    return self._value_done(j + 3)
                self._string_text(c)
                i = j + 1
                continue
            if c in "\n\r":
                if not triple:
                    return self._break_list(data, j)  # an unterminated one-line string
                self._string_text(c)
                i = j + 1
                continue
            # a backslash
            if j + 1 >= n:
                return ~j
            if self._raw_string:
                # in a raw string a backslash stays, and a quote after it does not end the string
                self._string_text(data[j:j + 2])
                i = j + 2
                continue
            r = self._escape(data, j)
            if r is None:
                return ~j
            text, end = r
            if text is None:
                q = self._void_call(data, end, BAD)
                self._skip_quote = quote  # the skip goes on inside the string
                return q
            self._string_text(text)
            i = end
        return n

    def _escape(self, data: str, j: int) -> tuple[str | None, int] | None:
        """The escape at ``data[j]`` (a backslash): (its text or None if invalid, where it ends), or
        None while it is incomplete."""
        n = len(data)
        e = data[j + 1]
        if e == "\r":
            if j + 2 >= n:
                return None
            return "", j + 3 if data[j + 2] == "\n" else j + 2
        if e in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[e], j + 2
        if e in _HEX_LEN:
            k = _HEX_LEN[e]
            if j + 2 + k > n:
                return None
            digits = data[j + 2:j + 2 + k]
            if not all(ch in "0123456789abcdefABCDEF" for ch in digits):
                return None, j + 2
            code = int(digits, 16)
            if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                return None, j + 2  # no lone surrogates in JSON text
            return chr(code), j + 2 + k
        if e in "01234567":
            k = j + 1
            while k < n and k < j + 4 and data[k] in "01234567":
                k += 1
            if k < j + 4 and k == n:
                return None
            code = int(data[j + 1:k], 8)
            return chr(code), k
        if e == "N":
            if j + 2 >= n:
                return None
            if data[j + 2] != "{":
                return None, j + 2
            close = data.find("}", j + 3, j + 3 + 100)
            if close == -1:
                return (None, j + 2) if n - j > 103 else None
            try:
                return unicodedata.lookup(data[j + 3:close]), close + 1
            except KeyError:
                return None, j + 2
        return "\\" + e, j + 2  # an unknown escape keeps its backslash (Python's rule)

    def _number(self, data: str, pos: int) -> int:
        """A number literal: its characters (and an exponent's sign), checked once complete."""
        n = len(data)
        q = pos
        while True:
            q = _match_end(_NUMBER_CHARS, data, q)
            if q < n and data[q] in "+-":
                prev = data[q - 1] if q > pos else "".join(self._word)[-1:]
                head = ("".join(self._word) + data[pos:q])[:2].lower()
                if prev in ("e", "E") and head != "0x":
                    q += 1
                    continue
            break
        if q > pos:
            self._word.append(data[pos:q])
        if q == n:
            return q
        text = "".join(self._word)
        sign, self._sign = self._sign, ""
        value = _number_json(text) if len(text) <= NUMBER_CAP else None
        if value is None:
            return self._void_call(data, q, BAD)
        if sign == "-" and value != "0":
            value = "-" + value
        self._emit(value)
        return self._value_done(q)

    def _value_done(self, q: int) -> int:
        """A value is complete at ``q``: what may follow it depends on where it stands."""
        self._state = AFTER
        frame = self._frames[-1] if self._frames else None
        if frame is not None and self._keybuf is not None:
            key = "".join(self._keybuf)
            self._keybuf = None
            if frame.kind == _DICT and frame.phase == 0:
                frame.phase = 1
                if key in frame.keys:
                    self._pending_dup = True
                frame.keys.add(key)
            elif frame.kind == _BRACE:
                frame.keys.add(key)
        return q

    def _after(self, data: str, pos: int) -> int:
        """After a value: ``,``, a closer, or a dict's ``:``."""
        q = _ws_end(data, pos)
        n = len(data)
        if q == n:
            return q
        if self._pending_dup:
            self._pending_dup = False
            return self._void_call(data, q, DUPLICATE)
        c = data[q]
        frame = self._frames[-1] if self._frames else None
        if frame is None:  # a keyword's value
            if c == ",":
                self._state, self._may_close = ARG, True
                return q + 1
            if c == ")":
                return self._end_of_call(data, q + 1)
            return self._after_error(data, q)
        if frame.kind == _BRACE:
            if c == ":":
                if not frame.keys:  # the first element was no string: not a dict we can write
                    return self._void_call(data, q, BAD)
                self._decide(frame, _DICT)
                frame.phase = 2
                self._emit(": ")
                self._state, self._may_close = VALUE, False
                return q + 1
            if c in ",}":
                frame.keys.clear()
                self._decide(frame, _SET)
        elif frame.kind == _PAREN and c in ",)":
            if c == ")":
                self._decide(frame, _PAREN)
                self._frames.pop()
                return self._value_done(q + 1)
            self._decide(frame, _TUPLE)
        elif frame.kind == _DICT:
            if frame.phase == 1:
                if c != ":":
                    return self._after_error(data, q)
                frame.phase = 2
                self._emit(": ")
                self._state, self._may_close = VALUE, False
                return q + 1
            frame.phase = 0
        if c == ",":
            self._state, self._may_close = VALUE, True
            return q + 1
        if c == frame.closer:
            return self._close_frame(data, q)
        return self._after_error(data, q)

    def _after_error(self, data: str, q: int) -> int:
        c = data[q]
        if c == self._lead_char:
            found = self._is_marker(data, q)
            if found < 0:
                return ~q
            if found:
                return self._marker_in_list(data, q)
        m = _IDENT.match(data, q)
        if m is not None:
            if m.end() == len(data) and m.end() - q <= NAME_CAP:
                return ~q
            if m.group() in _EXPR_WORDS:
                return self._void_call(data, q, BAD)
            return self._break_list(data, q)  # a missing comma
        if c in "'\"0123456789)]}:=,\\#;" or c.isspace():
            return self._break_list(data, q)
        return self._void_call(data, q, BAD)  # an operator: an expression, not a literal

    def _close_frame(self, data: str, q: int) -> int:
        frame = self._frames.pop()
        if frame.kind == _PAREN:  # "()" is the empty tuple
            self._decide(frame, _TUPLE)
        elif frame.kind == _BRACE:  # "{}" is the empty dict
            self._decide(frame, _DICT)
        self._emit(_ENDS[frame.kind])
        return self._value_done(q + 1)

    def _is_marker(self, data: str, q: int) -> int:
        """1: a family marker starts at ``q``; -1: maybe (hold); 0: no."""
        if self._markers.match(data, q):
            return 1
        return -1 if self._markers.hold(data, q) == q else 0

def _number_json(text: str) -> str | None:
    """A complete Python number literal as JSON, or None when it is none (or complex, or not
    finite)."""
    if _INT.fullmatch(text):
        try:
            return str(int(text.replace("_", ""), 0))
        except ValueError:  # more digits than int() converts
            return None
    if _FLOAT.fullmatch(text) and any(ch.isdigit() for ch in text):
        value = float(text.replace("_", ""))
        if math.isinf(value):
            return None
        return repr(value)
    return None
