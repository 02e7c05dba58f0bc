"""What StrictTransport and the record store cost, in one run.

1. Transport: the client's CPU time to read the same streamed body over loopback with a plain
   ``httpx2.Client`` vs one with ``StrictTransport`` (and the same pair under the openai SDK). The
   server runs in another process, so the client's ``process_time`` is the client's alone.
2. Store: 10,000 records through a ``BatchWriter`` into SQLite (and PostgreSQL when its binaries are
   installed): records/s, and how long ``put()`` keeps the caller.
3. The proxy's store hook (``--only hook``): the CPU one stream's record costs the proxy's process
   (its event loop and any thread of it, which share its GIL and its core) and the writer process,
   for the three ways the proxy has handed records to the store: built and redacted on the loop, then
   a ``BatchWriter`` thread (before issue 35); built raw on the loop, redacted by the thread; built raw,
   then a ``ProcessWriter`` (now). The record is a 100-event chat stream's, as the proxy makes it.

Run: PYTHONPATH=tests .venv/bin/python -m bench.store.bench_client_store [--events 2000] [--repeat 5]
     [--only hook]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import openai

from bench.harness import machine
from sseguard.client import StrictTransport
from sseguard.store import BatchWriter, open_store

try:  # the store tests' records and PostgreSQL server, importable as pytest imports them
    from support.postgres import find_bindir, postgres_server
    from support.store import records
except ModuleNotFoundError as missing:
    raise SystemExit(f"{missing}: run with PYTHONPATH=tests (this benchmark stores the records of "
                     "tests/support/store.py, which imports its parts by name)") from None


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


def _hook_inputs() -> tuple[Any, dict[str, Any], Any]:
    """A verdict of a 100-event chat stream, the proxy's facts for its record, and a client's redactor."""
    from sseguard.core.contract import check_body
    from sseguard.core.redact import DEFAULT
    from sseguard.core.verdict import Api

    verdict = check_body(_body(100), Api.CHAT)
    facts: dict[str, Any] = dict(
        source="proxy", run_id="20261206-020000-abcdef", arm="proxy", index=1, workload="proxy",
        started_at=time.time(), method="POST", path="/v1/chat/completions", stream=True, ttfb_ms=1.2,
        ttft_ms=1.3, duration_ms=1000.0, max_gap_ms=12.0, prompt_bytes=120, concurrency=100,
        headers={"Content-Type": "text/event-stream", "Date": "Sun, 06 Dec 2026 02:00:00 GMT",
                 "Server": "Python/3.11 aiohttp/3.14", "Transfer-Encoding": "chunked",
                 "x-request-id": "req-123456", "Cache-Control": "no-cache"})
    return verdict, facts, DEFAULT.with_secrets(["sk-bench-not-a-real-key"])


def bench_hook(n: int, repeat: int) -> None:
    import resource

    from sseguard.core.policy import Policy
    from sseguard.core.record import raw_record, record_from_verdict
    from sseguard.store.process import ProcessWriter

    verdict, facts, redactor = _hook_inputs()
    policy = Policy.from_spec()

    def before(writer: Any) -> None:  # built and redacted on the loop; the thread encodes and writes
        writer.put(record_from_verdict(verdict, policy=policy, redactor=redactor,
                                       extra=redactor.obj({"action": "forwarded"}), **facts))

    def raw(writer: Any) -> None:  # built raw on the loop; the writer redacts
        writer.put(raw_record(verdict, policy=policy, extra={"action": "forwarded"}, **facts), redactor)

    def self_cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    def child_cpu(writer: Any) -> float:  # the writer process's CPU so far (its start-up excluded)
        process = getattr(writer, "_process", None)
        if process is None or process.pid is None:
            return 0.0
        with open(f"/proc/{process.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    cases: dict[str, tuple[Callable[[str], Any], Callable[[Any], None]]] = {
        "BatchWriter, redacted on the loop (before)": (lambda db: BatchWriter(open_store(db)), before),
        "BatchWriter, raw hand-off": (lambda db: BatchWriter(open_store(db)), raw),
        "ProcessWriter, raw hand-off (now)": (lambda db: ProcessWriter(db), raw),
    }
    results: dict[str, list[tuple[float, float, float]]] = {k: [] for k in cases}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(repeat):  # interleaved, so machine load hits every case alike
            for i, (name, (make, put)) in enumerate(cases.items()):
                writer = make(str(Path(tmp) / f"hook-{rep}-{i}.db"))
                writer.flush()
                proc0, child0 = self_cpu(), child_cpu(writer)
                t0 = time.thread_time()
                for _ in range(n):
                    put(writer)
                caller = time.thread_time() - t0
                writer.flush()
                proc, child = self_cpu() - proc0, child_cpu(writer) - child0
                store = getattr(writer, "store", None)
                writer.close()
                if store is not None:
                    store.close()
                results[name].append((caller / n * 1e6, proc / n * 1e6, child / n * 1e6))
    print(f"store hook: {n} records of a 100-event chat stream, CPU per record in µs, median of {repeat}")
    print(f"  {'':44s} {'caller (loop)':>14s} {'proxy process':>14s} {'writer process':>15s}")
    for name, rows in results.items():
        caller, proc, child = (statistics.median(r[k] for r in rows) for k in range(3))
        print(f"  {name:44s} {caller:14.1f} {proc:14.1f} {child:15.1f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--only", choices=("transport", "store", "hook"),
                        help="Run one part (default: transport and store).")
    args = parser.parse_args()
    print(machine())
    if args.only == "hook":
        bench_hook(args.records, args.repeat)
        return
    if args.only in (None, "transport"):
        bench_transport(args.events, args.repeat)
    if args.only == "transport":
        return
    with tempfile.TemporaryDirectory() as tmp:
        bench_store(str(Path(tmp) / "bench.db"), args.records)
    bindir = find_bindir()
    if bindir is None:
        print("store postgresql: skipped (no PostgreSQL binaries)")
        return
    with postgres_server(bindir) as dsn:
        bench_store(dsn, args.records)


if __name__ == "__main__":
    main()
