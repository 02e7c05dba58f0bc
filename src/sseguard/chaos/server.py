"""The chaos upstream on aiohttp.web: every registered protocol, breaking on demand.

aiohttp.web because it is the fastest server measured on this machine kind for many concurrent
streams (``docs/design/http.md``): the chaos server must never be what a probe or proxy benchmark measures.
The handler decides (``decide``), generates (``generate``), encodes every byte up front (``frames``), and
then only sleeps and writes.

Headers every response carries: ``x-request-id``, ``traceparent`` and ``x-trace-id`` (an incoming W3C
``traceparent`` keeps its trace id), ``server: sseguard-chaos/<version>``, ``x-sseguard-fault`` (the
injected fault or ``none``), ``x-sseguard-route`` (``default`` or a routed pattern's route) and
``x-sseguard-inflight`` (requests in flight when this one arrived, itself included). A request header
``x-sseguard-inject: <fault>|none`` forces the fault of that one request.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import os
import re
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import msgspec
from aiohttp import web

from sseguard import __version__
from sseguard._serve import (
    Listening,
    Worker,
    serve_app,
    serve_in_worker,
    serve_until_signalled,
    serve_workers,
)
from sseguard.chaos.cache import PrefixCache
from sseguard.chaos.config import ChaosConfig
from sseguard.chaos.conversations import (
    ConversationLog,
    ServedConversation,
    first_answer_decision,
    settle,
)
from sseguard.chaos.decide import applicable, decide
from sseguard.chaos.faults import Decision, Fault
from sseguard.chaos.frames import End, Plan, ResponseIds, completion_plan
from sseguard.chaos.generate import GeneratedAnswer, make_answer
from sseguard.chaos.registry import writers
from sseguard.chaos.request import BadRequest, ChatRequest
from sseguard.chaos.writer import Writer
from sseguard.core.contract import Framing, Protocol, Route, protocol
from sseguard.core.verdict import Api

SERVER_HEADER = f"sseguard-chaos/{__version__}"
FAULT_HEADER = "x-sseguard-fault"
ROUTE_HEADER = "x-sseguard-route"
INFLIGHT_HEADER = "x-sseguard-inflight"
INJECT_HEADER = "x-sseguard-inject"
_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$")
_JSON_TYPE = "application/json; charset=UTF-8"
_SSE_HEADERS = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no"}
_HTTP_ERROR_MESSAGES = {
    429: "Rate limit reached for requests. Please try again in 1s.",
    500: "The server had an error while processing your request.",
    503: "The engine is currently overloaded, please try again later.",
}


@dataclass(slots=True)
class ChaosStats:
    """Live counters of one server; ``faults`` counts header values (``none`` included)."""

    requests: int = 0
    apis: Counter[str] = field(default_factory=Counter)  # requests per protocol (chat, responses, …)
    streams: int = 0
    inflight: int = 0
    max_inflight: int = 0
    frames: int = 0  # SSE frames written
    bad_requests: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)  # drawn, but the request could not carry it
    sources: Counter[str] = field(default_factory=Counter)  # base | load | routed | window | api | forced
    routes: Counter[str] = field(default_factory=Counter)
    statuses: Counter[int] = field(default_factory=Counter)
    retrievals: int = 0  # reads of a stored (background) response, streamed or not
    cancels: int = 0  # background responses cancelled (POST …/responses/{id}/cancel)
    conversations: int = 0  # conversations seen by ``first_answer`` (``chaos.conversations``)

    def injected(self, fault: Fault | str) -> int:
        return self.faults[str(fault)]

    def to_dict(self) -> dict[str, Any]:
        return {"requests": self.requests, "apis": dict(self.apis), "streams": self.streams,
                "retrievals": self.retrievals, "cancels": self.cancels,
                "conversations": self.conversations,
                "inflight": self.inflight,
                "max_inflight": self.max_inflight, "frames": self.frames,
                "bad_requests": self.bad_requests, "faults": dict(self.faults),
                "skipped": dict(self.skipped), "sources": dict(self.sources),
                "routes": dict(self.routes),
                "statuses": {str(k): v for k, v in self.statuses.items()}}


@dataclass(slots=True)
class ChaosState:
    config: ChaosConfig
    clock: Callable[[], float]
    started: float
    stats: ChaosStats = field(default_factory=ChaosStats)
    #: The next request's number, which seeds its decision and ids. With N worker processes, worker k
    #: numbers its requests k, k + N, k + 2N, …: every number is drawn once, by one worker.
    counter: int = 0
    step: int = 1
    #: The prefix cache (``chaos.cache``): which requests hit it, for the cache pattern and usage.
    cache: PrefixCache = field(default_factory=PrefixCache)
    #: Background (Responses) streams kept for reading again, by response id, oldest first.
    stored: dict[str, StoredStream] = field(default_factory=dict)
    #: Background responses cancelled (``POST …/responses/{id}/cancel``), by response id.
    cancelled: set[str] = field(default_factory=set)
    #: The conversations ``first_answer`` has seen: which one's first answer broke.
    conversations: ConversationLog = field(default_factory=ConversationLog)
    #: The load the patterns see, given the requests in flight measured (``run_chaos(load=)``).
    load: Callable[[int], int] | None = None

    def arrive(self, api: Api) -> tuple[int, int]:
        """Count a request of ``api`` in: its draw counter and the requests in flight with it. The
        caller takes it out again (``stats.inflight -= 1``) when its answer is over."""
        stats = self.stats
        counter = self.counter
        self.counter += self.step
        stats.requests += 1
        stats.apis[str(api)] += 1
        stats.inflight += 1
        stats.max_inflight = max(stats.max_inflight, stats.inflight)
        return counter, stats.inflight

    def load_of(self, inflight: int) -> int:
        """The load the load and cache patterns act on: the measured figure, unless the app was
        given its own signal."""
        return inflight if self.load is None else self.load(inflight)


@dataclass(frozen=True, slots=True)
class StoredStream:
    """What a background response's stream is made of: read again, it is made again, exactly."""

    writer: Writer
    req: ChatRequest
    decision: Decision
    ids: ResponseIds
    answers: list[GeneratedAnswer]


