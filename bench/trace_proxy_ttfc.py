"""Where the guard proxy's time to first chunk goes: per-stream timestamps, not guesses.

The proxy runs in a subprocess of this script with its steps wrapped (no product code changes): each
client request carries an ``x-trace`` id, and the proxy notes, with ``time.perf_counter_ns`` (the
monotonic clock every process on the machine shares), when its handler started, when the upstream
request went out and its headers came back, when the first upstream bytes were read, when the client's
headers were prepared and when the first body bytes were written; also how long each stream's end
(``stream_done``: metrics and the record) held the event loop. The load client notes when it sent
each request and when its first chunk arrived. Per protocol, at N concurrent streams (the steady
window after the ramp only), the medians of each step are printed.

``--sequential N`` instead asks N requests per target one at a time (direct, the bare relay, the proxy,
alternating): the added latency without any queueing.

Run: .venv/bin/python bench/trace_proxy_ttfc.py [--apis chat,responses,messages,gemini]
     [--streams 100] [--seconds 6] [--no-store] [--sequential N [--baseline SRC]]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).parent))
import bench_proxy as bp  # the bench's requests and process helpers

NS = time.perf_counter_ns
STEPS = ("handler", "post", "upstream_headers", "first_read", "prepared", "first_write")


def serve(upstream: str, store: str, out: str) -> None:
    """The proxy, its steps wrapped; the trace is written to ``out`` when it stops."""
    from aiohttp import web

    import sseguard.proxy.app as app_mod
    import sseguard.proxy.guarded as guarded
    import sseguard.proxy.state as state_mod
    from sseguard.proxy import ProxyConfig
    from sseguard.proxy.relay import StreamRelay

    marks: dict[str, dict[str, int]] = defaultdict(dict)
    done_ns: list[int] = []
    setup_ns: list[int] = []

    def mark(request: web.Request, step: str) -> None:
        trace = request.headers.get("x-trace")
        if trace is not None and step not in marks[trace]:
            marks[trace][step] = NS()

    v1 = app_mod.v1

    async def traced_v1(request: web.Request) -> web.StreamResponse:
        mark(request, "handler")
        return await v1(request)

    app_mod.v1 = traced_v1

    new_relay = guarded._Attempts.new_relay

    def traced_new_relay(self: Any) -> StreamRelay:
        t = NS()
        try:
            return new_relay(self)
        finally:
            setup_ns.append(NS() - t)

    guarded._Attempts.new_relay = traced_new_relay  # type: ignore[method-assign]

    post = aiohttp.ClientSession.post

    def traced_post(self: aiohttp.ClientSession, url: Any, **kw: Any) -> Any:
        headers = kw.get("headers") or {}
        trace = headers.get("x-trace")
        if trace is not None:
            marks[trace].setdefault("post", NS())
        return post(self, url, **kw)

    aiohttp.ClientSession.post = traced_post  # type: ignore[method-assign]

    read = aiohttp.StreamReader.read
    readers: dict[int, str] = {}  # StreamReader has slots: its trace id is kept here

    async def traced_read(self: aiohttp.StreamReader, n: int = -1) -> bytes:
        data = await read(self, n)
        trace = readers.pop(id(self), None)
        if trace is not None:
            marks[trace].setdefault("first_read", NS())
        return data

    aiohttp.StreamReader.read = traced_read  # type: ignore[method-assign]

    start = aiohttp.ClientResponse.start

    async def traced_start(self: aiohttp.ClientResponse, connection: Any) -> Any:
        out = await start(self, connection)
        trace = self.request_info.headers.get("x-trace")
        if trace is not None:
            marks[trace].setdefault("upstream_headers", NS())
            readers[id(self.content)] = trace
        return out

    aiohttp.ClientResponse.start = traced_start  # type: ignore[method-assign]

    connect = aiohttp.TCPConnector._create_connection
    connects: list[int] = []

    async def counted(self: aiohttp.TCPConnector, *a: Any, **kw: Any) -> Any:
        connects.append(NS())
        return await connect(self, *a, **kw)

    aiohttp.TCPConnector._create_connection = counted  # type: ignore[method-assign]

    prepare = web.StreamResponse.prepare
    writers: dict[int, str] = {}  # id(the response's body writer) → trace id

    async def traced_prepare(self: web.StreamResponse, request: web.BaseRequest) -> Any:
        out = await prepare(self, request)
        mark(request, "prepared")  # type: ignore[arg-type]
        trace = request.headers.get("x-trace")
        if trace is not None:
            writers[id(out)] = trace
        return out

    web.StreamResponse.prepare = traced_prepare  # type: ignore[method-assign]

    # The body writer's own write: the relay writes to it directly (``StreamResponse.write`` is a
    # wrapper around it); the upstream request's body goes through the same class, never prepared.
    from aiohttp.http_writer import StreamWriter

    write = StreamWriter.write

    async def traced_write(self: StreamWriter, chunk: Any, **kw: Any) -> None:
        await write(self, chunk, **kw)
        trace = writers.pop(id(self), None)
        if trace is not None:
            marks[trace].setdefault("first_write", NS())

    StreamWriter.write = traced_write  # type: ignore[method-assign]

    stream_done = state_mod.ProxyState.stream_done

    def traced_done(self: Any, relay: Any, verdict: Any) -> None:
        t = NS()
        stream_done(self, relay, verdict)
        done_ns.append(NS() - t)

    state_mod.ProxyState.stream_done = traced_done  # type: ignore[method-assign]

    import gc

    import uvloop

    from sseguard._serve import map_large_blocks, settle_gc

    # As ``proxy.worker.serve_worker`` sets a proxy process up (the GC settings matter here).
    map_large_blocks()
    settle_gc(int(os.environ.get("TRACE_GC_THRESHOLD", "20000")))
    # (generation, wall ns, the loop thread's CPU ns) of every cyclic-GC pass: CPU, because on a
    # shared machine a pass's wall time includes waiting for the core.
    gc_pauses: list[tuple[int, int, int]] = []
    gc_started = [0, 0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            gc_started[:] = NS(), time.thread_time_ns()
        else:
            gc_pauses.append((info["generation"], NS() - gc_started[0],
                              time.thread_time_ns() - gc_started[1]))

    gc.callbacks.append(on_gc)
    if os.environ.get("TRACE_GC_TYPES"):  # keep what the collector frees: which objects form cycles
        gc.set_debug(gc.DEBUG_SAVEALL)
    # How late a 1 ms timer fired, and how much of that the loop's thread spent on the CPU: the
    # rest of a late timer is the process waiting for its core (another process had it).
    lags: list[tuple[int, int]] = []
    cpu = time.thread_time_ns

    async def lag_probe() -> None:
        while True:
            t, c = NS(), cpu()
            await asyncio.sleep(0.001)
            lags.append((NS() - t - 1_000_000, cpu() - c))

    def ready(p: Any) -> None:
        asyncio.get_running_loop().create_task(lag_probe())
        print(f"proxy listening on {p.url}", flush=True)

    config = ProxyConfig.from_options(upstream=upstream, listen="127.0.0.1:0",
                                      store=None if store == "-" else store)
    profile = None
    if os.environ.get("TRACE_PROFILE"):
        import cProfile

        profile = cProfile.Profile()
        profile.enable()
    with contextlib.suppress(KeyboardInterrupt):
        uvloop.run(app_mod.serve_proxy(config, on_ready=ready))
    if profile is not None:
        import pstats

        profile.disable()
        with open(os.environ["TRACE_PROFILE"], "a") as f:
            pstats.Stats(profile, stream=f).sort_stats("tottime").print_stats(60)
    garbage: list[tuple[str, int]] = []
    if os.environ.get("TRACE_GC_TYPES"):
        from collections import Counter

        gc.collect()
        garbage = Counter(f"{type(o).__module__}.{type(o).__qualname__}"
                          for o in gc.garbage).most_common(40)
        gc.garbage.clear()
    Path(out).write_text(json.dumps({"marks": marks, "done_ns": done_ns, "setup_ns": setup_ns,
                                      "connects": len(connects), "streams": len(setup_ns),
                                      "gc": gc_pauses, "lags": lags, "garbage": garbage}))


async def load(url: str, api: str, streams: int, seconds: float) -> dict[str, dict[str, int]]:
    path, body = bp.REQUESTS[api]
    clock = time.perf_counter
    ramp = 1.0
    t0 = clock()
    start, end = t0 + ramp, t0 + ramp + seconds
    seen: dict[str, dict[str, int]] = {}
    count = 0
    events = 0

    async def worker(i: int, session: aiohttp.ClientSession) -> None:
        nonlocal count, events
        await asyncio.sleep(ramp * i / streams)
        while clock() < end:
            count += 1
            trace = f"{i}-{count}"
            sent = NS()
            first = 0
            async with session.post(f"{url}/{path}", data=body,
                                    headers={**bp.HEADERS, "x-trace": trace}) as resp:
                got_headers = NS()
                async for chunk in resp.content.iter_any():
                    if not first:
                        first = NS()
                    events += chunk.count(b"\n\n") + chunk.count(b"\n\r\n")
            if start <= sent / 1e9 < end:
                seen[trace] = {"sent": sent, "client_headers": got_headers, "client_first": first}

    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(*(worker(i, session) for i in range(streams)))
    seen["events"] = {"n": events}
    return seen


def report(api: str, seen: dict[str, dict[str, int]], trace: dict[str, Any], cpu_s: float) -> None:
    marks = trace["marks"]
    events = seen.pop("events")["n"]
    order = ["sent", *STEPS, "client_headers", "client_first"]
    gaps: dict[str, list[float]] = defaultdict(list)
    for tid, client in seen.items():
        row = {**marks.get(tid, {}), **client}
        if not all(k in row for k in order):
            continue
        for a, b in itertools.pairwise(order):
            gaps[f"{a} → {b}"].append((row[b] - row[a]) / 1e6)
        gaps["total"].append((row["client_first"] - row["sent"]) / 1e6)
    print(f"{api}: {len(gaps['total'])} streams traced (ms: p50 / p90); the proxy opened "
          f"{trace['connects']} upstream connections for {trace['streams']} streams; its CPU "
          f"{cpu_s / events * 1e6:.1f} µs per event delivered ({events:,} events)")
    for name, values in gaps.items():
        q = statistics.quantiles(values, n=10) if len(values) > 1 else values * 9
        print(f"  {name:34} {statistics.median(values):7.3f} / {q[8]:7.3f}")
    lags = sorted((lag / 1e6, busy / 1e6) for lag, busy in trace["lags"])
    if lags:
        late = [(lag, busy) for lag, busy in lags if lag > 2.0]
        print(f"  loop lag (a 1 ms timer, ms)       p50 {lags[len(lags) // 2][0]:.3f} p99 "
              f"{lags[int(len(lags) * 0.99)][0]:.3f} max {lags[-1][0]:.2f}; {len(late)} of "
              f"{len(lags)} over 2 ms ({sum(v for v, _ in late):.0f} ms in all, of which the loop "
              f"thread ran {sum(b for _, b in late):.0f} ms)")
    by_gen: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for gen, ns, cpu_ns in trace["gc"]:
        by_gen[gen].append((ns / 1e6, cpu_ns / 1e6))
    for gen, values in sorted(by_gen.items()):
        walls, cpus = [w for w, _ in values], [c for _, c in values]
        print(f"  GC gen {gen}: {len(values)} passes, wall p50 {statistics.median(walls):.3f} ms, "
              f"max {max(walls):.2f} ms; CPU p50 {statistics.median(cpus):.3f} ms, max "
              f"{max(cpus):.2f} ms, {sum(cpus):.1f} ms in all")
    for name, count in trace.get("garbage", []):
        print(f"  in cycles: {count:7,} {name}")
    for name in ("setup_ns", "done_ns"):
        values = [v / 1e6 for v in trace[name]]
        if values:
            print(f"  {name:34} {statistics.median(values):7.3f} / "
                  f"{statistics.quantiles(values, n=10)[8]:7.3f} ms held on the loop")


async def one_by_one(targets: dict[str, str], api: str, n: int) -> dict[str, list[float]]:
    """Time to first chunk of ``n`` requests per target, one request at a time, targets alternating:
    the relay's own added latency, without queueing behind other streams."""
    path, body = bp.REQUESTS[api]
    out: dict[str, list[float]] = {name: [] for name in targets}
    async with aiohttp.ClientSession() as session:
        for _ in range(n):
            for name, base in targets.items():
                sent = NS()
                first = 0
                async with session.post(f"{base}/{path}", data=body, headers=bp.HEADERS) as resp:
                    async for _chunk in resp.content.iter_any():
                        if not first:
                            first = NS()
                out[name].append((first - sent) / 1e6)
    return out


