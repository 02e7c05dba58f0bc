"""What the guard proxy costs: the same load direct to the chaos upstream and through ``sseguard proxy``.

Processes and cores (2-core machine): the proxy runs as ``sseguard proxy`` in a subprocess pinned to
core 1, alone; the chaos upstream (``sseguard chaos``, subprocess) and this load client share core 0.
The proxy runs as deployed: strict policy, in-flight checking, error frames on bad ends, every stream
recorded to a SQLite store. The client is one aiohttp session on uvloop reading with ``iter_any()``.

Per scenario (1, 100, 1,000 concurrent streams) and per target (direct, proxy), each of N workers
requests streams back to back; starts are spread over one stream length so streams do not run in
lock-step, and only the steady window after that ramp is measured. Reported: events/s the client
received, time to first chunk (p50, p99), proxy CPU and memory. Direct and proxy runs alternate,
``--repeats`` times, and the medians are compared.

Run: .venv/bin/python bench/bench_proxy.py [--repeats 3] [--append docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

REQUEST = json.dumps({"model": "chaos-1", "stream": True,
                      "messages": [{"role": "user", "content": "Stream something."}]}).encode()
HEADERS = {"Content-Type": "application/json", "Authorization": "Bearer sk-bench-not-a-real-key"}
TICKS = os.sysconf("SC_CLK_TCK")
SSEGUARD = [sys.executable, "-c", "from sseguard.cli import main; main()"]


@dataclass(frozen=True)
class Scenario:
    name: str
    streams: int
    tokens: int  # content chunks per stream (plus role, finish and [DONE] frames)
    inter_token_ms: float
    seconds: float  # measured window, after the ramp

    @property
    def stream_s(self) -> float:
        return self.tokens * self.inter_token_ms / 1000


SCENARIOS = [
    Scenario("1 stream", 1, 20, 10, 8),
    Scenario("100 streams", 100, 100, 10, 8),
    Scenario("1,000 streams", 1000, 100, 50, 10),
]


@dataclass
class Run:
    events: int = 0
    window: float = 0.0
    ttfc_ms: list[float] = field(default_factory=list)
    completed: int = 0
    failed: int = 0
    client_cpu: float = 0.0
    proxy_cpu: float = 0.0  # the relay's CPU (share of one core) over the run
    proxy_cpu_s: float = 0.0
    proxy_rss_mb: float = 0.0
    idle_rss_mb: float = 0.0
    all_events: int = 0  # events over the whole run, ramp included (for CPU per event)

    @property
    def cpu_us_per_event(self) -> float:
        return self.proxy_cpu_s / self.all_events * 1e6 if self.all_events else float("nan")

    @property
    def events_per_s(self) -> float:
        return self.events / self.window if self.window else 0.0

    @property
    def p50(self) -> float:
        return statistics.median(self.ttfc_ms) if self.ttfc_ms else float("nan")

    @property
    def p99(self) -> float:
        if len(self.ttfc_ms) < 2:
            return self.p50
        return statistics.quantiles(self.ttfc_ms, n=100, method="inclusive")[98]


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def pinned(core: int) -> object:
    def pin() -> None:
        os.sched_setaffinity(0, {core})
    return pin


@contextlib.contextmanager
def process(args: list[str], core: int, *,
            raw: bool = False) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Start a server pinned to ``core``; yield it and the first line it prints."""
    command = args if raw else [*SSEGUARD, *args]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, preexec_fn=pinned(core))  # type: ignore[arg-type]
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{args[0]} did not start")
        yield proc, line
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def load(url: str, sc: Scenario, proxy_pid: int | None) -> Run:
    run = Run()
    # perf_counter, not loop.time(): uvloop's clock has a 1 ms resolution.
    clock = time.perf_counter
    ramp = max(sc.stream_s, 0.5)
    t0 = clock()
    start_measure, end_measure = t0 + ramp, t0 + ramp + sc.seconds
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0)
    timeout = aiohttp.ClientTimeout(total=None, sock_read=30)
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    proxy0 = cpu_seconds(proxy_pid) if proxy_pid else 0.0
    peak_rss = 0.0

    async def worker(i: int, session: aiohttp.ClientSession) -> None:
        await asyncio.sleep(ramp * i / sc.streams)
        while clock() < end_measure:
            sent = clock()
            first = True
            try:
                async with session.post(url, data=REQUEST, headers=HEADERS) as resp:
                    async for chunk in resp.content.iter_any():
                        now = clock()
                        if first:
                            first = False
                            if start_measure <= sent < end_measure:
                                run.ttfc_ms.append((now - sent) * 1000)
                        n = chunk.count(b"\n\n")
                        run.all_events += n
                        if start_measure <= now < end_measure:
                            run.events += n
                    if resp.status == 200:
                        run.completed += 1
                    else:
                        run.failed += 1
            except aiohttp.ClientError:
                run.failed += 1

    async def sample_rss() -> None:
        nonlocal peak_rss
        while proxy_pid and clock() < end_measure:
            peak_rss = max(peak_rss, rss_mb(proxy_pid))
            await asyncio.sleep(0.5)

    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        await asyncio.gather(sample_rss(), *(worker(i, session) for i in range(sc.streams)))
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    elapsed = clock() - t0
    run.window = sc.seconds
    run.client_cpu = (cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime) / elapsed
    if proxy_pid:
        run.proxy_cpu_s = cpu_seconds(proxy_pid) - proxy0
        run.proxy_cpu = run.proxy_cpu_s / elapsed
        run.proxy_rss_mb = peak_rss
    return run


