"""Transports that make any httpx2-based SDK strict about how streams end.

The official SDKs end their stream loop quietly when the body simply stops, when it stops inside a
frame, on an ``event: error`` event, and when tool-call arguments are cut off; the caller then acts on
half an answer. These transports sit under the SDK's client and check every ``text/event-stream``
response of every registered protocol's streaming endpoints as the caller reads it, each with its
protocol's checker, told from the request path (``api_for_path``, by the protocols' routes); every
other request passes untouched. When the stream ends badly under the ``Policy`` they raise
``StreamEndedBadly`` (carrying the ``Verdict``), a subclass of ``httpx2.TransportError``. The policy is
``agents`` unless given: a finished answer (every choice has its ``finish_reason``; messages: a
``stop_reason``) that only lacks its sentinel (``no_done``) does not raise, as the SDKs themselves take
it; ``policy="strict"`` raises on it too::

    client = openai.OpenAI(http_client=httpx2.Client(transport=StrictTransport()))
    client = openai.AsyncOpenAI(http_client=httpx2.AsyncClient(transport=AsyncStrictTransport()))
    client = anthropic.Anthropic(http_client=httpx2.Client(transport=StrictTransport()))
    client = anthropic.AsyncAnthropic(http_client=httpx2.AsyncClient(transport=AsyncStrictTransport()))

The openai and anthropic (≥ 2.17) SDKs wrap it in their ``APIConnectionError`` (``__cause__`` is the
``StreamEndedBadly``, whose own ``__cause__`` is httpx2's error when the connection broke); google-genai
lets it through as it is. ``ended_badly(exc)`` finds it behind any of them.

When the verdict is made: at the protocol's end sentinel (``data: [DONE]``: the openai SDK stops
reading there, so a stream with ``[DONE]`` but no ``finish_reason`` must fail before it), at an error
event, at the end of the body, when the wrapped stream raises, or after ``stall_timeout`` seconds
without a byte. A stream the caller closes
before any of these is not judged: stopping early is the caller's choice. Nothing is buffered: each
chunk goes to the caller as it came, after the checker has seen it.

Legacy ``httpx`` (litellm, openai 2.x) gets the same transports from ``httpx_transport()`` and
``async_httpx_transport()``; httpx is imported only when one of them is called.
"""

from __future__ import annotations

import functools
import importlib
import logging
import time
import zlib
from collections.abc import AsyncIterator, Iterator
from typing import Any, NoReturn

import anyio
import httpx2
import msgspec

from sseguard.core.contract import Checker, Protocol, checker_for, protocol_for_path
from sseguard.core.errors import ConfigError, SSEGuardError
from sseguard.core.policy import AGENTS, STRICT, Policy
from sseguard.core.redact import redact_text
from sseguard.core.verdict import Verdict
from sseguard.telemetry.genai import Emitter, MeasuredCall, request_model

__all__ = ["AsyncStrictTransport", "StreamEndedBadly", "StrictTransport", "async_httpx_transport",
           "ended_badly", "httpx_transport"]

_log = logging.getLogger("sseguard.client")
_MESSAGE_DETAIL = 200
#: Content codings the checker can read through; a request asks for no others (see _limit_encodings).
_CODINGS = ("gzip", "x-gzip", "deflate", "identity")


class StreamEndedBadly(SSEGuardError, httpx2.TransportError):
    """A streamed response ended badly under the policy; ``.verdict`` says how and what was wrong."""

    def __init__(self, verdict: Verdict, *, policy: Policy = STRICT, request: Any = None) -> None:
        self.verdict = verdict
        self.policy = policy
        super().__init__(describe(verdict, policy), request=request)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.verdict.to_dict(), self.policy))


def ended_badly(exc: BaseException) -> StreamEndedBadly | None:
    """The ``StreamEndedBadly`` an SDK raised or wrapped (its ``__cause__`` chain), else ``None``."""
    seen: BaseException | None = exc
    while seen is not None and not isinstance(seen, StreamEndedBadly):
        seen = seen.__cause__
    return seen


