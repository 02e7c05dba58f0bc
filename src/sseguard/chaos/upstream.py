"""The fault machine of ``chaos --upstream``: a real upstream's stream in, the broken stream out.

Sans-IO in the manner of ``proxy.machine``: the driver (``upstream_server.py``) feeds it the upstream's
body bytes as they arrive (``feed``) and the upstream's end (``close``), and performs what it answers,
in order: ``Send`` bytes to the client, ``Pause`` (a stall), ``Stop`` (a clean end, a reset, or a
hang). It never reads a clock or a socket.

Where a fault strikes. A generated stream knows its length; a relayed one does not. So the decision's
``at`` picks a content delta by number — ``1 + int(at × expected)``, ``expected`` being
``pacing.tokens`` (``--tokens``), the answer length the strike points are spread over — and the
fault strikes before the record after it. A stream whose text ends sooner is struck before its
finish (the finish chunk, ``message_delta``, ``response.completed``, Gemini's ``finishReason``
record), so every cut falls inside the real stream and after its content. A tool call is never split:
once one begins, the strike waits for the finish. ``--first-answer`` strikes at ``at`` 0.5.

What it can do to a relayed stream: the faults that end it (``truncated``, ``cut_mid_frame``,
``transport_error``, ``stalled``, ``error_event``, ``no_finish``, ``no_done``), ``garbled`` (its text
overwritten in a span, ``upstream_garble``), and the chat and Responses dialects. What the answer
holds is the model's: the content faults are not injected (``upstream_wire.Wire.unsupported``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from sseguard.chaos.config import ChaosConfig
from sseguard.chaos.faults import Decision, Fault, ServerDialect
from sseguard.chaos.frames import End
from sseguard.chaos.upstream_garble import Garbler
from sseguard.chaos.upstream_wire import WIRES, Kind, Wire, chat_dialects
from sseguard.core.contract import checker_for
from sseguard.core.contract.chat import DONE_FRAME
from sseguard.core.contract.gemini.relay import ARRAY_CLOSE
from sseguard.core.sse import SSEEvent
from sseguard.core.verdict import Api

_enc = msgspec.json.encode
_dec = msgspec.json.decode

#: The faults that strike at one point of the stream.
CUTS = frozenset({Fault.TRUNCATED, Fault.CUT_MID_FRAME, Fault.TRANSPORT_ERROR, Fault.STALLED,
                  Fault.ERROR_EVENT})


@dataclass(frozen=True, slots=True)
class Send:
    """Write these bytes to the client."""

    data: bytes


@dataclass(frozen=True, slots=True)
class Pause:
    """Write nothing for this long (a stall), then go on."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Stop:
    """End the client's body (``End.EOF``, ``ABORT``, ``HANG``); read no more of the upstream."""

    end: End


Step = Send | Pause | Stop


def strike_at(decision: Decision, config: ChaosConfig) -> int:
    """The content delta after which a cut strikes (1-based): ``at`` spread over ``pacing.tokens``."""
    return 1 + int(decision.at * max(1, config.pacing.tokens))


