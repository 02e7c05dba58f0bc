"""The asyncio scheduler: arms side by side, concurrency levels one after another, always bounded.

Per docs/design/http.md: one aiohttp ``ClientSession`` (uvloop when installed) with an unlimited
``TCPConnector`` (the workers bound concurrency themselves), the open-files limit raised to the hard limit,
and the first requests spread over about one stream length — otherwise every stream starts in the same
millisecond and time to first token measures a burst. The probe samples its own CPU each second:
past ~80 % of a core its timings measure itself, and the summary says so.

Only ``reuse`` leaves the shared session: each of its workers owns a one-connection session, because
"one kept-alive connection per conversation" cannot be asked of a shared pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import signal
import statistics
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from rich.console import Console

from sseguard._serve import loop_factory, raise_open_files_limit
from sseguard.core._renamed import renamed
from sseguard.core.errors import ConfigError
from sseguard.core.record import Record
from sseguard.core.redact import Redactor
from sseguard.core.verdict import Ending
from sseguard.probe import consistency, references
from sseguard.probe.config import ProbeConfig
from sseguard.probe.cpu import CpuMonitor, CpuSummary
from sseguard.probe.live import LiveView, Tally
from sseguard.probe.request import RequestSettings, run_request
from sseguard.probe.sink import (
    RESULTS,
    JsonlSink,
    merge_worker_results,
    read_results,
    read_run_file,
    repair_results,
    worker_results,
    write_run_file,
)
from sseguard.probe.target import ConnectionTracker, Target
from sseguard.probe.workloads import FixedPrompts, Workload, arm_workloads, encode_body

#: Longest default ramp: a stalled pilot stream must not hold the run back for minutes.
MAX_DEFAULT_RAMP = 60.0
#: A worker whose requests get no response at all waits before the next try, up to this long.
MAX_BACKOFF = 1.0
@dataclass
class RunResult:
    """What a run left behind: its results file (``results``: every record of the run, a resumed
    run's earlier ones included) and the counts the run kept as it wrote them. The analysis reads the
    file where it lies; ``records`` reads it into memory only when asked (a test, a small demo act)."""

    out: Path
    run_id: str
    config: ProbeConfig
    results: Path
    total: int  # records in ``results``
    failed: int  # of them, failed under ``config.policy``
    new_records: int
    new_failed: int  # of the records this session wrote, failed under ``config.policy``
    interrupted: bool
    cpu: CpuSummary
    elapsed: float

    @functools.cached_property
    def records(self) -> list[Record]:
        """Every record of ``results``, read once, when first asked for."""
        return list(read_results(self.results.parent, self.results.name))

    @property
    def exit_code(self) -> int:
        """0 all passed, 1 some failed; an interrupted run is 130 (as a shell reports Ctrl-C)."""
        if self.interrupted:
            return 130
        return 1 if self.failed else 0


async def check_reachable(targets: list[Target], timeout: float) -> None:
    """Open (and close) one TCP connection per arm; an arm that cannot be reached is unusable input."""

    async def one(target: Target) -> None:
        parts = urlsplit(target.url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            async with asyncio.timeout(timeout):
                _, writer = await asyncio.open_connection(host, port)
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
        except TimeoutError:
            raise ConfigError(f"arm {target.arm.name!r}: {host}:{port} did not answer within "
                              f"{timeout:g} s") from None
        except OSError as exc:
            reason = exc.strerror or str(exc) or type(exc).__name__
            raise ConfigError(f"arm {target.arm.name!r}: cannot reach {host}:{port} ({reason})") from None

    await asyncio.gather(*(one(t) for t in targets))


@dataclass(frozen=True, slots=True)
class Share:
    """This process's part of a run that ``count`` probe processes share (``--workers``).

    Process ``index`` takes every ``count``-th request index of each arm and level (so indexes stay
    unique and a resume knows what is done whichever worker did it) and its part of the concurrency.
    """

    index: int = 0
    count: int = 1

    def part(self, total: int) -> int:
        """This process's part of ``total`` (streams in flight): the parts add up to ``total``."""
        return total // self.count + (1 if self.index < total % self.count else 0)


class _Indexes:
    """Hands out request indexes of one arm at one level, skipping those a resumed run already has;
    with a ``Share``, only that process's indexes (every ``step``-th from ``offset``)."""

    def __init__(self, arm: str, base: int, count: int | None, deadline: float | None,
                 done: set[tuple[str, int]], share: Share = Share()) -> None:
        self._arm = arm
        self._next = base + share.index
        self._step = share.count
        self._end = base + count if count is not None else None
        self._deadline = deadline
        self._done = done

    def take(self, now: float) -> int | None:
        if self._deadline is not None and now >= self._deadline:
            return None
        while self._end is None or self._next < self._end:
            index = self._next
            self._next += self._step
            if (self._arm, index) not in self._done:
                return index
        return None


class _Pacer:
    """At most ``rate`` request starts per second for one arm."""

    def __init__(self, rate: float) -> None:
        self._interval = 1.0 / rate
        self._next: float | None = None

    async def wait(self) -> None:
        now = time.monotonic()
        slot = now if self._next is None else max(now, self._next)
        self._next = slot + self._interval
        if slot > now:
            await asyncio.sleep(slot - now)


class _ViewSink:
    """The run's sink: writes through to the JSONL sink and counts each record for the display."""

    def __init__(self, inner: JsonlSink, view: LiveView) -> None:
        self._inner = inner
        self._view = view
        self.written = 0

    def write(self, record: Record) -> None:
        self._inner.write(record)
        self._view.add(record)
        self.written += 1

    def write_evidence(self, name: str, document: dict[str, Any]) -> str:
        return self._inner.write_evidence(name, document)


@dataclass
class _Run:
    config: ProbeConfig
    settings: RequestSettings
    workloads: dict[str, Workload]  # per arm: the run's, or the arm's own body
    session: aiohttp.ClientSession
    sink: _ViewSink
    connections: ConnectionTracker
    done: set[tuple[str, int]]
    view: LiveView
    share: Share = Share()
    references: consistency.References | None = None  # the consistency workload's
    stream_seconds: dict[str, float] = field(default_factory=dict)  # per arm, for the next ramp
    on_level: Callable[[int], None] | None = None  # told each level as it begins


def _stride(config: ProbeConfig) -> int:
    """Index space per level: level i owns [i·stride, (i+1)·stride), so a resume knows the level."""
    return config.count if config.count is not None else 1_000_000


def _connector(limit: int) -> aiohttp.TCPConnector:
    return aiohttp.TCPConnector(limit=limit, limit_per_host=0, ttl_dns_cache=300,
                                keepalive_timeout=60)


def _session(config: ProbeConfig, limit: int = 0) -> aiohttp.ClientSession:
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=config.connect_timeout)
    return aiohttp.ClientSession(connector=_connector(limit), timeout=timeout)