def _rebuild(cls: type[StreamEndedBadly], verdict: dict[str, Any], policy: Policy) -> StreamEndedBadly:
    return cls(Verdict.from_dict(verdict), policy=policy)


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MESSAGE_DETAIL else text[:_MESSAGE_DETAIL] + "…"


def describe(verdict: Verdict, policy: Policy = STRICT) -> str:
    """One line: the ending, the error or first finding, and why the policy fails it."""
    parts = [f"stream ended badly: {verdict.ending}"]
    if verdict.error:
        parts.append(f" ({_clip(verdict.error)})")
    if verdict.findings:
        first = verdict.findings[0]
        parts.append(f"; first finding {first.kind}: {_clip(first.detail)}")
    failure = policy.failure(verdict)
    parts.append(f" [policy {policy.name}" + (f" fails {failure}" if failure else "") +
                 f"; {verdict.chunks} chunks, {verdict.bytes} bytes]")
    return redact_text("".join(parts))


# ── the checking shared by every transport ─────────────────────────────────────────────────────
class _Inflater:
    """Undoes gzip/deflate so the checker sees the body the caller will see."""

    def __init__(self, coding: str) -> None:
        self._raw_fallback = coding == "deflate"
        self._started = False
        # 32 + MAX_WBITS: accept a gzip or a zlib header, whichever came.
        self._obj = zlib.decompressobj(zlib.MAX_WBITS | 32)

    def feed(self, data: bytes) -> bytes:
        try:
            out = self._obj.decompress(data)
        except zlib.error:
            if not (self._raw_fallback and not self._started):
                raise
            # Some servers send raw deflate without the zlib header the RFC asks for.
            self._obj = zlib.decompressobj(-zlib.MAX_WBITS)
            out = self._obj.decompress(data)
        self._started = True
        return out

    def flush(self) -> bytes:
        return self._obj.flush()


class _Guard:
    """Feeds one response's bytes to its protocol's checker; raises once the stream is over and bad."""

    def __init__(self, *, checker: Checker, policy: Policy,
                 stall_timeout: float | None, inflater: _Inflater | None,
                 error_cls: type[StreamEndedBadly], timeout_types: tuple[type[BaseException], ...],
                 request: Any, traced: _Traced | None = None) -> None:
        self.checker = checker
        self.policy = policy
        self.stall_timeout = stall_timeout
        self.verdict: Verdict | None = None
        self._inflater = inflater
        self._error_cls = error_cls
        self._timeout_types = timeout_types
        self._request = request
        self._last_byte = time.monotonic()
        self._traced = traced

    @property
    def settled(self) -> bool:
        return self.verdict is not None

    def feed(self, chunk: bytes) -> None:
        """Check one chunk before the caller gets it; raises if it ends the stream badly."""
        if self.verdict is not None or not chunk:
            return
        now = time.monotonic()
        if self.stall_timeout is not None and now - self._last_byte > self.stall_timeout:
            # The wrapped transport ignored the read timeout: the gap still happened.
            self._settle(stalled=True)
            return
        self._last_byte = now
        if self._inflater is not None:
            try:
                chunk = self._inflater.feed(chunk)
            except zlib.error as exc:
                self._settle(transport_error=f"undecodable compressed body: {exc}")
                return
        events = self.checker.feed(chunk)
        traced = self._traced
        if traced is not None and traced.ttfc is None and self.checker.saw_content:
            traced.ttfc = time.perf_counter() - traced.t0
        # The openai SDK stops reading at data: [DONE] (chat and responses alike), and an error event
        # ends the stream whatever follows. Otherwise the SDKs read to the end of the body.
        if self.checker.error_message is not None or any(e.data == "[DONE]" for e in events):
            self._settle()

    def end(self) -> None:
        """The wrapped stream is exhausted."""
        if self.verdict is None and self._inflater is not None:
            try:
                self.checker.feed(self._inflater.flush())
            except zlib.error as exc:
                self._settle(transport_error=f"undecodable compressed body: {exc}")
                return
        self._settle()

    def fail(self, exc: BaseException) -> NoReturn:
        """The wrapped stream raised ``exc``: judge the stream, then raise the verdict or ``exc``."""
        if self.verdict is None:
            stalled = self.stall_timeout is not None and isinstance(exc, self._timeout_types)
            self._settle(transport_error=None if stalled else _one_line(exc), stalled=stalled, cause=exc)
        raise exc  # the policy tolerates this ending: the caller gets the error it would have had

    def _settle(self, *, transport_error: str | None = None, stalled: bool = False,
                cause: BaseException | None = None) -> None:
        if self.verdict is not None:
            return
        verdict = self.checker.close(transport_error=transport_error, stalled=stalled)
        self.verdict = verdict
        if self._traced is not None:
            try:
                self._traced.emit(verdict, self.policy)
            except Exception:  # telemetry must never change what the caller gets
                _log.exception("could not emit the telemetry of a stream")
        if not self.policy.passes(verdict):
            raise self._error_cls(verdict, policy=self.policy, request=self._request) from cause


