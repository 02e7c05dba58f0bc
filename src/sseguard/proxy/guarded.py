"""A guarded stream, from the request to the upstream to the relay's last byte.

The upstream is asked with the client's body; no answer in ``--timeout``, an unreachable upstream or a
non-2xx status end here (an error the client's SDK raises, or the upstream's own status and body);
a 2xx stream goes through ``StreamRelay`` with its protocol's checker, ``Wire`` and ``Frames``.

With ``--retry`` the client's response headers wait for the upstream's first event: until then
nothing has reached the client, so a failure (``retry.py`` says which) is asked again instead. The
headers then leave with the first frames, in one write (``forward.HeadersWithFirstBytes``). The
last attempt is relayed exactly as it would be without retries.
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

from sseguard.contract import Framing, Protocol, checker_for
from sseguard.proxy.actions import AskContinuation
from sseguard.proxy.config import ProxyConfig
from sseguard.proxy.forward import error_response, request_headers, response_headers, unreachable
from sseguard.proxy.heal import dialect_for
from sseguard.proxy.relay import StreamRelay
from sseguard.proxy.repair import checker_markup, frames_for
from sseguard.proxy.retry import completion_tokens, retry_after, retryable_status, wait_before_retry
from sseguard.proxy.stall import Stalled, StallWatch
from sseguard.proxy.state import ProxyState
from sseguard.redact import Redactor
from sseguard.sse import SSEEvent
from sseguard.verdict import Verdict


async def guard_stream(state: ProxyState, request: web.Request, body: bytes, obj: dict[str, Any],
                       proto: Protocol, target: URL) -> web.StreamResponse:
    """Send the stream request ``obj`` (read as ``body``, of protocol ``proto``) to ``target`` and
    guard its answer.

    With ``--retry N`` a failure before the first event is asked again, up to N times (``retry.py``
    says which and how long to wait); each failed attempt is recorded on its own, linked to the
    stream by ``heal_of``. The proxy's own errors take ``proto``'s shape.
    """
    redactor = state.request_redactor(request)
    attempts = _Attempts(state, request, body, obj, proto, redactor, target)
    state.stream_started()
    budget = state.budget(attempts.origin)
    budget.request(state.clock())
    try:
        while True:
            relay = attempts.new_relay()
            relay.concurrency = state.active
            # No retry could follow (none left, or the budget is spent now): the attempt is
            # relayed as it comes, exactly as without retries.
            last = attempts.last or not budget.allows(state.clock())
            failed = await _attempt(state, relay, target, proto, attempts, last=last)
            if isinstance(failed, web.StreamResponse):
                return failed
            verdict, upstream = failed
            wait, refused = attempts.failed(relay, verdict, upstream)
            if wait is None:  # a Retry-After beyond --retry-max-wait, or the budget refused
                return attempts.answer(verdict, upstream, budget_spent=refused,
                                       waited_too_long=not refused)
            await state.sleep(wait)
    except asyncio.CancelledError:
        attempts.client_left()
        raise
    finally:
        state.stream_ended()


class _Attempts:
    """The upstream attempts made for one client stream: their relays, and when to stop asking."""

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
        self.origin = str(target.origin())  # whose retry budget the retries spend
        # Only a protocol with two framings looks at the query (parsing it costs on every stream).
        self.array = (len(proto.framings) > 1
                      and proto.framing_for(request.query) is Framing.JSON_ARRAY)
        self.redactor = redactor
        self.index = state.next_index()  # the client stream's record; attempts point at it
        self.made = 0
        self.tokens = 0
        self.linked = 0  # attempts recorded with heal_of pointing at this stream's record
        self.recorded = False  # this stream's own record has been written
        self.t0 = time.perf_counter()
        self.started_at = time.time()

    @property
    def last(self) -> bool:
        """No retry is left after the attempt being made."""
        return self.made > self.state.config.retry

    def new_relay(self) -> StreamRelay:
        config = self.state.config
        # keep_text=False: the proxy forwards the text and records facts, so holding every answer's
        # text (1.37 GB RSS for 1,000 concurrent 1.2 MB answers) buys nothing; leaks are still found
        # in flight.
        checker = checker_for(self.api, self.obj, markup=checker_markup(config.repair_markup, self.api),
                              keep_text=False)
        dialect = self.dialect
        if dialect is None:
            relay = StreamRelay(config, self.state.policy, self.done, self.request, self.body,
                                self.obj, frames_for(config.repair_markup, self.obj, self.api),
                                checker, self.redactor, self.proto.relay, api=self.api,
                                array=self.array)
        else:
            target = continuation_url(config, self.target) if dialect.own_base else self.target
            base = (config.resume_base_url or config.upstream) if dialect.own_base \
                else config.upstream
            relay = StreamRelay(config, self.state.policy, self.done, self.request, self.body,
                                self.obj, dialect.frames(), checker, self.redactor,
                                self.proto.relay, api=self.api, array=self.array,
                                resume=dialect.state(self.obj, config.resume_max),
                                continued_frames=dialect.frames,
                                ask=functools.partial(_ask, self.state, self.request, target,
                                                      base))
            relay.heal_dialect = dialect.name
        self.made += 1
        # The client's stream is the one record that counts its whole time, retries included.
        relay.index, relay.t0, relay.started_at = self.index, self.t0, self.started_at
        if config.retry or config.resume:
            relay.healed = "retry" if self.made > 1 else "none"
            relay.heal_attempts, relay.heal_tokens = self.made - 1, self.tokens
        return relay

    def failed(self, relay: StreamRelay, verdict: Verdict,
               upstream: _Failed) -> tuple[float | None, bool]:
        """Record a failed attempt; how long to wait before the next, and whether the retry budget
        refused it.

        None: the upstream asked to wait longer than ``--retry-max-wait``, or the budget refused the
        retry, so this attempt's answer is the client's, and its record the client stream's.
        """
        state = self.state
        asked = None if upstream.headers is None else retry_after(upstream.headers, time.time())
        wait = wait_before_retry(self.made - 1, asked, state.config.retry_max_wait, state.rng)
        refused = wait is not None and not state.may_retry(self.origin, str(self.api),
                                                            upstream.reason_for(verdict))
        if refused:
            wait = None
        if wait is not None:
            relay.index, relay.heal_of, relay.healed = None, self.index, None
            relay.heal_attempts = relay.heal_tokens = 0
            self.tokens += completion_tokens(verdict)
        self.done(relay, verdict)
        return wait, refused

    def answer(self, verdict: Verdict, failed: _Failed, *, budget_spent: bool = False,
               waited_too_long: bool = False) -> web.StreamResponse:
        """A failed attempt's answer, as the client's (marked whether a client retry can help)."""
        if failed.headers is not None:  # the upstream's own error answer, as it came
            resp: web.StreamResponse = _as_is(failed)
            cause = "upstream" if retryable_status(failed.status, failed.body) else "client_error"
        else:  # it failed before its first byte: the proxy words it in the protocol's shape
            message = (f"the upstream failed before its first byte: {verdict.ending}"
                       + (f" ({verdict.error})" if verdict.error else ""))
            resp = error_response(self.proto, 502, self.redactor.text(message),
                                  type_="upstream_error", code=str(verdict.ending))
            cause = "upstream"
        return self.state.tell_retry(resp, str(self.api), failed.reason_for(verdict), cause,
                                     retried=self.made > 1, upstream_headers=failed.headers,
                                     budget_spent=budget_spent, waited_too_long=waited_too_long)

    def done(self, relay: StreamRelay, verdict: Verdict) -> None:
        """``state.stream_done``, noting whether that was this stream's record or a linked attempt."""
        if relay.heal_of is None:
            self.recorded = True
        else:
            self.linked += 1
        self.state.stream_done(relay, verdict)

    def client_left(self) -> None:
        """The client left before its stream's record was written (during a backoff, or while an
        attempt waited for the upstream's headers): it is written now, as a client disconnect, so
        the attempts already recorded never point at a record that does not exist."""
        if self.recorded:
            return
        relay = self.new_relay()
        self.made -= 1  # a record, not an upstream attempt
        if relay.healed is not None:
            relay.healed = "retry" if self.linked else "none"
            relay.heal_attempts, relay.heal_tokens = self.linked, self.tokens
        relay.outcome.client_gone = True
        self.done(relay, relay.checker.close(transport_error="client disconnected"))


