"""What healing costs (issue 27): ``sseguard proxy --retry 2 --resume vllm`` against ``--retry 0``.

(a) Streams that need no healing: 100 concurrent chat streams from a fault-free chaos upstream, through
    a proxy with healing on and one with healing off (``--retry 0``, no ``--resume``), alternating,
    ``--repeats`` times; throughput (events/s the client received) and TTFC p50, medians, the ratio.
    Same layout as ``bench_proxy.py`` (whose load client this reuses): each proxy a subprocess pinned
    to core 1 (only the one under load is busy), chaos upstream and client on core 0, records to SQLite.
(b) What a healed stream costs: one chat stream at a time through the healing proxy, from a scripted
    upstream (in this process) that answers ``TOKENS`` tokens ``INTER_MS`` apart, and either cuts the
    first answer cleanly after half of them (healed by resume: the proxy asks for the continuation of
    the text the client has), or answers the first request ``503`` (healed by retry), or neither
    (fault-free). Per case: time to completion (request sent → ``[DONE]`` read, median) and the request
    bytes the upstream received beyond the client's own request (re-sent bytes). The prompt is
    ``PROMPT_KB`` KiB, so re-sending it shows.

Run: .venv/bin/python -m bench.proxy.bench_heal [--repeats 3] [--streams 100] [--single 20]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from bench.harness import pin_self, server
from bench.proxy.bench_proxy import HEADERS, Scenario, load

TOKENS, INTER_MS, FIRST_MS = 60, 5.0, 30.0
PROMPT_KB = 16
WORDS = [f"w{i} " for i in range(TOKENS)]


def _chunk(content: str | None, finish: str | None = None, role: bool = False) -> bytes:
    delta: dict[str, Any] = {"role": "assistant", "content": ""} if role else {}
    if content is not None:
        delta["content"] = content
    obj = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0, "model": "m",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


class Scripted:
    """A chat upstream that cuts or refuses on request; counts the request bytes it received."""

    def __init__(self) -> None:
        self.received = 0
        self.seen: set[str] = set()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.received += len(body)
        data = json.loads(body)
        case = request.headers.get("x-bench-case", "clean")
        key = request.headers.get("x-bench-id", "")
        if case == "retry" and key not in self.seen:
            self.seen.add(key)
            return web.json_response({"error": {"message": "overloaded", "type": "server_error"}},
                                     status=503)
        start, cut = 0, None
        if data.get("continue_final_message"):
            sent = data["messages"][-1]["content"]
            while start < TOKENS and "".join(WORDS[:start]) != sent:
                start += 1
        elif case == "resume":
            cut = TOKENS // 2
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await asyncio.sleep(FIRST_MS / 1000)
        await resp.write(_chunk(None, role=True))
        for i in range(start, TOKENS):
            if cut is not None and i == cut:
                return resp  # a clean end without finish_reason: truncated
            await resp.write(_chunk(WORDS[i]))
            await asyncio.sleep(INTER_MS / 1000)
        await resp.write(_chunk(None, "stop") + b"data: [DONE]\n\n")
        return resp


async def single(proxy: str, upstream: Scripted, case: str, n: int) -> tuple[float, int, str]:
    """One stream: seconds to [DONE], request bytes the upstream got beyond the client's, the text."""
    prompt = "x" * (PROMPT_KB * 1024)
    body = json.dumps({"model": "m", "stream": True,
                       "messages": [{"role": "user", "content": prompt}]}).encode()
    before = upstream.received
    headers = {**HEADERS, "x-bench-case": case, "x-bench-id": f"{case}-{n}"}
    text = ""
    async with aiohttp.ClientSession() as session:
        t0 = time.perf_counter()
        async with session.post(f"{proxy}/chat/completions", data=body, headers=headers) as resp:
            raw = await resp.read()
        took = time.perf_counter() - t0
    for frame in raw.split(b"\n\n"):
        if frame.startswith(b"data: {"):
            for choice in json.loads(frame[6:]).get("choices") or ():
                text += choice["delta"].get("content") or ""
    return took, upstream.received - before - len(body), text


async def healed_costs(single_n: int, store: Path) -> dict[str, tuple[float, int]]:
    upstream = Scripted()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", upstream.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    args = ["proxy", "--upstream", f"http://127.0.0.1:{port}/v1", "--listen", "127.0.0.1:0", "--store",
            str(store), "--retry", "2", "--resume", "vllm"]
    out: dict[str, list[tuple[float, int]]] = {"clean": [], "resume": [], "retry": []}
    with server(args, 1) as (_, line):
        proxy = line.split()[4]
        for n in range(single_n):
            for case in (out if n % 2 == 0 else reversed(list(out))):
                took, resent, text = await single(proxy, upstream, case, n)
                if text != "".join(WORDS):
                    raise SystemExit(f"{case}: the client got {text[:60]!r}…, not the whole answer")
                out[case].append((took, resent))
    await runner.cleanup()
    return {case: (statistics.median(t for t, _ in runs), int(statistics.median(b for _, b in runs)))
            for case, runs in out.items()}


