"""``sseguard chaos --upstream URL``: the fault table applied to a real upstream's streams.

Every request is forwarded to the upstream (its path and query appended to the upstream URL, whose
own final ``/v1`` is dropped, so an OpenAI base URL works as is); a streamed request of one of the four
protocols draws its fault exactly as the generated server does (``server.draw``: the same seed, the
same request numbers, ``x-sseguard-inject``, the patterns, ``--first-answer``) and its stream goes
through the fault machine (``upstream.UpstreamFaults``), which decides everything; this module only
moves bytes and sleeps. Anything else — a non-streamed answer, ``/v1/models``, a request the
protocol's parser refuses — is relayed as it came (a non-streamed answer can still be stalled or
reset). ``http_error`` and ``empty`` answer without asking the upstream.

The prefix cache (``chaos.cache``) is kept as for generated answers, and a long prompt sent before
(``MIN_PREFIX_CHARS`` or more: a cache block's worth) is a hit too, as a real engine serves a
repeated prompt's full blocks from its cache; so the ``cache`` pattern garbles the requests a real
prefix cache would serve: ``--garble-cached P``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import msgspec
from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

from sseguard._serve import (
    Listening,
    Worker,
    serve_app,
    serve_in_worker,
    serve_workers,
)
from sseguard.chaos.cache import MIN_PREFIX_CHARS
from sseguard.chaos.config import ChaosConfig
from sseguard.chaos.faults import Decision, Fault
from sseguard.chaos.frames import End
from sseguard.chaos.registry import writer_for
from sseguard.chaos.request import BadRequest, ChatRequest
from sseguard.chaos.responding import (
    FAULT_HEADER,
    INFLIGHT_HEADER,
    INJECT_HEADER,
    ROUTE_HEADER,
    hang_until_gone,
    reset_connection,
)
from sseguard.chaos.server import (
    RunningChaos,
    conversations_log,
    draw,
    forced_fault,
    from_route,
    healthz,
    stats_json,
)
from sseguard.chaos.state import STATE, ChaosState
from sseguard.chaos.upstream import Pause, Send, Step, Stop, UpstreamFaults
from sseguard.chaos.upstream_garble import Garbler
from sseguard.chaos.upstream_wire import WIRES
from sseguard.core.contract import Framing, Protocol, protocol_for_path

#: Connection-specific headers (RFC 9110 §7.6.1) and those each hop sets anew: never copied.
_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
                  "trailer", "transfer-encoding", "upgrade", "host", "content-length",
                  "content-encoding", "expect"})
#: Not for the upstream: what this chaos injects is its own choice (an upstream that is a chaos
#: server too would otherwise inject it a second time).
_OURS = _HOP | {INJECT_HEADER}
#: Prompts remembered to tell a repeat (a cache hit on a real engine), and donors of garbled text.
_SEEN_MAX = 4096
_DONORS = 8
#: How long the upstream may take to answer or to send the next bytes (a real engine's prefill).
UPSTREAM_READ_S = 600.0


@dataclass(slots=True)
class Upstream:
    """Where requests go, and what the relay remembers across them."""

    base: URL
    session: aiohttp.ClientSession | None = None
    seen: OrderedDict[bytes, None] = field(default_factory=OrderedDict)
    #: The answers of recent streams, (prompt fingerprint, text): the donors of garbled spans.
    donors: deque[tuple[bytes, str]] = field(default_factory=lambda: deque(maxlen=_DONORS))

    def url(self, request: web.Request) -> URL:
        """The upstream URL for ``request``: its raw path and query after the base's path."""
        base_path = self.base.raw_path.rstrip("/").removesuffix("/v1")
        rel = request.rel_url
        query = f"?{rel.raw_query_string}" if rel.raw_query_string else ""
        return URL(f"{self.base.origin()}{base_path}{rel.raw_path}{query}", encoded=True)

    def repeated(self, fingerprint: bytes) -> bool:
        """Whether this prompt was sent before (remembered from now on)."""
        if fingerprint in self.seen:
            self.seen.move_to_end(fingerprint)
            return True
        self.seen[fingerprint] = None
        while len(self.seen) > _SEEN_MAX:
            self.seen.popitem(last=False)
        return False

    def donor(self, fingerprint: bytes) -> str:
        """The latest answer to another prompt: what a garbled span is overwritten with."""
        return next((text for fp, text in reversed(self.donors) if fp != fingerprint), "")


