"""What the guard proxy's handlers share, and what happens when a guarded stream is over.

``ProxyState`` owns the app's long-lived things: the config, the policy the proxy acts on, one
``aiohttp.ClientSession`` to the upstream for the app's lifetime (``docs/design/http.md`` measured an httpx
pool in this seat at a quarter of the throughput), the evidence writer and the metrics. ``stream_done`` is the
done-callback each ``StreamDriver`` is given: metrics and the stream's record, never blocking the loop.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import logging
import random
import time
from collections.abc import Callable
from typing import Any

import aiohttp
from aiohttp import web

from sseguard._serve import release_free_memory
from sseguard.core.policy import Policy
from sseguard.core.record import Record, raw_record
from sseguard.core.redact import DEFAULT, RedactingFilter, Redactor
from sseguard.core.verdict import Verdict
from sseguard.proxy.config import ProxyConfig
from sseguard.proxy.driver.metrics import ProxyMetrics
from sseguard.proxy.driver.stall import Timers
from sseguard.proxy.driver.stream import StreamDriver
from sseguard.proxy.driver.traces import ProxyTraces
from sseguard.proxy.machines.attempts import ErrorAnswer
from sseguard.proxy.machines.outcome import RecordIdentity
from sseguard.proxy.machines.retry import RetryBudget, Sleep, retry_headers

log = logging.getLogger("sseguard.proxy")
log.addFilter(RedactingFilter())

_SECRET_REQUEST_HEADERS = ("authorization", "api-key", "x-api-key", "proxy-authorization")
#: Upstream bytes buffered per response before reading pauses (x2); TCP holds the rest upstream.
UPSTREAM_READ_BUFFER = 64 * 1024
#: Seconds without a stream in flight before freed memory is handed back to the OS.
IDLE_TRIM_DELAY_S = 1.0
#: Clients' keys whose redactors are kept (a deployment has a few; past this many the oldest goes).
REDACTORS_KEPT = 64


class ProxyState:
    """Everything the handlers share: config, the upstream session, the evidence writer, metrics."""

    def __init__(self, config: ProxyConfig) -> None:
        self.config = config
        self.policy: Policy = config.effective_policy
        self.metrics = ProxyMetrics(shared=config.workers > 1)
        self.redactor: Redactor = DEFAULT.with_secrets(config.secrets)
        self.session: aiohttp.ClientSession | None = None
        self.writer: Any = None
        self.pruner: Any = None
        #: ``--otel``: the streams' spans and metrics, and what flushes them at shutdown.
        self.traces: ProxyTraces | None = None
        self._otel_shutdown: Callable[[], None] | None = None
        self.active = 0
        # One process: the gauge reads ``active`` when scraped rather than being counted twice per
        # stream (prometheus-client's inc/dec lock and dispatch on every stream's first-chunk path).
        # Workers share the gauge through files: each counts its own in and out.
        self._count_active = self.metrics.shared
        if not self._count_active:
            self.metrics.active.set_function(lambda: self.active)
        self._index = itertools.count(config.worker, config.workers)
        self._trim: asyncio.TimerHandle | None = None
        #: How a retry waits and where its jitter comes from (tests replace both: no real waits).
        self.sleep: Sleep = asyncio.sleep
        self.rng = random.Random()
        #: The retry budget's clock (tests replace it: no wall-clock windows) and the budgets, one
        #: per upstream origin (continuations may go to another base).
        self.clock: Callable[[], float] = time.monotonic
        #: The stall timers' clock (None: the event loop's; tests give a virtual one, so no test
        #: waits a real --stall-timeout).
        self.timers: Timers | None = None
        self._budgets: dict[str, RetryBudget] = {}
        # Per client key, its redactor: building one sorts every secret, on each stream's first-chunk
        # path. Held in memory only, as the keys already are while their streams run.
        self._redactors: dict[tuple[str, ...], Redactor] = {}

    def stall_timers(self) -> Timers:
        """What the stall timers run on: the injected ``timers``, or the running loop."""
        return self.timers if self.timers is not None else asyncio.get_running_loop()

    def budget(self, origin: str) -> RetryBudget:
        """The retry budget of the upstream at ``origin`` (``scheme://host:port``)."""
        budget = self._budgets.get(origin)
        if budget is None:
            # This worker's share: the budget holds for the whole proxy, whatever --workers is.
            budget = self._budgets[origin] = RetryBudget.of_worker(self.config.retry_budget,
                                                                   self.config.workers)
        return budget

    def answered(self, resp: web.StreamResponse, answer: ErrorAnswer, api: str) -> web.StreamResponse:
        """An error answer the attempts' machine decided (``attempts.ErrorAnswer``): its retry
        headers on ``resp``, counted."""
        return self._retry_headers(resp, answer.headers, api, answer.reason, refused=answer.refused)

    def tell_retry(self, resp: web.StreamResponse, api: str, reason: str, cause: str, *,
                   retried: bool, retry_off: bool | None = None) -> web.StreamResponse:
        """An error answer the proxy writes outside the attempts' machine (a refused request, a
        verbatim call that failed): its retry headers (``retry.retry_headers``; ``retry_off``
        defaults to ``ProxyConfig.retries_off``) on ``resp``, counted."""
        headers = retry_headers(cause, retried=retried,
                                retry_off=self.config.retries_off if retry_off is None else retry_off)
        return self._retry_headers(resp, headers, api, reason)

    def _retry_headers(self, resp: web.StreamResponse, headers: tuple[tuple[str, str], ...],
                       api: str, reason: str, *, refused: bool = False) -> web.StreamResponse:
        """The one place the proxy's error answers get their retry headers (``x-should-retry``,
        a passed-on ``retry-after``), and a refused retry and a don't-retry answer are counted."""
        for name, value in headers:
            resp.headers[name] = value
        if refused:
            self.metrics.retries_refused.labels(api, reason).inc()
        if dict(headers).get("x-should-retry") == "false":
            self.metrics.dont_retry.labels(api, reason).inc()
        return resp

    def next_index(self) -> int:
        """The next record index of this run (a worker's indexes never meet another's)."""
        return next(self._index)

    async def start(self, app: web.Application) -> None:
        if self.config.otel:
            from sseguard import telemetry

            # In the serving process (each worker its own), from the OTEL_* variables.
            pipeline = telemetry.load().configure(service_name="sseguard-proxy",
                                                  redactor=self.redactor)
            upstream = self.config.upstream
            self.traces = ProxyTraces(pipeline.telemetry, self.policy,
                                      server=(upstream.host or "", upstream.port))
            self._otel_shutdown = pipeline.shutdown
            # The SDK and exporters were imported just now, after the server froze what existed
            # (``_serve.settle_gc``): freeze them too, or every full collection walks them again.
            gc.freeze()
        if self.config.store is not None:
            from sseguard.store.process import ProcessWriter
            from sseguard.store.retention import RetentionThread

            # The store is opened, redacted into and written by a process of its own, so the relay's
            # loop pays a queue append per stream and nothing else (``store/process.py``); starting it
            # is blocking: keep it off the loop.
            retention = self.config.retention
            self.writer = await asyncio.to_thread(ProcessWriter, self.config.store,
                                                  sample_healthy=retention.sample_healthy)
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
        if self._otel_shutdown is not None:
            # Flushes the spans and metrics not yet exported (blocking: off the loop).
            await asyncio.to_thread(self._otel_shutdown)

    def stream_started(self) -> None:
        """One more stream in flight."""
        self.active += 1
        if self._count_active:
            self.metrics.active.inc()

    def stream_ended(self) -> None:
        """One stream fewer in flight; once none is left, the freed buffers go back to the OS."""
        self.active -= 1
        if self._count_active:
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
        if not values:
            return self.redactor
        key = tuple(values)
        redactor = self._redactors.get(key)
        if redactor is None:
            if len(self._redactors) >= REDACTORS_KEPT:
                del self._redactors[next(iter(self._redactors))]
            redactor = self._redactors[key] = self.redactor.with_secrets(values)
        return redactor

    def stream_done(self, relay: StreamDriver, verdict: Verdict, identity: RecordIdentity) -> None:
        """Metrics and the evidence record of one finished stream (never blocks the loop):
        ``identity`` says which record (the stream's own, or one of its upstream attempts)."""
        now = time.perf_counter()
        duration = now - relay.t0
        outcome = relay.outcome
        if identity.heal_of is not None:  # an upstream attempt the client never saw
            self.metrics.heal_attempts.labels(str(verdict.api), str(verdict.ending)).inc()
        else:
            self.metrics.stream_ended(verdict, client_gone=outcome.client_gone, ttft_s=relay.ttft,
                                      duration_s=duration)
            if identity.healed is not None and identity.healed != "none":
                dialect = (relay.heal_dialect or "") if identity.healed == "resume" else ""
                self.metrics.healed.labels(str(verdict.api), identity.healed, dialect,
                                           "passed" if self.policy.passes(verdict) else "failed").inc()
        if outcome.code is not None or outcome.action == "pass":
            self.metrics.actions.labels(outcome.action).inc()
        if verdict.ending == "stalled":
            self.metrics.upstream_errors.labels("stalled").inc()
        elif (verdict.ending == "transport_error" and not outcome.client_gone
              and relay.ttfb is not None):  # before the headers it was counted as connect/timeout
            self.metrics.upstream_errors.labels("transport").inc()
        if self.traces is not None:
            try:
                self.traces.stream_done(relay, verdict, duration, identity)
            except Exception:  # telemetry must never take the proxy down
                log.exception("could not emit the telemetry of a stream")
        if self.writer is None:
            return
        try:
            record = self._record(relay, verdict, duration, identity)
        except Exception:  # evidence must never take the proxy down
            log.exception("could not build the record of a stream")
            return
        # Unredacted: the writer redacts it (with this client's redactor) before the store sees it,
        # so the secret searches (most of a record's cost) are not spent on the loop.
        self.writer.put(record, relay.redactor)

    def _record(self, relay: StreamDriver, verdict: Verdict, duration: float,
                identity: RecordIdentity) -> Record:
        """The stream's record, not yet redacted (the writer's ``put`` is given the redactor)."""
        outcome = relay.outcome
        extra: dict[str, Any] = {"action": outcome.action, **relay.frames.facts(), **outcome.extra}
        if outcome.code is not None:
            extra["error_code"] = outcome.code
        if outcome.client_gone:
            extra["client_disconnected"] = True
        if identity.healed == "resume" and relay.heal_dialect is not None:
            extra["heal_dialect"] = relay.heal_dialect  # which --resume dialect continued it
        record = raw_record(
            verdict, policy=self.policy, headers=dict(relay.upstream_headers),
            source="proxy", run_id=self.config.run_id, arm=self.config.arm_name,
            index=self.next_index() if identity.index is None else identity.index, workload="proxy",
            started_at=relay.started_at,
            method=relay.request.method, path=relay.request.path, stream=True,
            ttfb_ms=None if relay.ttfb is None else relay.ttfb * 1000,
            ttft_ms=None if relay.ttft is None else relay.ttft * 1000,
            duration_ms=duration * 1000, max_gap_ms=relay.max_gap * 1000,
            prompt_bytes=len(relay.body), concurrency=relay.concurrency,
            extra=extra, heal_of=identity.heal_of, healed=identity.healed,
            heal_attempts=identity.heal_attempts, heal_tokens=identity.heal_tokens,
        )
        if record.model is None and isinstance(relay.request_obj.get("model"), str):
            record.model = relay.request_obj["model"]
        if outcome.client_gone:
            record.status = None if relay.ttfb is None else record.status
        return record
