"""The guard proxy's aiohttp.web application: routes, the shared upstream session, evidence, metrics.

One ``aiohttp.ClientSession`` to the upstream for the app's lifetime (created on startup, closed on
cleanup): ``HTTP.md`` measured an httpx pool in this seat at a quarter of the throughput. Streamed chat
completions, Responses and Messages go through ``StreamRelay`` with their protocol's checker and
``Wire``; everything else under ``/v1/`` is relayed as it is (both bodies streamed), to the configured
upstream only.

Run it with ``run_proxy`` (or any ``AppRunner`` created with ``handler_cancellation=True``): handler
cancellation is what lets a client's disconnect cancel the upstream request at once rather than at the
next write.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import msgspec
from aiohttp import web
from yarl import URL

from sseguard._serve import Listening, release_free_memory, serve_app, serve_until_signalled
from sseguard.contract import api_for_path, checker_for
from sseguard.policy import Policy
from sseguard.proxy.config import ProxyConfig
from sseguard.proxy.forward import (
    PathRejected,
    error_response,
    request_headers,
    response_headers,
    upstream_url,
)
from sseguard.proxy.metrics import CONTENT_TYPE, ProxyMetrics
from sseguard.proxy.repair import checker_markup, frames_for
from sseguard.proxy.stream import Stalled, StallWatch, StreamRelay
from sseguard.proxy.wire import WIRES
from sseguard.record import Record, record_from_verdict
from sseguard.redact import DEFAULT, RedactingFilter, Redactor
from sseguard.verdict import Api, Verdict

log = logging.getLogger("sseguard.proxy")
log.addFilter(RedactingFilter())

_SECRET_REQUEST_HEADERS = ("authorization", "api-key", "x-api-key", "proxy-authorization")
#: Upstream bytes buffered per response before reading pauses (x2); TCP holds the rest upstream.
UPSTREAM_READ_BUFFER = 64 * 1024
#: Seconds without a stream in flight before freed memory is handed back to the OS.
IDLE_TRIM_DELAY_S = 1.0


class ProxyState:
    """Everything the handlers share: config, the upstream session, the evidence writer, metrics."""

    def __init__(self, config: ProxyConfig) -> None:
        self.config = config
        self.policy: Policy = config.effective_policy
        self.metrics = ProxyMetrics(shared=config.workers > 1)
        self.redactor: Redactor = DEFAULT.with_secrets(config.secrets)
        self.session: aiohttp.ClientSession | None = None
        self.store: Any = None
        self.writer: Any = None
        self.pruner: Any = None
        self.active = 0
        self._index = itertools.count(config.worker, config.workers)
        self._trim: asyncio.TimerHandle | None = None

    async def start(self, app: web.Application) -> None:
        if self.config.store is not None:
            from sseguard.store import BatchWriter, open_store

            # Opening a SQLite file or connecting to PostgreSQL is blocking: keep it off the loop.
            from sseguard.store.retention import RetentionThread, SampledStore

            self.store = await asyncio.to_thread(open_store, self.config.store)
            retention = self.config.retention
            if retention.sample_healthy is not None:
                self.store = SampledStore(self.store, retention.sample_healthy)
            self.writer = BatchWriter(self.store)
            if retention.prunes and self.config.worker == 0:  # one pruner per store, not per worker
                self.pruner = RetentionThread(self.config.store, retention).start()
        # Idle upstream connections are dropped after 4 s, below uvicorn's 5 s keep-alive (vLLM,
        # SGLang): reusing a connection the server is closing at that moment would be a spurious 502.
        connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, ttl_dns_cache=300,
                                         keepalive_timeout=4.0)
        self.session = aiohttp.ClientSession(
            connector=connector, auto_decompress=False, trust_env=False,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=self.config.connect_timeout),
            # The client's own User-Agent and Accept-Encoding are forwarded; add none of ours.
            skip_auto_headers=("User-Agent", "Accept-Encoding"),
            # aiohttp buffers up to twice this per upstream response before it stops reading the
            # socket (256 KiB → 512 KiB by default): for a slow client that is what the proxy holds.
            read_bufsize=UPSTREAM_READ_BUFFER,
        )

    async def stop(self, app: web.Application) -> None:
        if self._trim is not None:
            self._trim.cancel()
        if self.session is not None:
            await self.session.close()
        if self.writer is not None:
            # Drain every queued record: a clean shutdown loses no evidence.
            await asyncio.to_thread(self.writer.close)
        if self.pruner is not None:
            await asyncio.to_thread(self.pruner.stop)
        if self.store is not None:
            await asyncio.to_thread(self.store.close)

    def stream_ended(self) -> None:
        """One stream fewer in flight; once none is left, the freed buffers go back to the OS."""
        self.active -= 1
        self.metrics.active.dec()
        if self.active == 0 and self._trim is None:
            # A moment later, so that a steady trickle of single streams does not pay a heap walk each.
            self._trim = asyncio.get_running_loop().call_later(IDLE_TRIM_DELAY_S, self._trim_if_idle)

    def _trim_if_idle(self) -> None:
        self._trim = None
        if self.active == 0:
            release_free_memory()

    def request_redactor(self, request: web.Request) -> Redactor:
        """The app's redactor plus this client's own key, in whatever shape it has."""
        values: list[str] = []
        for name in _SECRET_REQUEST_HEADERS:
            for value in request.headers.getall(name, ()):
                values.append(value)
                scheme, _, token = value.partition(" ")
                if token and scheme.lower() in ("bearer", "basic", "token"):
                    values.append(token.strip())
        return self.redactor.with_secrets(values) if values else self.redactor

    def stream_done(self, relay: StreamRelay, verdict: Verdict) -> None:
        """Metrics and the evidence record of one finished stream (never blocks the loop)."""
        now = time.perf_counter()
        duration = now - relay.t0
        outcome = relay.outcome
        self.metrics.stream_ended(verdict, client_gone=outcome.client_gone, ttft_s=relay.ttft,
                                  duration_s=duration)
        if outcome.code is not None or outcome.action == "pass":
            self.metrics.actions.labels(outcome.action).inc()
        if verdict.ending == "stalled":
            self.metrics.upstream_errors.labels("stalled").inc()
        elif (verdict.ending == "transport_error" and not outcome.client_gone
              and relay.ttfb is not None):  # before the headers it was counted as connect/timeout
            self.metrics.upstream_errors.labels("transport").inc()
        if self.writer is None:
            return
        try:
            record = self._record(relay, verdict, duration)
        except Exception:  # evidence must never take the proxy down
            log.exception("could not build the record of a stream")
            return
        self.writer.put(record)

    def _record(self, relay: StreamRelay, verdict: Verdict, duration: float) -> Record:
        outcome = relay.outcome
        extra: dict[str, Any] = {"action": outcome.action, **relay.frames.facts(), **outcome.extra}
        if outcome.code is not None:
            extra["error_code"] = outcome.code
        if outcome.client_gone:
            extra["client_disconnected"] = True
        record = record_from_verdict(
            verdict, policy=self.policy, headers=relay.upstream_headers, redactor=relay.redactor,
            source="proxy", run_id=self.config.run_id, arm=self.config.arm_name,
            index=next(self._index), workload="proxy", started_at=relay.started_at,
            method=relay.request.method, path=relay.request.path, stream=True,
            ttfb_ms=None if relay.ttfb is None else relay.ttfb * 1000,
            ttft_ms=None if relay.ttft is None else relay.ttft * 1000,
            duration_ms=duration * 1000, max_gap_ms=relay.max_gap * 1000,
            prompt_bytes=len(relay.body), concurrency=relay.concurrency,
            extra=relay.redactor.obj(extra),
        )
        if record.model is None and isinstance(relay.request_obj.get("model"), str):
            record.model = relay.redactor.text(relay.request_obj["model"])
        if outcome.client_gone:
            record.status = None if relay.ttfb is None else record.status
        return record


STATE = web.AppKey("sseguard_proxy_state", ProxyState)


# ── handlers ─────────────────────────────────────────────────────────────────────────────────────


class _TooLarge(Exception):
    pass


async def _read_body(request: web.Request, limit: int) -> bytes:
    if request.content_length is not None and request.content_length > limit:
        raise _TooLarge
    buf = bytearray()
    async for chunk in request.content.iter_any():
        buf += chunk
        if len(buf) > limit:
            raise _TooLarge
    return bytes(buf)


def _anthropic(request: web.Request, api: Api | None) -> bool:
    """Whether the client speaks Anthropic's API: its errors then come in Anthropic's shape."""
    return api is Api.MESSAGES or "anthropic-version" in request.headers


def _too_large(state: ProxyState, anthropic: bool) -> web.Response:
    state.metrics.requests.labels("rejected_413").inc()
    # Close the connection: the rest of an oversized body is not worth reading.
    return error_response(413, f"request body is larger than the proxy's limit of "
                               f"{state.config.max_body} bytes (--max-body)",
                          type_="invalid_request_error", code="request_too_large",
                          headers=[("Connection", "close")], anthropic=anthropic)


async def v1(request: web.Request) -> web.StreamResponse:
    """Every ``/v1/*`` request: the three streaming endpoints are guarded, the rest relayed as is.

    Only the configured upstream is ever reached: the target is its base plus a checked path.
    """
    state = request.app[STATE]
    api = api_for_path(request.rel_url.raw_path) if request.method == "POST" else None
    anthropic = _anthropic(request, api)
    try:
        target = upstream_url(state.config.upstream, request)
    except PathRejected as exc:
        state.metrics.requests.labels("rejected_path").inc()
        return error_response(400, f"path not forwarded: {exc}", type_="invalid_request_error",
                              code="invalid_path", anthropic=anthropic)
    if api is None:
        state.metrics.requests.labels("passthrough").inc()
        return await _relay(state, request, target, None, anthropic)
    # The body decides whether this is a stream, so it is read (bounded by --max-body) and parsed.
    try:
        body = await _read_body(request, state.config.max_body)
    except _TooLarge:
        return _too_large(state, anthropic)
    try:
        obj = msgspec.json.decode(body)
    except msgspec.DecodeError as exc:
        state.metrics.requests.labels("rejected_400").inc()
        return error_response(400, f"the request body is not valid JSON: {exc}",
                              type_="invalid_request_error", code="invalid_json",
                              anthropic=anthropic)
    if not isinstance(obj, dict):
        state.metrics.requests.labels("rejected_400").inc()
        return error_response(400, "the request body must be a JSON object",
                              type_="invalid_request_error", code="invalid_json",
                              anthropic=anthropic)
    if obj.get("stream") is True:
        state.metrics.requests.labels("stream").inc()
        return await _stream(state, request, body, obj, api, target)
    state.metrics.requests.labels("non_stream").inc()
    return await _relay(state, request, target, body, anthropic)


async def _stream(state: ProxyState, request: web.Request, body: bytes, obj: dict[str, Any],
                  api: Api, target: URL) -> web.StreamResponse:
    config = state.config
    redactor = state.request_redactor(request)
    anthropic = _anthropic(request, api)
    # keep_text=False: the proxy forwards the text and records facts, so holding every answer's text
    # (1.37 GB RSS for 1,000 concurrent 1.2 MB answers) buys nothing; leaks are still found in flight.
    checker = checker_for(api, obj, markup=checker_markup(config.repair_markup, api), keep_text=False)
    relay = StreamRelay(state, request, body, obj, frames_for(config.repair_markup, obj, api),
                        checker, redactor, WIRES[api])
    assert state.session is not None
    state.active += 1
    relay.concurrency = state.active
    state.metrics.active.inc()
    try:
        try:
            async with asyncio.timeout(config.timeout):
                upstream = await state.session.post(
                    target, data=body, allow_redirects=False, auto_decompress=True,
                    headers=request_headers(request.headers, identity=True))
        except TimeoutError:
            state.metrics.upstream_errors.labels("timeout").inc()
            message = f"the upstream sent no response within {config.timeout:g} s (--timeout)"
            state.stream_done(relay, checker.close(transport_error=message))
            return error_response(504, message, type_="upstream_timeout", code="upstream_timeout",
                                  anthropic=anthropic)
        except aiohttp.ClientError as exc:
            state.metrics.upstream_errors.labels("connect").inc()
            message = _unreachable(config.upstream, exc, redactor)
            state.stream_done(relay, checker.close(transport_error=message))
            return error_response(502, message, type_="upstream_unreachable",
                                  code="upstream_unreachable", anthropic=anthropic)
        relay.upstream_headers = dict(upstream.headers)
        if not 200 <= upstream.status < 300:
            return await _stream_http_error(state, relay, upstream)
        return await relay.relay(upstream)
    finally:
        state.stream_ended()


async def _stream_http_error(state: ProxyState, relay: StreamRelay,
                             upstream: aiohttp.ClientResponse) -> web.StreamResponse:
    """A non-2xx answer to a stream request goes to the client as it is: the SDK raises on it."""
    state.metrics.upstream_errors.labels(f"http_{upstream.status}").inc()
    relay.ttfb = time.perf_counter() - relay.t0
    try:
        async with asyncio.timeout(state.config.timeout):
            payload = await upstream.read()
    except (TimeoutError, aiohttp.ClientError, OSError):
        payload = b""
    finally:
        upstream.close()
    state.stream_done(relay, relay.checker.close(http_status=upstream.status, body=payload))
    return web.Response(status=upstream.status, reason=upstream.reason, body=payload,
                        headers=response_headers(upstream.headers, keep_framing=False))


def _unreachable(upstream: URL, exc: BaseException, redactor: Redactor) -> str:
    reason = str(exc) or type(exc).__name__
    return redactor.text(f"the upstream {upstream} is unreachable: {reason}")


class _Upload:
    """The client's request body, streamed to the upstream as it arrives (never held whole).

    Silence longer than ``--stall-timeout`` ends it; once it is all sent, ``--timeout`` starts again for
    the upstream's answer, so a long upload does not eat the time the upstream has to respond.
    """

    def __init__(self, request: web.Request, stall_timeout: float, deadline: asyncio.Timeout,
                 timeout: float) -> None:
        self._content = request.content
        self._stall = stall_timeout
        self._deadline = deadline
        self._timeout = timeout
        self.failure: str | None = None
        self.waiting = True  # for the upstream's headers: the deadline is still running

    async def chunks(self) -> AsyncIterator[bytes]:
        loop = asyncio.get_running_loop()
        while True:
            try:
                async with asyncio.timeout(self._stall):
                    chunk = await self._content.readany()
            except TimeoutError:
                self.failure = f"the client sent no request body byte for {self._stall:g} s"
                raise
            except (aiohttp.ClientError, OSError) as exc:
                self.failure = f"the client's request body broke off: {type(exc).__name__}"
                raise
            if not chunk:
                break
            yield chunk
        if self.waiting:  # an upstream may answer before the upload ends; then nothing is waited on
            self._deadline.reschedule(loop.time() + self._timeout)


async def _relay(state: ProxyState, request: web.Request, target: URL, body: bytes | None,
                 anthropic: bool) -> web.StreamResponse:
    """Copy a request to the upstream and its answer back, both bodies streamed as they come.

    ``body`` is a request body already read (the guarded endpoints' non-streaming calls); otherwise
    the client's body is streamed. Only hop-by-hop headers stay behind; length and content coding
    are kept, so the answer arrives exactly as the upstream sent it (compressed bodies included).
    """
    config = state.config
    assert state.session is not None
    headers = request_headers(request.headers, identity=False)
    deadline = asyncio.timeout(config.timeout)
    upload: _Upload | None = None
    data: Any = body or None
    if body is None and request.body_exists:
        upload = _Upload(request, config.stall_timeout, deadline, config.timeout)
        data = upload.chunks()
        if request.content_length is not None:
            # Sent with the length the client declared, not re-framed as chunked: some upstreams
            # refuse chunked uploads.
            headers["Content-Length"] = str(request.content_length)
    # aiohttp would add its own Content-Type to a body that has none: the upstream sees the client's.
    skip = () if "Content-Type" in request.headers else ("Content-Type",)
    try:
        async with deadline:
            upstream = await state.session.request(
                request.method, target, data=data, allow_redirects=False, headers=headers,
                skip_auto_headers=skip)
    except (TimeoutError, aiohttp.ClientError) as exc:
        if upload is not None:
            upload.waiting = False
        if upload is not None and upload.failure is not None:
            state.metrics.requests.labels("rejected_408").inc()
            return error_response(408, upload.failure, type_="invalid_request_error",
                                  code="request_body_incomplete", anthropic=anthropic,
                                  headers=[("Connection", "close")])
        if isinstance(exc, TimeoutError):
            state.metrics.upstream_errors.labels("timeout").inc()
            return error_response(504, f"the upstream sent no response within {config.timeout:g} s "
                                       "(--timeout)", type_="upstream_timeout",
                                  code="upstream_timeout", anthropic=anthropic)
        state.metrics.upstream_errors.labels("connect").inc()
        return error_response(502, _unreachable(config.upstream, exc, state.redactor),
                              type_="upstream_unreachable", code="upstream_unreachable",
                              anthropic=anthropic)
    if upload is not None:
        upload.waiting = False
    watch = StallWatch(asyncio.get_running_loop(), config.stall_timeout, upstream.content)
    complete = False
    try:
        resp = web.StreamResponse(status=upstream.status, reason=upstream.reason,
                                  headers=response_headers(upstream.headers, keep_framing=True))
        try:
            await resp.prepare(request)
            while chunk := await watch.read():
                await resp.write(chunk)
        except ConnectionResetError:
            return resp  # the client left; closing the upstream response below is all there is
        except (Stalled, aiohttp.ClientError, OSError) as exc:
            # Headers are out: the only honest signal left is an incomplete body.
            state.metrics.upstream_errors.labels(
                "stalled" if isinstance(exc, Stalled) else "transport").inc()
            if request.transport is not None:
                request.transport.abort()
            return resp
        await resp.write_eof()
        complete = True
        return resp
    finally:
        watch.close()
        if complete:
            upstream.release()  # the connection goes back to the pool
        else:
            upstream.close()


async def metrics(request: web.Request) -> web.Response:
    state = request.app[STATE]
    return web.Response(body=state.metrics.render(), headers={"Content-Type": CONTENT_TYPE})


async def healthz(request: web.Request) -> web.Response:
    state = request.app[STATE]
    return web.json_response({"status": "ok", "active_streams": state.active,
                              "policy": state.policy.name, "run_id": state.config.run_id,
                              "worker": state.config.worker, "pid": os.getpid()})


def make_proxy_app(config: ProxyConfig) -> web.Application:
    """The proxy as an ``aiohttp.web.Application`` (serve it with ``handler_cancellation=True``)."""
    app = web.Application(client_max_size=config.max_body)
    state = ProxyState(config)
    app[STATE] = state
    app.on_startup.append(state.start)
    app.on_cleanup.append(state.stop)
    app.router.add_route("*", "/v1/{tail:.*}", v1)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    return app


# ── running it ───────────────────────────────────────────────────────────────────────────────────


@dataclass(slots=True)
class RunningProxy(Listening):
    """A listening proxy: ``url`` is the base URL clients use (``http://127.0.0.1:PORT/v1``)."""

    app: web.Application

    @property
    def state(self) -> ProxyState:
        return self.app[STATE]


@contextlib.asynccontextmanager
async def run_proxy(config: ProxyConfig, *, backlog: int = 4096,
                    reuse_port: bool = False) -> AsyncIterator[RunningProxy]:
    """Serve the proxy on ``config.host:config.port`` (0 = a free port) for the block's duration.

    Leaving the block stops accepting, lets streams finish for a moment, closes the upstream session
    and drains the evidence writer. ``reuse_port``: one of several worker processes on one port.
    """
    app = make_proxy_app(config)
    async with serve_app(app, config.host, config.port, backlog=backlog, shutdown_timeout=5.0,
                         reuse_port=reuse_port) as bound:
        yield RunningProxy(config.host, bound, app)


async def serve_proxy(config: ProxyConfig, on_ready: Any = None, *, reuse_port: bool = False) -> None:
    """Serve until SIGTERM or SIGINT (Ctrl-C), which drain the streams and records; ``on_ready(proxy)``
    once it listens."""
    started = time.monotonic()

    def ready(proxy: RunningProxy) -> None:
        log.info("proxy %s listening on %s for %s", config.run_id, proxy.url, config.upstream)
        if on_ready is not None:
            on_ready(proxy)

    await serve_until_signalled(run_proxy(config, reuse_port=reuse_port), ready)
    log.info("proxy %s stopped after %.0f s", config.run_id, time.monotonic() - started)
