"""``sseguard probe --workers N``: one run shared by N probe processes on this machine.

One Python process runs one event loop on one core, and past ~80 % of that core a probe's timings
measure the probe itself. So a large machine runs N processes (spawned: fresh interpreters, nothing of
this process's state leaks in), each taking every N-th request index and its part of the concurrency
of every arm and level (``runner.Share``). This process opens the run as a single-process run does
(run id, run file, reachability of the arms), waits for the workers, and merges their results files
into ``results.jsonl``: the run directory looks exactly like a one-process run's, every record naming
the worker that made it. Ctrl-C reaches every worker (one process group); each stops cleanly and what
finished is merged. Beyond one machine, Locust workers (``sseguard locust``) are the answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import signal
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from rich.console import Console

from sseguard._serve import loop_factory, raise_open_files_limit
from sseguard.core.redact import Redactor
from sseguard.probe.config import ProbeConfig
from sseguard.probe.cpu import CpuSummary
from sseguard.probe.runner import (
    RunResult,
    Share,
    check_reachable,
    describe_run,
    execute,
    open_run,
    quiet_gc,
)
from sseguard.probe.sink import RESULTS, merge_worker_results, write_run_file
from sseguard.probe.target import Target


@dataclass(frozen=True, slots=True)
class ShareResult:
    """What one worker process reports back (its records are in its results file)."""

    written: int
    failed: int  # of the records written, failed under the run's policy
    interrupted: bool
    cpu_samples: list[float]
    cpu_seconds: float


def run_share(config: ProbeConfig, share: Share, run_id: str, resume: bool,
              environ: Mapping[str, str] | None) -> ShareResult:
    """One worker process: its own event loop and session; stops cleanly on SIGINT/SIGTERM."""

    async def main() -> ShareResult:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        result = await execute(config, resume=resume, live=False, environ=environ, stop=stop,
                               share=share, run_id=run_id)
        return ShareResult(written=result.new_records, failed=result.new_failed,
                           interrupted=result.interrupted,
                           cpu_samples=result.cpu.samples, cpu_seconds=result.cpu.total_seconds)

    with quiet_gc(), asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main())


@contextlib.contextmanager
def _deferred_interrupt(flag: list[bool]) -> Iterator[None]:
    """While the workers run, Ctrl-C is theirs to handle: this process notes it and waits for them."""

    def note(signum: int, frame: FrameType | None) -> None:
        flag.append(True)

    old = signal.signal(signal.SIGINT, note)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def run_parallel(config: ProbeConfig, workers: int, *, resume: bool = False,
                 console: Console | None = None, environ: Mapping[str, str] | None = None,
                 announce: bool = False) -> RunResult:
    """Run (or resume) ``config`` in ``workers`` processes and return the merged run."""
    console = console or Console(stderr=True)
    raise_open_files_limit()
    out = Path(config.out)
    targets = [Target.of(arm, environ) for arm in config.arms]
    redactor = Redactor([s for t in targets for s in t.secrets])
    run_doc, existing = open_run(config, redactor, resume=resume)
    failed_before = sum(r.failed_under(config.policy) for r in existing)
    run_id = str(run_doc["run_id"])
    if config.check_reachable:
        asyncio.run(check_reachable(targets, config.connect_timeout))
    if announce:
        console.print(f"{describe_run(config)} · {workers} processes", highlight=False,
                      soft_wrap=True)
    out.mkdir(parents=True, exist_ok=True)
    session_doc: dict[str, Any] = {"started_at": time.time(), "resumed": resume,
                                   "workers": workers}
    run_doc.setdefault("sessions", []).append(session_doc)
    write_run_file(out, run_doc)
    started = time.monotonic()
    signalled: list[bool] = []
    results: list[ShareResult] = []
    child_env = dict(environ) if environ is not None else None
    try:
        with _deferred_interrupt(signalled), ProcessPoolExecutor(
                max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [pool.submit(run_share, config, Share(index, workers), run_id, resume,
                                   child_env) for index in range(workers)]
            results = [f.result() for f in futures]
    finally:
        merge_worker_results(out)
        elapsed = time.monotonic() - started
        cpu = CpuSummary(samples=[s for r in results for s in r.cpu_samples],
                         total_seconds=sum(r.cpu_seconds for r in results), wall_seconds=elapsed)
        interrupted = bool(signalled) or any(r.interrupted for r in results)
        written = sum(r.written for r in results)
        session_doc.update({"finished_at": time.time(), "interrupted": interrupted,
                            "records": written, "cpu": cpu.to_dict()})
        write_run_file(out, run_doc)
    new_failed = sum(r.failed for r in results)
    return RunResult(out=out, run_id=run_id, config=config, results=out / RESULTS,
                     total=len(existing) + written, failed=failed_before + new_failed,
                     new_records=written, new_failed=new_failed, interrupted=interrupted, cpu=cpu,
                     elapsed=elapsed)
