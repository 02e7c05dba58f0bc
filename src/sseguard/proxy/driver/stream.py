"""The guarded relay's driver: sockets and timers in, the stream machine's decisions out.

Every decision of a guarded stream lives in ``machine.StreamMachine`` (what to forward, hold,
continue, how to end, what to record). This module only turns the world into its events — each
upstream read (``read(READ_MAX)``: what has arrived, at most 16 KiB, never waiting for a size to
fill: that holds events back), the upstream's end or break, a stall of the timer, a continuation's
answer, the client gone — and performs what it answers: writes to the client (each ``await write()``
drains the socket, so a slow client slows the upstream read and memory stays flat), the end of the
body or a reset, closing or releasing the upstream, asking for a continuation, recording.

The relay knows its config, its policy and whom to tell when a stream is done (``done``: metrics and
the record, in ``state.py``); it holds no app state. It also keeps what only a clock can say: the
stream's timings.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.abc import AbstractStreamWriter

from sseguard.core.contract import Checker, RelayTable
from sseguard.core.policy import Policy
from sseguard.core.redact import Redactor
from sseguard.core.sse import SSEEvent
from sseguard.core.verdict import Api, Verdict
from sseguard.proxy.config import ProxyConfig
from sseguard.proxy.driver.forward import STREAM_HEADERS, HeadersWithFirstBytes, response_headers
from sseguard.proxy.driver.stall import READ_MAX, Body, Stalled, StallWatch, Timers, broke_off, drain
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
from sseguard.proxy.machines.frames import Frames
from sseguard.proxy.machines.outcome import RecordIdentity, StreamOutcome
from sseguard.proxy.machines.stream import Resume, StreamMachine

#: Sends a continuation request (the machine's ``AskContinuation``, where continuations of this stream
#: go): its 2xx response, or None (unreachable, refused).
Ask = Callable[[AskContinuation], Awaitable[aiohttp.ClientResponse | None]]


class _ClientGone(Exception):
    """The client closed its connection; nothing more can be sent."""


#: Told once per record, when it is over: the driver (its timings, outcome, frames), the verdict, and
#: which record it is (the client stream's own, or one of its upstream attempts).
StreamDone = Callable[["StreamDriver", Verdict, RecordIdentity], None]

#: Cancel requests in flight (``RecordVerdict.cancel``): kept referenced until they finish, since the
#: stream that sent one may be over (its handler cancelled) before the upstream answers.
_CANCELS: set[asyncio.Task[None]] = set()


class StreamDriver:
    """One guarded stream (of the protocol ``wire`` describes), from the upstream's response headers
    to the last byte: the driver of its ``StreamMachine``."""

    def __init__(self, config: ProxyConfig, policy: Policy, done: StreamDone,
                 request: web.Request, body: bytes, request_obj: dict[str, Any], frames: Frames,
                 checker: Checker, redactor: Redactor, wire: RelayTable, *, api: Api,
                 array: bool = False, resume: Resume | None = None,
                 continued_frames: Callable[[], Frames] | None = None,
                 ask: Ask | None = None, timers: Timers | None = None) -> None:
        self.config = config
        self._done = done
        self.request = request
        self.body = body
        self.request_obj = request_obj
        self.redactor = redactor
        self.machine = StreamMachine(
            api=api, wire=wire, policy=policy, checker=checker, frames=frames, redactor=redactor,
            request_obj=request_obj, on_bad_end=str(config.on_bad_end),
            complete_done=config.complete_done, stall_timeout=config.stall_timeout, array=array,
            resume=resume, continued_frames=continued_frames)
        self._ask = ask
        #: The stall timers' clock: the event loop, or a test's virtual one (``timers``).
        self.loop: Timers = timers if timers is not None else asyncio.get_running_loop()
        # perf_counter for what is reported: uvloop's loop clock ticks in whole milliseconds.
        self.t0 = time.perf_counter()
        self.started_at = time.time()
        self.ttfb: float | None = None
        self.ttft: float | None = None
        self.max_gap = 0.0
        #: What the record gets: the machine's outcome and frames as of the verdict recorded.
        self.outcome: StreamOutcome = self.machine.outcome
        self.frames: Frames = frames
        self._resp: web.StreamResponse | None = None
        self._upstream: aiohttp.ClientResponse  # the upstream answer being relayed (set by relay())
        self._watch: StallWatch
        #: The response's body writer (``prepare``'s): the pump writes to it, one coroutine fewer per
        #: read than ``StreamResponse.write``, whose checks hold once the headers are prepared.
        self._writer: AbstractStreamWriter | None = None
        self.upstream_headers: Mapping[str, str] = {}
        self.concurrency = 1  # streams in flight when this one started, itself included
        #: Which record this stream's verdict becomes (``driver/guarded.py`` sets it once per
        #: attempt; a continuation derives the next from it).
        self.identity = RecordIdentity()
        #: The ``--resume`` dialect continuing this stream (``dialects.DIALECTS``' name), if any: what
        #: the record and ``/metrics`` name when it healed the stream.
        self.heal_dialect: str | None = None

    @property
    def checker(self) -> Checker:
        """The checker judging the client's stream (a continuation gets a new one)."""
        return self.machine.checker

    # ── the relay ──────────────────────────────────────────────────────────────────────────────
    async def relay(self, upstream: aiohttp.ClientResponse, first: bytes = b"",
                    events: list[SSEEvent] | None = None,
                    watch: StallWatch | None = None) -> web.StreamResponse:
        """Stream ``upstream`` (a 2xx) to the client; always closes ``upstream``.

        ``first``: body bytes already read from ``upstream`` (to see its first event before the client
        got anything); they are relayed before the rest. ``events``: what the checker already
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
        self._upstream, self._watch = upstream, watch
        try:
            try:
                self._writer = await resp.prepare(self.request)
            except ConnectionResetError:
                raise _ClientGone from None
            await self._perform(await self._pump(upstream.content, watch, first, events))
        except _ClientGone:
            self._settle(self.machine.client_gone())
            return resp
        except asyncio.CancelledError:
            self._settle(self.machine.client_gone())
            raise
        return resp

    async def _perform(self, actions: list[StreamAction]) -> None:
        """Carry out the machine's actions, feeding it what they bring (a continuation, a drain)."""
        machine = self.machine
        queue = deque(actions)
        while queue:
            action = queue.popleft()
            if isinstance(action, Write):
                await self._write(action.data)
            elif isinstance(action, EndBody):
                await self._eof()
            elif isinstance(action, Drain):
                try:  # the rest goes into the checker only: the client is done
                    error = await drain(self._watch, machine.absorb)
                finally:
                    self._upstream.close()
                queue.extend(machine.drained(error, self._watch.fired))
            elif isinstance(action, AskContinuation):
                self._watch.close()
                answer = None if self._ask is None else await self._ask(action)
                if answer is None:
                    queue.extend(machine.continuation(False))
                    continue
                self._upstream = answer
                self._watch = StallWatch(self.loop, self.config.stall_timeout, answer.content)
                self.upstream_headers = dict(answer.headers)
                self._settle(machine.continuation(True))
                queue.extend(await self._pump(answer.content, self._watch, b"", None))
            else:
                self._settle([action])

    def _settle(self, actions: list[StreamAction]) -> None:
        """The actions that need no waiting."""
        for action in actions:
            if isinstance(action, RecordVerdict):
                self._watch.close()
                self._record(action)
            elif isinstance(action, CloseUpstream):
                self._upstream.close()
                self._watch.close()
            elif isinstance(action, ReleaseUpstream):
                self._upstream.release()
            elif isinstance(action, ShortenStall):
                self._watch.shorten(action.seconds)
            elif isinstance(action, Reset):
                self._reset()
            else:  # pragma: no cover - the machine's actions are all handled above
                raise AssertionError(f"unhandled relay action {action!r}")

    def _record(self, action: RecordVerdict) -> None:
        """Tell ``done`` about a verdict: the client stream's, or an attempt a continuation replaced."""
        self.outcome, self.frames = action.outcome, action.frames
        if not action.attempt:
            self._done(self, action.verdict, self.identity)
            if action.cancel is not None and self._ask is not None:
                self._send_detached(self._ask, action.cancel)
            return
        try:
            self._done(self, action.verdict, self.identity.attempt())
        finally:
            self.identity = self.identity.resumed(action.tokens)
            self.outcome, self.frames = self.machine.outcome, self.machine.frames

    @staticmethod
    def _send_detached(ask: Ask, cancel: AskContinuation) -> None:
        """Send the machine's cancel request in a task of its own: the client may be gone, and
        this handler with it."""
        task = asyncio.get_running_loop().create_task(_send_cancel(ask, cancel))
        _CANCELS.add(task)
        task.add_done_callback(_CANCELS.discard)

    async def _pump(self, content: Body, watch: StallWatch, first: bytes,
                    fed: list[SSEEvent] | None) -> list[StreamAction]:
        """Feed the machine the upstream's reads and write what it answers, until the upstream ends
        or the machine stops it (``first``: bytes already read, ``fed``: the events the checker
        found in them when they were already fed to it); what the machine then decides.

        With ``first`` the client's headers wait to go out with the first bytes written
        (``HeadersWithFirstBytes``); if the first read writes nothing they go out by themselves.
        """
        held = bool(first)
        self._watch = watch
        machine = self.machine
        receive = machine.receive
        wants = machine.wants
        assert self._writer is not None
        write = self._writer.write
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
                    if watch.timer is None:
                        watch.start_read()
                    try:
                        chunk = await content.read(READ_MAX)
                    finally:
                        watch.reading = False
                if not chunk:
                    return machine.upstream_ended()
                now = clock()
                if now - last > max_gap:
                    max_gap = now - last
                last = now
                data = receive(chunk, events)
                # While the write waits on a slow client only the bytes being sent stay alive.
                del chunk, events
                if wants:
                    self._settle(wants)
                    wants.clear()
                if data:
                    try:  # self._write inlined: one coroutine fewer per read on the hot path
                        await write(data)
                    except ConnectionResetError:
                        raise _ClientGone from None
                elif held:
                    held = self._send_headers()
                if self.ttft is None and machine.checker.saw_content:
                    self.ttft = clock() - self.t0
                if machine.stop is not None:
                    return machine.upstream_ended()
        except Stalled:
            return machine.upstream_ended(stalled=True)
        except (aiohttp.ClientError, OSError) as exc:
            return machine.upstream_ended(broke=broke_off(exc, machine.received),
                                          detail=f"{type(exc).__name__}: {exc}")
        finally:
            self.max_gap = max_gap

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

    def _reset(self) -> None:
        """Close with no terminal frame: the client's HTTP layer sees an incomplete body."""
        transport = self.request.transport
        if transport is not None:
            if self._writer is not None and not transport.is_closing():
                self._writer.send_headers()  # a status and headers, then the cut (if still held)
            transport.abort()
        self.machine.client_stream_ended()

    async def _eof(self) -> None:
        assert self._resp is not None
        try:
            await self._resp.write_eof()
        except ConnectionResetError:
            raise _ClientGone from None
        self.machine.client_stream_ended()


async def _send_cancel(ask: Ask, cancel: AskContinuation) -> None:
    """Send a cancel request; its answer only needs closing (the response's fate is the
    upstream's, and nothing waits on it)."""
    answer = await ask(cancel)
    if answer is not None:
        answer.close()
