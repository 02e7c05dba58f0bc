"""The stream machine: every decision of one guarded client stream, with no socket and no clock.

In the manner of h11's ``Connection``: the driver (``driver/stream.py``) feeds it what happened —
upstream bytes (``receive``), the upstream's end, break or silence (``upstream_ended``), a
continuation's answer (``continuation``), the rest of a body read after the client was done (``absorb``
then ``drained``), the end of the client's stream gone out (``client_stream_ended``), the client gone
(``client_gone``) — and performs what it answers: the bytes to write (``receive``'s return value, the
hot path) and the actions of ``actions.py`` (end the body, reset, close or release the upstream, shorten
the stall timer, ask for a continuation, record a verdict). Time arrives as events too: a stall is
``upstream_ended(stalled=True)``.

What it decides, per upstream read: every complete frame goes through the protocol's checker and the
stream's ``Frames`` (unchanged, the markup repair, or the tool calls held for ``--resume``) and is
forwarded at once; keep-alive comments go out at once; the terminal event is held until the upstream's
end shows the stream deserves it; an upstream error frame ends the stream (forwarded when the client's
SDK raises on it, replaced otherwise). At the upstream's end: a continuation where the healing table
(``resume/dialects.py``) can cure the break, otherwise the ending the policy and ``--on-bad-end`` call
for — a clean end, the protocol's error frame, or a reset — never a clean end for a bad stream.

It imports the core (``contract``, ``policy``, ``verdict``, ``redact``, ``sse``) and its own folder
only; ``tests/test_layers.py`` keeps it so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

from sseguard.core.contract import Checker, RelayTable, UpstreamError, checker_for
from sseguard.core.policy import Policy
from sseguard.core.redact import Redactor
from sseguard.core.sse import SSEEvent
from sseguard.core.verdict import Api, Ending, Verdict
from sseguard.proxy.machines.actions import (
    AskContinuation,
    CloseUpstream,
    Drain,
    EndBody,
    RecordVerdict,
    ReleaseUpstream,
    Reset,
    ShortenStall,
    StreamAction,
    Write,
)
from sseguard.proxy.machines.frames import Frames, StopReason
from sseguard.proxy.machines.outcome import StreamOutcome, failure_message

#: Undelivered bytes longer than this are a frame still arriving, not a block of keep-alive comments.
_COMMENT_SCAN = 4096
#: After the terminal event, how long the upstream may take to end its body before the proxy ends it.
DONE_GRACE = 1.0
#: Endings a continuation can cure: the answer stopped, but what was sent is sound.
RESUMABLE = frozenset({"truncated", "cut_mid_frame", "transport_error", "stalled", "no_finish"})


class Splice(Protocol):
    """Rewrites a continuation's body into the client's stream (``resume/dialects.py``'s table builds one)."""

    failure: str | None

    def feed(self, data: bytes) -> bytes:
        """Continuation bytes in, the client's whole frames out."""

    def close(self) -> bytes:
        """The continuation ended: what is left of it, as it came."""


class Resume(Protocol):
    """One client stream's continuation state (``dialects.Resume``): what the client has, and how to ask
    for the rest."""

    forwarded: list[bytes]

    def note(self, data: bytes) -> None:
        """Bytes just written to the client."""

    def why_not(self) -> str | None:
        """Why the stream cannot be continued now (None: it can)."""

    def continuation(self) -> AskContinuation:
        """The continuation request: its body, and (a server that keeps the answer) method and path."""

    def splice(self) -> Splice:
        """The splice of the next continuation (spends one)."""

    def end_attempt(self) -> tuple[dict[str, Any] | None, int]:
        """The attempt being continued ended: its own usage and completion tokens."""

    def abandoned(self) -> AskContinuation | None:
        """The request that stops the upstream's generation of an answer the client's stream ended
        without (None: nothing goes on upstream)."""


class StreamMachine:
    """One guarded client stream's decisions, from the upstream's first body byte to its record."""

    def __init__(self, *, api: Api, wire: RelayTable, policy: Policy, checker: Checker, frames: Frames,
                 redactor: Redactor, request_obj: dict[str, Any], on_bad_end: str = "error-event",
                 complete_done: bool = False, stall_timeout: float = 60.0, array: bool = False,
                 resume: Resume | None = None,
                 continued_frames: Callable[[], Frames] | None = None) -> None:
        self.api = api
        self.wire = wire
        self.policy = policy
        self.checker = checker
        self.frames = frames
        self.redactor = redactor
        self.request_obj = request_obj
        self.on_bad_end = on_bad_end
        self.hold = on_bad_end != "pass"  # hold the terminal event until the end is known good
        self.complete_done = complete_done
        self.stall_timeout = stall_timeout
        #: The body is one JSON array (Gemini without ``alt=sse``): whatever ends it early must also
        #: close it with ``]``, or the client's JSON parser fails instead of raising the error.
        self.array = array
        self.resume = resume
        self._note = None if resume is None else resume.note
        self._continued_frames = continued_frames
        # The plain ``Frames`` forwards every frame unchanged and never fails: its calls are skipped.
        self._verbatim = type(frames) is Frames
        self.outcome = StreamOutcome()
        #: Actions decided while receiving (rare: the terminal's grace); the driver takes them.
        self.wants: list[StreamAction] = []
        # Bytes received but not yet part of a dispatched event (a frame still arriving), kept as
        # parts: a large frame arriving in many reads must not be re-joined on every read.
        self._pending: list[bytes] = []
        self._pending_len = 0
        self._ahead = 0  # of those, bytes of a comment-only block already sent
        self._received = self._consumed = 0  # of the current upstream body
        self._after_done = False
        self._done_raw = b""  # the held terminal event (and its tolerated trailer)
        self._sent = b""  # the last frames written, for the error frame's sequence number
        #: The error that stopped the stream early (code, message), and whether its frame went out.
        self.stop: StopReason | None = None
        self._stop_forwarded = False
        self._splice: Splice | None = None
        self._closed = False  # the checker has given its verdict
        self._last_verdict: Verdict | None = None
        #: How the upstream connection broke, in the client's words.
        self._broke: str | None = None
        self._ended: tuple[str | None, bool] = (None, False)  # the upstream's end, for a refusal
        #: The client's stream has been ended (``client_stream_ended``: the end went out).
        self._delivered = False

    @property
    def saw_content(self) -> bool:
        """Content (text, reasoning or a tool call) has been forwarded: the time to first token."""
        return self.checker.saw_content

    @property
    def received(self) -> int:
        """Body bytes of the current upstream relayed so far."""
        return self._received

    # ── upstream bytes ─────────────────────────────────────────────────────────────────────────
    def receive(self, chunk: bytes, events: list[SSEEvent] | None = None) -> bytes:
        """Upstream body bytes in; the bytes to write to the client now out (b"": none).

        ``events``: what the checker already found in ``chunk`` (it was fed to it while the client's
        headers waited on the first event), or None to feed it now. After it, ``stop`` says whether
        the stream must end now (no more reading), ``wants`` holds any other action.
        """
        # Everything below runs for every stream's every read: locals, one call per read.
        if self._splice is not None:
            chunk = self._splice.feed(chunk)
            if not chunk:
                return b""
        checker = self.checker
        if events is None:
            events = checker.feed(chunk)
        size = len(chunk)
        received = self._received = self._received + size
        if len(events) == 1:
            consumed = self._consumed = self._consumed + len(events[0].raw)
        elif events:
            consumed = self._consumed = self._consumed + sum([len(e.raw) for e in events])
        else:
            consumed = self._consumed
        left = received - consumed
        if not left:
            if self._pending_len:
                self._pending, self._pending_len = [], 0
        elif left <= size:
            self._pending, self._pending_len = [chunk[size - left:]], left
        else:
            self._pending.append(chunk)
            self._pending_len = left
        if not events:
            if left <= _COMMENT_SCAN and self._pending_bytes()[self._ahead:self._ahead + 1] == b":":
                # Keep-alive comments (": ping") go out at once: holding them until the next event
                # would defeat their purpose during a long prefill.
                return self._comments()
            return b""
        out: list[bytes] = []
        wire = self.wire
        terminal = wire.terminal
        frames = self.frames
        hold = self.hold
        verbatim = self._verbatim
        after_done = self._after_done
        error_gate = hold and checker.error_message is not None
        for event in events:
            raw = event.raw
            if self._ahead:
                cut = min(self._ahead, len(raw))
                raw = raw[cut:]
                self._ahead -= cut
                event = SSEEvent(event.data, event.event, event.id, event.retry, raw)
            if after_done:
                # Frames after the terminal event are never delivered (the checker notes them), but
                # for a trailer the protocol tolerates.
                if wire.trailer(event):
                    self._done_raw += raw
                continue
            if terminal(event):
                # As it came (a repair renumbers a Responses terminal event's items).
                raw = frames.transform(event)
                if hold:
                    after_done = self._after_done = True
                    self._done_raw = raw  # sent once the end is known good
                    # An upstream that never ends its body after its terminal event is not stalled:
                    # the answer is whole, so it gets a short grace, then the end.
                    self.wants.append(ShortenStall(DONE_GRACE))
                else:
                    out.append(raw)
                continue
            if error_gate:
                what = wire.upstream_error(event)
                if what is UpstreamError.REPLACE:
                    self.stop = ("error_event", checker.error_message or "upstream error event")
                    break
                if what is UpstreamError.FORWARD:
                    out.append(wire.forwarded(event, self._sent))  # the SDK raises on it
                    self._stop_forwarded = True
                    self.stop = ("error_event", checker.error_message or "upstream error")
                    break
            if verbatim:
                out.append(raw)
                continue
            piece = frames.transform(event)
            if piece:
                out.append(piece)
            if frames.failure is not None:
                self.stop = frames.failure
                break
        data = out[0] if len(out) == 1 else b"".join(out)
        if data:
            self._sent = data  # the error frame's sequence number continues from it
            note = self._note
            if note is not None:
                note(data)
        return data

    def _pending_bytes(self) -> bytes:
        if len(self._pending) > 1:
            self._pending = [b"".join(self._pending)]
        return self._pending[0] if self._pending else b""

    def _comments(self) -> bytes:
        """The comment-only lines of the undelivered bytes, up to their last blank line."""
        pending = self._pending_bytes()[self._ahead:]
        end = pending.rfind(b"\n\n")
        if end == -1 or b"\r" in pending:
            return b""
        block = pending[:end + 2]
        if all(line == b"" or line.startswith(b":") for line in block.split(b"\n")):
            self._ahead += len(block)
            return block
        return b""

    # ── the upstream's end ─────────────────────────────────────────────────────────────────────
    def upstream_ended(self, *, broke: str | None = None, detail: str = "",
                       stalled: bool = False) -> list[StreamAction]:
        """The upstream body ended (cleanly; ``broke``: its connection broke off, in the client's
        words, ``detail`` the exception; ``stalled``: silent for the stall timeout), or ``stop``
        was set: what the driver does next."""
        actions: list[StreamAction] = []
        transport_error = None
        if broke is not None:
            self._broke = broke
            transport_error = self.redactor.text(f"{broke} ({detail})" if detail else broke)
        if stalled and self._after_done:
            stalled = False  # a whole answer whose body did not end: not a stall
            self.outcome.extra["lingered_after_done"] = True
        if self._splice is not None and broke is None and not stalled and self.stop is None:
            splice, self._splice = self._splice, None
            rest = splice.close()  # a frame cut at the end goes on: the checker sees it
            data = self.receive(rest) if rest else b""
            self._splice = splice
            if data:
                actions.append(Write(data))
        if self.stop is None and self._splice is not None and self._splice.failure is not None:
            self.stop = ("resume_mismatch", self._splice.failure)
        if self.stop is None and self._continuable(transport_error, stalled):
            assert self.resume is not None
            self._ended = (transport_error, stalled)
            return [*actions, CloseUpstream(), self.resume.continuation()]
        return actions + self._finish(transport_error, stalled)

    def _continuable(self, transport_error: str | None, stalled: bool) -> bool:
        resume = self.resume
        if resume is None or self.outcome.extra.get("lingered_after_done") or not resume.forwarded:
            return False  # a whole answer whose body did not end, or nothing the client has
        verdict = self._verdict(transport_error, stalled)
        return str(verdict.ending) in RESUMABLE and resume.why_not() is None

    def continuation(self, answered: bool) -> list[StreamAction]:
        """The continuation asked for answered with a 2xx (``answered``; its body is then fed to
        ``receive``), or could not be had (the stream ends as it would without ``--resume``)."""
        if not answered:
            return self._finish(*self._ended)
        assert self.resume is not None and self._last_verdict is not None
        usage, tokens = self.resume.end_attempt()
        verdict = self._last_verdict
        message = {k: v for k, v in verdict.message.items() if k != "usage"}
        if usage is not None:
            message["usage"] = usage  # the attempt's own, not what the client got before it
        record = RecordVerdict(replace(verdict, message=message), self.outcome, self.frames, attempt=True,
                        tokens=tokens)
        # The client's stream is judged afresh: a new checker re-reads what the client got, then the
        # continuation's frames. What the broken answer held back is not the client's.
        checker = checker_for(self.api, self.request_obj, keep_text=False)
        checker.feed(b"".join(self.resume.forwarded))
        self.checker = checker
        self.frames = self._continued_frames() if self._continued_frames else Frames()
        self._verbatim = type(self.frames) is Frames
        self._splice = self.resume.splice()
        self.outcome = StreamOutcome()
        self._closed, self._last_verdict = False, None
        self._pending, self._pending_len, self._ahead = [], 0, 0
        self._received = self._consumed = 0
        self._done_raw, self._after_done = b"", False
        return [record]

    def _finish(self, transport_error: str | None, stalled: bool) -> list[StreamAction]:
        stop = self.stop
        if stop is not None and stop[0] != "error_event":
            # A repair failure: the client's stream ends now; the upstream is still read to its end
            # so that the record says how the upstream itself ended.
            return [*self._end_with_error(stop, forwarded=False), Drain()]
        if stop is not None:
            verdict = self._verdict(transport_error, stalled)
            return [CloseUpstream(), *self._end_with_error(stop, forwarded=self._stop_forwarded),
                    self._record(verdict)]
        lingered = "lingered_after_done" in self.outcome.extra
        upstream: StreamAction = (CloseUpstream() if transport_error is not None or stalled or lingered
                            else ReleaseUpstream())
        actions, verdict = self._conclude(transport_error, stalled)
        return [upstream, *actions, self._record(verdict)]

    def absorb(self, chunk: bytes) -> None:
        """Upstream bytes read after the client's stream ended: for the record only."""
        self.checker.feed(chunk)

    def drained(self, error: str | None = None, stalled: bool = False) -> list[StreamAction]:
        """The rest of the upstream's body has been read (``error``: what cut it)."""
        verdict = self._verdict(error and self.redactor.text(error), stalled)
        return [CloseUpstream(), self._record(verdict)]

    def _conclude(self, transport_error: str | None,
                  stalled: bool) -> tuple[list[StreamAction], Verdict]:
        """The upstream ended by itself: judge it and end the client's stream accordingly."""
        flushed = self.frames.flush()  # before the verdict: what it finds counts
        verdict = self._verdict(transport_error, stalled)
        failure = self.policy.failure(verdict)
        passing = self.on_bad_end == "pass"
        if failure is not None and failure == str(verdict.ending) and not passing:
            return self._end_with_error((failure, self._message(verdict, failure)),
                                        forwarded=False), verdict
        if self.frames.failure is not None:
            # Unparseable markup is never shown as content, whatever --on-bad-end says.
            return self._end_with_error(self.frames.failure, forwarded=False), verdict
        if passing and verdict.ending in (Ending.TRANSPORT_ERROR, Ending.STALLED):
            # "As it came" for a connection that failed is a connection that fails: ending it
            # cleanly would be the very silent truncation this proxy exists to prevent.
            self.outcome.action = "pass"
            rest = flushed + self._pending_bytes()[self._ahead:]
            passed: list[StreamAction] = [Write(rest)] if rest else []
            return [*passed, Reset()], verdict
        if failure is None or passing:
            return self._end_well(verdict, failure, flushed), verdict
        return self._end_with_error((failure, self._message(verdict, failure)),
                                    forwarded=False), verdict

    def _end_well(self, verdict: Verdict, failure: str | None, flushed: bytes) -> list[StreamAction]:
        out = [flushed]
        if failure is not None:
            self.outcome.action = "pass"
            out.append(self._pending_bytes()[self._ahead:])  # a cut frame goes out as it came
        sentinel = self.wire.sentinel
        if self.hold and self._done_raw:
            out.append(self._done_raw)
        elif (self.policy.complete and (self.hold or self.complete_done) and sentinel
              and not self._done_raw and verdict.ending is Ending.NO_DONE):
            # A finished answer that only lacks its sentinel: the client gets the end it expects,
            # the record keeps the ending (no_done) and says it was completed (the action).
            # ``--on-bad-end pass`` forwards as it came unless --complete-done asks for it.
            out.append(sentinel)
            self.outcome.action = "completed-done"
        data = b"".join(out)
        actions: list[StreamAction] = [Write(data)] if data else []
        return [*actions, EndBody()]

    def _end_with_error(self, stop: StopReason, *, forwarded: bool) -> list[StreamAction]:
        code, message = stop
        self.outcome.code = code
        if self.on_bad_end == "abort":
            self.outcome.action = "abort"
            return [Reset()]
        self.outcome.action = "error-event"
        if forwarded:
            return [EndBody()]
        message = self.redactor.text(message)
        if self.array and not self._sent:
            # Nothing of the array has been sent: the error element goes out as the whole array,
            # ``[`` included (the protocol's frame continues an array already begun).
            frame = self.wire.error_frame(code, message, b"[")
            return [Write(b"[" + frame.lstrip(b" \t\r\n,")), EndBody()]
        return [Write(self.wire.error_frame(code, message, self._sent)), EndBody()]

    # ── the client ─────────────────────────────────────────────────────────────────────────────
    def client_stream_ended(self) -> None:
        """The driver performed the end of the client's stream (``EndBody`` or ``Reset``): a
        departure from now on is not the client leaving early."""
        self._delivered = True

    def client_gone(self) -> list[StreamAction]:
        """The client closed its connection (or the proxy stopped reading after its end)."""
        self.outcome.client_gone = not self._delivered
        reason = ("the proxy stopped reading after the client's stream had ended" if self._delivered
                  else "client disconnected")
        verdict = self._last_verdict or self._verdict(reason, False)
        return [CloseUpstream(), self._record(verdict)]

    # ── verdicts ───────────────────────────────────────────────────────────────────────────────
    def _record(self, verdict: Verdict) -> RecordVerdict:
        """The client stream's own record; with a cancel when the upstream keeps generating an
        answer the client's stream ended without (the client left, or the proxy gave up)."""
        cancel = None
        if self.resume is not None and (verdict.ending is not Ending.COMPLETE or self.outcome.client_gone):
            cancel = self.resume.abandoned()
        return RecordVerdict(verdict, self.outcome, self.frames, cancel=cancel)

    def _verdict(self, transport_error: str | None, stalled: bool) -> Verdict:
        if self._closed and self._last_verdict is not None:
            return self._last_verdict  # a resumed stream's upstream was judged before it was continued
        self._closed = True
        verdict = self.checker.close(transport_error=transport_error, stalled=stalled)
        extra = self.frames.findings()
        if extra:
            verdict = replace(verdict, findings=(*verdict.findings, *extra))
        self._last_verdict = verdict
        return verdict

    def _message(self, verdict: Verdict, failure: str) -> str:
        return failure_message(verdict, failure, policy=self.policy.name, broke=self._broke,
                               stall_timeout=self.stall_timeout, messages=self.wire.messages)
