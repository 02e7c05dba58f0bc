"""The guarded relay: forward each complete frame as it arrives, check it in flight, end it honestly.

One engine for the three protocols; what differs (the terminal event, the error frame, …) is the
stream's ``Wire`` table (``wire.py``). Per upstream read (``read(READ_MAX)``: what has arrived, at most
16 KiB, never waiting for a size to fill: that holds events back) the bytes go through the protocol's
checker and every frame they complete goes through the stream's ``Frames`` (``frames.py``: unchanged,
or the markup repair) and is written to the client at once. Two things are held back: the terminal
event (``data: [DONE]``, ``response.completed``, ``message_stop``), until the upstream's end shows the
stream deserves it (a stream whose tool arguments are not JSON, or that carries a frame after its end,
must not end cleanly), and, in repair mode, a partial markup marker. When the stream fails the policy
the client gets what ``--on-bad-end`` says instead of a clean end. Each ``await write()`` drains the
socket, so a slow client slows the upstream read (TCP flow control does the rest) and memory stays
flat.

The relay knows its config, its policy and whom to tell when a stream is done (``done``: metrics and
the record, in ``state.py``); it holds no app state.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Protocol

import aiohttp
from aiohttp import web
from aiohttp.abc import AbstractStreamWriter

from sseguard.contract import Checker
from sseguard.policy import Policy
from sseguard.proxy.config import OnBadEnd, ProxyConfig
from sseguard.proxy.forward import STREAM_HEADERS, HeadersWithFirstBytes, response_headers
from sseguard.proxy.frames import Failure, Frames
from sseguard.proxy.outcome import Outcome, failure_message
from sseguard.proxy.stall import READ_MAX, Body, Stalled, StallWatch, broke_off, drain
from sseguard.proxy.wire import UpstreamError, Wire
from sseguard.redact import Redactor
from sseguard.sse import SSEEvent
from sseguard.verdict import Ending, Verdict

#: Undelivered bytes longer than this are a frame still arriving, not a block of keep-alive comments.
_COMMENT_SCAN = 4096
#: After the terminal event, how long the upstream may take to end its body before the proxy ends it.
DONE_GRACE = 1.0


class _ClientGone(Exception):
    """The client closed its connection; nothing more can be sent."""


#: Told once per stream, when it is over: the relay (its timings, outcome, frames) and the verdict.
StreamDone = Callable[["StreamRelay", Verdict], None]


class ResumedBody(Body, Protocol):
    """A continuation's body as the client's stream goes on (``heal.py`` splices it)."""

    def failure(self) -> Failure | None:
        """Why the continuation did not line up with what the client has (None: it did)."""


class Resumer(Protocol):
    """``--resume``: notes what the client got; after a break, the next upstream to relay, or None
    (the stream then ends as it would without ``--resume``)."""

    def note(self, data: bytes) -> None:
        """Bytes just written to the client."""

    async def next(self, relay: StreamRelay, upstream: aiohttp.ClientResponse, watch: StallWatch,
                   transport_error: str | None) -> tuple[aiohttp.ClientResponse, StallWatch,
                                                         ResumedBody] | None:
        """The continuation of ``relay``'s stream, whose ``upstream`` just ended or broke."""


