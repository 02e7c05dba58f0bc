"""``JSONArgsParser``: families whose call arguments are one JSON object the model writes itself,
ended by a marker (Kimi, Harmony), streamed verbatim as they arrive."""

from __future__ import annotations

from abc import abstractmethod

from sseguard.core.toolcalls.events import Event, MarkupErrorKind, ToolArgsDelta
from sseguard.core.toolcalls.grammars.base import Call
from sseguard.core.toolcalls.grammars.blocks import BlockParser
from sseguard.core.toolcalls.grammars.markers import TAG_CAP, Markers
from sseguard.core.toolcalls.grammars.strict_json import ASCII_WS, JSONStrings
from sseguard.core.toolcalls.schema import ToolSpec


class JSONArgsParser(BlockParser):
    """A family whose call arguments are one JSON object the model writes itself, ended by a marker
    (Kimi, Harmony): the arguments stream verbatim as they arrive (leading whitespace dropped,
    trailing whitespace held until more follows), and a marker counts only outside JSON strings
    (docs/design/markup.md decision 2.4).

    The family's arguments state is ``_ARGS`` (handler ``_args``); it says which markers end the
    arguments (``_ARGS_ENDS``, part of the call) and which end them because the next thing begins
    (``_ARGS_BREAKS``, left to the next state); any other marker voids the call.
    """

    _ARGS = -1
    _ARGS_ENDS: frozenset[str] = frozenset()
    _ARGS_BREAKS: frozenset[str] = frozenset()
    _markers: Markers

    def __init__(self, tools: ToolSpec | None = None) -> None:
        super().__init__(tools)
        self._strings = JSONStrings()
        self._head: list[str] = []  # the call's header (Kimi's call id, a Harmony header)
        self._head_size = 0

    def _begin_head(self, first: str = "") -> None:
        self._head, self._head_size = [first] if first else [], 0

    def _collect_head(self, seg: str) -> None:
        self._head.append(seg)
        self._head_size += len(seg)

    def _header(self, data: str, pos: int) -> int:
        """The header state: its text up to the next marker joins the unit's raw text and
        ``_head``, and the family's ``_head_marker`` reads the marker. A header longer than
        ``TAG_CAP`` is none (no call id or message header is that long): the unit is void."""
        call = self._call
        assert call is not None
        r, lit = self._gather(data, pos, self._collect_head)
        if self._head_size > TAG_CAP:
            self._void(MarkupErrorKind.MALFORMED_TAG)
            return r
        if r != pos:
            return r
        return self._head_marker(pos, lit, call)

    @abstractmethod
    def _head_marker(self, m: int, lit: str, call: Call) -> int:
        """At the marker ``lit`` at ``m`` in the header of ``call``: where to go on."""

    def _begin_json_args(self) -> None:
        self._state, self._started, self._tail = self._ARGS, False, []
        self._strings = JSONStrings()

    _HOT = True

    def _hot(self, text: str) -> list[Event] | None:
        """The middle of the arguments, where only a "<" outside a string can end them: what comes
        before it is arguments text, taken without the state dispatch."""
        call = self._call
        if self._state != self._ARGS or call is None or call.index is None:
            return None
        n = len(text)
        j = self._strings.next_lt(text, 0, n)
        if j:
            seg = text[:j] if j < n else text
            call.raw.append(seg)
            if self._strings.inside and self._started:  # inside a string nothing is padding
                frag = "".join(self._tail) + seg if self._tail else seg
                self._tail = []
                call.frags.append(frag)
                return [ToolArgsDelta(call.index, frag)]
            self._stream_json(seg)
        if j < len(text):
            self._run(text[j:])
        return self._take()

    def _json_args(self, data: str, pos: int) -> tuple[int, str]:
        """Stream the arguments from ``pos`` to the first marker outside a string: (its start, the
        marker), the text before it consumed; or (``~k``, "") to hold ``data[k:]``."""
        call = self._call
        assert call is not None
        i, n = pos, len(data)
        markers = self._markers
        while True:
            j = self._strings.next_lt(data, i, n)
            lit = markers.match(data, j) if j < n else ""
            if lit or (j < n and markers.hold(data, j) == j):
                end = j
            elif j < n:
                i = j + 1  # a "<" that is no marker: the JSON check at the end judges it
                continue
            else:
                end = n
            if end > pos:
                seg = data[pos:end]
                call.raw.append(seg)
                self._stream_json(seg)
            return (j, lit) if lit else (~end, "")

    def _stream_json(self, seg: str) -> None:
        """Stream the next piece of the arguments (``_stream_args``). Whitespace at its end is held
        only while it may be padding after the JSON: if the piece ends inside a string it is string
        text and goes out now. So what is held when the stream ends depends only on the text, never
        on where it was cut (issue 29: an unterminated call's trailing whitespace went out when the
        input came in pieces, and was held when it came whole). ``feed``'s hot path is the same
        rule for a piece with no marker."""
        self._stream_args(seg, ASCII_WS)
        if self._strings.inside and self._tail:
            self._delta("".join(self._tail))
            self._tail = []

    def _args(self, data: str, pos: int) -> int:
        r, lit = self._json_args(data, pos)
        if not lit:
            return r
        if lit in self._ARGS_BREAKS:
            self._end_json_args()
            return r
        if lit not in self._ARGS_ENDS:  # the markers are reserved outside JSON strings
            self._void(MarkupErrorKind.MALFORMED_TAG)
            return r
        assert self._call is not None
        self._call.raw.append(lit)
        self._end_json_args()
        return r + len(lit)

    def _end_json_args(self) -> None:
        """The arguments are complete: one strict JSON object ends the call, whitespace only is
        ``{}``, anything else voids it (decision 2.4)."""
        call = self._call
        assert call is not None
        if self._started:
            self._end_object_call("".join(call.frags), emit=False)
        else:
            self._end_object_call("{}", emit=True)
