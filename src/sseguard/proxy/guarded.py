"""A guarded stream, from the request to the upstream to the relay's last byte.

The upstream is asked with the client's body; no answer in ``--timeout``, an unreachable upstream or a
non-2xx status end here (an error the client's SDK raises, or the upstream's own status and body);
a 2xx stream goes through ``StreamRelay`` with its protocol's checker, ``Wire`` and ``Frames``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
from aiohttp import web
from yarl import URL

from sseguard.contract import checker_for
from sseguard.proxy.forward import (
    error_response,
    request_headers,
    response_headers,
    speaks_anthropic,
    unreachable,
)
from sseguard.proxy.relay import StreamRelay
from sseguard.proxy.repair import checker_markup, frames_for
from sseguard.proxy.state import ProxyState
from sseguard.proxy.wire import WIRES
from sseguard.verdict import Api


async def guard_stream(state: ProxyState, request: web.Request, body: bytes, obj: dict[str, Any],
                       api: Api, target: URL) -> web.StreamResponse:
    """Send the stream request ``obj`` (read as ``body``) to ``target`` and guard its answer."""
    config = state.config
    redactor = state.request_redactor(request)
    anthropic = speaks_anthropic(request, api)
    # keep_text=False: the proxy forwards the text and records facts, so holding every answer's text
    # (1.37 GB RSS for 1,000 concurrent 1.2 MB answers) buys nothing; leaks are still found in flight.
    checker = checker_for(api, obj, markup=checker_markup(config.repair_markup, api), keep_text=False)
    relay = StreamRelay(config, state.policy, state.stream_done, request, body, obj,
                        frames_for(config.repair_markup, obj, api), checker, redactor, WIRES[api])
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
            message = unreachable(config.upstream, exc, redactor)
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