async def _arm_level(run: _Run, target: Target, level: int, level_index: int) -> None:
    """All requests of one arm at one concurrency level."""
    config = run.config
    share = run.share
    streams = share.part(level)  # this process's streams; records name the whole level
    if streams == 0:
        return
    arm = target.arm.name
    start = time.monotonic()
    deadline = start + config.duration if config.duration is not None else None
    indexes = _Indexes(arm, level_index * _stride(config), config.count, deadline, run.done, share)
    pacer = _Pacer(config.rate / share.count) if config.rate is not None else None
    ramp = config.ramp if config.ramp is not None else run.stream_seconds.get(arm)
    pilot_done = asyncio.Event()
    pilot: list[float] = []
    durations: list[float] = []

    async def worker(k: int) -> None:
        if level > 1:
            if ramp is not None:
                spread = ramp if config.ramp is not None else min(ramp, MAX_DEFAULT_RAMP)
                await asyncio.sleep(k * spread / streams)
            elif k > 0:
                # Default ramp, first level: worker 0's first stream measures one stream length.
                await pilot_done.wait()
                spread = min(pilot[0] if pilot else 0.0, MAX_DEFAULT_RAMP)
                await asyncio.sleep((k - 1) * spread / max(streams - 1, 1))
        api = target.arm.protocol
        workload = run.workloads[arm]
        # Numbered across processes: two processes must not send the same (cache-defeating) prompts.
        conversation = workload.conversation(f"{arm}:{level_index}:{share.index + k * share.count}",
                                             api)
        judged = None
        if run.references is not None and isinstance(conversation, FixedPrompts):
            judged = references.judge(run.references, arm, conversation, api, run.settings.redactor)
        own: aiohttp.ClientSession | None = None
        if workload.pinned_connection:
            own = _session(config, limit=1)
        session = own or run.session
        backoff = 0.0
        try:
            while True:
                index = indexes.take(time.monotonic())
                if index is None:
                    return
                if pacer is not None:
                    await pacer.wait()
                body = workload.finish(conversation.next_body(), model=target.arm.model, api=api)
                payload = encode_body(body)
                outcome = await run_request(
                    session, target, body, settings=run.settings, sink=run.sink, index=index,
                    workload=workload.name, concurrency=level, connections=run.connections,
                    payload=payload, judge=judged)
                conversation.observe(outcome.verdict)
                record = outcome.record
                if record.duration_ms is not None and record.ending == Ending.COMPLETE:
                    durations.append(record.duration_ms / 1000.0)
                if k == 0 and not pilot_done.is_set():
                    if record.duration_ms is not None:
                        pilot.append(record.duration_ms / 1000.0)
                    pilot_done.set()
                if record.status is None and record.ending == Ending.TRANSPORT_ERROR:
                    # Nothing answers: keep recording, but do not spin.
                    backoff = min(max(backoff * 2, 0.05), MAX_BACKOFF)
                    await asyncio.sleep(backoff)
                else:
                    backoff = 0.0
        finally:
            if k == 0:
                pilot_done.set()
            if own is not None:
                await own.close()

    async with asyncio.TaskGroup() as group:
        for k in range(streams):
            group.create_task(worker(k))
    if durations:
        run.stream_seconds[arm] = statistics.median(durations)


