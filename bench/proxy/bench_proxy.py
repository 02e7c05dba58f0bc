"""What the guard proxy costs: the same load direct to the chaos upstream and through ``sseguard proxy``.

Processes and cores (2-core machine): the proxy runs as ``sseguard proxy`` in a subprocess pinned to
core 1, alone; the chaos upstream (``sseguard chaos``, subprocess) and this load client share core 0.
The proxy runs as deployed: strict policy, in-flight checking, error frames on bad ends, every stream
recorded to a SQLite store. The client is one aiohttp session on uvloop reading with ``iter_any()``.

Per scenario (1, 100, 1,000 concurrent chat streams; 100 Responses, 100 Messages and 100 Gemini
``alt=sse`` streams) and per
target (direct, bare relay, proxy), each of N workers
requests streams back to back; starts are spread over one stream length so streams do not run in
lock-step, and only the steady window after that ramp is measured. Reported: events/s the client
received, time to first chunk (p50, p99), proxy CPU and memory. Direct and proxy runs alternate,
``--repeats`` times, and the medians are compared.

``--workers 1,2`` adds ``sseguard proxy --workers 2`` next to the one-process proxy: its two
processes are not pinned (they share the machine's two cores with the upstream and the client, which
stay on core 0); its CPU and RSS are summed over the supervisor and its workers.

``--stores sqlite,none`` runs the proxy once per store side by side (``none``: ``--store none``, no
records), to measure what the record store costs a client; ``--baseline-src DIR`` adds each proxy
variant once more, importing ``sseguard`` from ``DIR`` (the ``src`` of another tree: a before and after
measured in one run). ``--no-bare`` leaves the bare relay out. ``--otel`` adds each proxy variant
once more with ``--otel``, exporting its spans and metrics over OTLP/HTTP to a sink on core 0 that
reads and drops them (the export's encoding and sending are the proxy's own CPU, as deployed).

Run: .venv/bin/python -m bench.proxy.bench_proxy [--repeats 3] [--workers 1,2] [--only 100,1000]
     [--apis responses,messages] [--stores sqlite,none] [--baseline-src DIR] [--no-bare] [--no-slow]
     [--otel] [--append docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import sys
import tempfile
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import aiohttp

from bench.harness import (
    cpu_seconds,
    machine,
    machine_busy_seconds,
    median,
    percentile,
    pin_self,
    rss_mb,
    server,
)

REQUEST = json.dumps({"model": "chaos-1", "stream": True,
                      "messages": [{"role": "user", "content": "Stream something."}]}).encode()
#: Per protocol: the path under the base URL and the request body.
REQUESTS = {
    "chat": ("chat/completions", REQUEST),
    "responses": ("responses", json.dumps({"model": "chaos-1", "stream": True,
                                           "input": "Stream something."}).encode()),
    "messages": ("messages", json.dumps({"model": "chaos-1", "stream": True, "max_tokens": 4096,
                                         "messages": [{"role": "user",
                                                       "content": "Stream something."}]}).encode()),
    # Gemini streams by its path; ``alt=sse`` asks for SSE frames (what the SDKs and Gemini CLI send).
    "gemini": ("models/chaos-1:streamGenerateContent?alt=sse",
               json.dumps({"contents": [{"role": "user",
                                         "parts": [{"text": "Stream something."}]}]}).encode()),
}
#: This benchmark as a child process (its bare relay and its frame upstream run that way).
SELF = [sys.executable, "-m", "bench.proxy.bench_proxy"]
HEADERS = {"Content-Type": "application/json", "Authorization": "Bearer sk-bench-not-a-real-key",
           "anthropic-version": "2023-06-01", "x-goog-api-key": "AIza-bench-not-a-real-key"}


@dataclass(frozen=True)
class Scenario:
    name: str
    streams: int
    tokens: int  # content chunks per stream (plus role, finish and [DONE] frames)
    inter_token_ms: float
    seconds: float  # measured window, after the ramp
    api: str = "chat"

    @property
    def stream_s(self) -> float:
        return self.tokens * self.inter_token_ms / 1000


SLOW_STREAMS, SLOW_FRAMES, SLOW_PAUSE = 1000, 4096, 3.0
BIG_FRAME = b"data: " + json.dumps({"id": "chatcmpl-big", "object": "chat.completion.chunk",
                                    "created": 0, "model": "m", "choices": [{
                                        "index": 0, "delta": {"content": "x" * 120},
                                        "finish_reason": None}]}).encode() + b"\n\n"

SCENARIOS = [
    Scenario("1 stream", 1, 20, 10, 8),
    Scenario("100 streams", 100, 100, 10, 8),
    Scenario("responses, 100 streams", 100, 100, 10, 8, api="responses"),
    Scenario("messages, 100 streams", 100, 100, 10, 8, api="messages"),
    Scenario("gemini, 100 streams", 100, 100, 10, 8, api="gemini"),
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
    own_cpu_s: float = 0.0  # the proxy's own process alone (a store writer process not counted)
    proxy_rss_mb: float = 0.0
    idle_rss_mb: float = 0.0
    others_cpu: float = 0.0  # CPU (in cores) used by processes outside the benchmark meanwhile
    all_events: int = 0  # events over the whole run, ramp included (for CPU per event)

    @property
    def cpu_us_per_event(self) -> float:
        return self.proxy_cpu_s / self.all_events * 1e6 if self.all_events else float("nan")

    @property
    def own_us_per_event(self) -> float:
        return self.own_cpu_s / self.all_events * 1e6 if self.all_events else float("nan")

    @property
    def events_per_s(self) -> float:
        return self.events / self.window if self.window else 0.0

    @property
    def p50(self) -> float:
        return median(self.ttfc_ms)

    @property
    def p99(self) -> float:
        return percentile(self.ttfc_ms, 99)


async def load(url: str, sc: Scenario, proxy_pid: int | None, chaos_pid: int) -> Run:
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
    own0 = cpu_seconds(proxy_pid, alone=True) if proxy_pid else 0.0
    chaos0 = cpu_seconds(chaos_pid)
    busy0 = machine_busy_seconds()
    peak_rss = 0.0

    body = REQUESTS[sc.api][1]

    async def worker(i: int, session: aiohttp.ClientSession) -> None:
        await asyncio.sleep(ramp * i / sc.streams)
        while clock() < end_measure:
            sent = clock()
            first = True
            try:
                async with session.post(url, data=body, headers=HEADERS) as resp:
                    async for chunk in resp.content.iter_any():
                        now = clock()
                        if first:
                            first = False
                            if start_measure <= sent < end_measure:
                                run.ttfc_ms.append((now - sent) * 1000)
                        # Frames end in a blank line: "\n\n", or "\r\n\r\n" (Gemini's SSE).
                        n = chunk.count(b"\n\n") + chunk.count(b"\n\r\n")
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
        run.own_cpu_s = cpu_seconds(proxy_pid, alone=True) - own0
        run.proxy_cpu = run.proxy_cpu_s / elapsed
        run.proxy_rss_mb = peak_rss
    ours = (run.client_cpu * elapsed + run.proxy_cpu_s + cpu_seconds(chaos_pid) - chaos0)
    run.others_cpu = max(0.0, (machine_busy_seconds() - busy0 - ours) / elapsed)
    return run


@dataclass(frozen=True)
class Variant:
    """One ``sseguard proxy`` under test: its process count, its store, and which tree it runs."""

    workers: int = 1
    store: str = "sqlite"  # sqlite (a file in the run's temporary directory) or none
    src: str | None = None  # another tree's src directory (PYTHONPATH), the baseline
    otel: bool = False  # --otel, exporting to the benchmark's OTLP sink

    @property
    def name(self) -> str:
        name = "sseguard proxy" if self.workers == 1 else f"sseguard proxy ×{self.workers}"
        if self.store == "none":
            name += ", no store"
        if self.otel:
            name += ", --otel"
        return name + (" (baseline)" if self.src else "")


def variants(workers: list[int], stores: list[str], baseline_src: str | None,
             otel: bool = False) -> list[Variant]:
    return [Variant(n, store, src, on) for src in (None, *([baseline_src] if baseline_src else []))
            for n in workers for store in stores for on in ((False, True) if otel else (False,))]


class _DropOtlp(BaseHTTPRequestHandler):
    """Answers every OTLP/HTTP export with 200 and an empty body, and keeps nothing."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def otlp_sink() -> None:
    """``--otlp-sink``: an OTLP/HTTP endpoint that drops what it gets (for the ``--otel`` variants)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _DropOtlp)
    print(f"otlp sink on http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


def scenario(sc: Scenario, repeats: int, store: Path, proxies: list[Variant],
             bare_relay: bool = True) -> dict[str, list[Run]]:
    """Direct, a bare aiohttp relay and the sseguard proxy (one entry per variant), alternating,
    ``repeats`` times."""
    chaos_args = ["chaos", "--listen", "127.0.0.1:0", "--json", "--tokens", str(sc.tokens),
                  "--inter-token-ms", str(sc.inter_token_ms)]
    runs: dict[str, list[Run]] = {"direct": [], **({"bare relay": []} if bare_relay else {})}
    runs.update({v.name: [] for v in proxies})
    with server(chaos_args, 0) as (chaos, chaos_line), contextlib.ExitStack() as stack:
        upstream = json.loads(chaos_line)["url"]
        targets: dict[str, tuple[str, int | None]] = {"direct": (upstream, None)}
        if bare_relay:
            bare_args = [*SELF, "--bare-relay", upstream]
            bare, bare_line = stack.enter_context(server(bare_args, 1, raw=True))
            targets["bare relay"] = (bare_line.split()[4], bare.pid)
        otel_env: dict[str, str] = {}
        if any(v.otel for v in proxies):
            _, sink_line = stack.enter_context(server(
                [*SELF, "--otlp-sink"], 0, raw=True))
            otel_env = {"OTEL_EXPORTER_OTLP_ENDPOINT": sink_line.split()[3],
                        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}
        for i, v in enumerate(proxies):
            db = "none" if v.store == "none" else str(store.with_name(f"{store.stem}-{i}.db"))
            proxy_args = ["proxy", "--upstream", upstream, "--listen", "127.0.0.1:0", "--store",
                          db, "--workers", str(v.workers), *(["--otel"] if v.otel else [])]
            proxy, proxy_line = stack.enter_context(server(proxy_args, 1 if v.workers == 1 else None,
                                                            src=v.src,
                                                            extra_env=otel_env if v.otel else None))
            targets[v.name] = (proxy_line.split()[4], proxy.pid)
        idle = {name: rss_mb(pid) if pid else 0.0 for name, (_, pid) in targets.items()}
        for rep in range(repeats):
            order = list(targets) if rep % 2 == 0 else list(reversed(targets))
            for name in order:
                base, pid = targets[name]
                run = asyncio.run(load(f"{base}/{REQUESTS[sc.api][0]}", sc, pid, chaos.pid))
                run.idle_rss_mb = idle[name]
                runs[name].append(run)
                print(f"  {sc.name:14} {name:14} {run.events_per_s:10,.0f} ev/s  TTFC p50 "
                      f"{run.p50:7.2f} ms p99 {run.p99:8.2f} ms  completed {run.completed:,} "
                      f"failed {run.failed}  client CPU {run.client_cpu:.0%}  others "
                      f"{run.others_cpu:.0%}"
                      + (f"  relay CPU {run.proxy_cpu:.0%} ({run.cpu_us_per_event:.1f} µs/event, "
                         f"its own process {run.own_us_per_event:.1f})"
                         f" RSS {run.proxy_rss_mb:.0f} MB" if pid else ""), flush=True)
    return runs


async def bare_relay(upstream: str) -> None:
    """The baseline docs/design/http.md measured: aiohttp.web + one ClientSession, each chunk written as it
    comes, no checking, no records. Prints its URL like the sseguard servers do."""
    from aiohttp import web

    session: aiohttp.ClientSession | None = None

    async def relay(request: web.Request) -> web.StreamResponse:
        assert session is not None
        body = await request.read()
        headers = {"Content-Type": "application/json"}
        if "anthropic-version" in request.headers:
            headers["anthropic-version"] = request.headers["anthropic-version"]
        query = f"?{request.query_string}" if request.query_string else ""
        async with session.post(f"{upstream}/{request.match_info['tail']}{query}", data=body,
                                headers=headers) as up:
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
    app.router.add_post("/v1/{tail:.*}", relay)
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)
    await site.start()
    port = runner.addresses[0][1]
    print(f"bare relay listening on http://127.0.0.1:{port}/v1", flush=True)
    await asyncio.Event().wait()


async def frame_upstream(frames: int) -> None:
    """An upstream that streams ``frames`` chunk frames as fast as its client drains them: the
    slow-reader scenario needs bodies far larger than the kernel's socket buffers."""
    from aiohttp import web

    batch = BIG_FRAME * 64
    written = 0

    async def chat(request: web.Request) -> web.StreamResponse:
        nonlocal written
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        with contextlib.suppress(ConnectionError):
            for _ in range(frames // 64):
                await resp.write(batch)
                written += len(batch)
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
        return resp

    async def stats(request: web.Request) -> web.Response:
        return web.json_response({"written": written})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/stats", stats)
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)
    await site.start()
    print(json.dumps({"url": f"http://127.0.0.1:{runner.addresses[0][1]}/v1"}), flush=True)
    await asyncio.Event().wait()