def sequential(apis: list[str], n: int, baseline: str | None = None) -> None:
    """Direct, the bare relay and the proxy, one request at a time (``--sequential N``); with
    ``baseline`` (a ``src`` directory, e.g. of main) also that tree's proxy, requests alternating."""
    import uvloop

    with tempfile.TemporaryDirectory() as tmp, bp.process(
            ["chaos", "--listen", "127.0.0.1:0", "--json", "--tokens", "5",
             "--inter-token-ms", "10"], 0) as (_, chaos_line), contextlib.ExitStack() as stack:
        upstream = json.loads(chaos_line)["url"]
        _, bare_line = stack.enter_context(bp.process(
            [sys.executable, str(Path(__file__).parent / "bench_proxy.py"), "--bare-relay",
             upstream], 1, raw=True))
        _, proxy_line = stack.enter_context(bp.process(
            ["proxy", "--upstream", upstream, "--listen", "127.0.0.1:0", "--store",
             str(Path(tmp) / "s.db")], 1))
        targets = {"direct": upstream, "bare relay": bare_line.split()[4],
                   "sseguard proxy": proxy_line.split()[4]}
        if baseline is not None:
            _, base_line = stack.enter_context(bp.process(
                ["env", f"PYTHONPATH={baseline}", *bp.SSEGUARD, "proxy", "--upstream", upstream,
                 "--listen", "127.0.0.1:0", "--store", str(Path(tmp) / "b.db")], 1, raw=True))
            targets["baseline proxy"] = base_line.split()[4]
        for api in apis:
            got = uvloop.run(one_by_one(targets, api, n))
            d = statistics.median(got["direct"])
            print(f"{api}: TTFC p50 one request at a time, {n} each: direct {d:.2f} ms; "
                  + "; ".join(f"{name} {statistics.median(v):.2f} ms "
                              f"(+{statistics.median(v) - d:.2f})"
                              for name, v in got.items() if name != "direct"), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--apis", default="chat,responses,messages,gemini")
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--no-store", action="store_true", help="Run the proxy without a store.")
    parser.add_argument("--sequential", type=int, metavar="N",
                        help="Instead: TTFC of N requests one at a time, direct, bare relay, proxy.")
    parser.add_argument("--baseline", metavar="SRC",
                        help="With --sequential: also the proxy of another tree's src directory "
                             "(e.g. /work/main/src), its requests alternating with this one's.")
    parser.add_argument("--serve", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        os.sched_setaffinity(0, {1})
        serve(*args.serve)
        return
    os.sched_setaffinity(0, {0})
    if args.sequential:
        sequential(args.apis.split(","), args.sequential, args.baseline)
        return
    import uvloop

    for api in args.apis.split(","):
        with tempfile.TemporaryDirectory() as tmp, bp.process(
                ["chaos", "--listen", "127.0.0.1:0", "--json", "--tokens", "100",
                 "--inter-token-ms", "10"], 0) as (_, chaos_line):
            upstream = json.loads(chaos_line)["url"]
            out = Path(tmp) / "trace.json"
            proxy = subprocess.Popen(
                [sys.executable, __file__, "--serve", upstream,
                 "-" if args.no_store else str(Path(tmp) / "s.db"), str(out)],
                stdout=subprocess.PIPE, text=True)
            assert proxy.stdout is not None
            url = proxy.stdout.readline().split()[-1]
            cpu0 = bp.cpu_seconds(proxy.pid)
            seen = uvloop.run(load(url, api, args.streams, args.seconds))
            cpu_s = bp.cpu_seconds(proxy.pid) - cpu0
            proxy.send_signal(signal.SIGTERM)
            proxy.wait(30)
            report(api, seen, json.loads(out.read_text()), cpu_s)


if __name__ == "__main__":
    main()