UPSTREAM = web.AppKey("sseguard_chaos_upstream", Upstream)


def make_upstream_app(config: ChaosConfig, upstream: str, *,
                      clock: Callable[[], float] = time.monotonic,
                      worker: int = 0, workers: int = 1) -> web.Application:
    """The relaying chaos server as an ``aiohttp.web.Application``."""
    app = web.Application(client_max_size=32 * 1024 * 1024)
    app[STATE] = ChaosState(config, clock, clock(), counter=worker, step=workers)
    app[UPSTREAM] = Upstream(URL(upstream))
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/chaos/stats", stats_json)
    app.router.add_get("/chaos/conversations", conversations_log)
    app.router.add_route("*", "/{tail:.*}", _relay)
    app.cleanup_ctx.append(_session)
    return app


async def _session(app: web.Application) -> AsyncIterator[None]:
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=UPSTREAM_READ_S)
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=timeout,
                                    auto_decompress=False)
    app[UPSTREAM].session = session
    yield
    await session.close()


def _forwarded(headers: Mapping[str, str]) -> CIMultiDict[str]:
    out = CIMultiDict((k, v) for k, v in headers.items() if k.lower() not in _OURS)
    out["Accept-Encoding"] = "identity"
    return out


def _returned(headers: Mapping[str, str]) -> CIMultiDict[str]:
    return CIMultiDict((k, v) for k, v in headers.items() if k.lower() not in _HOP)


def _marks(decision: Decision, inflight: int) -> dict[str, str]:
    return {FAULT_HEADER: decision.header, ROUTE_HEADER: decision.route,
            INFLIGHT_HEADER: str(inflight)}


