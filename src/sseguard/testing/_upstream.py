"""The chaos upstream as a test fixture: one server per test, faults queued by the test, requests logged.

The server runs on its own event loop in a thread (``run_chaos_in_thread``), so the code under test
talks real HTTP to it from a sync test, an async test, or a subprocess alike. The test side and the
server side share two things only, each behind a lock: the queue of injections (consumed by the
server's middleware, which forces a fault through the ``x-sseguard-inject`` header exactly as a client
could) and the log of served requests (appended when the response headers go out, so the entry exists
before the client can read a byte of the body).
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import msgspec
from aiohttp import web
from aiohttp.typedefs import Handler

from sseguard.chaos.config import ChaosConfig, parse_dialect, parse_fault_name
from sseguard.chaos.responding import FAULT_HEADER, INJECT_HEADER
from sseguard.chaos.server import ChaosServer, run_chaos_in_thread
from sseguard.chaos.state import STATE, ChaosStats
from sseguard.core.contract import api_for_path, protocol, protocol_for_path
from sseguard.core.errors import UsageError
from sseguard.core.verdict import Api

_BODY = "sseguard.testing.body"  # request-state key: the parsed request body, set by the middleware


@dataclass(frozen=True, slots=True)
class ServedRequest:
    """One request the upstream answered: what came in and which fault (if any) went out."""

    method: str
    path: str
    api: str | None  # the protocol (an ``Api`` value), or None for any other path
    status: int
    fault: str | None  # the injected fault's name (x-sseguard-fault), None when it served a healthy answer
    body: Any  # the JSON request body (None when there was none or it was not JSON)

    @property
    def stream(self) -> bool:
        """Whether a stream was asked for: by the path where the protocol's route decides, else by
        the body's stream field."""
        proto = protocol_for_path(self.path)
        route = proto.route_for(self.path) if proto is not None else None
        if route is not None and route.streams is not None:
            return route.streams
        field = proto.stream_field if proto is not None else "stream"
        return isinstance(self.body, dict) and field is not None and self.body.get(field) is True


@dataclass(slots=True)
class _Injection:
    fault: str
    remaining: int
    api: Api | None


class ChaosUpstream:
    """A running chaos upstream owned by one test. Build it with ``ChaosUpstream.running(config)``.

    ``base_url`` is the OpenAI-style base (``http://127.0.0.1:PORT/v1``) for the openai SDK and
    for Anthropic-compatible clients alike (the anthropic SDK appends ``/v1/messages`` to
    ``root_url``).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: deque[_Injection] = deque()
        self._served: list[ServedRequest] = []
        self._server: ChaosServer | None = None

    # ── what a test uses ─────────────────────────────────────────────────────────────────────────
    @property
    def base_url(self) -> str:
        return self._running.url

    @property
    def root_url(self) -> str:
        """The server root without ``/v1`` (the anthropic SDK's ``base_url``)."""
        return self._running.root

    @property
    def stats(self) -> ChaosStats:
        return self._running.stats

    @property
    def requests(self) -> list[ServedRequest]:
        """What was served so far, in the order the responses started."""
        with self._lock:
            return list(self._served)

    @property
    def pending(self) -> int:
        """Injections queued and not yet used by a request."""
        with self._lock:
            return sum(i.remaining for i in self._queue)

    def inject(self, fault: str, *, times: int = 1, api: str | None = None) -> None:
        """Make the next ``times`` protocol requests (of ``api`` only, when given) end with ``fault``.

        ``fault`` is any name of the chaos vocabulary (an ending such as ``truncated`` or a finding
        such as ``tool_args_invalid_json``); an unknown name is a ``ConfigError`` listing the known
        ones. Injections queue up in order. A request that cannot carry its fault (a stream-only fault
        on a non-streamed request) is served healthy and logged with ``fault=None``.
        """
        name = str(parse_fault_name(fault))
        if not isinstance(times, int) or isinstance(times, bool) or times < 1:
            raise UsageError(f"times must be a positive integer, not {times!r}")
        which = _parse_api(api)
        with self._lock:
            self._queue.append(_Injection(name, times, which))

    def dialect(self, *names: str) -> None:
        """Serve every following response in these dialects (none: back to the plain contract)."""
        dialects = frozenset(parse_dialect(n) for n in names)
        state = self._running.app[STATE]
        state.config = replace(state.config, dialects=dialects)

    # ── the server side ──────────────────────────────────────────────────────────────────────────
    @property
    def _running(self) -> ChaosServer:
        if self._server is None:
            raise UsageError("the chaos upstream is not running")
        return self._server

    def _take(self, api: Api) -> str | None:
        with self._lock:
            for injection in self._queue:
                if injection.api is None or injection.api is api:
                    injection.remaining -= 1
                    if injection.remaining == 0:
                        self._queue.remove(injection)
                    return injection.fault
        return None

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        api = api_for_path(request.path) if request.method == "POST" else None
        if api is not None and INJECT_HEADER not in request.headers:
            forced = self._take(api)
            if forced is not None:
                headers = request.headers.copy()
                headers[INJECT_HEADER] = forced
                request = request.clone(headers=headers)
        body: Any = None
        if request.can_read_body:
            # Read once here: aiohttp caches it, so the handler's own read() gets the same bytes.
            with contextlib.suppress(msgspec.DecodeError):
                body = msgspec.json.decode(await request.read())
        request[_BODY] = body
        return await handler(request)

    def _install(self, app: web.Application) -> None:
        app.middlewares.append(self._middleware)
        app.on_response_prepare.append(self._on_prepare)

    async def _on_prepare(self, request: web.Request, response: web.StreamResponse) -> None:
        fault = response.headers.get(FAULT_HEADER)
        api = api_for_path(request.path) if request.method == "POST" else None
        entry = ServedRequest(request.method, request.path, None if api is None else str(api),
                              response.status, None if fault in (None, "none") else fault,
                              request.get(_BODY))
        with self._lock:
            self._served.append(entry)

    @classmethod
    @contextlib.contextmanager
    def running(cls, config: ChaosConfig | None = None) -> Iterator[ChaosUpstream]:
        """Start a fresh upstream on a free loopback port; it stops (port and thread gone) on exit."""
        upstream = cls()
        with run_chaos_in_thread(config or ChaosConfig(), setup=upstream._install) as server:
            upstream._server = server
            try:
                yield upstream
            finally:
                upstream._server = None


def _parse_api(api: str | None) -> Api | None:
    return None if api is None else protocol(api).api
