"""The guard proxy's aiohttp.web application: routes to the handlers, startup and shutdown, serving.

This module only wires: ``/v1/*`` requests are read here and handed to the guarded relay
(``guarded.py`` → ``driver/stream.py``, with the stream's checker, ``Wire`` and ``Frames``) when they are
streams of a guarded protocol, to the verbatim relay (``passthrough.py``) otherwise; what the handlers
share lives in ``state.py``.

Run it with ``run_proxy`` (or any ``AppRunner`` created with ``handler_cancellation=True``): handler
cancellation is what lets a client's disconnect cancel the upstream request at once rather than at the
next write.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import msgspec
from aiohttp import web

from sseguard._serve import Listening, serve_app, serve_until_signalled
from sseguard.core.contract import Protocol, Route
from sseguard.proxy.config import ProxyConfig
from sseguard.proxy.driver.forward import (
    MOUNTS,
    PathRejected,
    client_protocol,
    error_response,
    stream_route,
    upstream_url,
)
from sseguard.proxy.driver.guarded import guard_stream
from sseguard.proxy.driver.metrics import CONTENT_TYPE
from sseguard.proxy.driver.passthrough import relay_as_is
from sseguard.proxy.driver.request_body import BodyRefused, TooLarge, decode_body, read_body
from sseguard.proxy.driver.state import ProxyState, log

STATE = web.AppKey("sseguard_proxy_state", ProxyState)


# ── handlers ─────────────────────────────────────────────────────────────────────────────────────


def _too_large(state: ProxyState, proto: Protocol) -> web.Response:
    state.metrics.requested("rejected_413")
    # Close the connection: the rest of an oversized body is not worth reading.
    return _final(state, proto, error_response(
        proto, 413, f"request body is larger than the proxy's limit of {state.config.max_body} "
                    "bytes (--max-body)", type_="invalid_request_error", code="request_too_large",
        headers=[("Connection", "close")]), "request_too_large")


def _final(state: ProxyState, proto: Protocol, resp: web.Response, reason: str) -> web.Response:
    """The proxy's own refusal of a request: the same request would be refused again."""
    state.tell_retry(resp, str(proto.api), reason, "bad_request", retried=False)
    return resp


async def v1(request: web.Request) -> web.StreamResponse:
    """Every request under a protocol mount (``/v1/*``, ``/v1beta/*``): the streaming endpoints of every
    protocol are guarded, the rest relayed as is.

    Only the configured upstream is ever reached: the target is its base plus a checked path.
    """
    state = request.app[STATE]
    found = stream_route(request.rel_url.raw_path) if request.method == "POST" else None
    shape = client_protocol(request, None if found is None else found[0])
    try:
        target = upstream_url(state.config.upstream, request)
    except PathRejected as exc:
        state.metrics.requested("rejected_path")
        return _final(state, shape, error_response(
            shape, 400, f"path not forwarded: {exc}", type_="invalid_request_error",
            code="invalid_path"), "invalid_path")
    if found is None:
        state.metrics.requested("passthrough")
        return await relay_as_is(state, request, target, None, shape)
    proto, route = found
    # The route or the body decides whether this is a stream: it is read (bounded by --max-body).
    try:
        body = decode_body(await read_body(request, state.config.max_body),
                           request.headers.get("Content-Encoding"), state.config.max_body)
    except TooLarge:
        return _too_large(state, proto)
    except BodyRefused as refused:
        state.metrics.requested(f"rejected_{refused.status}")
        return _final(state, proto, error_response(
            proto, refused.status, refused.message, type_="invalid_request_error",
            code=refused.code), refused.code)
    try:
        obj = msgspec.json.decode(body)
    except (msgspec.DecodeError, RecursionError) as exc:
        # RecursionError: arrays or objects nested deeper than the decoder follows (a client's
        # fault like any other body that is no JSON the proxy can read, never a 500)
        problem = (f"is not valid JSON: {exc}" if isinstance(exc, msgspec.DecodeError)
                   else "nests arrays or objects too deeply to be read")
        state.metrics.requested("rejected_400")
        return _final(state, proto, error_response(
            proto, 400, f"the request body {problem}",
            type_="invalid_request_error", code="invalid_json"), "invalid_json")
    if not isinstance(obj, dict):
        state.metrics.requested("rejected_400")
        return _final(state, proto, error_response(
            proto, 400, "the request body must be a JSON object", type_="invalid_request_error",
            code="invalid_json"), "invalid_json")
    if _streams(proto, route, obj):
        state.metrics.requested("stream")
        return await guard_stream(state, request, body, obj, proto, target)
    state.metrics.requested("non_stream")
    return await relay_as_is(state, request, target, body, proto, guarded=True)


def _streams(proto: Protocol, route: Route, obj: dict[str, object]) -> bool:
    """Whether a request asks for a stream: its route says so (Gemini's ``:streamGenerateContent``,
    ``Route.streams``), or else the body's stream field does (``Protocol.stream_field``)."""
    if route.streams is not None:
        return route.streams
    return proto.stream_field is not None and obj.get(proto.stream_field) is True


async def metrics(request: web.Request) -> web.Response:
    """``GET /metrics``: the app's Prometheus registry as text."""
    state = request.app[STATE]
    return web.Response(body=state.metrics.render(), headers={"Content-Type": CONTENT_TYPE})


async def healthz(request: web.Request) -> web.Response:
    """``GET /healthz``: alive, streams in flight, the policy acted on, which run and worker."""
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
    for mount in MOUNTS:
        app.router.add_route("*", f"{mount}/{{tail:.*}}", v1)
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
    # Request bodies stay as sent: relayed as is, they reach the upstream byte for byte (a guarded
    # endpoint undoes their content coding itself, ``request_body``).
    async with serve_app(app, config.host, config.port, backlog=backlog, shutdown_timeout=5.0,
                         reuse_port=reuse_port, auto_decompress=False) as bound:
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
