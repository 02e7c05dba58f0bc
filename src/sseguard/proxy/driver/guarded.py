"""A guarded stream, from the request to the upstream to the relay's last byte.

The upstream is asked with the client's body; no answer in ``--timeout``, an unreachable upstream or a
non-2xx status end here (an error the client's SDK raises, or the upstream's own status and body);
a 2xx stream goes through ``StreamDriver`` with its protocol's checker, ``Wire`` and ``Frames``.

With ``--retry`` the client's response headers wait for the upstream's first event: until then
nothing has reached the client, so a failure may be asked again instead. Whether it is, after how
long, and what the client is answered otherwise (with ``x-should-retry``) is decided by the sans-IO
``attempts.Attempts``, and whether the first event is a bad start by ``first_event.FirstEvent``;
this module only performs it, through the one attempt loop (``attempt_loop.run_attempts``): the
requests, the reads, the records and the responses. The headers then leave with the first frames, in one write
(``forward.HeadersWithFirstBytes``). The last attempt is relayed exactly as it would be without
retries.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from typing import Any

import aiohttp
from aiohttp import web
from multidict import CIMultiDictProxy
from yarl import URL

from sseguard.core.contract import Framing, Protocol, checker_for
from sseguard.core.redact import Redactor
from sseguard.core.verdict import Verdict
from sseguard.proxy.config import ProxyConfig
from sseguard.proxy.driver.attempt_loop import run_attempts
from sseguard.proxy.driver.forward import error_response, request_headers, response_headers, unreachable
from sseguard.proxy.driver.stall import Stalled, StallWatch
from sseguard.proxy.driver.state import ProxyState
from sseguard.proxy.driver.stream import StreamDone, StreamDriver
from sseguard.proxy.machines.actions import AskContinuation
from sseguard.proxy.machines.attempts import (
    AttemptFailure,
    Attempts,
    ErrorAnswer,
    HttpError,
    RecordAttempt,
    RecordGone,
    StartAttempt,
    TimedOut,
    Unreachable,
)
from sseguard.proxy.machines.first_event import Beginning, FirstEvent
from sseguard.proxy.machines.outcome import RecordIdentity
from sseguard.proxy.repair import checker_markup, frames_for
from sseguard.proxy.resume.dialects import dialect_for


async def guard_stream(state: ProxyState, request: web.Request, body: bytes, obj: dict[str, Any],
                       proto: Protocol, target: URL) -> web.StreamResponse:
    """Send the stream request ``obj`` (read as ``body``, of protocol ``proto``) to ``target`` and
    guard its answer.

    The attempts' machine (``attempts.Attempts``) decides whether a failure before the first event
    is asked again, after how long, and what the client is answered; this function performs it:
    each failed attempt is recorded on its own, linked to the stream by ``heal_of``. The proxy's own
    errors take ``proto``'s shape.
    """
    redactor = state.request_redactor(request)
    driver = _Driver(state, request, body, obj, proto, redactor, target)
    state.stream_started()

    async def attempt(start: StartAttempt) -> web.StreamResponse | AttemptFailure:
        relay = driver.new_relay(start)
        got = await _attempt(state, relay, target, last=start.last, done=driver.done)
        if isinstance(got, web.StreamResponse):
            return got
        verdict, driver.failure = got
        driver.failed = (relay, verdict)
        return driver.failure

    try:
        got = await run_attempts(state, driver.machine, attempt, label=str(proto.api),
                                 recorded=driver.record_failed)
        return got if isinstance(got, web.StreamResponse) else driver.answer(got)
    except asyncio.CancelledError:
        driver.client_left()
        raise
    finally:
        state.stream_ended()


class _Driver:
    """The I/O of one client stream's attempts: their relays, their records, the error answer; every
    decision is its ``machine``'s."""

    def __init__(self, state: ProxyState, request: web.Request, body: bytes, obj: dict[str, Any],
                 proto: Protocol, redactor: Redactor, target: URL) -> None:
        self.state = state
        self.target = target
        self.request = request
        self.body = body
        self.obj = obj
        self.proto = proto
        self.api = proto.api
        self.dialect = dialect = dialect_for(state.config.resume, proto.api)
        if dialect is not None and dialect.upstream_request is not None:
            # The dialect changes what the upstream is asked (openai-background: run in the
            # background, stored), or does not apply to this request (None: store declined).
            changed = dialect.upstream_request(obj, state.config.resume_store_ok)
            if changed is None:
                self.dialect = None
            else:
                self.obj = changed
                self.body = json.dumps(changed, ensure_ascii=False).encode("utf-8")
        config = state.config
        self.machine = Attempts(
            retry=config.retry, max_wait=config.retry_max_wait,
            # Whose retry budget the retries spend.
            budget=state.budget(str(target.origin())), rng=state.rng,
            retry_off=config.retries_off,
            healing=bool(config.retry or config.resume))
        # Only a protocol with two framings looks at the query (parsing it costs on every stream).
        self.array = (len(proto.framings) > 1
                      and proto.framing_for(request.query) is Framing.JSON_ARRAY)
        self.redactor = redactor
        self.index = state.next_index()  # the client stream's record; attempts point at it
        self.t0 = time.perf_counter()
        self.started_at = time.time()
        #: The failure the last attempt left (its upstream answer, should it become the client's),
        #: and that attempt's relay and verdict (its record, should the machine ask for it).
        self.failure: AttemptFailure | None = None
        self.failed: tuple[StreamDriver, Verdict] | None = None

    def new_relay(self, start: StartAttempt | RecordGone) -> StreamDriver:
        """The relay of an attempt the machine started (or of the record of a client gone)."""
        config = self.state.config
        # keep_text=False: the proxy forwards the text and records facts, so holding every answer's
        # text (1.37 GB RSS for 1,000 concurrent 1.2 MB answers) buys nothing; leaks are still found
        # in flight.
        checker = checker_for(self.api, self.obj, markup=checker_markup(config.repair_markup, self.api),
                              keep_text=False)
        dialect = self.dialect
        if dialect is None:
            relay = StreamDriver(config, self.state.policy, self.done, self.request, self.body,
                                self.obj, frames_for(config.repair_markup, self.obj, self.api),
                                checker, self.redactor, self.proto.relay, api=self.api,
                                array=self.array, timers=self.state.timers)
        else:
            target = continuation_url(config, self.target) if dialect.own_base else self.target
            base = (config.resume_base_url or config.upstream) if dialect.own_base \
                else config.upstream
            relay = StreamDriver(config, self.state.policy, self.done, self.request, self.body,
                                self.obj, dialect.frames(), checker, self.redactor,
                                self.proto.relay, api=self.api, array=self.array,
                                resume=dialect.state(self.obj, config.resume_max),
                                continued_frames=dialect.frames,
                                ask=functools.partial(_ask, self.state, self.request, target,
                                                      base), timers=self.state.timers)
            relay.heal_dialect = dialect.name
        relay.concurrency = self.state.active
        # The client's stream is the one record that counts its whole time, retries included.
        relay.t0, relay.started_at = self.t0, self.started_at
        relay.identity = RecordIdentity(index=self.index, healed=start.healed,
                                        heal_attempts=start.heal_attempts,
                                        heal_tokens=start.heal_tokens)
        return relay

    def record_failed(self, action: RecordAttempt) -> None:
        """Record the failed attempt: linked to the stream's record (a retry follows), or as it."""
        assert self.failed is not None
        relay, verdict = self.failed
        self.done(relay, verdict, relay.identity.attempt() if action.linked else relay.identity)

    def answer(self, action: ErrorAnswer) -> web.StreamResponse:
        """The error answer the machine decided, with its headers; counted in ``/metrics``."""
        if action.as_is:  # the upstream's own error answer, as it came
            failed = self.failure
            assert isinstance(failed, HttpError) and isinstance(failed.headers, CIMultiDictProxy)
            resp: web.StreamResponse = web.Response(
                status=failed.status, reason=failed.phrase, body=failed.body,
                headers=response_headers(failed.headers, keep_framing=False))
        else:
            resp = error_response(self.proto, action.status, self.redactor.text(action.message),
                                  type_=action.type_, code=action.code)
        return self.state.answered(resp, action, str(self.api))

    def done(self, relay: StreamDriver, verdict: Verdict, identity: RecordIdentity) -> None:
        """``state.stream_done``, telling the machine when that was this stream's own record."""
        if identity.heal_of is None:
            self.machine.own_recorded()
        self.state.stream_done(relay, verdict, identity)

    def client_left(self) -> None:
        """The client left (during a backoff, or while an attempt waited for the upstream's
        headers): the stream's record, if the machine says it is still owed."""
        for action in self.machine.client_left():
            assert isinstance(action, RecordGone)
            relay = self.new_relay(action)
            relay.outcome.client_gone = True
            self.done(relay, relay.checker.close(transport_error="client disconnected"),
                      relay.identity)