#: Background streams one chaos process keeps; the oldest goes first (a bounded test upstream).
STORED_MAX = 4096
#: The faults a read of a stored stream can carry: the ways a stream ends, not what it holds (that
#: was fixed when the answer was made).
RESUME_FAULTS = frozenset({Fault.TRUNCATED, Fault.CUT_MID_FRAME, Fault.TRANSPORT_ERROR,
                           Fault.ERROR_EVENT, Fault.STALLED, Fault.HTTP_ERROR})


STATE = web.AppKey("sseguard_chaos", ChaosState)


def make_app(config: ChaosConfig | None = None, *,
             clock: Callable[[], float] = time.monotonic,
             setup: Callable[[web.Application], None] | None = None,
             worker: int = 0, workers: int = 1,
             load: Callable[[int], int] | None = None) -> web.Application:
    """The chaos server as an ``aiohttp.web.Application``; ``clock`` drives time windows (tests),
    ``load`` the load its load and cache patterns see, given the requests in flight it measured
    (``sseguard demo`` gives the load its sweep asks for, so the patterns do not hang on how fast
    the machine reaches it).

    ``setup`` gets the app before it is frozen: the pytest plugin (``sseguard.testing``) adds the
    middleware that injects faults and the signal that logs what was served, so the server itself
    knows nothing of tests. ``worker`` of ``workers``: this process's share of the request numbers
    (``--workers``).
    """
    app = web.Application(client_max_size=32 * 1024 * 1024)
    app[STATE] = ChaosState(config or ChaosConfig(), clock, clock(), counter=worker, step=workers,
                            load=load)
    for writer in writers():
        proto = protocol(writer.api)
        for route in proto.routes:
            for mount in proto.mounts:
                app.router.add_post(f"{mount}{route.path}", _handler(writer, proto, route))
            for mount, parse in writer.extra_mounts:
                app.router.add_post(f"{mount}{route.path}",
                                    _handler(replace(writer, parse=parse), proto, route))
            if writer.resume is not None:
                for mount in proto.mounts:
                    app.router.add_get(f"{mount}{route.path}/{{response_id}}", _retrieve)
                    app.router.add_post(f"{mount}{route.path}/{{response_id}}/cancel", _cancel)
    app.router.add_get("/v1/models", _models)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/chaos/stats", stats_json)
    app.router.add_get("/chaos/conversations", conversations_log)
    if setup is not None:
        setup(app)
    return app