async def _levels(run: _Run, targets: list[Target]) -> None:
    refs = run.references
    if refs is not None:
        # The references first, at concurrency 1: their indexes follow the levels' (a resume knows them).
        run.view.note("[bold]references[/] (each prompt once, at concurrency 1)")
        base = len(run.config.levels) * _stride(run.config)
        async with asyncio.TaskGroup() as group:
            for target in targets:
                group.create_task(references.collect(
                    run.session, target, run.workloads[target.arm.name], refs, settings=run.settings,
                    sink=run.sink, base=base, done=run.done, connections=run.connections))
    for level_index, level in enumerate(run.config.levels):
        if run.config.sweep:
            run.view.note(f"[bold]concurrency {level}[/] ({level_index + 1}/{len(run.config.levels)})")
        if run.on_level is not None:
            run.on_level(level)
        async with asyncio.TaskGroup() as group:
            for target in targets:
                group.create_task(_arm_level(run, target, level, level_index))


def describe_run(config: ProbeConfig) -> str:
    """One line saying what the run will do, printed once the arms are known to be reachable."""
    levels = ", ".join(map(str, config.levels))
    bound = " and ".join(filter(None, [
        f"{config.count} requests" if config.count is not None else "",
        f"{config.duration:g} s" if config.duration is not None else ""]))
    arms = ", ".join(f"{a.name} ({a.protocol})" for a in config.arms)
    return (f"probing {arms} · workload {config.workload.name} · "
            f"concurrency {levels} · {bound} per arm and level · policy {config.policy.name} · "
            f"out {config.out}")


def _new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]


def open_run(config: ProbeConfig, redactor: Redactor, *,
             resume: bool) -> tuple[dict[str, Any], list[Record]]:
    """The run file's document and the records a resumed run already has (the parts an interrupted
    ``--workers`` run left merged in first); a fresh run must not write over another."""
    out = Path(config.out)
    run_doc: dict[str, Any]
    existing: list[Record] = []
    if resume:
        run_doc = read_run_file(out)
        merge_worker_results(out)
        repair_results(out)
        existing = list(read_results(out))
    else:
        results = out / RESULTS
        if results.exists() and results.stat().st_size > 0:
            raise ConfigError(f"{out} already holds a run; continue it with --resume {out} "
                              "or pick another --out")
        run_doc = {"run_id": _new_run_id(), "sessions": []}
    run_doc["config"] = redactor.obj(config.to_dict())
    return run_doc, existing