class _Failed:
    """What a failed attempt leaves for the client, should no retry follow: a status, its headers
    and body (the upstream's own error answer)."""

    __slots__ = ("body", "headers", "reason", "status")

    def __init__(self, status: int = 502, reason: str | None = None,
                 headers: CIMultiDictProxy[str] | None = None, body: bytes = b"") -> None:
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = body

    def reason_for(self, verdict: Verdict) -> str:
        """The metrics' name for this failure: ``http_<status>`` or how the attempt ended."""
        return f"http_{self.status}" if self.headers is not None else str(verdict.ending)


async def _attempt(state: ProxyState, relay: StreamRelay, target: URL, proto: Protocol,
                   attempts: _Attempts, *, last: bool) -> web.StreamResponse | tuple[Verdict, _Failed]:
    """One upstream attempt: the client's response, or (on a retryable failure, ``last`` false) the
    attempt's verdict and what it left. ``attempts.done`` records a stream; the proxy's own errors
    take ``proto``'s shape and say whether a client retry can help (``x-should-retry``)."""
    done = attempts.done
    retried = attempts.made > 1
    config = state.config
    checker = relay.checker
    request = relay.request
    assert state.session is not None
    try:
        async with asyncio.timeout(config.timeout):
            upstream = await state.session.post(
                target, data=relay.body, allow_redirects=False, auto_decompress=True,
                headers=request_headers(request.headers, identity=True))
    except TimeoutError:
        # Not retried: the client has already waited the whole --timeout.
        state.metrics.upstream_errors.labels("timeout").inc()
        message = f"the upstream sent no response within {config.timeout:g} s (--timeout)"
        done(relay, checker.close(transport_error=message))
        return state.tell_retry(error_response(proto, 504, message, type_="upstream_timeout",
                                               code="upstream_timeout"),
                                str(proto.api), "timeout", "timeout", retried=retried)
    except aiohttp.ClientError as exc:
        state.metrics.upstream_errors.labels("connect").inc()
        message = unreachable(config.upstream, exc, relay.redactor)
        verdict = checker.close(transport_error=message)
        if not last:
            return verdict, _Failed()
        done(relay, verdict)
        return state.tell_retry(error_response(proto, 502, message, type_="upstream_unreachable",
                                               code="upstream_unreachable"),
                                str(proto.api), "connect", "upstream", retried=retried,
                                budget_spent=attempts.made <= state.config.retry)
    relay.ttfb = time.perf_counter() - relay.t0
    relay.upstream_headers = upstream.headers  # made a dict by the record, after the stream
    if not 200 <= upstream.status < 300:
        return await _http_error(state, relay, upstream, attempts, last=last)
    if last or not config.retry:
        return await relay.relay(upstream)
    # One stall timer for the first event and the relay after it: arming a second costs a timer.
    watch = StallWatch(relay.loop, config.stall_timeout, upstream.content)
    try:
        first, events, failure = await _first_event(relay, watch)
    except asyncio.CancelledError:
        # The client left while its headers waited on the first event: the upstream request ends
        # now (engines abort a generation when its connection closes), and the stream is recorded.
        watch.close()
        upstream.close()
        relay.outcome.client_gone = True
        done(relay, relay.checker.close(transport_error="client disconnected"))
        raise
    if failure is None:
        return await relay.relay(upstream, first, events, watch)
    watch.close()
    upstream.close()
    return failure, _Failed()


