"""Incremental decoding of a streamed JSON array into its top-level elements, over bytes.

Why it exists: Gemini's ``streamGenerateContent`` without ``?alt=sse`` streams one JSON array,
``[{…}\\r\\n,{…}]``, element by element. A checker must see each element as it completes (a relay
forwards it at once) and must say how the body ended: closed by ``]``, ended between elements, or
ended inside one. A JSON parser over the whole body answers none of that in flight.

Sans-IO like ``sse.py``: ``feed(bytes)`` returns the elements the bytes completed, ``close()`` says what
was left. Any split of the same body gives the same elements, down to one byte and inside a multi-byte
UTF-8 character (every structural byte is ASCII, and UTF-8 never uses ASCII bytes inside a character).
Each byte is scanned once: string, escape and nesting state are carried between feeds, so the cost is
linear however the body is cut. Nothing the peer sends raises: the decoder only finds where elements
begin and end; whether an element is valid JSON is for its consumer to decide (bytes that are no JSON
at all still come out as an element, so they are seen, never dropped). Every byte is accounted for: the
``raw`` of the elements, concatenated, plus ``ArrayTail.raw``, equal the input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

import msgspec

from sseguard.core.errors import UsageError

__all__ = ["ArrayEnd", "ArrayTail", "JsonArrayDecoder", "JsonElement"]

_BOM = b"\xef\xbb\xbf"
_WS = re.compile(rb"[ \t\r\n]*+")
# Inside a container element: everything up to the next bracket or an unfinished string, with the
# complete strings on the way consumed in one step (possessive: no backtracking, linear).
_RUN = re.compile(rb'(?:[^"{}\[\]]++|"(?:[^"\\]++|\\.)*+")*+', re.DOTALL)
_STRING_STOP = re.compile(rb'["\\]')
_STRING = rb'"(?:[^"\\]++|\\.)*+"'
_NESTING = 12


def _balanced(depth: int) -> bytes:
    """A pattern for one bracketed value nested at most ``depth`` deep (strings consumed whole;
    bracket kinds not matched against each other, exactly as ``_scan_element`` counts them)."""
    inner = rb"(?!)" if depth == 1 else _balanced(depth - 1)
    return rb'[\[{](?:[^"{}\[\]]++|' + _STRING + rb"|" + inner + rb")*+[\]}]"


# A whole element in one match, when it is all there and not nested deeper than _NESTING (the
# common case: a server writes a record at a time); otherwise the state machine reads it.
_ELEMENT = re.compile(_balanced(_NESTING), re.DOTALL)
# A bare scalar element (number, literal, or bytes that are no JSON) ends at a delimiter.
_SCALAR = re.compile(rb'[^ \t\r\n,\[\]{}"]*+')

_OPEN = frozenset(b"{[")
_QUOTE = 0x22
_BACKSLASH = 0x5C


def _skip(pattern: re.Pattern[bytes], buf: bytearray, pos: int) -> int:
    """Where a run of ``pattern`` (which may match nothing) starting at ``pos`` ends."""
    match = pattern.match(buf, pos)
    return match.end() if match is not None else pos


class JsonElement(msgspec.Struct, frozen=True):
    """One complete top-level element. ``text`` is its JSON text (invalid UTF-8 replaced), ``start``
    and ``end`` its byte offsets in the body; ``raw`` the exact bytes since the previous element ended
    (the ``[``, separators and whitespace before it, then the element). With ``closes`` it is no
    element but the array's closing ``]`` (given only to a decoder made with ``closes=True``)."""

    text: str
    start: int
    end: int
    raw: bytes
    closes: bool = False


class ArrayEnd(StrEnum):
    """How the body ended."""

    CLOSED = "closed"  # the array was closed by ``]`` (only whitespace after it)
    NOTHING = "nothing"  # no array began: an empty body, or only whitespace
    UNCLOSED = "unclosed"  # ended between elements, without the closing ``]``
    INSIDE = "inside"  # ended inside an element


@dataclass(frozen=True, slots=True)
class ArrayTail:
    """What ``close()`` found: how the body ended and the bytes after the last element."""

    kind: ArrayEnd
    raw: bytes = b""

    @property
    def is_cut(self) -> bool:
        """The body stopped before the array was finished."""
        return self.kind in (ArrayEnd.UNCLOSED, ArrayEnd.INSIDE)


class _Phase(StrEnum):
    START = "start"  # before the opening ``[``
    BETWEEN = "between"  # inside the array, between elements
    ELEMENT = "element"  # inside an element
    END = "end"  # after the closing ``]``


class JsonArrayDecoder:
    """Feed the bytes of a JSON array in any split; get the top-level elements that completed.

    A body that does not open with ``[`` is read as if it had (a bare ``{"error": …}`` object is then
    one element, and ``close()`` says the array was never closed); a missing comma between elements
    or bytes after the closing ``]`` are read leniently as more elements. Where the array is broken
    shows in ``close()`` or in elements that are not JSON, never as an exception.
    """

    __slots__ = ("_buf", "_closed", "_closes", "_depth", "_elem_start", "_escape", "_in_string",
                 "_offset", "_phase", "_pos", "_raw_start", "_scalar")

    def __init__(self, *, closes: bool = False) -> None:
        """``closes``: give the closing ``]`` too, as an element with ``closes`` set (a relay that
        forwards elements as they complete must forward the array's end as well)."""
        self._closes = closes
        self._buf = bytearray()
        self._offset = 0  # body offset of _buf[0]
        self._pos = 0  # first byte of _buf not yet scanned
        self._raw_start = 0  # where the next element's raw begins (just past the previous one)
        self._elem_start = 0  # first byte of the element being read
        self._phase = _Phase.START
        self._depth = 0  # open brackets of the current element
        self._in_string = False
        self._escape = False  # the last byte scanned was a backslash inside a string
        self._scalar = False  # the current element is a bare scalar
        self._closed = False

    def feed(self, data: bytes) -> list[JsonElement]:
        """The elements ``data`` completed (none while one is still open)."""
        if self._closed:
            raise UsageError("JsonArrayDecoder.feed() after close()")
        if not data:
            return []
        buf = self._buf
        buf += data
        out: list[JsonElement] = []
        end = len(buf)
        pos = self._pos
        while pos < end:
            phase = self._phase
            if phase is _Phase.ELEMENT:
                pos = self._scan_element(buf, pos, end, out)
            elif phase is _Phase.BETWEEN:
                pos = _skip(_WS, buf, pos)
                if pos == end:
                    break
                byte = buf[pos]
                if byte == 0x2C:  # ','
                    pos += 1
                elif byte == 0x5D:  # ']'
                    pos += 1
                    if self._closes:
                        self._elem_start = pos - 1
                        self._emit(buf, pos, out, closes=True)
                    self._phase = _Phase.END
                else:
                    self._begin(byte, pos)
                    whole = _ELEMENT.match(buf, pos) if self._depth else None
                    if whole is not None:
                        pos = whole.end()
                        self._emit(buf, pos, out)
                    else:
                        pos += 0 if self._scalar else 1
            elif phase is _Phase.START:
                pos = self._skip_bom(buf, pos)
                pos = _skip(_WS, buf, pos)
                if pos == end or (self._offset + pos < len(_BOM) and _BOM.startswith(buf[pos:end])):
                    break
                self._phase = _Phase.BETWEEN
                if buf[pos] == 0x5B:  # '['
                    pos += 1
            else:  # after ']': only whitespace belongs here; anything else is read as more elements
                pos = _skip(_WS, buf, pos)
                if pos < end:
                    self._phase = _Phase.BETWEEN
        # Drop what the elements took, once per feed (per element it would be quadratic).
        cut = self._raw_start
        if cut:
            del buf[:cut]
            self._offset += cut
            pos -= cut
            self._elem_start -= cut
            self._raw_start = 0
        self._pos = pos
        return out

    def _skip_bom(self, buf: bytearray, pos: int) -> int:
        """A UTF-8 byte-order mark at the very start of the body is not part of the array."""
        if self._offset + pos == 0 and buf.startswith(_BOM):
            return pos + len(_BOM)
        return pos

    def _begin(self, byte: int, pos: int) -> None:
        self._phase = _Phase.ELEMENT
        self._elem_start = pos
        self._escape = False
        self._in_string = byte == _QUOTE
        self._depth = 1 if byte in _OPEN else 0
        self._scalar = not (self._in_string or self._depth)

    def _scan_element(self, buf: bytearray, pos: int, end: int, out: list[JsonElement]) -> int:
        """Scan the open element from ``pos``; emit it if it completes. Returns where scanning stopped."""
        if self._scalar:
            pos = _skip(_SCALAR, buf, pos)
            if pos == self._elem_start:
                pos += 1  # a stray '}' where an element should begin: one byte of garbage
                self._emit(buf, pos, out)
            elif pos < end:
                self._emit(buf, pos, out)
            return pos
        while True:
            if self._in_string:
                if self._escape:
                    if pos == end:
                        return pos
                    pos += 1
                    self._escape = False
                stop = _STRING_STOP.search(buf, pos)
                if stop is None:
                    return end
                pos = stop.start() + 1
                if buf[pos - 1] == _BACKSLASH:
                    if pos == end:
                        self._escape = True
                        return pos
                    pos += 1
                    continue
                self._in_string = False
                if self._depth == 0:  # a bare string element
                    self._emit(buf, pos, out)
                    return pos
                continue
            pos = _skip(_RUN, buf, pos)
            if pos == end:
                return pos
            byte = buf[pos]
            pos += 1
            if byte == _QUOTE:
                self._in_string = True
            elif byte in _OPEN:
                self._depth += 1
            else:
                self._depth -= 1
                if self._depth == 0:
                    self._emit(buf, pos, out)
                    return pos

    def _emit(self, buf: bytearray, stop: int, out: list[JsonElement], *,
              closes: bool = False) -> None:
        start = self._elem_start
        out.append(JsonElement(bytes(buf[start:stop]).decode("utf-8", "replace"),
                               self._offset + start, self._offset + stop,
                               bytes(buf[self._raw_start:stop]), closes))
        self._raw_start = stop
        self._phase = _Phase.BETWEEN

    def close(self) -> ArrayTail:
        """End of body: whether the array was closed, never begun, or cut between or inside elements."""
        if self._closed:
            raise UsageError("JsonArrayDecoder.close() called twice")
        self._closed = True
        raw = bytes(self._buf[self._raw_start:])
        phase = self._phase
        if phase is _Phase.ELEMENT:
            return ArrayTail(ArrayEnd.INSIDE, raw)
        if phase is _Phase.BETWEEN:
            return ArrayTail(ArrayEnd.UNCLOSED, raw)
        if phase is _Phase.END:
            return ArrayTail(ArrayEnd.CLOSED, raw)
        if self._pos < len(self._buf):
            # Scanning stopped at a part of a byte-order mark: bytes that are no array, cut short.
            return ArrayTail(ArrayEnd.INSIDE, raw)
        return ArrayTail(ArrayEnd.NOTHING, raw)