class _Traced:
    """One checked stream's span, begun when its response came (``otel=True``): where it started,
    under which of the caller's spans, and its time to the first chunk."""

    __slots__ = ("emitter", "model", "parent", "port", "server", "start_ns", "t0", "ttfc")

    def __init__(self, emitter: Emitter, parent: object | None, model: str | None, request: Any) -> None:
        self.emitter = emitter
        self.parent = parent
        self.model = model
        self.server: str | None = request.url.host or None
        self.port: int | None = request.url.port
        # The request left before its response came: its span starts at the request's own time.
        started = request.extensions.get("sseguard_started")
        self.t0: float = started[0] if started else time.perf_counter()
        self.start_ns: int = started[1] if started else time.time_ns()
        self.ttfc: float | None = None

    def emit(self, verdict: Verdict, policy: Policy) -> None:
        self.emitter.emit(MeasuredCall(
            verdict=verdict, policy=policy, start_ns=self.start_ns,
            duration_s=time.perf_counter() - self.t0, request_model=self.model, ttfc_s=self.ttfc,
            server_address=self.server, server_port=self.port), self.parent)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _is_stream(headers: Any, proto: Protocol, path: str) -> bool:
    """Whether the response is framed as one of the protocol's streams (``Protocol.framings``)."""
    media = str(headers.get("content-type", "")).split(";", 1)[0].strip().lower()
    route = proto.route_for(path)
    return any(media == f.media_type and f.is_stream(route) for f in proto.framings)


def _request_json(request: Any, not_read: tuple[type[BaseException], ...]) -> dict[str, Any] | None:
    """The request body as JSON, when it is an object (tools and stream options live there)."""
    try:
        content = request.content
    except not_read:
        return None
    if not isinstance(content, bytes) or content.lstrip()[:1] != b"{":
        return None
    try:
        body = msgspec.json.decode(content)
    except msgspec.DecodeError:
        return None
    return body if isinstance(body, dict) else None


def _limit_encodings(request: Any) -> None:
    """Ask only for codings the checker can read (br/zstd would leave the stream unchecked)."""
    accepted = request.headers.get("accept-encoding")
    if not accepted:
        return
    tokens = (t.strip() for t in accepted.split(","))
    kept = [t for t in tokens if t.split(";")[0].strip().lower() in _CODINGS]
    request.headers["accept-encoding"] = ", ".join(kept) if kept else "identity"


def _inflater_for(headers: Any) -> tuple[bool, _Inflater | None]:
    """Whether the checker can read the body's coding, and the inflater it needs (None: identity)."""
    codings = [c.strip().lower() for c in str(headers.get("content-encoding", "")).split(",") if c.strip()]
    codings = [c for c in codings if c != "identity"]
    if not codings:
        return True, None
    if len(codings) == 1 and codings[0] in ("gzip", "x-gzip", "deflate"):
        return True, _Inflater(codings[0])
    return False, None


