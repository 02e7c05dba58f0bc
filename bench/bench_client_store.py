"""What StrictTransport and the record store cost, in one run.

1. Transport: the client's CPU time to read the same streamed body over loopback with a plain
   ``httpx2.Client`` vs one with ``StrictTransport`` (and the same pair under the openai SDK). The
   server runs in another process, so the client's ``process_time`` is the client's alone.
2. Store: 10,000 records through a ``BatchWriter`` into SQLite (and PostgreSQL when its binaries are
   installed): records/s, and how long ``put()`` keeps the caller.

Run: .venv/bin/python bench/bench_client_store.py [--events 2000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx2
import openai

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))

from _store_support import records
from sseguard.client import StrictTransport
from sseguard.store import BatchWriter, open_store


def _body(events: int) -> bytes:
    head = {"id": "chatcmpl-BfR2x7kLmNoPqRsTuVwXyZ", "object": "chat.completion.chunk",
            "created": 1764748800, "model": "m"}
    frames = [b"data: " + json.dumps(dict(head, choices=[{"index": 0, "delta": {"content": f" w{i}"},
                                                        "finish_reason": None}])).encode() + b"\n\n"
              for i in range(events)]
    frames.append(b"data: " + json.dumps(dict(head, choices=[{"index": 0, "delta": {},
                                                             "finish_reason": "stop"}])).encode()
                  + b"\n\ndata: [DONE]\n\n")
    return b"".join(frames)


def _server(events: int, port_out: multiprocessing.connection.Connection) -> None:
    import asyncio

    from aiohttp import web

    frames = _body(events).split(b"\n\n")

    async def handler(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for frame in frames[:-1]:
            await resp.write(frame + b"\n\n")
        await resp.write_eof()
        return resp

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port_out.send(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
        await asyncio.Event().wait()

    asyncio.run(main())


def _cpu(fn: Callable[[], int]) -> tuple[float, int]:
    t0 = time.process_time()
    n = fn()
    return time.process_time() - t0, n


def bench_transport(events: int, repeat: int) -> None:
    parent, child = multiprocessing.Pipe()
    proc = multiprocessing.Process(target=_server, args=(events, child), daemon=True)
    proc.start()
    port = parent.recv()
    url = f"http://127.0.0.1:{port}/v1"

    def raw(transport: httpx2.BaseTransport | None) -> Callable[[], int]:
        def run() -> int:
            client = httpx2.Client(transport=transport) if transport else httpx2.Client()
            with client, client.stream("POST", f"{url}/chat/completions", json={}) as r:
                return sum(1 for _ in r.iter_bytes())
        return run

    def sdk(transport: httpx2.BaseTransport | None) -> Callable[[], int]:
        def run() -> int:
            http = httpx2.Client(transport=transport) if transport else httpx2.Client()
            with openai.OpenAI(base_url=url, api_key="sk-bench", http_client=http) as client:
                return sum(1 for _ in client.chat.completions.create(model="m", messages=[], stream=True))
        return run

    cases = {"httpx2 plain": raw(None), "httpx2 + StrictTransport": raw(StrictTransport()),
             "openai SDK plain": sdk(None), "openai SDK + StrictTransport": sdk(StrictTransport())}
    times: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(repeat):  # interleaved, so machine load hits every case alike
        for name, fn in cases.items():
            cpu, _n = _cpu(fn)
            times[name].append(cpu)
    proc.terminate()
    print(f"transport: {events} events per stream, client CPU, median of {repeat}")
    for name, samples in times.items():
        med = statistics.median(samples)
        print(f"  {name:30s} {med * 1e3:7.1f} ms  ({med / events * 1e6:5.1f} us/event)")
    for base, ours in (("httpx2 plain", "httpx2 + StrictTransport"),
                       ("openai SDK plain", "openai SDK + StrictTransport")):
        extra = statistics.median(times[ours]) - statistics.median(times[base])
        ratio = statistics.median(times[ours]) / statistics.median(times[base])
        print(f"  added by StrictTransport under {base.split(' plain')[0]}: "
              f"{extra / events * 1e6:.1f} us/event ({ratio:.2f}x)")


def bench_store(target: str, n: int) -> None:
    store = open_store(target)
    writer = BatchWriter(store)
    batch = records(n, f"bench-{time.time()}")
    t0 = time.perf_counter()
    for rec in batch:
        writer.put(rec)
    put_s = time.perf_counter() - t0
    writer.close()
    total = time.perf_counter() - t0
    store.close()
    kind = target.split("://")[0] if "://" in target else "sqlite"
    print(f"store {kind:10s}: {n} records, put() {put_s / n * 1e6:.1f} us each, all written in "
          f"{total:.2f} s = {n / total:,.0f} records/s, {writer.batches} transactions, "
          f"{writer.dropped} dropped")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--records", type=int, default=10_000)
    args = parser.parse_args()
    print(f"python {platform.python_version()}, {os.cpu_count()} CPUs")
    bench_transport(args.events, args.repeat)
    with tempfile.TemporaryDirectory() as tmp:
        bench_store(str(Path(tmp) / "bench.db"), args.records)
    from _postgres_support import find_bindir, postgres_server

    bindir = find_bindir()
    if bindir is None:
        print("store postgresql: skipped (no PostgreSQL binaries)")
        return
    with postgres_server(bindir) as dsn:
        bench_store(dsn, args.records)


if __name__ == "__main__":
    main()
