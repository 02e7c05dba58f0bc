"""The machinery every protocol's checker shares: one engine, the protocols differ in their tables.

What is the same in chat, Responses and Messages lives here: feeding bytes through the SSE decoder,
keeping the body's tail, numbering frames and placing findings, scanning text deltas for leaked
tool-call markup in flight, the endings every protocol shares (HTTP error, error event, stall, transport
error, cut frame, empty) and the checks of a tool call's arguments against the offered tools. A
protocol module supplies what differs: how one event is folded, which terminal events it has, and its
final object.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import Any, ClassVar, Protocol

import msgspec

from sseguard.core.contract.folding import Block, ToolFacts, error_text, is_int, schema_problem
from sseguard.core.contract.garble import GarbleScanner
from sseguard.core.contract.lane import Lane, Path, plain
from sseguard.core.contract.leaks import LeakScanner, leak_tables, weakly
from sseguard.core.contract.vocabulary import Kinds, ReasonClass, Reasons
from sseguard.core.errors import UsageError
from sseguard.core.sse import SSEDecoder, SSEEvent
from sseguard.core.verdict import Api, Ending, Finding, FindingKind, Verdict

TAIL_BYTES = 2048
_TAIL_KEPT = 4 * TAIL_BYTES  # the tail's parts are joined and cut only past this

#: msgspec decodes a frame several times faster than ``json.loads``: the checker's cost per event.
decode_json = msgspec.json.decode
#: What decoding a peer's JSON may raise. Nesting deeper than the interpreter's recursion limit is
#: valid JSON that no Python client can read either: a peer's fault like any other, never a crash.
JSON_ERRORS = (msgspec.DecodeError, UnicodeDecodeError, RecursionError)

#: How often a stream may learn its lane (``contract.lane``): a stream whose frames vary where the
#: text does not (OpenAI's ``obfuscation``) has none, and must not pay for learning on every event.
_LANE_TRIES = 4
#: The text deltas a stream folds the general way before it learns its lane: learning costs about
#: what the lane saves over ten events (~12 µs), so a short answer never pays it, and a relay's
#: first chunk (its client's time to first token) does not wait for it.
_LANE_AFTER = 8

#: The places whose reasoning and answer share one index (a chat choice, a Gemini candidate); items
#: and blocks (Responses, Messages) give each its own.
_SHARED = frozenset({"choice", "candidate"})

#: Endings where the stream says it is finished (a tool call still open there was never closed).
FINISHED = frozenset({Ending.COMPLETE, Ending.NO_DONE, Ending.NO_FINISH})


class FrameTail(Protocol):
    """What a frame decoder's ``close()`` answers: whether the body stopped inside a frame."""

    @property
    def is_cut(self) -> bool: ...


class FrameDecoder(Protocol):
    """What the engine reads a body's frames with: ``SSEDecoder`` for the SSE protocols; a protocol
    with another framing (Gemini's streamed JSON array) supplies its own, giving ``SSEEvent``s all the
    same (``data`` the frame's payload, ``raw`` its exact bytes)."""

    def feed(self, data: bytes) -> list[SSEEvent]: ...

    def close(self) -> FrameTail: ...


class TextScanner(LeakScanner):
    """The markup scanner with the garbled-text signals beside it: one call per text delta."""

    __slots__ = ("garble",)

    def __init__(self, markers: tuple[str, ...], report: Callable[[str, int, str, int], None],
                 shapes: Any, *, garble: GarbleScanner) -> None:
        super().__init__(markers, report, shapes)
        self.garble = garble

    def scan(self, index: int, where: str, text: str) -> None:
        _leak_scan(self, index, where, text)
        self.garble.scan(index, where, text)


_leak_scan = LeakScanner.scan