async def _attempt(state: ProxyState, relay: StreamDriver, target: URL, *, last: bool,
                   done: StreamDone) -> web.StreamResponse | tuple[Verdict, AttemptFailure]:
    """One upstream attempt: the client's response (a 2xx relayed), or the attempt's verdict and how
    it failed before the client got a byte (the machine decides what follows). ``last``: no retry can
    follow, so a 2xx is relayed as it comes, without a look at its first event. ``done`` records the
    stream should its client leave while the first event is awaited."""
    config = state.config
    checker = relay.checker
    request = relay.request
    assert state.session is not None
    try:
        async with asyncio.timeout(config.timeout):
            upstream = await state.session.post(
                target, data=relay.body, allow_redirects=False, auto_decompress=True,
                headers=request_headers(request.headers, identity=True, body_read=True))
    except TimeoutError:
        state.metrics.upstream_errors.labels("timeout").inc()
        message = f"the upstream sent no response within {config.timeout:g} s (--timeout)"
        return checker.close(transport_error=message), TimedOut(message)
    except aiohttp.ClientError as exc:
        state.metrics.upstream_errors.labels("connect").inc()
        message = unreachable(config.upstream, exc, relay.redactor)
        return checker.close(transport_error=message), Unreachable(message)
    relay.ttfb = time.perf_counter() - relay.t0
    relay.upstream_headers = upstream.headers  # made a dict by the record, after the stream
    if not 200 <= upstream.status < 300:
        state.metrics.upstream_errors.labels(f"http_{upstream.status}").inc()
        try:
            async with asyncio.timeout(config.timeout):
                payload = await upstream.read()
        except (TimeoutError, aiohttp.ClientError, OSError):
            payload = b""
        finally:
            upstream.close()
        verdict = checker.close(http_status=upstream.status, body=payload)
        return verdict, HttpError(upstream.status, upstream.headers, payload, upstream.reason)
    if last:
        return await relay.relay(upstream)
    # One stall timer for the first event and the relay after it: arming a second costs a timer.
    watch = StallWatch(relay.loop, config.stall_timeout, upstream.content)
    try:
        beginning = await _first_event(FirstEvent(relay.checker), watch, relay.redactor)
    except asyncio.CancelledError:
        # The client left while its headers waited on the first event: the upstream request ends
        # now (engines abort a generation when its connection closes), and the stream is recorded.
        watch.close()
        upstream.close()
        relay.outcome.client_gone = True
        done(relay, relay.checker.close(transport_error="client disconnected"), relay.identity)
        raise
    bad_start = beginning.bad_start
    if beginning.failed is None or bad_start is None:
        return await relay.relay(upstream, beginning.data, beginning.events, watch)
    watch.close()
    upstream.close()
    return beginning.failed, bad_start