class StreamRelay:
    """One guarded stream (of the protocol ``wire`` describes), from the upstream's response headers
    to the last byte."""

    def __init__(self, config: ProxyConfig, policy: Policy, done: StreamDone,
                 request: web.Request, body: bytes, request_obj: dict[str, Any], frames: Frames,
                 checker: Checker, redactor: Redactor, wire: Wire) -> None:
        self.config = config
        self.policy = policy
        self._done = done
        self.wire = wire
        self.request = request
        self.body = body
        self.request_obj = request_obj
        self.frames = frames
        self.checker = checker
        self.redactor = redactor
        self.loop = asyncio.get_running_loop()
        # perf_counter for what is reported: uvloop's loop clock ticks in whole milliseconds.
        self.t0 = time.perf_counter()
        self.started_at = time.time()
        self.ttfb: float | None = None
        self.ttft: float | None = None
        self.max_gap = 0.0
        self.outcome = Outcome()
        self._resp: web.StreamResponse | None = None
        #: The response's body writer (``prepare``'s): the pump writes to it, one coroutine fewer per
        #: read than ``StreamResponse.write``, whose checks hold once the headers are prepared.
        self._writer: AbstractStreamWriter | None = None
        # Bytes received but not yet part of a dispatched event (a frame still arriving), kept as
        # parts: a large frame arriving in many reads must not be re-joined on every read.
        self._pending: list[bytes] = []
        self._pending_len = 0
        self._ahead = 0  # of those, bytes of a comment-only block already sent
        self._last_verdict: Verdict | None = None
        self.upstream_headers: Mapping[str, str] = {}
        self._done_raw = b""  # the held terminal event (and its tolerated trailer)
        self._sent = b""  # the last frames written, for the error frame's sequence number
        self._delivered = False  # the client's stream has been ended (cleanly or by a reset)
        self.concurrency = 1  # streams in flight when this one started, itself included
        # Healing (``guarded.py``): the record index this stream's record takes (None: the next one),
        # the client stream an upstream attempt was made for, and what healing this stream needed.
        self.index: int | None = None
        self.heal_of: int | None = None
        self.healed: str | None = None  # retry | resume | none; None when healing is off
        self.heal_attempts = 0
        self.heal_tokens = 0
        #: ``--resume``: asks for the rest of a stream that broke after content (``heal.py``).
        self.resume: Resumer | None = None
        self._closed = False  # the checker has given its verdict
        #: The body is one JSON array (Gemini without ``alt=sse``): whatever ends it early must also
        #: close it with ``]``, or the client's JSON parser fails instead of raising the error.
        self.array = False
        #: How the upstream connection broke, in the client's words (``stall.broke_off``).
        self._broke: str | None = None

    # ── the relay ──────────────────────────────────────────────────────────────────────────────
    async def relay(self, upstream: aiohttp.ClientResponse, first: bytes = b"",
                    events: list[SSEEvent] | None = None,
                    watch: StallWatch | None = None) -> web.StreamResponse:
        """Stream ``upstream`` (a 2xx) to the client; always closes ``upstream``.

        ``first``: body bytes already read from ``upstream`` (to see its first event before the client
        got anything); they are relayed before the rest. ``events``: what ``self.checker`` already
        found in them (they were fed to it), or None to feed them now. ``watch``: the stall timer
        those bytes were read under (None: a new one), kept rather than armed again.
        """
        if self.ttfb is None:
            self.ttfb = time.perf_counter() - self.t0
        kind = HeadersWithFirstBytes if first else web.StreamResponse
        resp = self._resp = kind(status=upstream.status, reason=upstream.reason)
        headers = response_headers(upstream.headers, keep_framing=False, into=resp.headers)
        headers.update(STREAM_HEADERS)
        if watch is None:
            watch = StallWatch(self.loop, self.config.stall_timeout, upstream.content)
        try:
            try:
                self._writer = await resp.prepare(self.request)
            except ConnectionResetError:
                raise _ClientGone from None
            transport_error, stop, forwarded = await self._pump(upstream.content, watch, first,
                                                                events)
            while stop is None and self.resume is not None:
                resumed = await self.resume.next(self, upstream, watch, transport_error)
                if resumed is None:
                    break
                upstream, watch, body = resumed
                transport_error, stop, forwarded = await self._pump(body, watch, b"", None)
                stop = stop or body.failure()
            if stop is not None and stop[0] != "error_event":
                # A repair failure: the client's stream ends now; the upstream is still read to its
                # end so that the record says how the upstream itself ended.
                await self._end_with_error(stop, upstream_error_forwarded=False)
                try:  # the rest goes into the checker only: the client is done
                    error = await drain(watch, self.checker.feed)
                finally:
                    upstream.close()
                verdict = self._verdict(error and self.redactor.text(error), watch.fired)
            elif stop is not None:
                upstream.close()  # the upstream reported an error: nothing more is wanted from it
                verdict = self._verdict(transport_error, watch.fired)
                await self._end_with_error(stop, upstream_error_forwarded=forwarded)
            else:
                if (transport_error is not None or watch.fired
                        or "lingered_after_done" in self.outcome.extra):
                    upstream.close()
                else:
                    upstream.release()
                verdict = await self._conclude(transport_error, watch.fired)
        except _ClientGone:
            self._client_left(upstream, watch)
            return resp
        except asyncio.CancelledError:
            self._client_left(upstream, watch)
            raise
        watch.close()
        self._done(self, verdict)
        return resp

    async def _conclude(self, transport_error: str | None, stalled: bool) -> Verdict:
        """The upstream ended by itself: judge it and end the client's stream accordingly."""
        flushed = self.frames.flush()  # before the verdict: what it finds counts
        verdict = self._verdict(transport_error, stalled)
        failure = self.policy.failure(verdict)
        passing = self.config.on_bad_end is OnBadEnd.PASS
        if failure is not None and failure == str(verdict.ending) and not passing:
            await self._end_with_error((failure, self._message(verdict, failure)),
                                       upstream_error_forwarded=False)
        elif self.frames.failure is not None:
            # Unparseable markup is never shown as content, whatever --on-bad-end says.
            await self._end_with_error(self.frames.failure, upstream_error_forwarded=False)
        elif passing and verdict.ending in (Ending.TRANSPORT_ERROR, Ending.STALLED):
            # "As it came" for a connection that failed is a connection that fails: ending it
            # cleanly would be the very silent truncation this proxy exists to prevent.
            self.outcome.action = "pass"
            rest = flushed + self._pending_bytes()[self._ahead:]
            if rest:
                await self._write(rest)
            self._reset()
        elif failure is None or passing:
            await self._end_well(verdict, failure, flushed)
        else:
            await self._end_with_error((failure, self._message(verdict, failure)),
                                       upstream_error_forwarded=False)
        return verdict

    def _client_left(self, upstream: aiohttp.ClientResponse, watch: StallWatch) -> None:
        """Client disconnects cancel the upstream request at once: closing the connection is what
        serving engines watch to abort the generation."""
        # Cancelled while draining the upstream after the client's stream had ended: the client
        # got its whole answer, only the record's view of the upstream is cut short.
        self.outcome.client_gone = not self._delivered
        upstream.close()
        watch.close()
        reason = ("the proxy stopped reading after the client's stream had ended" if self._delivered
                  else "client disconnected")
        verdict = self._last_verdict or self._verdict(reason, False)
        self._done(self, verdict)

    async def _pump(self, content: Body, watch: StallWatch, first: bytes,
                    fed: list[SSEEvent] | None) -> tuple[str | None, Failure | None, bool]:
        """Forward frames until the upstream ends or must be cut off (``first``: bytes already read,
        ``fed``: the events the checker found in them when they were already fed to it).

        Returns the transport error (if the upstream connection failed), the error that stopped the
        stream early (code, message) and whether that error's own frame was forwarded.

        With ``first`` the client's headers wait to go out with the first bytes written
        (``HeadersWithFirstBytes``); if the first read writes nothing they go out by themselves.
        """
        held = bool(first)
        hold = self.config.on_bad_end is not OnBadEnd.PASS
        checker = self.checker
        frames = self.frames
        note = None if self.resume is None else self.resume.note
        assert self._writer is not None
        write = self._writer.write
        wire = self.wire
        terminal = wire.terminal
        # The plain ``Frames`` forwards every frame unchanged and never fails: skip its calls.
        verbatim = type(frames) is Frames
        after_done = False
        received = consumed = 0
        # Per read, everything below runs for every stream's every event: locals, no helper calls
        # (``watch.start_read()`` inlined, the longest gap kept here and stored once at the end).
        clock = time.perf_counter
        loop_time = self.loop.time
        last = clock()
        max_gap = self.max_gap
        try:
            while True:
                events: list[SSEEvent] | None = None
                if first:
                    chunk, first, events, fed = first, b"", fed, None
                else:
                    watch.since = loop_time()  # watch.start_read(), inlined
                    watch.reading = True
                    if watch._handle is None:
                        watch.start_read()
                    try:
                        chunk = await content.read(READ_MAX)
                    finally:
                        watch.reading = False
                if not chunk:
                    return None, None, False
                now = clock()
                if now - last > max_gap:
                    max_gap = now - last
                last = now
                if events is None:
                    events = checker.feed(chunk)
                size = len(chunk)
                received += size
                if len(events) == 1:
                    consumed += len(events[0].raw)
                elif events:
                    consumed += sum([len(event.raw) for event in events])
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
                    if left <= _COMMENT_SCAN and self._pending_bytes()[
                            self._ahead:self._ahead + 1] == b":":
                        # Keep-alive comments (": ping") go out at once: holding them until the
                        # next event would defeat their purpose during a long prefill.
                        await self._send_comments()
                    if held:
                        held = self._send_headers()
                    continue
                out: list[bytes] = []
                stop: Failure | None = None
                forwarded = False
                error_gate = hold and checker.error_message is not None
                for event in events:
                    raw = event.raw
                    if self._ahead:
                        cut = min(self._ahead, len(raw))
                        raw = raw[cut:]
                        self._ahead -= cut
                        event = SSEEvent(event.data, event.event, event.id, event.retry, raw)
                    if after_done:
                        # Frames after the terminal event are never delivered (the checker notes
                        # them), but for a trailer the protocol tolerates.
                        if wire.trailer(event):
                            self._done_raw += raw
                        continue
                    if terminal(event):
                        # As it came (a repair renumbers a Responses terminal event's items).
                        raw = frames.transform(event)
                        if hold:
                            after_done = True
                            self._done_raw = raw  # sent once the end is known good
                            # An upstream that never ends its body after its terminal event is not
                            # stalled: the answer is whole, so it gets a short grace, then the end.
                            watch.shorten(DONE_GRACE)
                        else:
                            out.append(raw)
                        continue
                    if error_gate:
                        what = wire.upstream_error(event)
                        if what is UpstreamError.REPLACE:
                            stop = ("error_event", checker.error_message or "upstream error event")
                            break
                        if what is UpstreamError.FORWARD:
                            out.append(wire.forwarded(event, self._sent))  # the SDK raises on it
                            forwarded = True
                            stop = ("error_event", checker.error_message or "upstream error")
                            break
                    if verbatim:
                        out.append(raw)
                        continue
                    piece = frames.transform(event)
                    if piece:
                        out.append(piece)
                    if frames.failure is not None:
                        stop = frames.failure
                        break
                data = out[0] if len(out) == 1 else b"".join(out)
                # While the write waits on a slow client only the bytes being sent stay alive: the
                # read, its decoded events and the frame list would triple what a paused reader costs.
                del chunk, events, event, out
                if data:
                    self._sent = data  # the error frame's sequence number continues from it
                    if note is not None:
                        note(data)
                    try:  # self._write inlined: one coroutine fewer per read on the hot path
                        await write(data)
                    except ConnectionResetError:
                        raise _ClientGone from None
                elif held:
                    held = self._send_headers()
                if self.ttft is None and checker.saw_content:
                    self.ttft = clock() - self.t0
                if stop is not None:
                    return None, stop, forwarded
        except Stalled:
            if after_done:
                watch.fired = False
                self.outcome.extra["lingered_after_done"] = True
            return None, None, False
        except (aiohttp.ClientError, OSError) as exc:
            return self._broken(exc, received), None, False
        finally:
            self.max_gap = max_gap

    def _broken(self, exc: BaseException, received: int) -> str:
        """Note how the upstream broke off (the client's words); the record's words, with detail."""
        self._broke = broke_off(exc, received)
        return self.redactor.text(f"{self._broke} ({type(exc).__name__}: {exc})")

    def _send_headers(self) -> bool:
        """Send the client's headers if they are still held (``HeadersWithFirstBytes``); False."""
        if self._writer is not None:
            try:
                self._writer.send_headers()
            except ConnectionResetError:
                raise _ClientGone from None
        return False

    async def _write(self, data: bytes) -> None:
        assert self._resp is not None
        try:
            await self._resp.write(data)
        except ConnectionResetError:
            raise _ClientGone from None

    def _pending_bytes(self) -> bytes:
        if len(self._pending) > 1:
            self._pending = [b"".join(self._pending)]
        return self._pending[0] if self._pending else b""

    async def _send_comments(self) -> None:
        """Send the comment-only lines of the undelivered bytes, up to their last blank line."""
        pending = self._pending_bytes()[self._ahead:]
        end = pending.rfind(b"\n\n")
        if end == -1 or b"\r" in pending:
            return
        block = pending[:end + 2]
        if all(line == b"" or line.startswith(b":") for line in block.split(b"\n")):
            await self._write(block)
            self._ahead += len(block)

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

    # ── healing (``heal.py`` drives it) ────────────────────────────────────────────────────────
    def upstream_verdict(self, transport_error: str | None, stalled: bool) -> Verdict:
        """How the current upstream ended (judged once; the client's stream may still go on)."""
        return self._verdict(transport_error, stalled)

    def record_attempt(self, verdict: Verdict, tokens: int) -> None:
        """Record the upstream answer just ended as an attempt of this client stream."""
        saved = (self.index, self.healed, self.heal_attempts, self.heal_tokens)
        self.index, self.heal_of, self.healed = None, saved[0], None
        self.heal_attempts = self.heal_tokens = 0
        try:
            self._done(self, verdict)
        finally:
            self.index, self.heal_of, self.healed = saved[0], None, "resume"
            self.heal_attempts, self.heal_tokens = saved[2] + 1, saved[3] + tokens
            self.outcome = Outcome()

    def restart(self, checker: Checker, forwarded: bytes) -> None:
        """Judge the client's stream afresh: ``checker`` re-reads what the client got, then the
        continuation's frames."""
        checker.feed(forwarded)
        self.checker = checker
        self._closed, self._last_verdict = False, None
        self._pending, self._pending_len, self._ahead = [], 0, 0
        self._done_raw = b""

    # ── endings ────────────────────────────────────────────────────────────────────────────────
    async def _end_well(self, verdict: Verdict, failure: str | None, flushed: bytes) -> None:
        hold = self.config.on_bad_end is not OnBadEnd.PASS
        out = [flushed]
        if failure is not None:
            self.outcome.action = "pass"
            out.append(self._pending_bytes()[self._ahead:])  # a cut frame goes out as it came
        sentinel = self.wire.sentinel
        if hold and self._done_raw:
            out.append(self._done_raw)
        elif (self.policy.complete and (hold or self.config.complete_done) and sentinel
              and not self._done_raw and verdict.ending is Ending.NO_DONE):
            # A finished answer that only lacks its sentinel: the client gets the end it expects,
            # the record keeps the ending (no_done) and says it was completed (the action).
            # ``--on-bad-end pass`` forwards as it came unless --complete-done asks for it.
            out.append(sentinel)
            self.outcome.action = "completed-done"
        data = b"".join(out)
        if data:
            await self._write(data)
        await self._eof()

    async def _end_with_error(self, stop: Failure, *, upstream_error_forwarded: bool) -> None:
        code, message = stop
        self.outcome.code = code
        if self.config.on_bad_end is OnBadEnd.ABORT:
            self.outcome.action = "abort"
            self._reset()
            return
        self.outcome.action = "error-event"
        if not upstream_error_forwarded:
            message = self.redactor.text(message)
            if self.array and not self._sent:
                # Nothing of the array has been sent: the error element goes out as the whole
                # array, ``[`` included (the protocol's frame continues an array already begun).
                frame = self.wire.error_frame(code, message, b"[")
                await self._write(b"[" + frame.lstrip(b" \t\r\n,"))
            else:
                await self._write(self.wire.error_frame(code, message, self._sent))
        await self._eof()

    def _reset(self) -> None:
        """Close with no terminal frame: the client's HTTP layer sees an incomplete body."""
        transport = self.request.transport
        if transport is not None:
            if self._writer is not None and not transport.is_closing():
                self._writer.send_headers()  # a status and headers, then the cut (if still held)
            transport.abort()
        self._delivered = True

    async def _eof(self) -> None:
        assert self._resp is not None
        try:
            await self._resp.write_eof()
        except ConnectionResetError:
            raise _ClientGone from None
        self._delivered = True

    def _message(self, verdict: Verdict, failure: str) -> str:
        return failure_message(verdict, failure, policy=self.policy.name, broke=self._broke,
                               stall_timeout=self.config.stall_timeout, messages=self.wire.messages)
