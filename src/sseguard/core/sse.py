"""Incremental Server-Sent Events decoding over bytes, by the WHATWG event-stream rules.

Why our own decoder: a checker must be stricter than a client. Clients (and most SSE libraries)
silently dispatch or drop an event that the body cut off before its blank line; here that is reported
as a cut frame, because it is exactly the failure we exist to see. Every byte of the body is accounted
for: the ``raw`` of the dispatched events, concatenated, plus the ``Tail.raw`` of ``close()``, equal the
input — so a pass-through can forward frames byte-identical.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import msgspec

from sseguard.core.errors import UsageError

_BOM = b"\xef\xbb\xbf"


def _text(value: bytes) -> str:
    """UTF-8 with U+FFFD for what is not (WHATWG); the strict decoder first, being much cheaper
    to call (no codec lookup) and right for nearly every frame."""
    try:
        return value.decode()
    except UnicodeDecodeError:
        return value.decode("utf-8", "replace")


#: The ``event:`` lines seen, as their event type: a stream names its frames from a small set.
_NAMES: dict[bytes, str] = {}


class SSEEvent(msgspec.Struct, frozen=True, gc=False):
    """One dispatched event. ``raw`` is the exact bytes since the previous event, blank line included.

    A frozen ``msgspec.Struct`` rather than a frozen dataclass: one is made per event on every hot
    path, and a frozen dataclass's ``__init__`` (one ``object.__setattr__`` per field) cost ~0.8 µs of
    the checker's ~5 µs per event; the Struct is built in C, immutable, hashable and compares equal
    by value all the same. Its fields are strings, bytes and numbers, which cannot make a cycle, so
    the garbage collector need not track it (``gc=False``): one allocation less for it to count.
    """

    data: str
    event: str = "message"
    id: str | None = None
    retry: int | None = None
    raw: bytes = b""


class TailKind(StrEnum):
    """What the body left when it ended."""

    CLEAN = "clean"  # ended on an event boundary (or only blank/comment lines after it)
    PARTIAL_LINE = "partial_line"  # ended inside a line
    UNDISPATCHED = "undispatched"  # complete field lines with no blank line after them


@dataclass(frozen=True, slots=True)
class Tail:
    kind: TailKind
    raw: bytes = b""

    @property
    def is_cut(self) -> bool:
        return self.kind is not TailKind.CLEAN


class SSEDecoder:
    """Feed bytes in any split; get the events that completed. ``close()`` says what was left."""

    __slots__ = ("_after_cr", "_bom_checked", "_buf", "_closed", "_data", "_event_type",
                 "_fields_pending", "_frame_start", "_last_id", "_pos", "_retry", "_scanned")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._pos = 0  # start of the first unprocessed line in _buf
        self._frame_start = 0  # start of the current (undispatched) frame in _buf
        self._after_cr = False  # the last line ended with CR: a following LF belongs to it
        self._bom_checked = False
        self._data: list[str] = []
        self._event_type = ""
        self._last_id: str | None = None
        self._retry: int | None = None
        self._fields_pending = False  # a field line was seen since the last dispatch
        self._closed = False
        #: How far into ``_buf`` the unfinished line is known to hold no CR or LF: a long line fed
        #: in small pieces is searched once, not again from its start at every feed (linear time).
        self._scanned = 0

    def feed(self, data: bytes) -> list[SSEEvent]:
        if self._closed:
            raise UsageError("SSEDecoder.feed() after close()")
        if not data:
            return []
        buf: bytes | bytearray = self._buf
        if not buf and self._bom_checked and not self._after_cr and type(data) is bytes:
            # One whole frame in one read, nothing carried over: what a client reads when events
            # arrive milliseconds apart, so the cost per event of every streaming adapter. Decided
            # here with three ``find``s; anything else (two frames, a cut, comments, other fields)
            # takes the general way below, which gives the same event (test_sse compares).
            one = self._whole_frame(data)
            if one is not None:
                return [one]
        if buf or type(data) is not bytes:
            buf += data
        else:
            # Nothing carried over (a read that ended on a frame boundary, the common case): work on
            # the bytes as given, so no copy into the buffer and none out of it for each ``raw``.
            buf = data
        pos = self._pos
        if not self._bom_checked:
            if len(buf) < 3 and _BOM.startswith(bytes(buf)):
                self._buf = bytearray(buf)
                return []
            self._bom_checked = True
            if buf.startswith(_BOM):
                pos = 3
        if self._after_cr and pos < len(buf):
            self._after_cr = False
            if buf[pos] == 0x0A:
                pos += 1
        events: list[SSEEvent] = []
        end = len(buf)
        scanned = self._scanned if buf is self._buf else 0
        cr = buf.find(b"\r", pos if pos > scanned else scanned)
        if cr == -1:
            # Fast path: LF-only line ends, what nearly every server sends.
            while True:
                eol = buf.find(b"\n", pos if pos > scanned else scanned)
                if eol == -1:
                    break
                if (not self._data and eol + 1 < end and buf[eol + 1] == 0x0A
                        and buf.startswith(b"data:", pos)):
                    # The common frame: its only data line, then the blank line. Dispatched here in
                    # one step, exactly as ``_line`` would over the two lines (test_sse compares).
                    vstart = pos + 5
                    if vstart < eol and buf[vstart] == 0x20:
                        vstart += 1
                    pos = eol + 2
                    events.append(SSEEvent(buf[vstart:eol].decode("utf-8", "replace"),
                                           self._event_type or "message", self._last_id,
                                           self._retry, bytes(buf[self._frame_start:pos])))
                    self._frame_start = pos
                    self._event_type = ""
                    self._fields_pending = False
                    continue
                if buf.startswith(b"event:", pos):
                    # Responses and Messages name every frame: the line before that common frame
                    # (after a CR, ``_line`` reads it by the general field rules below).
                    vstart = pos + 6
                    if vstart < eol and buf[vstart] == 0x20:
                        vstart += 1
                    self._event_type = buf[vstart:eol].decode("utf-8", "replace")
                    self._fields_pending = True
                    pos = eol + 1
                    continue
                self._line(buf, pos, eol, eol + 1, events)
                pos = eol + 1
        else:
            # Both searches are kept until passed: a body with many lines of one ending and a far
            # line of the other must not search to the far one again for every line.
            lf = buf.find(b"\n", pos if pos > scanned else scanned)
            while pos < end:
                if lf != -1 and lf < pos:
                    lf = buf.find(b"\n", pos)
                if cr != -1 and cr < pos:
                    cr = buf.find(b"\r", pos)
                if cr == -1 and lf == -1:
                    break
                if cr == -1 or (lf != -1 and lf < cr):
                    self._line(buf, pos, lf, lf + 1, events)
                    pos = lf + 1
                    continue
                nxt = cr + 1
                if nxt < end:
                    if buf[nxt] == 0x0A:
                        nxt += 1
                else:
                    self._after_cr = True  # a CRLF may be split across two feeds
                self._line(buf, pos, cr, nxt, events)
                pos = nxt
        # Drop what is dispatched, once per feed (not per event: that would be quadratic).
        self._scanned = end  # (from ``pos`` to the end there is no CR or LF left: see the loops)
        cut = self._frame_start
        if buf is not self._buf:
            if cut < end:
                self._buf += buf[cut:]  # the buffer is empty: only the unfinished frame is kept
            pos -= cut
            self._frame_start = 0
        elif cut:
            del buf[:cut]
            pos -= cut
            self._frame_start = 0
        self._scanned -= cut
        self._pos = pos
        return events

    @property
    def at_boundary(self) -> bool:
        """Nothing is carried over: the next byte fed starts a new frame (no partial line, no field
        of an undispatched event, no CR whose LF may follow). A checker's lane (``contract.lane``)
        reads a whole frame itself only then, as ``feed`` would."""
        return not self._buf and self._bom_checked and not self._after_cr

    @property
    def last_id(self) -> str | None:
        """The event id in force (the last ``id:`` field): every event dispatched from here on
        carries it until another comes."""
        return self._last_id

    @property
    def retry(self) -> int | None:
        """The reconnection time in force (the last valid ``retry:`` field)."""
        return self._retry

    def _whole_frame(self, data: bytes) -> SSEEvent | None:
        """``data`` as one event, when it is exactly one frame of one ``data:`` line (LF, or CRLF
        as Gemini sends it), or an ``event:`` line and one ``data:`` line (LF); else None.

        Only called at a frame boundary with nothing buffered, so no field of an earlier line is
        pending: the event is built from these bytes, the last id and retry alone. Written with
        indexing, slices and ``in`` (of a byte value: ``b"\\n" in`` first tries the operand as an
        integer and formats an exception) rather than ``find``/``startswith``, whose argument
        parsing costs more than the search itself on a frame of a few hundred bytes.
        """
        n = len(data)
        if n < 7 or data[n - 1] != 0x0A:
            return None
        if data[n - 2] == 0x0A:
            head = data[:6]
            if head == b"data: " or head[:5] == b"data:":
                # "data: …\n\n", the frame of chat and Gemini
                value = data[6 if head[5] == 0x20 and n > 7 else 5:n - 2]
                if 0x0A in value or 0x0D in value:
                    return None
                try:  # ``_text``, inline: this is the frame of every chat and Gemini event
                    return SSEEvent(value.decode(), "message", self._last_id, self._retry, data)
                except UnicodeDecodeError:
                    return SSEEvent(_text(value), "message", self._last_id, self._retry, data)
            if head != b"event:" or 0x0D in data:
                return None
            # "event: name\ndata: …\n\n", how Responses and Messages send every frame
            head, _, line = data[:n - 2].partition(b"\n")
            if line[:5] != b"data:" or 0x0A in line:
                return None
            name = _NAMES.get(head)
            if name is None:
                name = _text(head[7:] if head[6:7] == b" " else head[6:]) or "message"
                if len(_NAMES) < 256:  # a peer inventing names must not grow it without end
                    _NAMES[head] = name
            return SSEEvent(_text(line[6:] if line[5:6] == b" " else line[5:]), name, self._last_id,
                            self._retry, data)
        if data[n - 2] == 0x0D and data[n - 3] == 0x0A and data[n - 4] == 0x0D:
            # "data: …\r\n\r\n", how Gemini sends it
            if data[:5] != b"data:":
                return None
            value = data[6 if data[5] == 0x20 and n > 9 else 5:n - 4]
            if 0x0A in value or 0x0D in value:
                return None
            try:
                return SSEEvent(value.decode(), "message", self._last_id, self._retry, data)
            except UnicodeDecodeError:
                return SSEEvent(_text(value), "message", self._last_id, self._retry, data)
        return None

    def _line(self, buf: bytes | bytearray, start: int, eol: int, after: int,
              events: list[SSEEvent]) -> None:
        if start == eol:
            # Blank line: dispatch, if there is data (WHATWG: an event without data is dropped).
            if self._data:
                events.append(SSEEvent(
                    data="\n".join(self._data),
                    event=self._event_type or "message",
                    id=self._last_id,
                    retry=self._retry,
                    raw=bytes(buf[self._frame_start:after]),
                ))
                self._frame_start = after
            self._data = []
            self._event_type = ""
            self._fields_pending = False
            return
        if buf.startswith(b"data:", start):
            vstart = start + 5
            if vstart < eol and buf[vstart] == 0x20:
                vstart += 1
            self._data.append(buf[vstart:eol].decode("utf-8", "replace"))
            self._fields_pending = True
            return
        if buf[start] == 0x3A:  # ':' comment
            return
        line = bytes(buf[start:eol])
        colon = line.find(b":")
        if colon == -1:
            name, value = line, b""
        else:
            name = line[:colon]
            value = line[colon + 1:]
            if value.startswith(b" "):
                value = value[1:]
        self._fields_pending = True
        if name == b"data":
            self._data.append(value.decode("utf-8", "replace"))
        elif name == b"event":
            self._event_type = value.decode("utf-8", "replace")
        elif name == b"id":
            if b"\x00" not in value:
                self._last_id = value.decode("utf-8", "replace")
        elif name == b"retry" and value.isdigit():
            self._retry = int(value)
        # Unknown fields are ignored, per the spec.

    def close(self) -> Tail:
        """End of body: a partial line or an event without its blank line is a cut frame."""
        if self._closed:
            raise UsageError("SSEDecoder.close() called twice")
        self._closed = True
        raw = bytes(self._buf[self._frame_start:])
        if not self._bom_checked and raw and _BOM.startswith(raw):
            return Tail(TailKind.PARTIAL_LINE, raw)
        if self._pos < len(self._buf):
            return Tail(TailKind.PARTIAL_LINE, raw)
        if self._fields_pending:
            return Tail(TailKind.UNDISPATCHED, raw)
        return Tail(TailKind.CLEAN, raw)


def single_frame(data: bytes) -> SSEEvent | None:
    """``data`` as the one event it is when it is exactly one frame of the common shapes (one
    ``data:`` line, or an ``event:`` and a ``data:`` line; LF, or CRLF for the first), read at a frame
    boundary with no id or retry set; else None. What a checker's lane learns its template from."""
    decoder = SSEDecoder()
    decoder._bom_checked = True
    return decoder._whole_frame(data)
