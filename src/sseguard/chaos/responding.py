"""How a chaos answer goes out over aiohttp: the headers and ids every response carries, JSON
bodies, the plan written on time, and the hostile endings (a hang, a TCP reset). Both chaos servers
answer this way (``chaos.server``, ``chaos.upstream_server``); what they write is decided before.

Headers every response carries: ``x-request-id``, ``traceparent`` and ``x-trace-id`` (an incoming W3C
``traceparent`` keeps its trace id), ``server: sseguard-chaos/<version>``, ``x-sseguard-fault`` (the
injected fault or ``none``), ``x-sseguard-route`` (``default`` or a routed pattern's route) and
``x-sseguard-inflight`` (requests in flight when this one arrived, itself included). A request header
``x-sseguard-inject: <fault>|none`` forces the fault of that one request.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
import socket
import struct
import time
from typing import Any

import msgspec
from aiohttp import web

from sseguard import __version__
from sseguard.chaos.faults import Decision
from sseguard.chaos.frames import End, Plan, ResponseIds
from sseguard.chaos.state import ChaosState

SERVER_HEADER = f"sseguard-chaos/{__version__}"
FAULT_HEADER = "x-sseguard-fault"
ROUTE_HEADER = "x-sseguard-route"
INFLIGHT_HEADER = "x-sseguard-inflight"
INJECT_HEADER = "x-sseguard-inject"
_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$")
SSE_HEADERS = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache",
               "X-Accel-Buffering": "no"}
HTTP_ERROR_MESSAGES = {
    429: "Rate limit reached for requests. Please try again in 1s.",
    500: "The server had an error while processing your request.",
    503: "The engine is currently overloaded, please try again later.",
}


def response_ids(seed: int, counter: int, prefix: str, traceparent: str | None) -> ResponseIds:
    """The ids of request ``counter`` under ``seed``: the same seed and number give the same ids (a
    replay is comparable); an incoming ``traceparent`` keeps its trace id."""
    digest = hashlib.blake2b(f"{seed}:{counter}".encode(), digest_size=32).hexdigest()
    match = _TRACEPARENT.match(traceparent or "")
    trace_id = match.group(1) if match else digest[32:64]
    return ResponseIds(response_id=f"{prefix}{int(digest[:15], 16)}",
                       request_id=f"req_{digest[15:39]}", trace_id=trace_id,
                       span_id=digest[:16], created=int(time.time()))


def response_headers(ids: ResponseIds, decision: Decision, inflight: int) -> dict[str, str]:
    """The headers every chaos response carries (this module's docstring)."""
    return {"Server": SERVER_HEADER, "x-request-id": ids.request_id,
            "traceparent": f"00-{ids.trace_id}-{ids.span_id}-01", "x-trace-id": ids.trace_id,
            FAULT_HEADER: decision.header, ROUTE_HEADER: decision.route,
            INFLIGHT_HEADER: str(inflight)}


def json_response(status: int, obj: Any, headers: dict[str, str] | None = None) -> web.Response:
    """A JSON answer: an error body, a statistics page."""
    return web.Response(status=status, body=msgspec.json.encode(obj),
                        content_type="application/json", headers=headers)


async def play(request: web.Request, response: web.StreamResponse, plan: Plan,
                state: ChaosState) -> web.StreamResponse:
    """Write the plan on time; a client that leaves just ends it (aiohttp maps that on its own)."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    stats = state.stats
    writes = plan.writes
    paced = state.config.pacing.inter_token_ms > 0
    try:
        i = 0
        while i < len(writes):
            delay = start + writes[i].at - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            # Paced frames already due (the loop fell behind) go out in one write, as a busy
            # server's socket buffer would deliver them: fewer syscalls exactly under load. Unpaced
            # streams keep one write per frame, so their chunking stays that of a token stream.
            now = loop.time() - start
            j = i + 1
            while paced and j < len(writes) and writes[j].at <= now:
                j += 1
            if not response.prepared:
                await response.prepare(request)
            if j == i + 1:
                await response.write(writes[i].data)
            else:
                await response.write(b"".join(w.data for w in writes[i:j]))
            stats.frames += sum(w.frames for w in writes[i:j])
            i = j
        if plan.end is End.HANG:
            await hang_until_gone(request, state.config.options.hang_max_s)
        if plan.end is not End.EOF:
            reset_connection(request)
            return response
        if not response.prepared:
            await response.prepare(request)
        await response.write_eof()
    except ConnectionError:
        pass  # the client went away; nothing left to tell it
    return response


async def hang_until_gone(request: web.Request, limit_s: float) -> None:
    """Silence until the client closes the connection, bounded so a forgotten client costs nothing."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit_s
    while loop.time() < deadline:
        transport = request.transport
        if transport is None or transport.is_closing():
            return
        await asyncio.sleep(min(0.05, max(0.0, deadline - loop.time())))


def reset_connection(request: web.Request) -> None:
    """Close with a TCP RST (SO_LINGER 0), the way a crashed worker or a killed pod ends a stream."""
    transport = request.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