def scenario(sc: Scenario, repeats: int, store: Path) -> dict[str, list[Run]]:
    """Direct, a bare aiohttp relay and the sseguard proxy, alternating, ``repeats`` times."""
    chaos_args = ["chaos", "--listen", "127.0.0.1:0", "--json", "--tokens", str(sc.tokens),
                  "--inter-token-ms", str(sc.inter_token_ms)]
    runs: dict[str, list[Run]] = {"direct": [], "bare relay": [], "sseguard proxy": []}
    with process(chaos_args, 0) as (_, chaos_line):
        upstream = json.loads(chaos_line)["url"]
        proxy_args = ["proxy", "--upstream", upstream, "--listen", "127.0.0.1:0", "--store", str(store)]
        bare_args = [sys.executable, __file__, "--bare-relay", upstream]
        with process(proxy_args, 1) as (proxy, proxy_line), \
                process(bare_args, 1, raw=True) as (bare, bare_line):
            targets = {"direct": (upstream, None), "bare relay": (bare_line.split()[4], bare.pid),
                       "sseguard proxy": (proxy_line.split()[4], proxy.pid)}
            idle = {name: rss_mb(pid) if pid else 0.0 for name, (_, pid) in targets.items()}
            for rep in range(repeats):
                order = list(targets) if rep % 2 == 0 else list(reversed(targets))
                for name in order:
                    base, pid = targets[name]
                    run = asyncio.run(load(f"{base}/chat/completions", sc, pid))
                    run.idle_rss_mb = idle[name]
                    runs[name].append(run)
                    print(f"  {sc.name:14} {name:14} {run.events_per_s:10,.0f} ev/s  TTFC p50 "
                          f"{run.p50:7.2f} ms p99 {run.p99:8.2f} ms  completed {run.completed:,} "
                          f"failed {run.failed}  client CPU {run.client_cpu:.0%}"
                          + (f"  relay CPU {run.proxy_cpu:.0%} ({run.cpu_us_per_event:.1f} µs/event)"
                             f" RSS {run.proxy_rss_mb:.0f} MB" if pid else ""), flush=True)
    return runs