def _with_stall_timeout(request: Any, stall_timeout: float | None) -> None:
    """Make the wrapped transport's read timeout no longer than the stall timeout.

    httpx's transports raise a read timeout when no byte arrives in time, also between body chunks,
    which is exactly a stall; the guard then reports it as ``stalled``. This also bounds the wait
    for the response headers.
    """
    if stall_timeout is None:
        return
    timeouts = dict(request.extensions.get("timeout") or {})
    read = timeouts.get("read")
    if read is None or read > stall_timeout:
        timeouts["read"] = stall_timeout
        request.extensions = {**request.extensions, "timeout": timeouts}


class _Options:
    """What a strict transport is configured with, validated once."""

    def __init__(self, policy: Policy | str, stall_timeout: float | None, request_aware: bool,
                 otel: bool | Emitter = False) -> None:
        self.policy = Policy.from_spec(policy) if isinstance(policy, str) else policy
        if stall_timeout is not None and not stall_timeout > 0:
            raise ConfigError(f"stall_timeout must be a positive number of seconds, not {stall_timeout!r}")
        self.stall_timeout = stall_timeout
        self.request_aware = request_aware
        self.emitter: Emitter | None = None
        if otel is True:
            from sseguard import telemetry

            # The application's own (global) providers: its exporters, its resource.
            self.emitter = telemetry.load().Telemetry()
        elif otel is not False:
            self.emitter = otel

    def started(self, request: Any) -> None:
        """Note when ``request`` left and under which of the caller's spans (``otel``)."""
        if self.emitter is not None:
            request.extensions = {**request.extensions,
                                  "sseguard_started": (time.perf_counter(), time.time_ns(),
                                                       self.emitter.current())}

    def guard(self, request: Any, response: Any, *, error_cls: type[StreamEndedBadly],
              timeout_types: tuple[type[BaseException], ...],
              not_read: tuple[type[BaseException], ...]) -> _Guard | None:
        """A guard for this response, or None when it is not a stream to check."""
        if not 200 <= response.status_code < 300 or request.method != "POST":
            return None
        proto = protocol_for_path(request.url.path)
        if proto is None:
            return None
        if not _is_stream(response.headers, proto, request.url.path):
            return None
        readable, inflater = _inflater_for(response.headers)
        if not readable:
            # Only a server that ignores Accept-Encoding gets here; reading garbage would be worse.
            return None
        body = _request_json(request, not_read) if self.request_aware else None
        traced = None
        if self.emitter is not None:
            started = request.extensions.get("sseguard_started")
            traced = _Traced(self.emitter, started[2] if started else self.emitter.current(),
                             request_model(proto.api, body, request.url.path), request)
        return _Guard(checker=checker_for(proto.api, body), policy=self.policy,
                      stall_timeout=self.stall_timeout, inflater=inflater,
                      error_cls=error_cls, timeout_types=timeout_types, request=request,
                      traced=traced)


class _GuardedIterable:
    """The checked body, for sync transports (mixed into each library's SyncByteStream)."""

    def __init__(self, wrapped: Any, guard: _Guard) -> None:
        self._wrapped = wrapped
        self._guard = guard

    def __iter__(self) -> Iterator[bytes]:
        guard = self._guard
        chunks = iter(self._wrapped)
        while True:
            try:
                chunk: bytes = next(chunks)
            except StopIteration:
                guard.end()
                return
            except Exception as exc:
                guard.fail(exc)
            guard.feed(chunk)
            yield chunk

    def close(self) -> None:
        self._wrapped.close()


