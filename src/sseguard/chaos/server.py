"""The chaos upstream on aiohttp.web: every registered protocol, breaking on demand.

aiohttp.web because it is the fastest server measured on this machine kind for many concurrent
streams (``docs/design/http.md``): the chaos server must never be what a probe or proxy benchmark measures.
The handler decides (``decide``), generates (``generate``), encodes every byte up front (``frames``), and
then only sleeps and writes (``responding``, which also says the headers every response carries).
Its counters and state are ``state``'s, its background (Responses) streams ``background``'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from aiohttp import web

from sseguard._serve import (
    Listening,
    Worker,
    serve_app,
    serve_in_worker,
    serve_until_signalled,
    serve_workers,
)
from sseguard.chaos.background import cancel, retrieve, store_stream
from sseguard.chaos.config import ChaosConfig
from sseguard.chaos.conversations import ServedConversation, first_answer_decision, settle
from sseguard.chaos.decide import applicable, decide
from sseguard.chaos.faults import Decision, Fault
from sseguard.chaos.frames import completion_plan
from sseguard.chaos.generate import make_answer
from sseguard.chaos.registry import writers
from sseguard.chaos.request import BadRequest, ChatRequest
from sseguard.chaos.responding import (
    HTTP_ERROR_MESSAGES,
    INJECT_HEADER,
    SERVER_HEADER,
    SSE_HEADERS,
    json_response,
    play,
    response_headers,
    response_ids,
)
from sseguard.chaos.state import STATE, ChaosState, ChaosStats, StoredStream
from sseguard.chaos.writer import Writer
from sseguard.core.contract import Framing, Protocol, Route, protocol
from sseguard.core.verdict import Api

_JSON_TYPE = "application/json; charset=UTF-8"


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
                    app.router.add_get(f"{mount}{route.path}/{{response_id}}", retrieve)
                    app.router.add_post(f"{mount}{route.path}/{{response_id}}/cancel", cancel)
    app.router.add_get("/v1/models", _models)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/chaos/stats", stats_json)
    app.router.add_get("/chaos/conversations", conversations_log)
    if setup is not None:
        setup(app)
    return app


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
        ids = response_ids(config.seed, counter, writer.id_prefix or config.id_prefix,
                   request.headers.get("traceparent"))
        return json_response(400, writer.bad_request_body(exc),
                             response_headers(ids, Decision(None), inflight))
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
    ids = response_ids(config.seed, counter, prefix, request.headers.get("traceparent"))
    headers = response_headers(ids, decision, inflight)
    if decision.fault is Fault.HTTP_ERROR:
        statuses = config.options.http_statuses
        status = statuses[decision.variant % len(statuses)]
        if status == 429:
            headers["Retry-After"] = "1"
        stats.statuses[status] += 1
        message = HTTP_ERROR_MESSAGES.get(status, f"upstream error {status}")
        return json_response(status, proto.status_error(status, message), headers)
    stats.statuses[200] += 1
    answers = [make_answer(config, req, decision.fault, i) for i in range(req.n)]
    if conversation is not None and req.continued is None:
        conversation.last_text = "".join(answers[0].content)
    if req.stream:
        stats.streams += 1
        plan = writer.stream_plan(config, req, decision, ids, answers)
        if req.background and writer.resume is not None:
            store_stream(state, StoredStream(writer, req, decision, ids, answers))
        framed = {**SSE_HEADERS, "Content-Type": _JSON_TYPE} \
            if req.framing is not Framing.SSE else SSE_HEADERS
        response = web.StreamResponse(status=200, headers={**headers, **framed})
        await response.prepare(request)
        return await play(request, response, plan, state)
    payload = writer.body(config, req, decision, ids, answers)
    tokens = max(a.completion_tokens for a in answers)
    plan = completion_plan(config, decision, payload, tokens)
    response = web.StreamResponse(status=200, headers=headers)
    response.content_type = "application/json"
    response.content_length = len(payload)
    return await play(request, response, plan, state)


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


async def _models(request: web.Request) -> web.Response:
    config = request.app[STATE].config
    return json_response(200, {"object": "list", "data": [
        {"id": config.model, "object": "model", "created": 0, "owned_by": "sseguard-chaos"}]},
        {"Server": SERVER_HEADER})


async def healthz(request: web.Request) -> web.Response:
    return json_response(200, {"status": "ok", "pid": os.getpid()}, {"Server": SERVER_HEADER})


async def stats_json(request: web.Request) -> web.Response:
    return json_response(200, request.app[STATE].stats.to_dict(), {"Server": SERVER_HEADER})


async def conversations_log(request: web.Request) -> web.Response:
    """``first_answer``'s log: per conversation, its requests, the fault its first answer got and
    the text of its latest answer, whole."""
    return json_response(200, request.app[STATE].conversations.to_dict(), {"Server": SERVER_HEADER})


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
