"""Capacity of one chaos process: concurrent streams and chunks per second, observed by the client.

The chaos server runs as ``sseguard chaos`` in a subprocess pinned to core 0; this process (the load
client: one aiohttp session on uvloop, body read with ``iter_any()``) is pinned to core 1, so the two
never share a core. Each of ``--streams`` workers requests streams back to back for ``--seconds``;
starts are spread over one stream length so the streams do not run in lock-step. Reported per
scenario: streams in flight (client and server view), chunks/s the client received, the server's
own frames/s, time to first chunk, and both processes' CPU. A client near 100 % CPU means the figure
is a lower bound of the server's capacity.

Run: .venv/bin/python -m bench.chaos.bench_chaos [--streams 1000] [--seconds 10] [--api chat --api responses
--api messages] [--append docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import time
from dataclasses import dataclass, field

import aiohttp

from bench.harness import (
    cpu_seconds,
    load_average,
    machine,
    median,
    percentile,
    pin_self,
    start_chaos,
    stop,
)

#: Per protocol: (path, request body, the bytes a complete stream's last frame ends with).
APIS: dict[str, tuple[str, bytes, bytes]] = {
    "chat": ("/chat/completions", json.dumps({
        "model": "chaos-1", "stream": True, "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "Stream something."}]}).encode(),
        b"data: [DONE]\n\n"),
    "responses": ("/responses", json.dumps({
        "model": "chaos-1", "stream": True, "input": "Stream something."}).encode(),
        b"event: response.completed"),
    "messages": ("/messages", json.dumps({
        "model": "chaos-1", "stream": True, "max_tokens": 4096,
        "messages": [{"role": "user", "content": "Stream something."}]}).encode(),
        b'data: {"type":"message_stop"}\n\n'),
}


@dataclass
class Scenario:
    name: str
    tokens: int
    inter_token_ms: float


@dataclass
class Result:
    scenario: Scenario
    streams: int
    seconds: float
    chunks: int = 0
    completed: int = 0
    broken: int = 0
    ttfc_ms: list[float] = field(default_factory=list)
    peak_client: int = 0
    server_peak: int = 0
    server_frames: int = 0
    server_cpu: float = 0.0
    client_cpu: float = 0.0

    @property
    def chunks_per_s(self) -> float:
        return self.chunks / self.seconds

    def row(self) -> str:
        p50 = median(self.ttfc_ms)
        p99 = percentile(self.ttfc_ms, 99) if len(self.ttfc_ms) > 100 else float("nan")
        asked = (self.streams * 1000 / self.scenario.inter_token_ms
                 if self.scenario.inter_token_ms else float("inf"))
        asked_text = f"{asked:,.0f}/s" if asked != float("inf") else "as fast as possible"
        return (f"| {self.scenario.name} | {asked_text} | {self.peak_client:,} / "
                f"{self.server_peak:,} | **{self.chunks_per_s:,.0f}/s** | "
                f"{self.server_frames / self.seconds:,.0f}/s | {p50:,.1f} / {p99:,.1f} ms | "
                f"{self.completed:,} / {self.broken} | {self.server_cpu:.0%} | "
                f"{self.server_us_per_frame:.1f} µs | {self.client_cpu:.0%} |")

    @property
    def server_us_per_frame(self) -> float:
        """Server CPU per frame written: what one full core would serve, independent of contention."""
        frames = self.server_frames / self.seconds
        return self.server_cpu / frames * 1e6 if frames else float("nan")


def start_server(scenario: Scenario) -> tuple[subprocess.Popen[str], str]:
    """The chaos server of ``scenario`` on core 0 (this load client runs on core 1)."""
    return start_chaos(["--tokens", str(scenario.tokens), "--inter-token-ms",
                        str(scenario.inter_token_ms), "--ttft-ms", "0"], core=0, open_files=True)


async def stats(session: aiohttp.ClientSession, url: str) -> dict[str, int]:
    async with session.get(url.removesuffix("/v1") + "/chaos/stats") as r:
        data: dict[str, int] = await r.json()
        return data


async def run(scenario: Scenario, streams: int, seconds: float, api: str = "chat") -> Result:
    proc, url = start_server(scenario)
    try:
        return await drive(scenario, proc.pid, url, streams, seconds, api)
    finally:
        stop(proc)


async def drive(scenario: Scenario, pid: int, url: str, streams: int, seconds: float,
                api: str = "chat") -> Result:
    """Ramp up over one stream length, then measure a window of ``seconds`` at full concurrency."""
    path, request, ending = APIS[api]
    loop = asyncio.get_running_loop()
    stream_s = scenario.tokens * scenario.inter_token_ms / 1000.0
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0)
    timeout = aiohttp.ClientTimeout(total=None, sock_read=60)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        # Warm-up: open the connections (the server's accept loop is not what we measure).
        warm = [session.post(url + path, data=request) for _ in range(streams)]
        for coro in asyncio.as_completed(warm):
            resp = await coro
            await resp.read()
        result = Result(scenario, streams, seconds)
        active = 0
        ramp = max(stream_s, 0.5)
        t_start = loop.time() + 0.05
        window = (t_start + ramp, t_start + ramp + seconds)

        def inside(t: float) -> bool:
            return window[0] <= t < window[1]

        async def worker(delay: float) -> None:
            nonlocal active
            await asyncio.sleep(max(0.0, t_start + delay - loop.time()))
            while loop.time() < window[1]:
                started = loop.time()
                first = True
                active += 1
                if inside(started):
                    result.peak_client = max(result.peak_client, active)
                try:
                    async with session.post(url + path, data=request) as resp:
                        tail = b""
                        async for data in resp.content.iter_any():
                            now = loop.time()
                            if first:
                                first = False
                                if inside(started):
                                    result.ttfc_ms.append((now - started) * 1000)
                            if inside(now):
                                result.chunks += data.count(b"\n\n")
                            tail = (tail + data)[-8192:]
                    last = tail.rstrip(b"\n").rsplit(b"\n\n", 1)[-1] + b"\n\n"
                    done = ending in last
                except aiohttp.ClientError:
                    done = False
                finally:
                    active -= 1
                if inside(loop.time()):
                    result.completed += done
                    result.broken += not done

        async def sample() -> tuple[dict[str, int], dict[str, int], float, float]:
            await asyncio.sleep(max(0.0, window[0] - loop.time()))
            before, cpu0, ccpu0 = await stats(session, url), cpu_seconds(pid, alone=True), time.process_time()
            await asyncio.sleep(max(0.0, window[1] - loop.time()))
            after = await stats(session, url)
            result.server_cpu = (cpu_seconds(pid, alone=True) - cpu0) / seconds
            result.client_cpu = (time.process_time() - ccpu0) / seconds
            return before, after, cpu0, ccpu0

        sampler = asyncio.create_task(sample())
        await asyncio.gather(*(worker(ramp * i / streams) for i in range(streams)))
        before, after, _, _ = await sampler
    result.server_peak = after["max_inflight"]
    result.server_frames = after["frames"] - before["frames"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--tokens", type=int, default=100)
    parser.add_argument("--api", choices=sorted(APIS), action="append",
                        help="protocol(s) to serve (repeatable; default chat)")
    parser.add_argument("--append", metavar="MARKDOWN", help="append the section to this file")
    args = parser.parse_args()
    pin_self(1)
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    try:
        import uvloop

        factory = uvloop.new_event_loop
    except ImportError:
        factory = None
    scenarios = [Scenario("100 tok/s per stream (d=10 ms)", args.tokens, 10.0),
                 Scenario("20 tok/s per stream (d=50 ms)", args.tokens, 50.0),
                 Scenario("unpaced (d=0)", args.tokens, 0.0)]
    load_before = load_average()
    results = []
    apis = args.api or ["chat"]
    with asyncio.Runner(loop_factory=factory) as runner:
        for api in apis:
            for scenario in scenarios:
                if apis != ["chat"]:
                    scenario = Scenario(f"{api}: {scenario.name}", scenario.tokens,
                                        scenario.inter_token_ms)
                result = runner.run(run(scenario, args.streams, args.seconds, api))
                print(result.row(), flush=True)
                results.append(result)
    best = max(r.chunks_per_s for r in results)
    per_frame = min(r.server_us_per_frame for r in results)
    peak = max(r.server_peak for r in results)
    met = best >= 20_000 and peak >= 1000
    lines = [
        "",
        "## Chaos upstream capacity",
        "",
        f"Command: `.venv/bin/python -m bench.chaos.bench_chaos --streams {args.streams} --seconds "
        f"{args.seconds:g} --tokens {args.tokens}`. Machine: {machine()}; chaos server "
        "(`sseguard chaos`, aiohttp.web on uvloop) pinned to core 0, the aiohttp load client to "
        f"core 1 (1-min load average {load_before:.1f} when it started). "
        f"{args.streams:,} concurrent streams of {args.tokens} content chunks (plus role, "
        "finish, usage and [DONE] frames), started spread over one stream length, each worker "
        "requesting streams back to back; after a ramp of one stream length, a window of "
        f"{args.seconds:g} s is measured. Chunks = SSE frames the client received in the window.",
        "",
        "| scenario | asked | streams in flight (client / server peak) | chunks/s at the client "
        "| frames/s written by the server | TTFC p50 / p99 | streams complete / broken "
        "| server CPU | server CPU per frame | client CPU |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *(r.row() for r in results),
        "",
        f"Target (≥ 1,000 concurrent streams and ≥ 20,000 chunks/s from one process): "
        f"{'**met**' if met else '**not met**'} — peak {peak:,} streams in flight, best "
        f"{best:,.0f} chunks/s. The server spends {per_frame:.1f}–"
        f"{max(r.server_us_per_frame for r in results):.1f} µs of CPU per frame (less under "
        "load, when paced frames that fell due together share one write). CPU % is the share "
        "of a core each process got: below 100 % with both processes busy means the machine, "
        "not the server, set the pace. "
        "In the unpaced scenario each stream is written in one go without yielding, so the "
        "server sees one stream in flight at a time and time to first chunk is queueing.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.append:
        with open(args.append, "a", encoding="utf-8") as f:
            f.write(text)


if __name__ == "__main__":
    main()