class _AsyncGuardedIterable:
    """The checked body, for async transports (mixed into each library's AsyncByteStream)."""

    def __init__(self, wrapped: Any, guard: _Guard) -> None:
        self._wrapped = wrapped
        self._guard = guard

    async def __aiter__(self) -> AsyncIterator[bytes]:
        guard = self._guard
        chunks = aiter(self._wrapped)
        while True:
            try:
                if guard.stall_timeout is not None and not guard.settled:
                    # Also for wrapped transports that ignore the read timeout; works on any
                    # event loop anyio supports (asyncio, trio).
                    with anyio.fail_after(guard.stall_timeout):
                        chunk: bytes = await anext(chunks)
                else:
                    chunk = await anext(chunks)
            except StopAsyncIteration:
                guard.end()
                return
            except Exception as exc:
                guard.fail(exc)
            guard.feed(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self._wrapped.aclose()


class _SyncStream(_GuardedIterable, httpx2.SyncByteStream):
    pass


class _AsyncStream(_AsyncGuardedIterable, httpx2.AsyncByteStream):
    pass


_TIMEOUTS: tuple[type[BaseException], ...] = (httpx2.TimeoutException, TimeoutError)
_NOT_READ: tuple[type[BaseException], ...] = (httpx2.RequestNotRead,)


class StrictTransport(httpx2.BaseTransport):
    """An httpx2 transport that raises ``StreamEndedBadly`` instead of letting a stream end quietly.

    ``wrapped`` does the HTTP (default ``httpx2.HTTPTransport()``). ``policy`` (a ``Policy`` or a
    preset name; ``agents`` by default, ``"strict"`` to fail a missing sentinel too) decides which
    endings and findings fail. ``stall_timeout`` seconds without a byte
    ends the stream as ``stalled`` (it also caps the read timeout, so the wait for the headers).
    ``request_aware`` lets the checker read the JSON request body (offered tools and their schemas,
    ``stream_options.include_usage``, ``n``). ``otel=True`` (with ``sseguard[otel]``) makes one
    OpenTelemetry span per checked stream in the GenAI conventions, on the application's own
    providers, under the span current when the request was sent (``docs/observability.md``).
    """

    def __init__(self, wrapped: httpx2.BaseTransport | None = None, *, policy: Policy | str = AGENTS,
                 stall_timeout: float | None = None, request_aware: bool = True,
                 otel: bool | Emitter = False) -> None:
        self.wrapped = wrapped if wrapped is not None else httpx2.HTTPTransport()
        self._options = _Options(policy, stall_timeout, request_aware, otel)

    @property
    def policy(self) -> Policy:
        return self._options.policy

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        _limit_encodings(request)
        _with_stall_timeout(request, self._options.stall_timeout)
        self._options.started(request)
        response = self.wrapped.handle_request(request)
        guard = self._options.guard(request, response, error_cls=StreamEndedBadly,
                                    timeout_types=_TIMEOUTS, not_read=_NOT_READ)
        if guard is not None:
            response.stream = _SyncStream(response.stream, guard)
        return response

    def close(self) -> None:
        self.wrapped.close()


class AsyncStrictTransport(httpx2.AsyncBaseTransport):
    """The async twin of ``StrictTransport`` (default wrapped: ``httpx2.AsyncHTTPTransport()``)."""

    def __init__(self, wrapped: httpx2.AsyncBaseTransport | None = None, *,
                 policy: Policy | str = AGENTS, stall_timeout: float | None = None,
                 request_aware: bool = True, otel: bool | Emitter = False) -> None:
        self.wrapped = wrapped if wrapped is not None else httpx2.AsyncHTTPTransport()
        self._options = _Options(policy, stall_timeout, request_aware, otel)

    @property
    def policy(self) -> Policy:
        return self._options.policy

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        _limit_encodings(request)
        _with_stall_timeout(request, self._options.stall_timeout)
        self._options.started(request)
        response = await self.wrapped.handle_async_request(request)
        guard = self._options.guard(request, response, error_cls=StreamEndedBadly,
                                    timeout_types=_TIMEOUTS, not_read=_NOT_READ)
        if guard is not None:
            response.stream = _AsyncStream(response.stream, guard)
        return response

    async def aclose(self) -> None:
        await self.wrapped.aclose()


# ── legacy httpx ───────────────────────────────────────────────────────────────────────────────
@functools.cache
def _legacy() -> dict[str, Any]:
    """The legacy-httpx classes, built on first use so that importing sseguard never imports httpx."""
    try:
        httpx = importlib.import_module("httpx")
    except ImportError:
        raise ConfigError("legacy httpx is not installed (pip install httpx); for httpx2 use "
                          "StrictTransport") from None
    error = type("StreamEndedBadly", (StreamEndedBadly, httpx.TransportError), {
        "__module__": __name__,
        "__doc__": "``StreamEndedBadly`` that is also an ``httpx.TransportError``, for legacy httpx SDKs.",
    })
    timeouts = (httpx.TimeoutException, TimeoutError)
    not_read = (httpx.RequestNotRead,)
    sync_stream = type("_LegacySyncStream", (_GuardedIterable, httpx.SyncByteStream), {})
    async_stream = type("_LegacyAsyncStream", (_AsyncGuardedIterable, httpx.AsyncByteStream), {})

    def handle_request(self: Any, request: Any) -> Any:
        _limit_encodings(request)
        _with_stall_timeout(request, self._options.stall_timeout)
        self._options.started(request)
        response = self.wrapped.handle_request(request)
        guard = self._options.guard(request, response, error_cls=error, timeout_types=timeouts,
                                    not_read=not_read)
        if guard is not None:
            response.stream = sync_stream(response.stream, guard)
        return response

    async def handle_async_request(self: Any, request: Any) -> Any:
        _limit_encodings(request)
        _with_stall_timeout(request, self._options.stall_timeout)
        self._options.started(request)
        response = await self.wrapped.handle_async_request(request)
        guard = self._options.guard(request, response, error_cls=error, timeout_types=timeouts,
                                    not_read=not_read)
        if guard is not None:
            response.stream = async_stream(response.stream, guard)
        return response

    def close(self: Any) -> None:
        self.wrapped.close()

    async def aclose(self: Any) -> None:
        await self.wrapped.aclose()

    def init(self: Any, wrapped: Any = None, *, policy: Policy | str = AGENTS,
             stall_timeout: float | None = None, request_aware: bool = True,
             otel: bool | Emitter = False) -> None:
        if wrapped is None:
            is_async = isinstance(self, httpx.AsyncBaseTransport)
            wrapped = httpx.AsyncHTTPTransport() if is_async else httpx.HTTPTransport()
        self.wrapped = wrapped
        self._options = _Options(policy, stall_timeout, request_aware, otel)
        self.policy = self._options.policy

    sync_transport = type("HttpxStrictTransport", (httpx.BaseTransport,), {
        "__module__": __name__, "__doc__": StrictTransport.__doc__, "__init__": init,
        "handle_request": handle_request, "close": close})
    async_transport = type("AsyncHttpxStrictTransport", (httpx.AsyncBaseTransport,), {
        "__module__": __name__, "__doc__": AsyncStrictTransport.__doc__, "__init__": init,
        "handle_async_request": handle_async_request, "aclose": aclose})
    return {"httpx": httpx, "error": error, "sync": sync_transport, "async": async_transport}


def httpx_transport(wrapped: Any = None, *, policy: Policy | str = AGENTS,
                    stall_timeout: float | None = None, request_aware: bool = True,
                    otel: bool | Emitter = False) -> Any:
    """``StrictTransport`` for legacy ``httpx`` (litellm, openai 2.x): an ``httpx.BaseTransport``.

    It raises a ``StreamEndedBadly`` that is also an ``httpx.TransportError``.
    """
    return _legacy()["sync"](wrapped, policy=policy, stall_timeout=stall_timeout,
                             request_aware=request_aware, otel=otel)


def async_httpx_transport(wrapped: Any = None, *, policy: Policy | str = AGENTS,
                          stall_timeout: float | None = None, request_aware: bool = True,
                          otel: bool | Emitter = False) -> Any:
    """``AsyncStrictTransport`` for legacy ``httpx``: an ``httpx.AsyncBaseTransport``."""
    return _legacy()["async"](wrapped, policy=policy, stall_timeout=stall_timeout,
                              request_aware=request_aware, otel=otel)