async def _first_event(machine: FirstEvent, watch: StallWatch, redactor: Redactor) -> Beginning:
    """Feed ``machine`` the upstream's reads under the stall timer ``watch`` (the caller's, which
    closes it) until it knows how the body begins; every decision is the machine's."""
    try:
        while True:
            beginning = machine.receive(await watch.read())
            if beginning is not None:
                return beginning
    except Stalled:
        return machine.ended(stalled=True)
    except (aiohttp.ClientError, OSError) as exc:
        return machine.ended(transport_error=redactor.text(f"{type(exc).__name__}: {exc}"))


def continuation_url(config: ProxyConfig, target: URL) -> URL:
    """``target`` (the upstream base plus the client's path) moved onto ``--resume-base-url``."""
    base = config.resume_base_url
    if base is None:
        return target
    prefix = config.upstream.raw_path.rstrip("/") + "/"
    rest = target.raw_path[len(prefix):] if target.raw_path.startswith(prefix) else \
        target.raw_path.rpartition("/")[2]
    url = str(base.with_path(f"{base.raw_path.rstrip('/')}/{rest}", encoded=True))
    query = target.raw_query_string
    return URL(f"{url}?{query}" if query else url, encoded=True)


def _continuation_target(target: URL, base: URL, ask: AskContinuation) -> URL:
    """Where ``ask`` goes: the stream's own continuation target, or its path under ``base``."""
    if ask.path is None:
        return target
    path, _, query = ask.path.partition("?")
    url = str(base.with_path(f"{base.raw_path.rstrip('/')}/{path.lstrip('/')}", encoded=True))
    return URL(f"{url}?{query}" if query else url, encoded=True)


async def _ask(state: ProxyState, request: web.Request, target: URL, base: URL,
               ask: AskContinuation) -> aiohttp.ClientResponse | None:
    """A continuation request (``--resume``), with the client's headers: its 2xx answer, or None.

    Nothing of the continuation has reached the client yet, so it is retried like the first
    request (``--retry``, within the retry budget) when it cannot connect or gets ``429``/``5xx``.
    """
    config = state.config
    assert state.session is not None
    url = _continuation_target(target, base, ask)
    headers = request_headers(request.headers, identity=True, body_read=True)
    if ask.method != "POST":
        headers.popall("Content-Type", None)  # a read again carries no body
    machine = Attempts(retry=config.retry, max_wait=config.retry_max_wait,
                       budget=state.budget(str(target.origin())), rng=state.rng, retry_off=False,
                       healing=False)

    async def attempt(start: StartAttempt) -> aiohttp.ClientResponse | AttemptFailure | None:
        assert state.session is not None
        try:
            async with asyncio.timeout(config.timeout):
                upstream = await state.session.request(
                    ask.method, url, data=ask.body if ask.method == "POST" else None,
                    allow_redirects=False, auto_decompress=True, headers=headers)
        except TimeoutError:
            state.metrics.upstream_errors.labels("timeout").inc()
            return None
        except aiohttp.ClientError as exc:
            state.metrics.upstream_errors.labels("connect").inc()
            return Unreachable(str(exc))
        if 200 <= upstream.status < 300:
            return upstream
        state.metrics.upstream_errors.labels(f"http_{upstream.status}").inc()
        upstream.close()
        return HttpError(upstream.status, upstream.headers)

    # The stream's request was counted in the retry budget already (``new_request``).
    got = await run_attempts(state, machine, attempt, label="continuation", new_request=False)
    if isinstance(got, ErrorAnswer):
        if got.refused:
            state.metrics.retries_refused.labels("continuation", got.reason).inc()
        return None
    return got