@dataclass
class SlowRun:
    streams: int
    idle_rss_mb: float
    peak_rss_mb: float
    after_rss_mb: float
    received_mb: float
    cpu: float
    upstream_mb: float = 0.0


async def upstream_written(stats_url: str) -> int:
    async with aiohttp.ClientSession() as session, session.get(stats_url) as resp:
        return int((await resp.json())["written"])


async def slow_readers(url: str, pid: int, streams: int, pause: float, stats_url: str) -> SlowRun:
    """Every client reads 64 KiB of a multi-megabyte stream, pauses, then closes the connection."""
    idle = rss_mb(pid)
    cpu0 = cpu_seconds(pid)
    written0 = await upstream_written(stats_url)
    received = 0
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0)
    started = asyncio.Event()
    count = 0

    async def reader(session: aiohttp.ClientSession) -> None:
        nonlocal received, count
        async with session.post(url, data=REQUEST, headers=HEADERS) as resp:
            got = 0
            async for chunk in resp.content.iter_any():
                got += len(chunk)
                if got >= 65536:
                    break
            received += got
            count += 1
            if count == streams:
                started.set()
            await asyncio.sleep(pause)

    async with aiohttp.ClientSession(connector=connector) as session:
        tasks = [asyncio.create_task(reader(session)) for _ in range(streams)]
        await asyncio.wait_for(started.wait(), 60)
        peak = 0.0
        for _ in range(int(pause / 0.25)):
            peak = max(peak, rss_mb(pid))
            await asyncio.sleep(0.25)
        written = await upstream_written(stats_url) - written0
        await asyncio.gather(*tasks)
    await asyncio.sleep(2.5)  # the proxy hands freed memory back 1 s after its last stream
    return SlowRun(streams, idle, peak, rss_mb(pid), received / 2**20, cpu_seconds(pid) - cpu0,
                   written / 2**20)