async def _relay(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    body = await request.read()
    raw_path = request.rel_url.raw_path
    proto = protocol_for_path(raw_path) if request.method == "POST" else None
    req = None
    forced_raw = request.headers.get(INJECT_HEADER)
    if proto is not None:
        route = proto.route_for(raw_path)
        match = route.pattern.search(raw_path) if route is not None else None
        try:
            forced = forced_fault(forced_raw)
            if route is not None and match is not None:
                req = from_route(writer_for(proto.api).parse(body), route, match.groupdict(),
                                  proto.framing_for(request.query))
        except BadRequest as exc:
            if exc.param == INJECT_HEADER:
                state.stats.bad_requests += 1
                state.stats.statuses[400] += 1
                return web.json_response(proto.error_body(str(exc), type_="invalid_request_error",
                                                          code=None, param=exc.param), status=400)
            req = None  # the upstream answers what chaos's parser refuses, in its own words
    if proto is None or req is None:
        return await _plain(request, body, None, {})
    counter, inflight = state.arrive(proto.api)
    try:
        return await _faulted(request, body, proto, req, counter, inflight, forced, forced_raw)
    finally:
        state.stats.inflight -= 1


async def _faulted(request: web.Request, body: bytes, proto: Protocol, req: ChatRequest,
                   counter: int, inflight: int, forced: Fault | None,
                   forced_raw: str | None) -> web.StreamResponse:
    state, upstream = request.app[STATE], request.app[UPSTREAM]
    config, stats = state.config, state.stats
    wire = WIRES[proto.api]
    cached_words = state.cache.lookup(req)
    # A repeated prompt is served from a real engine's cache when it fills a cache block or more.
    cached = cached_words > 0 or (len(req.last_text) >= MIN_PREFIX_CHARS
                                  and upstream.repeated(req.fingerprint))
    unsupported = wire.unsupported if req.stream else wire.unsupported | {Fault.GARBLED}
    decision, conversation = draw(state, req, counter, inflight, api=proto.api, forced=forced,
                                  forced_raw=forced_raw, cached=cached, unsupported=unsupported)
    marks = _marks(decision, inflight)
    if decision.fault is Fault.HTTP_ERROR:
        statuses = config.options.http_statuses
        status = statuses[decision.variant % len(statuses)]
        stats.statuses[status] += 1
        if status == 429:
            marks["Retry-After"] = "1"
        return web.Response(status=status, content_type="application/json", headers=marks,
                            body=msgspec.json.encode(proto.status_error(
                                status, f"upstream error {status} (sseguard chaos)")))
    if decision.fault is Fault.EMPTY:
        stats.statuses[200] += 1
        stats.streams += 1
        response = web.StreamResponse(status=200, headers={
            **marks, "Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"})
        await response.prepare(request)
        await response.write_eof()
        return response
    if not req.stream:
        return await _plain(request, body, decision, marks)
    array = req.framing is Framing.JSON_ARRAY
    garbler = None
    if decision.fault is Fault.GARBLED:
        options = config.options
        garbler = Garbler(decision.variant, after=options.garble_after, span=options.garble_span,
                          donor=upstream.donor(req.fingerprint))
    machine = UpstreamFaults(proto.api, decision, config, _object(body), array=array,
                             garbler=garbler)
    session = upstream.session
    assert session is not None
    try:
        answer = await session.request(request.method, upstream.url(request), data=body,
                                       headers=_forwarded(request.headers))
    except (TimeoutError, aiohttp.ClientError) as exc:
        stats.statuses[502] += 1
        return web.json_response(proto.status_error(502, f"upstream unreachable: {exc}"),
                                 status=502, headers=marks)
    async with answer:
        stats.statuses[answer.status] += 1
        headers = _returned(answer.headers)
        headers.update(marks)
        response = web.StreamResponse(status=answer.status, reason=answer.reason, headers=headers)
        await response.prepare(request)
        if answer.status != 200:
            await response.write(await answer.read())
            await response.write_eof()
            return response
        stats.streams += 1
        try:
            async for chunk in answer.content.iter_any():
                if await _perform(request, response, machine.feed(chunk), state):
                    break
            else:
                await _perform(request, response, machine.close(), state)
        except (TimeoutError, aiohttp.ClientPayloadError, aiohttp.ClientConnectionError):
            reset_connection(request)  # the upstream broke the stream: so does the client's
        except ConnectionError:
            pass  # the client went away
        finally:
            stats.frames += machine.frames
    text = "".join(machine.text)
    if text:
        upstream.donors.append((req.fingerprint, text))
    if conversation is not None and req.continued is None:
        conversation.last_text = text
    return response


async def _perform(request: web.Request, response: web.StreamResponse, steps: list[Step],
                   state: ChaosState) -> bool:
    """Carry out the machine's steps; True when the client's body has ended."""
    for step in steps:
        if isinstance(step, Send):
            await response.write(step.data)
        elif isinstance(step, Pause):
            await asyncio.sleep(step.seconds)
        elif isinstance(step, Stop):
            if step.end is End.HANG:
                await hang_until_gone(request, state.config.options.hang_max_s)
            if step.end is End.EOF:
                await response.write_eof()
            else:
                reset_connection(request)
            return True
    return False


async def _plain(request: web.Request, body: bytes, decision: Decision | None,
                 marks: dict[str, str]) -> web.StreamResponse:
    """The upstream's answer as it came (a non-streamed answer may be stalled or reset first)."""
    state, upstream = request.app[STATE], request.app[UPSTREAM]
    session = upstream.session
    assert session is not None
    fault = decision.fault if decision is not None else None
    try:
        answer = await session.request(request.method, upstream.url(request), data=body or None,
                                       headers=_forwarded(request.headers))
    except (TimeoutError, aiohttp.ClientError) as exc:
        return web.json_response({"error": {"message": f"upstream unreachable: {exc}",
                                            "type": "server_error", "code": 502}}, status=502)
    if decision is not None:
        state.stats.statuses[answer.status] += 1
    if fault not in (Fault.STALLED, Fault.TRANSPORT_ERROR):
        return await _passed(request, answer, marks)
    async with answer:
        payload = await answer.read()
        headers = _returned(answer.headers)
        headers.update(marks)
    if fault is Fault.STALLED:
        options = state.config.options
        if options.stall_then == "hang":
            await hang_until_gone(request, options.hang_max_s)
            reset_connection(request)
            return web.StreamResponse(status=answer.status)
        await asyncio.sleep(options.stall_ms / 1000.0)
    response = web.StreamResponse(status=answer.status, reason=answer.reason, headers=headers)
    response.content_length = len(payload)
    await response.prepare(request)
    try:
        if fault is Fault.TRANSPORT_ERROR:
            await response.write(payload[: len(payload) // 2])
            reset_connection(request)
            return response
        await response.write(payload)
        await response.write_eof()
    except ConnectionError:
        pass
    return response


async def _passed(request: web.Request, answer: aiohttp.ClientResponse,
                  marks: dict[str, str]) -> web.StreamResponse:
    """The upstream's answer relayed as it arrives (a stream chaos does not break stays a stream)."""
    async with answer:
        headers = _returned(answer.headers)
        headers.update(marks)
        response = web.StreamResponse(status=answer.status, reason=answer.reason, headers=headers)
        await response.prepare(request)
        try:
            async for chunk in answer.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
        except (TimeoutError, aiohttp.ClientPayloadError, aiohttp.ClientConnectionError):
            reset_connection(request)
        except ConnectionError:
            pass
    return response


def _object(body: bytes) -> dict[str, Any] | None:
    try:
        obj = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return None
    return obj if isinstance(obj, dict) else None


# ── running it ───────────────────────────────────────────────────────────────────────────────────


@dataclass(slots=True)
class UpstreamChaos(RunningChaos):
    """A running relaying chaos server: ``url`` is its OpenAI base URL."""


@contextlib.asynccontextmanager
async def run_upstream_chaos(config: ChaosConfig, upstream: str, host: str = "127.0.0.1",
                             port: int = 0, *, worker: Worker | None = None,
                             ) -> AsyncIterator[UpstreamChaos]:
    """Relay to ``upstream`` with faults on ``host:port`` (0: a free port) for the block's duration."""
    worker = worker or Worker(0, 1, host, port)
    app = make_upstream_app(config, upstream, worker=worker.index, workers=worker.count)
    async with serve_app(app, host, port, backlog=4096, shutdown_timeout=1.0,
                         reuse_port=worker.reuse_port) as bound:
        state = app[STATE]
        yield UpstreamChaos(host, bound, state.config, state.stats, app)


def check_upstream(upstream: str) -> str:
    """``upstream`` if it is an http(s) URL with a host, else a ``ConfigError``."""
    from sseguard.core.errors import ConfigError

    url = URL(upstream)
    if url.scheme not in ("http", "https") or not url.host:
        raise ConfigError(f"--upstream {upstream!r}: an http:// or https:// URL with a host")
    return upstream


def serve_upstream_blocking(config: ChaosConfig, upstream: str, host: str, port: int,
                            on_ready: Callable[[Listening], None], *, workers: int = 1) -> int:
    """Relay with faults until Ctrl-C or SIGTERM, in ``workers`` processes on one port (as
    ``server.serve_blocking``); returns the exit status."""
    return serve_workers(workers, host, port,
                         functools.partial(_serve_worker, config, upstream), on_ready)


def _serve_worker(config: ChaosConfig, upstream: str, worker: Worker,
                  ready: Callable[[int], None]) -> None:
    serve_in_worker(lambda: run_upstream_chaos(config, upstream, worker.host, worker.port,
                                               worker=worker), ready)


__all__ = ["UpstreamChaos", "check_upstream", "make_upstream_app", "run_upstream_chaos",
           "serve_upstream_blocking"]