async def execute(config: ProbeConfig, *, resume: bool = False, console: Console | None = None,
                  live: bool | None = None, environ: Mapping[str, str] | None = None,
                  stop: asyncio.Event | None = None, announce: bool = False,
                  share: Share | None = None, run_id: str = "",
                  on_level: Callable[[int], None] | None = None) -> RunResult:
    """Run (or resume) a probe inside the running event loop and return what it left behind.

    ``on_level(level)`` is called as each concurrency level begins (after the consistency
    workload's references): what a caller paces by, rather than by the clock (``sseguard demo``).

    ``stop`` ends the run early and cleanly (Ctrl-C): requests in flight are dropped unrecorded
    (a resume redoes them), everything finished stays in ``results.jsonl``.

    With a ``share`` this is one process of a ``--workers`` run (``probe.workers``): the parent has
    opened the run (``run_id``, run file, reachability), this process writes its records to its own
    results file, which the parent merges into ``results.jsonl``.
    """
    console = console or Console(stderr=True)
    raise_open_files_limit()
    targets = [Target.of(arm, environ) for arm in config.arms]
    redactor = Redactor([s for t in targets for s in t.secrets])
    out = Path(config.out)
    run_doc: dict[str, Any] = {}
    if share is None:
        run_doc, existing = open_run(config, redactor, resume=resume)
        run_id = str(run_doc["run_id"])
        if config.check_reachable:
            await check_reachable(targets, config.connect_timeout)
        if announce:
            console.print(describe_run(config), highlight=False, soft_wrap=True)
    else:
        existing = list(read_results(out))
    workload = Workload(config.workload, seed=config.seed)

    sink = JsonlSink(out, results=RESULTS if share is None else worker_results(share.index))
    tally = Tally(config.policy)
    tally.extend(existing)
    failed_before = tally.failed
    view = LiveView(console, tally, enabled=live)
    session_doc: dict[str, Any] = {"started_at": time.time(), "resumed": resume}
    if share is None:
        run_doc.setdefault("sessions", []).append(session_doc)
        write_run_file(out, run_doc)

    pipeline = None
    if config.otel:
        from sseguard import telemetry

        pipeline = telemetry.load().configure(service_name="sseguard-probe", redactor=redactor)
        gc.freeze()  # the SDK just imported, as ``quiet_gc`` froze what existed before
    settings = RequestSettings(policy=config.policy, redactor=redactor,
                              stall_timeout=config.stall_timeout, timeout=config.timeout,
                              run_id=run_id,
                              worker=str(share.index) if share and share.count > 1 else None,
                              telemetry=None if pipeline is None else pipeline.telemetry)
    monitor = CpuMonitor()
    monitor_task = asyncio.create_task(monitor.run())
    started = time.monotonic()
    interrupted = False
    view_sink = _ViewSink(sink, view)
    per_arm = config.count * len(config.levels) if config.count is not None else None
    view.start([a.name for a in config.arms], {a.name: per_arm for a in config.arms},
               {a.name: tally.arms[a.name].total for a in config.arms if a.name in tally.arms},
               apis={a.name: str(a.protocol) for a in config.arms})
    try:
        async with _session(config) as session:
            run = _Run(config=config, settings=settings,
                       workloads=arm_workloads(workload, config.arms), session=session,
                       sink=view_sink, connections=ConnectionTracker(),
                       done={(r.arm, r.index) for r in existing}, view=view,
                       share=share or Share(),
                       references=consistency.References.load(out) if workload.compares else None,
                       on_level=on_level)
            work = asyncio.create_task(_levels(run, targets))
            waiters: set[asyncio.Future[Any]] = {work}
            stopper = asyncio.create_task(stop.wait()) if stop is not None else None
            if stopper is not None:
                waiters.add(stopper)
            try:
                await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            finally:
                if not work.done():
                    interrupted = True
                    work.cancel()
                if stopper is not None:
                    stopper.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await work
    finally:
        monitor_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await monitor_task
        cpu = monitor.stop()
        view.stop()
        sink.close()
        if pipeline is not None:
            await asyncio.to_thread(pipeline.shutdown)  # what is not yet exported leaves now
        session_doc.update({"finished_at": time.time(), "interrupted": interrupted,
                            "records": view_sink.written, "cpu": cpu.to_dict()})
        if share is None:
            write_run_file(out, run_doc)
    return RunResult(out=out, run_id=run_id, config=config, results=sink.results_path,
                     total=tally.total, failed=tally.failed, new_records=view_sink.written,
                     new_failed=tally.failed - failed_before, interrupted=interrupted, cpu=cpu,
                     elapsed=time.monotonic() - started)


@contextlib.contextmanager
def quiet_gc(threshold: int = 20_000) -> Iterator[None]:
    """Fewer, cheaper garbage collections while a probe runs.

    Streams allocate many short-lived dicts (one per decoded chunk) that reference counting frees
    anyway; with the default threshold the cyclic collector ran ~8 % of the probe's CPU at a thousand
    streams, and a full collection over every imported module paused the loop for 100+ ms. Freezing
    what exists at start keeps full collections small; the old settings come back afterwards.
    """
    old = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(threshold, 20, 20)
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()


def run_probe(config: ProbeConfig, *, resume: bool = False, console: Console | None = None,
              live: bool | None = None, environ: Mapping[str, str] | None = None,
              announce: bool = False) -> RunResult:
    """Run a probe on a fresh event loop (uvloop when installed); Ctrl-C stops it cleanly."""

    async def main() -> RunResult:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        handled = False
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGINT, stop.set)
            handled = True
        try:
            return await execute(config, resume=resume, console=console, live=live,
                                 environ=environ, stop=stop, announce=announce)
        finally:
            if handled:
                loop.remove_signal_handler(signal.SIGINT)

    with quiet_gc(), asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main())

#: Old names → new (docs/design/vocabulary.md "Names").
__getattr__ = renamed(__name__, {"describe": "describe_run"})