class CheckerBase(ABC):
    """The engine: bytes in, events folded by the protocol's ``_on_event``, one ``Verdict`` out.

    Nothing the peer sends raises out of ``feed()``/``close()``; only our caller's misuse (feeding after
    ``close()``) raises ``UsageError``. Subclasses set ``api`` and implement the hooks below.
    """

    api: ClassVar[Api]
    #: The protocol's finish reasons and known kinds (``contract/<protocol>/vocabulary.py``; the
    #: descriptor holds the same objects).
    reasons: ClassVar[Reasons]
    kinds: ClassVar[Kinds]

    def __init__(self, request: dict[str, Any] | None = None, *,
                 markup: str | Iterable[str] | None = "all", keep_text: bool = True) -> None:
        self._request: dict[str, Any] = request if isinstance(request, dict) else {}
        self._tools = ToolFacts(self._request.get("tools"), self._tool_entry)
        markers, shapes = leak_tables(markup)
        #: Every text delta of every protocol goes through ``self._leaks.scan``: the markup scanner,
        #: and beside it the garbled-text signals (``contract.garble``), so no protocol calls either.
        self._leaks = TextScanner(markers, weakly(self._on_leak), shapes,
                                  garble=GarbleScanner(weakly(self._on_garble),
                                                       shared_index=self._leak_place in _SHARED))
        self._decoder: FrameDecoder = SSEDecoder()
        self._findings: list[Finding] = []
        self._tail_parts: list[bytes] = []
        self._tail_len = 0
        self._bytes = 0
        self._frames = 0  # dispatched SSE events
        self._frame_end = 0  # body offset just past the last dispatched event
        self._frame_raw = b""  # its bytes: the LF of a trailing CRLF is not counted in offsets
        self._chunks = 0  # JSON event objects folded
        self._events = 0  # events that are not keep-alives: none at all is an empty stream
        self._error: str | None = None
        self._once_keys: set[str] = set()
        self._closed = False
        self._lane: Lane | None = None
        self._lane_ok = False  # ``_lane_ready`` said yes and the general way has not run since
        self._lane_tries = 0
        self._lane_offers = 0  # text deltas offered to ``_learn_lane`` while there was no lane
        #: The ``sequence_number`` the next event must carry, in a protocol that numbers its events
        #: (Responses; None elsewhere): a numbered lane's frame must carry it.
        self._next_seq: int | None = None
        #: Kinds the protocol's tables do not know, by name, with how often they came.
        self._unknown: dict[str, int] = {}

    # ── what adapters read while feeding ──────────────────────────────────────────────────────
    @property
    @abstractmethod
    def saw_content(self) -> bool:
        """A content, reasoning or tool-call delta has arrived: the adapter's "first token" moment."""

    @property
    @abstractmethod
    def saw_done(self) -> bool:
        """The protocol's terminal event arrived (``[DONE]``, ``response.completed``, ``message_stop``)."""

    @property
    def error_message(self) -> str | None:
        """The message of an error event, once one arrived."""
        return self._error

    @property
    def findings_so_far(self) -> tuple[Finding, ...]:
        """Findings made while feeding (those that need the whole stream come at ``close()``)."""
        return tuple(self._findings)

    @property
    def bytes_seen(self) -> int:
        """Body bytes fed so far (and a non-2xx body given to ``close()``)."""
        return self._bytes

    # ── feeding ───────────────────────────────────────────────────────────────────────────────
    def feed(self, data: bytes) -> list[SSEEvent]:
        """Check the next bytes of the body; returns the events they completed."""
        if self._closed:
            raise UsageError(f"{type(self).__name__}.feed() after close()")
        if not data:
            return []
        size = len(data)
        self._bytes += size
        # The tail, inline (this runs for every read of every stream): ``_keep_tail`` trims it.
        self._tail_parts.append(data)
        self._tail_len += size
        if self._tail_len > _TAIL_KEPT:
            self._keep_tail(b"")
        lane = self._lane
        if lane is not None and type(data) is bytes:  # (an event's raw is bytes, never a view)
            # The stream's steady frame with another text: folded without decoding it again.
            text = lane.text(data, self._next_seq)
            if text is not None and (self._lane_ok or self._lane_ready(lane)):
                self._frames += 1
                self._frame_raw = data
                self._frame_end += size
                self._lane_fold(text)
                return [lane.event(data)]
        self._lane_ok = False  # the general way may change what the lane relies on
        events = self._decoder.feed(data)
        for event in events:
            self._frames += 1
            # Where a finding happened is the end of its frame in the body: the same however the
            # body was split into feeds (the bytes fed so far would not be). A CRLF blank line counts
            # to its CR (``_find``): when a feed ends between the two, the decoder dispatches at the
            # CR and the LF arrives with the next frame, so the LF must not move the offset.
            raw = self._frame_raw = event.raw
            self._frame_end += len(raw)
            self._on_event(event)
        return events

    def _lane_ready(self, lane: Lane) -> bool:
        """Whether a frame matching ``lane`` may be folded by ``_lane_fold``: the decoder is at a
        frame boundary and the protocol's state still folds the lane's event as it did when it was
        learned. Asked only after the general way ran (a lane fold changes neither)."""
        self._lane_ok = lane.ready() and self._lane_state()
        return self._lane_ok

    @abstractmethod
    def _lane_state(self) -> bool:
        """The protocol's part of ``_lane_ready`` (e.g. no terminal event yet, the block open).
        Asked only once the protocol has learned a lane (``_learn_lane``); a protocol that never
        learns one answers False."""

    @abstractmethod
    def _lane_fold(self, text: str) -> None:
        """Fold the lane's event with ``text`` exactly as the general way folds the event it was
        learned from (called only after ``_lane_state`` said yes)."""

    def _learn_lane(self, event: SSEEvent, text: str, path: Path, *, number: int | None = None,
                    number_key: str = "", number_path: Path = ()) -> bool:
        """The general way just folded ``event``, a text delta whose ``text`` is at ``path`` of its
        JSON: make its frame the stream's lane (``contract.lane``), unless it already is. True when
        a new lane was learned: the caller then keeps what its ``_lane_fold`` needs."""
        lane = self._lane
        if lane is None:
            self._lane_offers += 1
            if self._lane_offers < _LANE_AFTER:
                return False
        elif lane.text(event.raw, number) is not None:
            return False  # (a frame the lane missed only because it came with others in one read)
        decoder = self._decoder
        if self._lane_tries >= _LANE_TRIES or type(decoder) is not SSEDecoder:
            return False
        if not plain(text):
            return False  # this frame's text is escaped: the next one may do
        self._lane_tries += 1
        lane = Lane.learn(event.raw, text, path, decode_json, decoder, number=number,
                          number_key=number_key, number_path=number_path)
        if lane is None:
            return False  # (the stream keeps the lane it had)
        self._lane = lane
        return True

    @property
    def _may_learn(self) -> bool:
        """Whether a text delta folded the general way is worth offering to ``_learn_lane``."""
        return self._lane is not None or self._lane_tries < _LANE_TRIES

    def _keep_tail(self, data: bytes) -> None:
        self._tail_parts.append(data)
        self._tail_len += len(data)
        if self._tail_len > _TAIL_KEPT:
            joined = b"".join(self._tail_parts)[-TAIL_BYTES:]
            self._tail_parts = [joined]
            self._tail_len = len(joined)

    def _find(self, kind: FindingKind, detail: str) -> None:
        cut = 1 if self._frame_raw.endswith(b"\r\n") else 0
        self._findings.append(Finding(kind, detail, self._frames, self._frame_end - cut))

    def _once(self, key: str, kind: FindingKind, detail: str) -> None:
        """A finding made once per stream for ``key`` (what follows the end, what precedes the
        start: one is evidence enough, a thousand would bury the rest)."""
        if key not in self._once_keys:
            self._once_keys.add(key)
            self._find(kind, detail)

    def _unknown_kind(self, name: str) -> None:
        """A kind the tables do not know passed through (``docs/design/guarantees.md`` guarantee 6): recorded
        in the verdict, never a finding."""
        self._unknown[name] = self._unknown.get(name, 0) + 1

    def _finish_reason(self, reason: str, where: str, *, blocked: bool = False,
                       message: object = None) -> ReasonClass:
        """Classify a finish reason by the protocol's table: a failed one (or one the table does
        not name) ends the stream as an error, with the reason as its message."""
        cls = self.reasons.classify(reason, blocked=blocked)
        if cls is ReasonClass.FAILED and self._error is None:
            known = reason in (self.reasons.blocked if blocked else self.reasons.table)
            self._error = (f"{where} {reason}" + ("" if known else " (a reason sseguard does not "
                                                                   "classify: failed until it does)")
                           + (f": {message}" if isinstance(message, str) and message else ""))
        return cls

    def _on_leak(self, marker: str, index: int, where: str, pos: int) -> None:
        self._find(FindingKind.MARKUP_LEAK, f"{marker!r} in {where} of {self._leak_place} {index} "
                                            f"at {pos}")

    _leak_place: ClassVar[str] = "choice"  # what the index of a text stream counts, for the detail

    def _on_garble(self, kind: FindingKind, detail: str, index: int, where: str) -> None:
        self._find(kind, f"{detail} in {where} of {self._leak_place} {index}")

    @staticmethod
    @abstractmethod
    def _tool_entry(tool: dict[str, Any]) -> tuple[Any, Any]:
        """One element of the request's ``tools`` as ``(name, JSON schema)``, in the protocol's
        own spelling of a tool."""

    def _on_error(self, data: str, obj: Any = None) -> None:
        """An error event: its message is kept (the first one wins; later ones are echoes)."""
        if obj is None:
            try:
                obj = decode_json(data)
            except JSON_ERRORS:
                obj = None
        if self._error is None:
            self._error = error_text(data, obj)

    @abstractmethod
    def _on_event(self, event: SSEEvent) -> None:
        """Fold one dispatched event (frame number and end offset are already counted)."""

    def _json_object(self, data: str, what: str) -> dict[str, Any] | None:
        """A frame's JSON object, or None with the finding for bad JSON or another JSON value
        (``what`` the frame is called in this protocol: a chunk, an event, a record)."""
        try:
            obj = decode_json(data)
        except JSON_ERRORS:
            self._find(FindingKind.BAD_CHUNK_JSON, f"not JSON: {data[:120]!r}")
            return None
        if not isinstance(obj, dict):
            self._find(FindingKind.CHUNK_SCHEMA, f"{what} is a {type(obj).__name__}, not an object")
            return None
        return obj

    def _typed_event(self, event: SSEEvent,
                     note: Callable[[dict[str, Any]], None] | None = None,
                     decoded: Any = None) -> tuple[str, dict[str, Any]] | None:
        """Decode a typed-event protocol's frame (Responses, Messages) into its type and object.

        Bad JSON and non-objects become findings, an error event is taken as one; None means the
        frame is fully handled. The type is the object's ``type``, else the SSE ``event:`` name (a few
        compatible servers put it only there). ``note`` sees every object, error events included
        (Responses numbers them all). ``decoded``: the frame's JSON object, when the caller's fast
        path already decoded it (and did nothing else with it).
        """
        self._events += 1
        data = event.data
        obj = decoded if type(decoded) is dict else self._json_object(data, "event")
        if obj is None:
            return None
        etype = obj.get("type")
        if not isinstance(etype, str):
            etype = event.event if event.event != "message" else ""
        self._chunks += 1
        if note is not None:
            note(obj)
        if etype == "error" or event.event == "error" or (not etype and "error" in obj):
            self._on_error(data, obj)
            return None
        if not etype:
            self._find(FindingKind.CHUNK_SCHEMA, f"event without a type: {data[:80]!r}")
            return None
        return etype, obj

    # ── the verdict ───────────────────────────────────────────────────────────────────────────
    def close(self, transport_error: str | None = None, http_status: int = 200,
              stalled: bool = False, body: bytes | None = None) -> Verdict:
        """Say how the body ended and get the verdict. ``body`` is a non-2xx response's body."""
        if self._closed:
            raise UsageError(f"{type(self).__name__}.close() called twice")
        self._closed = True
        tail = self._decoder.close()
        error = self._error
        if body is not None:
            self._keep_tail(body)
            self._bytes += len(body)
        if not 200 <= http_status < 300:
            ending = Ending.HTTP_ERROR
            error = (body or b"").decode("utf-8", "replace")[:TAIL_BYTES] or f"HTTP {http_status}"
        elif error is not None:
            ending = Ending.ERROR_EVENT
        elif stalled:
            ending = Ending.STALLED
            error = "stalled"
        elif transport_error is not None:
            ending = Ending.TRANSPORT_ERROR
            error = transport_error
        elif tail.is_cut:
            ending = Ending.CUT_MID_FRAME
        elif self._events == 0:
            ending = Ending.EMPTY
        else:
            ending = self._clean_ending()
            error = self._error  # (a reason classified only at the end: a blocked prompt's)
        self._frame_end = self._bytes  # what is found from here on concerns the whole body
        self._frame_raw = b""
        if ending is not Ending.HTTP_ERROR:
            self._final_findings(ending)
        first_id, last_id, ids_changed = self._ids()
        if ids_changed:
            self._find(FindingKind.ID_CHANGED, f"response id changed from {first_id!r} to {last_id!r}")
        return Verdict(
            ending=ending,
            findings=tuple(self._findings),
            message=self._message(),
            chunks=self._chunks,
            bytes=self._bytes,
            first_id=first_id,
            last_id=last_id,
            tail=b"".join(self._tail_parts)[-TAIL_BYTES:],
            error=error,
            http_status=http_status,
            api=str(self.api),
            unknown_kinds=tuple(sorted(self._unknown)),
        )

    @abstractmethod
    def _clean_ending(self) -> Ending:
        """The ending of a body that ended cleanly after some events: the protocol's own table."""

    @abstractmethod
    def _final_findings(self, ending: Ending) -> None:
        """Findings that need the whole stream (tool calls, usage)."""

    @abstractmethod
    def _ids(self) -> tuple[str | None, str | None, bool]:
        """The first and last id the stream gave, and whether it changed."""

    @abstractmethod
    def _message(self) -> dict[str, Any]:
        """The final object, as the protocol's official SDK would accumulate it."""

    # ── helpers of the typed-event protocols (Responses, Messages) ────────────────────────────
    def _int_field(self, etype: str, obj: dict[str, Any], field: str) -> int | None:
        """An index field of an event; anything but an integer is a schema finding."""
        value = obj.get(field)
        if is_int(value):
            return value
        self._find(FindingKind.CHUNK_SCHEMA, f"{etype}: {field} is not an integer")
        return None

    def _open_block(self, etype: str, index: int, blocks: dict[int, Block],
                    what: str) -> Block | None:
        """The open block (item) an event refers to; one never opened, or closed, is out of order
        (once per event type and block: a server that skips an open sends every delta after it)."""
        block = blocks.get(index)
        if block is None or not block.open:
            self._once(f"{etype}#{index}", FindingKind.EVENT_ORDER,
                       f"{etype} for {what} {index}, which is "
                       f"{'not open' if block else 'never opened'}")
            return None
        return block

    # ── tool calls ────────────────────────────────────────────────────────────────────────────
    def _check_call(self, where: str, name: str, arguments: str, *, cut_off: bool,
                    flagged: bool = False) -> None:
        """Name, JSON and schema of one tool call. ``cut_off``: the stream stopped inside it, so
        unparseable arguments are a call cut short, not bad JSON (unless already ``flagged``)."""
        tools = self._tools
        if tools.offered and name not in tools.schemas:
            self._find(FindingKind.TOOL_UNDEFINED_FUNCTION,
                       f"{where}: not among the {len(tools.schemas)} offered tools")
        if arguments.strip() == "":
            # An empty string for a call without arguments is common and harmless.
            args: Any = {}
        else:
            try:
                args = json.loads(arguments)
            except (ValueError, RecursionError) as exc:
                if cut_off:
                    if not flagged:
                        self._find(FindingKind.TOOL_CALL_UNTERMINATED,
                                   f"{where}: arguments cut off after {len(arguments)} chars")
                else:
                    self._find(FindingKind.TOOL_ARGS_INVALID_JSON,
                               f"{where}: {exc.msg} at {exc.pos}: {arguments[:120]!r}"
                               if isinstance(exc, json.JSONDecodeError) else f"{where}: {exc}")
                return
        schema = tools.schemas.get(name)
        if isinstance(schema, dict) and schema:
            problem = schema_problem(args, schema)
            if problem is not None:
                self._find(FindingKind.TOOL_ARGS_SCHEMA_MISMATCH, f"{where}: {problem}")

    def _flag_open(self, blocks: Iterable[Block], what: str) -> None:
        """At the terminal event: every block still open was never closed (a tool call: cut off)."""
        for block in blocks:
            if block.open and not block.flagged:
                block.flagged = True
                if block.is_tool:
                    self._find(FindingKind.TOOL_CALL_UNTERMINATED,
                               f"{what} {block.index} ({block.type} {block.name!r}) still open at "
                               f"the terminal event")
                else:
                    self._find(FindingKind.BLOCK_UNTERMINATED,
                               f"{what} {block.index} ({block.type}) still open at the terminal event")

    def _check_tool_blocks(self, blocks: Iterable[Block], what: str) -> None:
        """At close: every tool call's name and arguments; one still open was cut off."""
        for block in blocks:
            if block.is_tool:
                self._check_call(f"{what} {block.index} tool call {block.name!r}", block.name,
                                 "".join(block.arguments), cut_off=block.open, flagged=block.flagged)