class UpstreamFaults:
    """One relayed stream's fault: fed the upstream's bytes, answers what the client gets."""

    def __init__(self, api: Api, decision: Decision, config: ChaosConfig,
                 request: dict[str, Any] | None = None, *, array: bool = False,
                 garbler: Garbler | None = None) -> None:
        self.wire: Wire = WIRES[api]
        self.api = api
        self.decision = decision
        self.config = config
        self.fault = decision.fault
        self.array = array
        self._decoder = checker_for(api, request, markup=None, keep_text=False)
        self._garbler = garbler if self.fault is Fault.GARBLED else None
        self._target = strike_at(decision, config)
        self._contents = 0
        self._call = False  # a tool call began: no cut before the finish
        self._armed = False  # the target delta went out: strike before the next record
        self._struck = self.fault not in CUTS
        self._stopped = False
        self._sent = False  # anything of the body went out (an array's error element needs to know)
        self._last: Any = None
        self._held = 0  # bytes fed that no record has taken yet
        self._tail = bytearray()
        self._pos = 0  # characters of the answer's text relayed so far
        self._cr = False  # the previous record's bytes ended with a CR (its LF may come apart)
        self._cr_sent = False  # and they were sent as they came
        #: The answer's text as the upstream wrote it (before any garbling).
        self.text: list[str] = []
        #: Records of the upstream's stream relayed to the client (whole or rewritten).
        self.frames = 0

    @property
    def stopped(self) -> bool:
        """The client's body has ended: read no more of the upstream."""
        return self._stopped

    def feed(self, data: bytes) -> list[Step]:
        """Upstream body bytes in; what to do for the client, in order."""
        if self._stopped:
            return []
        self._tail += data
        events = self._decoder.feed(data)
        steps: list[Step] = []
        out: list[bytes] = []
        for event in events:
            del self._tail[:len(event.raw)]
            self._one(event, out, steps)
            if self._stopped:
                break
        if out:
            steps.append(Send(b"".join(out)))
        return _merged(steps)

    def close(self) -> list[Step]:
        """The upstream's body ended (cleanly: a broken upstream is the driver's to pass on)."""
        if self._stopped:
            return []
        steps: list[Step] = []
        out: list[bytes] = []
        if not self._struck:
            # The stream ended before any finish (Gemini has no terminal record in SSE): strike now.
            self._strike(None, out, steps)
        if not self._stopped and self._tail:
            out.append(bytes(self._tail))  # what the upstream left undelimited, as it came
        if out:
            steps.append(Send(b"".join(out)))
        if not self._stopped:
            steps.append(Stop(End.EOF))
            self._stopped = True
        return _merged(steps)

    # ── one record ─────────────────────────────────────────────────────────────────────────────
    def _one(self, event: SSEEvent, out: list[bytes], steps: list[Step]) -> None:
        if self._cr and event.raw[:1] == b"\n":
            # The LF of a CRLF that ended the previous event, split from it by the upstream's reads:
            # it is the previous event's (what is done to this one must not depend on the reads).
            if self._cr_sent:
                out.append(b"\n")
            event = SSEEvent(event.data, event.event, event.id, event.retry, event.raw[1:])
        self._cr = event.raw[-1:] == b"\r"
        self._cr_sent = False
        obj = _decode(event)
        kind = self.wire.kind(event.event, obj)
        if not self._struck and (self._armed or kind in (Kind.FINISH, Kind.TERMINAL)):
            self._strike(event, out, steps)
            if self._stopped:
                return
        if kind is Kind.CALL:
            self._call = True
        raw = self._rewritten(event, obj, kind)
        if raw:
            out.append(raw)
            self._sent = True
            self._cr_sent = raw[-1:] == b"\r"
            self.frames += 1
        if obj is not None and obj != "[DONE]":
            self._last = obj
        if kind is Kind.CONTENT and not self._call:
            self._contents += 1
            self._armed = self._contents >= self._target

    def _strike(self, event: SSEEvent | None, out: list[bytes], steps: list[Step]) -> None:
        """The cut fault, before ``event`` (None: at the upstream's end)."""
        self._struck = True
        fault = self.fault
        if fault is Fault.STALLED:
            options = self.config.options
            if options.stall_then == "hang":
                self._stop(out, steps, End.HANG)
                return
            if out:
                steps.append(Send(b"".join(out)))
                out.clear()
            steps.append(Pause(options.stall_ms / 1000.0))
            return
        if fault is Fault.CUT_MID_FRAME and event is not None:
            # Half the frame as a whole read gives it: an LF still to come after its CR counts.
            size = len(event.raw) + (event.raw[-1:] == b"\r")
            out.append(event.raw[: max(1, size // 2)])
        elif fault is Fault.ERROR_EVENT:
            out.append(self.wire.error(self.config, self.decision, self._last, self.array,
                                       self._sent))
        elif fault is Fault.TRUNCATED and self.array and self._sent:
            out.append(b"\r\n" + ARRAY_CLOSE.encode())  # a clean end of an array closes it
        self._stop(out, steps, End.ABORT if fault is Fault.TRANSPORT_ERROR else End.EOF)

    def _stop(self, out: list[bytes], steps: list[Step], end: End) -> None:
        if out:
            steps.append(Send(b"".join(out)))
            out.clear()
        steps.append(Stop(end))
        self._stopped = True

    def _rewritten(self, event: SSEEvent, obj: Any, kind: Kind) -> bytes:
        """The record as the client gets it: dropped, replaced or changed by the fault and dialects."""
        fault, dialects = self.fault, self.config.dialects
        if kind is Kind.TERMINAL and obj == "[DONE]" and (
                fault is Fault.NO_DONE or ServerDialect.NO_DONE in dialects):
            return b""
        if kind is Kind.TERMINAL and self.api is Api.MESSAGES and (
                fault is Fault.NO_DONE or ServerDialect.NO_DONE in dialects):
            return b""
        changed = False
        if isinstance(obj, dict):
            if self._texts(event, obj):
                changed = True
            if fault is Fault.NO_FINISH and kind is Kind.FINISH:
                obj = self.wire.no_finish(event.event, obj)
                if obj is None:
                    return b""
                if obj == "[DONE]":
                    return DONE_FRAME
                changed = True
            if self.api is Api.CHAT and dialects:
                obj = chat_dialects(obj, kind, dialects)
                changed = True
        raw = _reframed(event, obj) if changed else event.raw
        if (kind is Kind.FINISH and self.api is Api.RESPONSES
                and ServerDialect.TRAILING_DONE in dialects):
            raw += DONE_FRAME
        return raw

    def _texts(self, event: SSEEvent, obj: dict[str, Any]) -> bool:
        """Note the answer's text in ``obj``, garbling it in place when that is the fault."""
        places = self.wire.texts(event.event, obj)
        garbler = self._garbler
        for holder, key, whole in places:
            text = holder[key]
            if not whole:
                self.text.append(text)
            if garbler is not None:
                start = 0 if whole else self._pos
                holder[key] = garbler.piece(text, start)
            if not whole:
                self._pos += len(text)
        return garbler is not None and bool(places)


def _decode(event: SSEEvent) -> Any:
    if event.event == ARRAY_CLOSE:
        return None
    data = event.data
    if data == "[DONE]":
        return data
    try:
        return _dec(data)
    except msgspec.DecodeError:
        return None


def _reframed(event: SSEEvent, obj: Any) -> bytes:
    """``event``'s bytes with its data replaced by ``obj``: the frame's own lines kept around it."""
    old = event.data.encode()
    new = _enc(obj)
    raw = event.raw
    at = raw.find(old) if old else -1
    if at >= 0:
        return raw[:at] + new + raw[at + len(old):]
    head = b"" if event.event == "message" else b"event: " + event.event.encode() + b"\n"
    return head + b"data: " + new + b"\n\n"


def _merged(steps: list[Step]) -> list[Step]:
    """Adjacent sends as one write."""
    out: list[Step] = []
    for step in steps:
        if isinstance(step, Send) and out and isinstance(out[-1], Send):
            out[-1] = Send(out[-1].data + step.data)
        elif not (isinstance(step, Send) and not step.data):
            out.append(step)
    return out