def slow_scenario(streams: int, frames: int, pause: float, store: Path) -> dict[str, SlowRun]:
    out: dict[str, SlowRun] = {}
    up_args = [*SELF, "--frame-upstream", str(frames)]
    with server(up_args, 0, raw=True) as (_, up_line):
        upstream = json.loads(up_line)["url"]
        proxy_args = ["proxy", "--upstream", upstream, "--listen", "127.0.0.1:0", "--store", str(store)]
        bare_args = [*SELF, "--bare-relay", upstream]
        with server(proxy_args, 1) as (proxy, proxy_line), \
                server(bare_args, 1, raw=True) as (bare, bare_line):
            for name, base, pid in (("bare relay", bare_line.split()[4], bare.pid),
                                    ("sseguard proxy", proxy_line.split()[4], proxy.pid)):
                stats = upstream.removesuffix("/v1") + "/stats"
                run = asyncio.run(slow_readers(f"{base}/chat/completions", pid, streams, pause, stats))
                out[name] = run
                print(f"  slow readers  {name:14} RSS {run.idle_rss_mb:.0f} → peak {run.peak_rss_mb:.0f}"
                      f" → after {run.after_rss_mb:.0f} MB; clients read {run.received_mb:.0f} MiB, "
                      f"upstream wrote {run.upstream_mb:.0f} MiB",
                      flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--append", metavar="FILE", help="Append the results section to FILE.")
    parser.add_argument("--only", metavar="N[,N…]", help="Run only these stream counts (1,100,1000).")
    parser.add_argument("--workers", default="1", metavar="N[,N…]",
                        help="Proxy variants by --workers count, side by side (default 1).")
    parser.add_argument("--apis", metavar="API[,API…]",
                        help="Run only scenarios of these protocols (chat,responses,messages,gemini).")
    parser.add_argument("--stores", default="sqlite", metavar="STORE[,STORE…]",
                        help="Proxy variants by store, side by side: sqlite, none (default sqlite).")
    parser.add_argument("--baseline-src", metavar="DIR",
                        help="Run every proxy variant once more from this src directory.")
    parser.add_argument("--no-bare", action="store_true", help="Leave the bare relay out.")
    parser.add_argument("--no-slow", action="store_true", help="Skip the slow-reader scenario.")
    parser.add_argument("--otel", action="store_true",
                        help="Add each proxy variant with --otel (exporting to a local OTLP sink).")
    parser.add_argument("--otlp-sink", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--bare-relay", metavar="UPSTREAM", help=argparse.SUPPRESS)
    parser.add_argument("--frame-upstream", type=int, metavar="FRAMES", help=argparse.SUPPRESS)
    args = parser.parse_args()
    with contextlib.suppress(ImportError):
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if args.bare_relay:
        asyncio.run(bare_relay(args.bare_relay))
        return
    if args.otlp_sink:
        otlp_sink()
        return
    if args.frame_upstream:
        asyncio.run(frame_upstream(args.frame_upstream))
        return
    if (os.cpu_count() or 1) < 2:
        sys.exit("needs two cores: the relay gets one of its own")
    pin_self(0)
    workers = [int(n) for n in args.workers.split(",")]
    stores = args.stores.split(",")
    if not set(stores) <= {"sqlite", "none"}:
        sys.exit(f"--stores {args.stores}: use sqlite, none or both")
    proxies = variants(workers, stores, args.baseline_src, args.otel)
    rows = []
    started = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        wanted = {int(n) for n in args.only.split(",")} if args.only else None
        apis = set(args.apis.split(",")) if args.apis else None
        for sc in SCENARIOS:
            if wanted is not None and sc.streams not in wanted:
                continue
            if apis is not None and sc.api not in apis:
                continue
            runs = scenario(sc, args.repeats, Path(tmp) / "bench.db", proxies,
                            bare_relay=not args.no_bare)
            direct = runs["direct"]
            d_eps = median([r.events_per_s for r in direct])
            d50, d99 = median([r.p50 for r in direct]), median([r.p99 for r in direct])
            asked = sc.streams * 1000 / sc.inter_token_ms
            rows.append(f"| {sc.name} (d={sc.inter_token_ms:g} ms, {asked:,.0f} ev/s asked) | direct | "
                        f"{d_eps:,.0f} | 100% | {d50:.2f} / {d99:.2f} | – | – | – | "
                        f"{median([r.client_cpu for r in direct]):.0%} | "
                        f"{median([r.others_cpu for r in direct]):.0%} |")
            for name in [n for n in runs if n != "direct"]:
                rs = runs[name]
                eps = median([r.events_per_s for r in rs])
                p50, p99 = median([r.p50 for r in rs]), median([r.p99 for r in rs])
                rows.append(
                    f"| | {name} | {eps:,.0f} | **{eps / d_eps:.1%}** | {p50:.2f} / {p99:.2f} | "
                    f"**{p50 - d50:+.2f}** / {p99 - d99:+.2f} | {median([r.proxy_cpu for r in rs]):.0%}, "
                    f"{median([r.cpu_us_per_event for r in rs]):.1f} µs/event (own process "
                    f"{median([r.own_us_per_event for r in rs]):.1f}) | "
                    f"{rs[0].idle_rss_mb:.0f} → {max(r.proxy_rss_mb for r in rs):.0f} MB | "
                    f"{median([r.client_cpu for r in rs]):.0%} | {median([r.others_cpu for r in rs]):.0%} |")
        slow = ({} if args.no_slow
                else slow_scenario(SLOW_STREAMS, SLOW_FRAMES, SLOW_PAUSE, Path(tmp) / "slow.db"))
    slow_rows = [f"| {name} | {r.idle_rss_mb:.0f} MB | {r.peak_rss_mb:.0f} MB | {r.after_rss_mb:.0f} MB "
                 f"| {r.received_mb:.0f} MiB | {r.upstream_mb:,.0f} MiB |" for name, r in slow.items()]
    took = time.time() - started
    header = ("| scenario | target | events/s | ÷ direct | TTFC p50 / p99 ms | added p50 / p99 ms "
              "| relay CPU | relay RSS idle → peak | client CPU | other processes |\n"
              "|---|---|---|---|---|---|---|---|---|---|")
    section = "\n".join([
        "", "## proxy overhead (bench/proxy/bench_proxy.py)", "",
        f"Command: `.venv/bin/python -m bench.proxy.bench_proxy {' '.join(sys.argv[1:])}` "
        f"({took:.0f} s). Machine: {machine()}. The relay under "
        "test (`sseguard proxy`: strict policy, in-flight checking, records to SQLite; or the bare "
        "aiohttp relay of docs/design/http.md) runs on core 1 (`--workers 2`: on both cores); the chaos "
        "upstream and the aiohttp load client share core 0. Medians of the runs; TTFC = time to "
        "first chunk. \"Other processes\" is the CPU (in cores) that processes outside the "
        "benchmark used meanwhile: above a few percent the latencies measure the machine, not the "
        "relay.", "",
        header, *rows, "",
        *([f"Slow readers: {SLOW_STREAMS:,} streams of {SLOW_FRAMES * len(BIG_FRAME) / 1e6:.1f} MB "
           f"each (an upstream that writes as fast as it is drained); every client reads 64 KiB, "
           f"pauses {SLOW_PAUSE:g} s, then closes.", "",
           "| relay | RSS idle | RSS peak while the clients pause | RSS after they close | "
           "read by clients | written by the upstream meanwhile |", "|---|---|---|---|---|---|",
           *slow_rows, ""] if slow else [])])
    print(section)
    if args.append:
        with open(args.append, "a") as f:
            f.write(section)


if __name__ == "__main__":
    main()