def _ids(seed: int, counter: int, prefix: str, traceparent: str | None) -> ResponseIds:
    digest = hashlib.blake2b(f"{seed}:{counter}".encode(), digest_size=32).hexdigest()
    match = _TRACEPARENT.match(traceparent or "")
    trace_id = match.group(1) if match else digest[32:64]
    return ResponseIds(response_id=f"{prefix}{int(digest[:15], 16)}",
                       request_id=f"req_{digest[15:39]}", trace_id=trace_id,
                       span_id=digest[:16], created=int(time.time()))


def _headers(ids: ResponseIds, decision: Decision, inflight: int) -> dict[str, str]:
    return {"Server": SERVER_HEADER, "x-request-id": ids.request_id,
            "traceparent": f"00-{ids.trace_id}-{ids.span_id}-01", "x-trace-id": ids.trace_id,
            FAULT_HEADER: decision.header, ROUTE_HEADER: decision.route,
            INFLIGHT_HEADER: str(inflight)}


def _json(status: int, obj: Any, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(status=status, body=msgspec.json.encode(obj),
                        content_type="application/json", headers=headers)


def _handler(writer: Writer, proto: Protocol, route: Route
             ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handle(request: web.Request) -> web.StreamResponse:
        state = request.app[STATE]
        counter, inflight = state.arrive(writer.api)
        try:
            return await _serve(request, writer, proto, route, state, counter, inflight)
        finally:
            state.stats.inflight -= 1

    return handle


async def _serve(request: web.Request, writer: Writer, proto: Protocol, route: Route,
                 state: ChaosState, counter: int, inflight: int) -> web.StreamResponse:
    config, stats = state.config, state.stats
    body = await request.read()
    forced_raw = request.headers.get(INJECT_HEADER)
    try:
        forced = forced_fault(forced_raw)
        req = from_route(writer.parse(body), route, request.match_info,
                          proto.framing_for(request.query))
    except BadRequest as exc:
        stats.bad_requests += 1
        stats.statuses[400] += 1
        ids = _ids(config.seed, counter, writer.id_prefix or config.id_prefix,
                   request.headers.get("traceparent"))
        return _json(400, writer.bad_request_body(exc), _headers(ids, Decision(None), inflight))
    cached = state.cache.lookup(req)
    if cached:
        req = replace(req, cached_words=cached)
    decision, conversation = draw(state, req, counter, inflight, api=writer.api,
                                  forced=forced, forced_raw=forced_raw, cached=cached > 0,
                                  unsupported=writer.cannot_carry(stream=req.stream, req=req))
    # A routed prefix shows in every protocol's ids; the default route keeps the protocol's own.
    prefix = decision.id_prefix
    if decision.route == "default" and writer.id_prefix is not None:
        prefix = writer.id_prefix
    ids = _ids(config.seed, counter, prefix, request.headers.get("traceparent"))
    headers = _headers(ids, decision, inflight)
    if decision.fault is Fault.HTTP_ERROR:
        statuses = config.options.http_statuses
        status = statuses[decision.variant % len(statuses)]
        if status == 429:
            headers["Retry-After"] = "1"
        stats.statuses[status] += 1
        message = _HTTP_ERROR_MESSAGES.get(status, f"upstream error {status}")
        return _json(status, proto.status_error(status, message), headers)
    stats.statuses[200] += 1
    answers = [make_answer(config, req, decision.fault, i) for i in range(req.n)]
    if conversation is not None and req.continued is None:
        conversation.last_text = "".join(answers[0].content)
    if req.stream:
        stats.streams += 1
        plan = writer.stream_plan(config, req, decision, ids, answers)
        if req.background and writer.resume is not None:
            _store(state, StoredStream(writer, req, decision, ids, answers))
        framed = {**_SSE_HEADERS, "Content-Type": _JSON_TYPE} \
            if req.framing is not Framing.SSE else _SSE_HEADERS
        response = web.StreamResponse(status=200, headers={**headers, **framed})
        await response.prepare(request)
        return await _play(request, response, plan, state)
    payload = writer.body(config, req, decision, ids, answers)
    tokens = max(a.completion_tokens for a in answers)
    plan = completion_plan(config, decision, payload, tokens)
    response = web.StreamResponse(status=200, headers=headers)
    response.content_type = "application/json"
    response.content_length = len(payload)
    return await _play(request, response, plan, state)


def draw(state: ChaosState, req: ChatRequest, counter: int, inflight: int, *, api: Api,
         forced: Fault | None, forced_raw: str | None, cached: bool,
         unsupported: frozenset[Fault]) -> tuple[Decision, ServedConversation | None]:
    """The fault request ``counter`` gets, counted in the statistics, and its conversation (under
    ``first_answer``): the seeded draw, or a forced fault, less what the request cannot carry. The
    generated server and ``chaos --upstream`` draw alike, so one seed replays either."""
    config, stats = state.config, state.stats
    conversation = None
    if config.first_answer is not None and forced_raw is None:
        # Each conversation's first answer breaks, nothing else does (``chaos.conversations``).
        _, conversation = state.conversations.arrive(req)
        stats.conversations = len(state.conversations.seen)
        fault, at = first_answer_decision(config.first_answer, conversation, req)
        drawn = decide(config, counter, forced=fault, force=True, api=str(api))
        drawn = replace(drawn, at=at, source="first_answer" if fault is not None else "none")
    else:
        drawn = decide(config, counter, inflight=state.load_of(inflight),
                       elapsed_s=state.clock() - state.started, forced=forced,
                       force=forced_raw is not None, api=str(api), cached=cached)
    decision = applicable(drawn, stream=req.stream, tools_offered=req.tools_offered,
                          typed_tool=req.typed_tool, include_usage=req.include_usage,
                          unsupported=unsupported)
    if conversation is not None:
        settle(decision, conversation)
    if decision.fault is None and drawn.fault is not None:
        stats.skipped[str(drawn.fault)] += 1
    stats.faults[decision.header] += 1
    stats.sources[decision.source] += 1
    stats.routes[decision.route] += 1
    return decision, conversation


def _store(state: ChaosState, stream: StoredStream) -> None:
    stored = state.stored
    stored[stream.ids.response_id] = stream
    while len(stored) > STORED_MAX:
        oldest = next(iter(stored))
        del stored[oldest]
        state.cancelled.discard(oldest)


async def _retrieve(request: web.Request) -> web.StreamResponse:
    """``GET …/responses/{id}?stream=true&starting_after=N``: a background response's stream again,
    from the event after N (OpenAI's own way to resume a broken stream). The read draws a fault of
    its own, as any request does, but only one that ends a stream (``RESUME_FAULTS``)."""
    state = request.app[STATE]
    config, stats = state.config, state.stats
    counter = state.counter
    state.counter += state.step
    stats.requests += 1
    stats.retrievals += 1
    stored = state.stored.get(request.match_info["response_id"])
    query = request.query
    if stored is None:
        stats.statuses[404] += 1
        return _json(404, {"error": {"message": "No response found with id "
                                     f"'{request.match_info['response_id']}'.",
                                     "type": "invalid_request_error", "param": None,
                                     "code": "not_found"}})
    try:
        after = int(query.get("starting_after", "-1"))
    except ValueError:
        stats.statuses[400] += 1
        return _json(400, {"error": {"message": "Invalid value for 'starting_after': expected an "
                                     "integer.", "type": "invalid_request_error",
                                     "param": "starting_after", "code": None}})
    if query.get("stream", "false").lower() != "true":
        stats.statuses[200] += 1
        return web.Response(body=_stored_body(state, stored), content_type="application/json")
    stats.inflight += 1
    try:
        # Under ``first_answer`` a reading is a later request of the conversation: whole.
        drawn = decide(config, counter, inflight=state.load_of(stats.inflight),
                       elapsed_s=state.clock() - state.started, forced=None,
                       force=config.first_answer is not None, api=str(stored.writer.api))
        reading = drawn if drawn.fault in RESUME_FAULTS else Decision(None)
        if reading.fault is None and drawn.fault is not None:
            stats.skipped[str(drawn.fault)] += 1
        stats.faults[reading.header] += 1
        headers = _headers(stored.ids, reading, stats.inflight)
        if reading.fault is Fault.HTTP_ERROR:
            status = config.options.http_statuses[reading.variant % len(config.options.http_statuses)]
            stats.statuses[status] += 1
            message = _HTTP_ERROR_MESSAGES.get(status, f"upstream error {status}")
            return _json(status, protocol(stored.writer.api).status_error(status, message), headers)
        stats.statuses[200] += 1
        stats.streams += 1
        assert stored.writer.resume is not None
        plan = stored.writer.resume(config, stored.req, stored.decision, reading, stored.ids,
                                    stored.answers, after)
        response = web.StreamResponse(status=200, headers={**headers, **_SSE_HEADERS})
        await response.prepare(request)
        return await _play(request, response, plan, state)
    finally:
        stats.inflight -= 1


def _stored_body(state: ChaosState, stored: StoredStream) -> bytes:
    """A stored response as one object; a cancelled one says ``"status": "cancelled"``."""
    body = stored.writer.body(state.config, stored.req, stored.decision, stored.ids, stored.answers)
    if stored.ids.response_id not in state.cancelled:
        return body
    obj = msgspec.json.decode(body)
    obj["status"] = "cancelled"
    return msgspec.json.encode(obj)


async def _cancel(request: web.Request) -> web.Response:
    """``POST …/responses/{id}/cancel``: stop a background response (OpenAI's own endpoint). The
    response's status becomes ``cancelled``; cancelling it again answers the same. Chaos made the
    answer up front, so nothing is left to stop: the count (``cancels``) is what a test reads."""
    state = request.app[STATE]
    stats = state.stats
    rid = request.match_info["response_id"]
    stored = state.stored.get(rid)
    if stored is None:
        stats.statuses[404] += 1
        return _json(404, {"error": {"message": f"No response found with id '{rid}'.",
                                     "type": "invalid_request_error", "param": None,
                                     "code": "not_found"}})
    if rid not in state.cancelled:
        state.cancelled.add(rid)
        stats.cancels += 1
    stats.statuses[200] += 1
    return web.Response(body=_stored_body(state, stored), content_type="application/json",
                        headers={"Server": SERVER_HEADER})


def from_route(req: ChatRequest, route: Route, params: Mapping[str, str], framing: Framing
                ) -> ChatRequest:
    """What the URL says wins over the body: streaming chosen by the route, the model in the path,
    the framing asked by the query string (``?alt=sse``)."""
    if framing is not req.framing:
        req = replace(req, framing=framing)
    if route.streams is not None and route.streams != req.stream:
        req = replace(req, stream=route.streams)
    model = params.get("model")
    return replace(req, model=model) if model is not None and model != req.model else req


def forced_fault(raw: str | None) -> Fault | None:
    if raw is None or raw.strip() == "none":
        return None
    try:
        return Fault(raw.strip())
    except ValueError:
        raise BadRequest(f"{INJECT_HEADER}: unknown fault {raw.strip()!r}", INJECT_HEADER) from None


async def _play(request: web.Request, response: web.StreamResponse, plan: Plan,
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


async def _models(request: web.Request) -> web.Response:
    config = request.app[STATE].config
    return _json(200, {"object": "list", "data": [
        {"id": config.model, "object": "model", "created": 0, "owned_by": "sseguard-chaos"}]},
        {"Server": SERVER_HEADER})


async def healthz(request: web.Request) -> web.Response:
    return _json(200, {"status": "ok", "pid": os.getpid()}, {"Server": SERVER_HEADER})


async def stats_json(request: web.Request) -> web.Response:
    return _json(200, request.app[STATE].stats.to_dict(), {"Server": SERVER_HEADER})


async def conversations_log(request: web.Request) -> web.Response:
    """``first_answer``'s log: per conversation, its requests, the fault its first answer got and
    the text of its latest answer, whole."""
    return _json(200, request.app[STATE].conversations.to_dict(), {"Server": SERVER_HEADER})


# ── running it ───────────────────────────────────────────────────────────────────────────────────


@dataclass(slots=True)
class RunningChaos(Listening):
    """What a running chaos server of either kind (answering, or relaying with faults) holds: its
    settings, its counters and its aiohttp app."""

    config: ChaosConfig
    stats: ChaosStats
    app: web.Application


@dataclass(slots=True)
class ChaosServer(RunningChaos):
    """A running chaos server: ``url`` is the OpenAI base URL (``http://127.0.0.1:PORT/v1``)."""

    def url_for(self, api: str | Api, *, model: str | None = None) -> str:
        """The stream URL of one protocol (its first route, the model filled in where it is in the
        path)."""
        return f"{self.url}{protocol(api).routes[0].fill(model=model or self.config.model)}"

    @property
    def chat_url(self) -> str:
        return self.url_for(Api.CHAT)

    @property
    def responses_url(self) -> str:
        return self.url_for(Api.RESPONSES)

    @property
    def messages_url(self) -> str:
        return self.url_for(Api.MESSAGES)


@contextlib.asynccontextmanager
async def run_chaos(config: ChaosConfig | None = None, host: str = "127.0.0.1", port: int = 0, *,
                    clock: Callable[[], float] = time.monotonic, backlog: int = 4096,
                    setup: Callable[[web.Application], None] | None = None,
                    worker: Worker | None = None,
                    load: Callable[[int], int] | None = None) -> AsyncIterator[ChaosServer]:
    """Serve on ``host:port`` (0 = a free port) for the duration of the block, in this event loop;
    ``worker``: one of several processes sharing the port (``serve_blocking(workers=N)``);
    ``clock`` and ``load`` as ``make_app``'s."""
    worker = worker or Worker(0, 1, host, port)
    app = make_app(config, clock=clock, setup=setup, worker=worker.index, workers=worker.count,
                   load=load)
    # Request bodies as sent: a body in a content coding is no JSON to this server (a 400), never
    # a decoding failure of the HTTP layer that resets the connection.
    async with serve_app(app, host, port, backlog=backlog, shutdown_timeout=1.0,
                         reuse_port=worker.reuse_port, auto_decompress=False) as bound:
        state = app[STATE]
        yield ChaosServer(host, bound, state.config, state.stats, app)


@contextlib.contextmanager
def run_chaos_in_thread(config: ChaosConfig | None = None, host: str = "127.0.0.1",
                        port: int = 0, *, setup: Callable[[web.Application], None] | None = None,
                        ) -> Iterator[ChaosServer]:
    """``run_chaos`` on its own event loop in a daemon thread, for synchronous callers and tests."""
    ready = threading.Event()
    box: dict[str, Any] = {}
    loop = asyncio.new_event_loop()

    async def main() -> None:
        stop = asyncio.Event()
        box["stop"] = stop
        async with run_chaos(config, host, port, setup=setup) as server:
            box["server"] = server
            ready.set()
            await stop.wait()

    def target() -> None:
        try:
            loop.run_until_complete(main())
        except BaseException as exc:  # handed to the caller's thread below
            box["error"] = exc
        finally:
            ready.set()
            loop.close()

    thread = threading.Thread(target=target, name="sseguard-chaos", daemon=True)
    thread.start()
    ready.wait(30)
    if "server" not in box:
        thread.join(5)
        raise box.get("error") or RuntimeError("the chaos server did not start")
    try:
        yield box["server"]
    finally:
        loop.call_soon_threadsafe(box["stop"].set)
        thread.join(10)


async def serve(config: ChaosConfig, host: str, port: int,
                on_ready: Callable[[ChaosServer], None], *, worker: Worker | None = None) -> None:
    """Serve until SIGTERM or SIGINT (Ctrl-C); ``on_ready`` gets the server once it listens."""
    await serve_until_signalled(run_chaos(config, host, port, worker=worker), on_ready)


def serve_blocking(config: ChaosConfig, host: str, port: int,
                   on_ready: Callable[[Listening], None], *, workers: int = 1) -> int:
    """``serve`` on uvloop when installed, in ``workers`` processes on one port, until Ctrl-C or
    SIGTERM; both end it cleanly. Returns the exit status (``sseguard._serve.serve_workers``)."""
    return serve_workers(workers, host, port, functools.partial(_serve_worker, config), on_ready)


def _serve_worker(config: ChaosConfig, worker: Worker, ready: Callable[[int], None]) -> None:
    serve_in_worker(lambda: run_chaos(config, worker.host, worker.port, worker=worker), ready)


__all__ = ["ChaosServer", "ChaosStats", "make_app", "run_chaos",
           "run_chaos_in_thread", "serve", "serve_blocking"]