def no_healing_cost(streams: int, repeats: int, tmp: Path) -> dict[str, list[Any]]:
    sc = Scenario(f"{streams} streams", streams, 100, 10, 8)
    chaos_args = ["chaos", "--listen", "127.0.0.1:0", "--json", "--tokens", str(sc.tokens),
                  "--inter-token-ms", str(sc.inter_token_ms)]
    runs: dict[str, list[Any]] = {"healing off": [], "healing on": []}
    with server(chaos_args, 0) as (chaos, chaos_line), contextlib.ExitStack() as stack:
        upstream = json.loads(chaos_line)["url"]
        targets = {}
        for name, extra in (("healing off", ["--retry", "0"]),
                            ("healing on", ["--retry", "2", "--resume", "vllm"])):
            args = ["proxy", "--upstream", upstream, "--listen", "127.0.0.1:0", "--store",
                    str(tmp / f"{name.replace(' ', '-')}.db"), *extra]
            proxy, line = stack.enter_context(server(args, 1))
            targets[name] = (line.split()[4], proxy.pid)
        for rep in range(repeats):
            for name in (list(targets) if rep % 2 == 0 else list(reversed(targets))):
                base, pid = targets[name]
                run = asyncio.run(load(f"{base}/chat/completions", sc, pid, chaos.pid))
                runs[name].append(run)
                print(f"  {name:12} {run.events_per_s:10,.0f} ev/s  TTFC p50 {run.p50:7.2f} ms  "
                      f"completed {run.completed:,} failed {run.failed}  proxy CPU "
                      f"{run.cpu_us_per_event:.1f} µs/event  others {run.others_cpu:.0%}",
                      flush=True)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--single", type=int, default=20, help="Streams per case in (b).")
    args = parser.parse_args()
    with contextlib.suppress(ImportError):
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if (os.cpu_count() or 1) < 2:
        sys.exit("needs two cores: the proxy gets one of its own")
    pin_self(0)
    started = time.time()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        runs = no_healing_cost(args.streams, args.repeats, Path(tmp))
        costs = asyncio.run(healed_costs(args.single, Path(tmp) / "single.db"))
    took = time.time() - started
    off, on = runs["healing off"], runs["healing on"]
    eps_off, eps_on = (statistics.median(r.events_per_s for r in rs) for rs in (off, on))
    p50_off, p50_on = (statistics.median(r.p50 for r in rs) for rs in (off, on))
    cpu_off, cpu_on = (statistics.median(r.cpu_us_per_event for r in rs) for rs in (off, on))
    others = statistics.median(r.others_cpu for r in off + on)
    clean_t = costs["clean"][0]
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started))
    lines = [
        f"Command: `.venv/bin/python -m bench.proxy.bench_heal {' '.join(sys.argv[1:])}` ({took:.0f} s), "
        f"{when}, load average {load_before[0]:.2f} / {load_before[1]:.2f} / {load_before[2]:.2f} "
        f"(1 / 5 / 15 min) at the start, other processes {others:.0%} of a core during (a).", "",
        f"(a) {args.streams} chat streams needing no healing, {args.repeats} alternating runs each:", "",
        "| proxy | events/s | ÷ healing off | TTFC p50 ms | added p50 ms | proxy CPU µs/event "
        "| ÷ healing off |",
        "|---|---|---|---|---|---|---|",
        f"| `--retry 0` (healing off) | {eps_off:,.0f} | 100% | {p50_off:.2f} | – | {cpu_off:.1f} "
        "| 1.00× |",
        f"| `--retry 2 --resume vllm` | {eps_on:,.0f} | **{eps_on / eps_off:.1%}** | {p50_on:.2f} | "
        f"**{p50_on - p50_off:+.2f}** | {cpu_on:.1f} | **{cpu_on / cpu_off:.2f}×** |", "",
        f"(b) one stream at a time, {TOKENS} tokens {INTER_MS:g} ms apart after {FIRST_MS:g} ms, a "
        f"{PROMPT_KB} KiB prompt, {args.single} streams per case, medians:", "",
        "| case | time to completion ms | ÷ fault-free | request bytes re-sent |", "|---|---|---|---|",
        *(f"| {label} | {costs[case][0] * 1000:.1f} | {costs[case][0] / clean_t:.2f}× | {costs[case][1]:,} |"
          for case, label in (("clean", "fault-free"), ("resume", "truncated after half, healed by resume"),
                              ("retry", "503 first, healed by retry")))]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