async def _first_event(relay: StreamRelay, watch: StallWatch
                       ) -> tuple[bytes, list[SSEEvent] | None, Verdict | None]:
    """Read until the upstream's first event (keep-alive comments do not count); the bytes read, the
    events the relay's checker found in them (None: none yet), and the attempt's verdict when that
    beginning is a failure worth retrying (an empty body, a stall, a reset, an error event).

    The bytes go through the relay's own checker, once: the relay forwards the events it found
    without feeding them again (a second checker for the probe cost its setup on every stream, on
    the way to the first chunk). A failed attempt's relay is dropped, its checker with it. ``watch``
    (the caller's, which closes it) reads the upstream's body under the stall timer.
    """
    checker = relay.checker
    read: list[bytes] = []
    try:
        while True:
            chunk = await watch.read()
            if not chunk:
                return b"".join(read), None, checker.close()
            read.append(chunk)
            events = checker.feed(chunk)
            if events:
                first = b"".join(read)
                return first, events, (None if checker.error_message is None else checker.close())
            if read[0][:1] == b":" and b"\n\n" in chunk:
                # Keep-alive comments during a long prefill go out at once (holding them would defeat
                # them): the upstream is at work, and the client's body has begun, so no retry.
                return b"".join(read), [], None
    except Stalled:
        return b"".join(read), None, checker.close(stalled=True)
    except (aiohttp.ClientError, OSError) as exc:
        return b"".join(read), None, checker.close(
            transport_error=relay.redactor.text(f"{type(exc).__name__}: {exc}"))


