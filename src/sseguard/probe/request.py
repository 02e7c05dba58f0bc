"""One request of the probe: send it over aiohttp, check it as its bytes arrive, and write one
``Record`` to a sink.

No global state: everything comes in as arguments (session, target, body, settings, sink, connection
tracker), so any scheduler — the asyncio runner here, a test, another process — can call
``run_request`` as is. Per docs/design/http.md the body is read with ``iter_any()`` and fed as bytes (reading
by lines costs about twice the CPU), and the per-chunk path does no allocation beyond the checker's own.

The stall watchdog is one timer per stream that re-arms itself lazily: each chunk's arrival time is
stored once (by the ``StreamWatch``, which the watchdog reads), and the timer, when it fires, either
finds the stream idle for the whole stall timeout or moves itself to the new deadline. Re-scheduling a
timer per chunk would cost more than the check.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from sseguard.core._renamed import renamed
from sseguard.core.policy import Policy
from sseguard.core.record import Record
from sseguard.core.redact import Redactor
from sseguard.core.verdict import Ending, Verdict
from sseguard.probe.measure import StreamWatch, evidence_document, request_summary
from sseguard.probe.sink import Sink
from sseguard.probe.target import ConnectionTracker, Target
from sseguard.probe.workloads import encode_body
from sseguard.telemetry.genai import Emitter, MeasuredCall, request_model

#: Old names (this module was ``sseguard.probe.engine``; "engine" is the serving engine only).
__getattr__ = renamed(__name__, {"EngineSettings": "RequestSettings", "Outcome": "RequestResult"})

#: How much of a non-2xx body is read (it goes into the verdict and the evidence, cut to 2 KiB).
ERROR_BODY_LIMIT = 64 * 1024


@dataclass(frozen=True, slots=True)
class RequestSettings:
    """How every request is judged and bounded. ``clock`` must be monotonic seconds (the loop's
    timers run on real time); ``wall`` gives the epoch time kept in ``Record.started_at``."""

    policy: Policy = field(default_factory=Policy)
    redactor: Redactor = field(default_factory=Redactor)
    stall_timeout: float = 30.0
    timeout: float = 300.0
    run_id: str = ""
    source: str = "probe"
    worker: str | None = None
    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time
    #: ``--otel``: where each request's call goes (``sseguard.telemetry``); None: nowhere.
    telemetry: Emitter | None = None


@dataclass(slots=True)
class RequestResult:
    """What one request produced."""

    record: Record
    verdict: Verdict


class _Stalled(Exception):
    """Set into the response stream by the watchdog; never leaves this module."""


class _Watchdog:
    """Declares the stream stalled when no byte arrived for ``limit`` seconds.

    A 2xx body's chunks are timed by the ``StreamWatch`` (``last_chunk_at``), which the watchdog
    reads when it fires: the per-chunk path stores the arrival time once. Other bodies set ``last``.
    """

    __slots__ = ("_clock", "_content", "_handle", "_limit", "_loop", "_seen_total", "_watch", "fired",
                 "last")

    def __init__(self, loop: asyncio.AbstractEventLoop, content: aiohttp.StreamReader,
                 limit: float, clock: Callable[[], float], watch: StreamWatch) -> None:
        self._loop = loop
        self._content = content
        self._limit = limit
        self._clock = clock
        self._watch = watch
        self.last = clock()
        self._seen_total = content.total_bytes
        self.fired = False
        self._handle = loop.call_later(limit, self._check)

    def _check(self) -> None:
        now = self._clock()
        chunk_at = self._watch.last_chunk_at
        if chunk_at is not None and chunk_at > self.last:
            self.last = chunk_at
        total = self._content.total_bytes
        if total != self._seen_total:
            # Bytes arrived that the reader has not taken yet (a busy loop): that is not a stall.
            self._seen_total = total
            self.last = max(self.last, now)
        idle = now - self.last
        if idle >= self._limit * 0.999:
            self.fired = True
            self._content.set_exception(_Stalled())
        else:
            self._handle = self._loop.call_later(self._limit - idle, self._check)

    def cancel(self) -> None:
        self._handle.cancel()


def _describe(exc: BaseException) -> str:
    text = str(exc)
    name = type(exc).__name__
    return f"{name}: {text}" if text else name


async def run_request(session: aiohttp.ClientSession, target: Target, body: dict[str, Any], *,
                      settings: RequestSettings, sink: Sink, index: int, workload: str = "small",
                      concurrency: int = 1, connections: ConnectionTracker | None = None,
                      extra: Mapping[str, Any] | None = None,
                      payload: bytes | None = None,
                      judge: Callable[[Verdict], Mapping[str, Any]] | None = None) -> RequestResult:
    """Send one streamed request in the target's protocol and keep its ``Record`` (and evidence when
    it did not end ``complete``). Peer failures are never raised: they are the record. ``payload`` is
    the already-encoded ``body`` when the caller has it. ``judge``: more facts of the record, read off
    the verdict (the consistency workload's comparison with its reference)."""
    clock = settings.clock
    data = payload if payload is not None else encode_body(body)
    api = target.arm.protocol
    watch = StreamWatch(body, sent_at=clock(), started_at=settings.wall(), api=api)
    transport_error: str | None = None
    stalled = False
    error_body: bytes | None = None
    label: str | None = None
    reuse: int | None = None
    resp: aiohttp.ClientResponse | None = None
    watchdog: _Watchdog | None = None
    read_to_end = False
    try:
        async with asyncio.timeout(settings.timeout):
            try:
                async with asyncio.timeout(settings.stall_timeout):
                    # No redirects: a moved endpoint is a finding (a 3xx), and a key must not
                    # follow a redirect to wherever it points.
                    resp = await session.post(target.url, data=data, headers=target.headers,
                                              allow_redirects=False)
            except TimeoutError as exc:
                if isinstance(exc, aiohttp.ClientError):
                    raise  # aiohttp's connect timeout: a transport error, not silence
                stalled = True  # connected, request sent, not one byte back
            if resp is not None:
                watch.response(resp.status, resp.headers.items(), clock())
                # Taken now, when the headers are in and before the body is read: aiohttp releases
                # the connection object as soon as a short body has arrived, while the protocol the
                # response keeps still names the TCP connection.
                protocol = (resp.connection.protocol if resp.connection is not None else None) or \
                    getattr(resp, "_protocol", None)
                if connections is not None:
                    label, reuse = connections.use(protocol)
                content = resp.content
                watchdog = _Watchdog(asyncio.get_running_loop(), content, settings.stall_timeout,
                                     clock, watch)
                if 200 <= resp.status < 300:
                    feed = watch.feed
                    async for chunk in content.iter_any():
                        feed(chunk, clock())
                else:
                    parts: list[bytes] = []
                    size = 0
                    async for chunk in content.iter_any():
                        watchdog.last = clock()
                        if size < ERROR_BODY_LIMIT:
                            parts.append(chunk)
                            size += len(chunk)
                    error_body = b"".join(parts)[:ERROR_BODY_LIMIT]
                read_to_end = True
    except _Stalled:
        stalled = True
    except TimeoutError as exc:
        # aiohttp's own timeouts (connect) are TimeoutErrors too and say what timed out.
        transport_error = (_describe(exc) if isinstance(exc, aiohttp.ClientError)
                           else f"timeout: no complete response within {settings.timeout:g} s")
    except (aiohttp.ClientError, OSError) as exc:
        transport_error = _describe(exc)
    finally:
        if watchdog is not None:
            watchdog.cancel()
        if resp is not None and read_to_end:
            resp.release()
        elif resp is not None:
            resp.close()  # half read (stall, error, cancel): the connection must not be reused
    if error_body is None and resp is not None and not 200 <= resp.status < 300:
        error_body = b""
    verdict = watch.finish(clock(), transport_error=transport_error, stalled=stalled,
                           error_body=error_body)
    redactor = settings.redactor
    record = watch.record(
        verdict, policy=settings.policy, redactor=redactor, model=body.get("model"),
        source=settings.source, run_id=settings.run_id, arm=target.arm.name, index=index,
        worker=settings.worker, workload=workload, path=target.path,
        prompt_bytes=len(data), concurrency=concurrency, reuse_index=reuse, connection=label,
        extra=redactor.obj(dict(extra)) if extra else {})
    if judge is not None:
        for name, value in judge(verdict).items():
            setattr(record, name, value)
    if resp is None:
        record.status = None  # no response at all: refused, reset before headers, or silent
    if verdict.ending is not Ending.COMPLETE:
        document = evidence_document(
            record, verdict, watch.headers, redactor,
            request_summary=request_summary(body, url_path=target.path, prompt_bytes=len(data),
                                            api=api))
        record.evidence = sink.write_evidence(f"{target.arm.name}-{index:06d}", document)
    sink.write(record)
    if settings.telemetry is not None:
        _emit(settings.telemetry, record, verdict, settings.policy, body, target)
    return RequestResult(record=record, verdict=verdict)


def _emit(telemetry: Emitter, record: Record, verdict: Verdict, policy: Policy,
          body: dict[str, Any], target: Target) -> None:
    """The request's span and metrics, from the times its record keeps."""
    url = urlsplit(target.url)
    telemetry.emit(MeasuredCall(
        verdict=verdict, policy=policy, start_ns=round(record.started_at * 1e9),
        duration_s=(record.duration_ms or 0.0) / 1000,
        request_model=request_model(verdict.api, body, target.path),
        ttfc_s=None if record.ttft_ms is None else record.ttft_ms / 1000,
        server_address=url.hostname, server_port=url.port))