async def bare_relay(upstream: str) -> None:
    """The baseline HTTP.md measured: aiohttp.web + one ClientSession, each chunk written as it comes,
    no checking, no records. Prints its URL like the sseguard servers do."""
    from aiohttp import web

    session: aiohttp.ClientSession | None = None

    async def chat(request: web.Request) -> web.StreamResponse:
        assert session is not None
        body = await request.read()
        async with session.post(f"{upstream}/chat/completions", data=body,
                                headers={"Content-Type": "application/json"}) as up:
            resp = web.StreamResponse(status=up.status, headers={
                "Content-Type": up.headers.get("Content-Type", "text/event-stream"),
                "Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
            await resp.prepare(request)
            async for chunk in up.content.iter_any():
                await resp.write(chunk)
            await resp.write_eof()
            return resp

    async def start(app: web.Application) -> None:
        nonlocal session
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, limit_per_host=0))

    async def stop(app: web.Application) -> None:
        if session is not None:
            await session.close()

    app = web.Application()
    app.on_startup.append(start)
    app.on_cleanup.append(stop)
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)
    await site.start()
    port = runner.addresses[0][1]
    print(f"bare relay listening on http://127.0.0.1:{port}/v1", flush=True)
    await asyncio.Event().wait()


def med(values: list[float]) -> float:
    return statistics.median(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--append", metavar="FILE", help="Append the results section to FILE.")
    parser.add_argument("--bare-relay", metavar="UPSTREAM", help=argparse.SUPPRESS)
    args = parser.parse_args()
    with contextlib.suppress(ImportError):
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if args.bare_relay:
        asyncio.run(bare_relay(args.bare_relay))
        return
    if (os.cpu_count() or 1) < 2:
        sys.exit("needs two cores: the relay gets one of its own")
    os.sched_setaffinity(0, {0})
    rows = []
    started = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        for sc in SCENARIOS:
            runs = scenario(sc, args.repeats, Path(tmp) / "bench.db")
            direct = runs["direct"]
            d_eps = med([r.events_per_s for r in direct])
            d50, d99 = med([r.p50 for r in direct]), med([r.p99 for r in direct])
            asked = sc.streams * 1000 / sc.inter_token_ms
            rows.append(f"| {sc.name} (d={sc.inter_token_ms:g} ms, {asked:,.0f} ev/s asked) | direct | "
                        f"{d_eps:,.0f} | 100% | {d50:.2f} / {d99:.2f} | – | – | – | "
                        f"{med([r.client_cpu for r in direct]):.0%} |")
            for name in ("bare relay", "sseguard proxy"):
                rs = runs[name]
                eps = med([r.events_per_s for r in rs])
                p50, p99 = med([r.p50 for r in rs]), med([r.p99 for r in rs])
                rows.append(
                    f"| | {name} | {eps:,.0f} | **{eps / d_eps:.1%}** | {p50:.2f} / {p99:.2f} | "
                    f"**{p50 - d50:+.2f}** / {p99 - d99:+.2f} | {med([r.proxy_cpu for r in rs]):.0%}, "
                    f"{med([r.cpu_us_per_event for r in rs]):.1f} µs/event | "
                    f"{rs[0].idle_rss_mb:.0f} → {max(r.proxy_rss_mb for r in rs):.0f} MB | "
                    f"{med([r.client_cpu for r in rs]):.0%} |")
    took = time.time() - started
    header = ("| scenario | target | events/s | ÷ direct | TTFC p50 / p99 ms | added p50 / p99 ms "
              "| relay CPU | relay RSS idle → peak | client CPU |\n"
              "|---|---|---|---|---|---|---|---|---|")
    section = "\n".join([
        "", "## proxy overhead (bench/bench_proxy.py)", "",
        f"Command: `.venv/bin/python bench/bench_proxy.py --repeats {args.repeats}` "
        f"({took:.0f} s). Machine: {os.cpu_count()} cores (`nproc`), Python "
        f"{platform.python_version()}, {platform.system()} {platform.release()}. The relay under "
        "test (`sseguard proxy`: strict policy, in-flight checking, records to SQLite; or the bare "
        "aiohttp relay baseline of HTTP.md) runs on core 1; the chaos upstream and the aiohttp load "
        "client share core 0. Medians of the runs; TTFC = time to first chunk.", "",
        header, *rows, ""])
    print(section)
    if args.append:
        with open(args.append, "a") as f:
            f.write(section)


if __name__ == "__main__":
    main()