async def _http_error(state: ProxyState, relay: StreamRelay, upstream: aiohttp.ClientResponse,
                      attempts: _Attempts, *,
                      last: bool) -> web.StreamResponse | tuple[Verdict, _Failed]:
    """A non-2xx answer to a stream request goes to the client as it is (the SDK raises on it),
    unless it is worth retrying and a retry is left; marked whether a client retry can help."""
    state.metrics.upstream_errors.labels(f"http_{upstream.status}").inc()
    try:
        async with asyncio.timeout(state.config.timeout):
            payload = await upstream.read()
    except (TimeoutError, aiohttp.ClientError, OSError):
        payload = b""
    finally:
        upstream.close()
    verdict = relay.checker.close(http_status=upstream.status, body=payload)
    failed = _Failed(upstream.status, upstream.reason, upstream.headers, payload)
    if not last and state.config.retry and retryable_status(upstream.status, payload):
        return verdict, failed
    attempts.done(relay, verdict)
    return attempts.answer(verdict, failed,
                           budget_spent=attempts.made <= state.config.retry)


def _as_is(failed: _Failed) -> web.Response:
    headers = response_headers(failed.headers, keep_framing=False) if failed.headers is not None else None
    return web.Response(status=failed.status, reason=failed.reason, body=failed.body, headers=headers)


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
    headers = request_headers(request.headers, identity=True)
    if ask.method != "POST":
        headers.popall("Content-Type", None)  # a read again carries no body
    for attempt in range(config.retry + 1):
        asked: float | None = None
        reason = "connect"
        try:
            async with asyncio.timeout(config.timeout):
                upstream = await state.session.request(
                    ask.method, url, data=ask.body if ask.method == "POST" else None,
                    allow_redirects=False, auto_decompress=True, headers=headers)
        except TimeoutError:
            state.metrics.upstream_errors.labels("timeout").inc()
            return None
        except aiohttp.ClientError:
            state.metrics.upstream_errors.labels("connect").inc()
        else:
            if 200 <= upstream.status < 300:
                return upstream
            state.metrics.upstream_errors.labels(f"http_{upstream.status}").inc()
            upstream.close()
            if not retryable_status(upstream.status):
                return None
            asked = retry_after(upstream.headers, time.time())
            reason = f"http_{upstream.status}"
        wait = wait_before_retry(attempt, asked, config.retry_max_wait, state.rng)
        if wait is None or attempt == config.retry or not state.may_retry(
                str(target.origin()), "continuation", reason):
            return None
        await state.sleep(wait)
    return None
