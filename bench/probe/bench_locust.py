"""What one Locust worker process sustains, against the built-in probe in the same run.

Both clients check every stream with the same ``StreamChecker`` and write the same ``Record``s; they
differ in their I/O stack: the probe is asyncio + aiohttp (uvloop), the Locust worker is gevent +
geventhttpclient (Locust's ``FastHttpUser``). One chaos upstream (a separate process, healthy, 100
chunks per answer, ``--inter-token-ms`` apart) serves both, one client at a time, at each level of
concurrent streams (Locust users or probe concurrency), interleaved per level. The upstream (and the
Locust master) is pinned to core 0, the client under test to core 1.

Measured over a steady window (starting 2 s after the first record, ``--seconds`` long), from the
records themselves: streams finished per second, events (data chunks) per second, time to first token,
and the CPU of the client process (user + system, % of one core), plus the chaos server's CPU so a
saturated upstream is visible.

Run: .venv/bin/python -m bench.probe.bench_locust [--levels 50,200,400] [--seconds 15] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from bench.harness import load_average, machine, median, percentile, pinned, start_chaos, stop
from sseguard.core.record import Record, decode_record

CLI = [sys.executable, "-m", "sseguard.cli"]
#: Upstream (and the Locust master) on core 0, the client under test on core 1, as in bench_chaos.py.
UPSTREAM_CORE, CLIENT_CORE = 0, 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return float(t.user + t.system)


@dataclass
class Result:
    client: str
    level: int
    streams_s: float
    events_s: float
    ttft_p50: float
    ttft_p99: float
    cpu: float
    chaos_cpu: float
    bad: int


def read_records(paths: list[Path]) -> list[Record]:
    out: list[Record] = []
    for path in paths:
        for line in path.read_bytes().splitlines():
            if line.strip():
                out.append(decode_record(line))
    return out


def measure(client: str, level: int, procs: list[subprocess.Popen[bytes]], client_pid: int,
            results: Path, pattern: str, chaos: psutil.Process, seconds: float) -> Result:
    """Wait for the first record, let the ramp pass, then sample CPU over the window."""
    deadline = time.monotonic() + 60
    while not any(p.stat().st_size for p in results.glob(pattern)):
        if time.monotonic() > deadline or any(p.poll() not in (None, 0) for p in procs):
            raise RuntimeError(f"{client} produced no record")
        time.sleep(0.05)
    time.sleep(2.0)
    me = psutil.Process(client_pid)
    t0, c0, k0 = time.time(), cpu_seconds(me), cpu_seconds(chaos)
    time.sleep(seconds)
    t1, c1, k1 = time.time(), cpu_seconds(me), cpu_seconds(chaos)
    for p in procs:
        p.wait(60)
    records = read_records(sorted(results.glob(pattern)))
    done = [r for r in records
            if r.duration_ms is not None and t0 <= r.started_at + r.duration_ms / 1000 < t1]
    ttfts = sorted(r.ttft_ms for r in records if t0 <= r.started_at < t1 and r.ttft_ms is not None)
    window = t1 - t0

    return Result(client=client, level=level, streams_s=len(done) / window,
                  events_s=sum(r.chunks for r in done) / window, ttft_p50=median(ttfts),
                  ttft_p99=percentile(ttfts, 99), cpu=100 * (c1 - c0) / window,
                  chaos_cpu=100 * (k1 - k0) / window,
                  bad=sum(r.ending != "complete" for r in done))


def run_locust(url: str, level: int, seconds: float, work: Path, chaos: psutil.Process) -> Result:
    out = work / f"locust-{level}"
    port = free_port()
    env = dict(os.environ)
    common = ["locust", "--arm", f"bench={url}", "--out", str(out), "--stall-timeout", "30"]
    runtime = f"{int(seconds + 8)}s"
    master = subprocess.Popen(
        [*CLI, *common, "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
         "--headless", "-u", str(level), "-r", str(level), "-t", runtime, "--expect-workers", "1",
         "--only-summary", "--exit-code-on-error", "0"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=pinned(UPSTREAM_CORE))
    time.sleep(0.5)
    # `sseguard locust` replaces itself with Locust: this pid is the worker process.
    worker = subprocess.Popen([*CLI, *common, "--worker", "--master-host", "127.0.0.1",
                               "--master-port", str(port)],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              preexec_fn=pinned(CLIENT_CORE))
    try:
        return measure("locust worker", level, [master, worker], worker.pid, out, "results-*.jsonl",
                       chaos, seconds)
    finally:
        for p in (master, worker):
            if p.poll() is None:
                p.terminate()
                p.wait(10)


def run_probe(url: str, level: int, seconds: float, work: Path, chaos: psutil.Process) -> Result:
    out = work / f"probe-{level}"
    proc = subprocess.Popen(
        [*CLI, "probe", "--arm", f"bench={url}", "--concurrency", str(level), "--duration",
         f"{int(seconds + 5)}s", "--out", str(out), "--no-live", "--json", "--ramp", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=pinned(CLIENT_CORE))
    try:
        return measure("probe (aiohttp)", level, [proc], proc.pid, out, "results.jsonl", chaos,
                       seconds)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="50,200", help="concurrent streams per client")
    parser.add_argument("--seconds", type=float, default=15.0, help="measured window per run")
    parser.add_argument("--tokens", type=int, default=100, help="content chunks per answer")
    parser.add_argument("--inter-token-ms", type=float, default=10.0)
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs per client and level, interleaved; the median run (by events/s) "
                             "is shown")
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]

    chaos_proc, url = start_chaos(["--tokens", str(args.tokens), "--inter-token-ms",
                                   str(args.inter_token_ms)], core=UPSTREAM_CORE)
    chaos = psutil.Process(chaos_proc.pid)
    print(f"{machine()}; chaos: {args.tokens} chunks/answer, {args.inter_token_ms:g} ms "
          f"apart; window {args.seconds:g} s, median of {args.repeat}")
    print(f"{'client':<16} {'streams':>7} {'streams/s':>9} {'events/s':>9} {'TTFT p50':>9} "
          f"{'TTFT p99':>9} {'CPU':>6} {'chaos CPU':>9} {'bad':>4}")
    try:
        with tempfile.TemporaryDirectory(prefix="bench-locust-") as tmp:
            work = Path(tmp)
            for level in levels:
                runs: dict[str, list[Result]] = {}
                for i in range(args.repeat):
                    for runner in (run_probe, run_locust):
                        r = runner(url, level, args.seconds, work / str(i), chaos)
                        runs.setdefault(r.client, []).append(r)
                for results in runs.values():
                    r = sorted(results, key=lambda x: x.events_s)[len(results) // 2]
                    print(f"{r.client:<16} {r.level:>7} {r.streams_s:>9.1f} {r.events_s:>9.0f} "
                          f"{r.ttft_p50:>7.1f}ms {r.ttft_p99:>7.1f}ms {r.cpu:>5.0f}% "
                          f"{r.chaos_cpu:>8.0f}% {r.bad:>4}", flush=True)
    finally:
        stop(chaos_proc)
    print(f"load at the end: {load_average():.1f}")


if __name__ == "__main__":
    main()
