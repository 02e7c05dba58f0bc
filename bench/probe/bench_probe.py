"""Probe at scale: 1,000 concurrent streams at 50 ms between tokens, against a bare aiohttp reader,
for each protocol (chat completions, responses, messages).

One process (this one, pinned to core 0) runs, alternately, a *bare reader* — the same aiohttp session
settings, ``iter_any()``, counting events and nothing else — and the real probe (``probe.runner.execute``:
engine, the protocol's checker on every byte, records to JSONL), once per protocol: an arm of that api
against the same chaos upstream, which runs in a subprocess pinned to core 1. Both phases use the same
schedule: 1,000 workers whose first requests are spread over one stream length, each running
``--rounds`` streams back to back, so from the end of the ramp until the last round starts every worker
has a stream in flight: that window is where events/s is measured.

Targets (issue 12): delivered events/s ≥ 95 % of the asked rate; no stream lost or miscounted; probe CPU
per event ≤ 1.6× the bare reader's (issue 29: ≤ 1.3×); TTFT p50 within 5 ms of the bare reader's. Issue 18:
the CPU target holds for each protocol.

Counting costs both sides the same: one Python call per chunk doing ``bytes.count`` and adding to the
counter — for the bare reader a ``count`` function, for the probe a ``StreamWatch`` subclass whose
``feed`` counts inline and calls the base ``feed`` (no ``super()``), the only frame it adds.

Usage: .venv/bin/python -m bench.probe.bench_probe [--streams 1000] [--delay-ms 50] [--tokens 100]
                                            [--rounds 3] [--repeat 2] [--apis chat,responses,messages]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from bench.harness import cpu_seconds, machine, percentile, pin_self, start_chaos, stop
from sseguard._serve import loop_factory, raise_open_files_limit
from sseguard.core.policy import Policy
from sseguard.core.verdict import Api
from sseguard.probe import engine as probe_engine
from sseguard.probe.config import ProbeConfig, WorkloadSpec, make_arm
from sseguard.probe.measure import StreamWatch
from sseguard.probe.runner import execute, quiet_gc
from sseguard.probe.workloads import Workload, encode_body

#: The bare reader's view of each protocol: the first content event, and what a finished body ends with.
CONTENT = {
    Api.CHAT: re.compile(rb'"content":\s*"[^"]'),
    Api.RESPONSES: re.compile(rb'"type":\s*"response\.output_text\.delta"'),
    Api.MESSAGES: re.compile(rb'"type":\s*"text_delta"'),
    Api.GEMINI: re.compile(rb'"text":\s*"[^"]'),
}
FINISHED = {Api.CHAT: b"data: [DONE]\n\n", Api.RESPONSES: b"response.completed",
            Api.MESSAGES: b"message_stop", Api.GEMINI: b'"finishReason"'}
#: What ends one event on the wire: Gemini's SSE (as Google serves it) ends records with CRLF pairs.
SEPARATOR = {Api.CHAT: b"\n\n", Api.RESPONSES: b"\n\n", Api.MESSAGES: b"\n\n",
             Api.GEMINI: b"\r\n\r\n"}


@dataclass
class Phase:
    name: str
    streams: int = 0
    complete: int = 0
    events: int = 0
    events_per_stream: list[int] = field(default_factory=list)
    ttft_ms: list[float] = field(default_factory=list)
    cpu_s: float = 0.0
    wall_s: float = 0.0
    window_rate: float = 0.0
    probe_cpu_peak: float | None = None
    server_cpu: float | None = None  # the chaos process's CPU, fraction of one core
    load: float | None = None  # the machine's 1-minute load average at the end of the phase

    @property
    def cpu_per_event_us(self) -> float:
        return self.cpu_s / self.events * 1e6 if self.events else float("nan")

    def summary(self) -> dict[str, Any]:
        return {"phase": self.name, "streams": self.streams, "complete": self.complete,
                "events": self.events, "window_events_per_s": (round(self.window_rate)
                                        if math.isfinite(self.window_rate) else None),
                "cpu_s": round(self.cpu_s, 2), "cpu_per_event_us": round(self.cpu_per_event_us, 2),
                "cpu_of_core": round(self.cpu_s / self.wall_s, 3) if self.wall_s else None,
                "ttft_p50_ms": round(statistics.median(self.ttft_ms), 2) if self.ttft_ms else None,
                "ttft_p99_ms": round(percentile(self.ttft_ms, 99), 2) if self.ttft_ms else None,
                "distinct_event_counts": sorted(set(self.events_per_stream)),
                "probe_cpu_peak": self.probe_cpu_peak,
                "server_cpu_of_core": round(self.server_cpu, 3) if self.server_cpu else None,
                "loadavg_1m": self.load}


class Counter:
    """Events seen so far, sampled by a task to measure the steady window."""

    def __init__(self) -> None:
        self.events = 0
        self.samples: list[tuple[float, int]] = []

    async def sample(self, every: float = 0.25) -> None:
        while True:
            self.samples.append((time.monotonic(), self.events))
            await asyncio.sleep(every)

    def rate(self, start: float, end: float) -> float:
        inside = [(t, n) for t, n in self.samples if start <= t <= end]
        if len(inside) < 2:
            return float("nan")
        (t0, n0), (t1, n1) = inside[0], inside[-1]
        return (n1 - n0) / (t1 - t0)


def _session(limit: int) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(limit=limit, limit_per_host=0, ttl_dns_cache=300,
                                     keepalive_timeout=60)
    return aiohttp.ClientSession(connector=connector,
                                 timeout=aiohttp.ClientTimeout(total=None, sock_connect=10))


async def bare_phase(url: str, streams: int, rounds: int, ramp: float, api: Api = Api.CHAT) -> Phase:
    """The baseline: read each stream with iter_any and count events; nothing else."""
    phase = Phase(f"{api}: bare aiohttp reader")
    counter = Counter()
    workload = Workload(WorkloadSpec(name="small"))
    body = encode_body(workload.finish(workload.conversation(0, api).next_body(), model="chaos-1",
                                       api=api))
    headers = {"content-type": "application/json", "accept": "text/event-stream"}
    target = make_arm("bare", url, api=api).url
    content, finished, separator = CONTENT[api], FINISHED[api], SEPARATOR[api]

    def count(data: bytes) -> int:
        # The same work, in one call per chunk, as the probe's counting (``probe_phase``).
        n = data.count(separator)
        counter.events += n
        return n

    async def worker(k: int, session: aiohttp.ClientSession) -> None:
        await asyncio.sleep(k * ramp / streams)
        for _ in range(rounds):
            sent = time.monotonic()
            first: float | None = None
            events = 0
            before = tail = b""
            async with session.post(target, data=body, headers=headers) as resp:
                async for data in resp.content.iter_any():
                    events += count(data)
                    if first is None and content.search(data):
                        first = time.monotonic()
                    before, tail = tail, data
            phase.streams += 1
            phase.events_per_stream.append(events)
            # The terminal event of responses carries the whole response: it may span two reads.
            phase.complete += finished in before + tail
            if first is not None:
                phase.ttft_ms.append((first - sent) * 1000)

    async with _session(0) as session:
        sampler = asyncio.create_task(counter.sample())
        cpu0, t0 = time.process_time(), time.monotonic()
        await asyncio.gather(*(worker(k, session) for k in range(streams)))
        phase.cpu_s, phase.wall_s = time.process_time() - cpu0, time.monotonic() - t0
        sampler.cancel()
    phase.events = counter.events
    phase.window_rate = counter.rate(*_window(t0, ramp, rounds, ramp))
    return phase


def _window(t0: float, ramp: float, rounds: int, stream_s: float) -> tuple[float, float]:
    """From the end of the ramp until the last round starts, every worker has a stream in flight."""
    return t0 + ramp + 0.5, t0 + ramp + (rounds - 1) * stream_s - 0.5


async def probe_phase(url: str, streams: int, rounds: int, ramp: float, out: Path,
                      api: Api = Api.CHAT) -> Phase:
    """The real probe: runner + engine + the protocol's checker + JSONL sink."""
    phase = Phase(f"{api}: sseguard probe")
    counter = Counter()
    separator = SEPARATOR[api]

    base_feed = StreamWatch.feed

    class CountingWatch(StreamWatch):
        __slots__ = ()

        def feed(self, data: bytes, now: float) -> None:
            # One frame per chunk, as the bare reader's ``count``; no ``super()`` lookup.
            counter.events += data.count(separator)
            base_feed(self, data, now)

    probe_engine.StreamWatch = CountingWatch  # type: ignore[misc]
    config = ProbeConfig(arms=(make_arm("chaos", url, model="chaos-1", api=api),), levels=(streams,),
                         count=streams * rounds, ramp=ramp, stall_timeout=30.0, timeout=120.0,
                         out=str(out), policy=Policy())
    sampler = asyncio.create_task(counter.sample())
    cpu0, t0 = time.process_time(), time.monotonic()
    result = await execute(config, live=False)
    phase.cpu_s, phase.wall_s = time.process_time() - cpu0, time.monotonic() - t0
    sampler.cancel()
    probe_engine.StreamWatch = StreamWatch  # type: ignore[misc]
    phase.streams = len(result.records)
    phase.complete = sum(r.ending == "complete" for r in result.records)
    phase.events = counter.events
    phase.events_per_stream = [r.chunks for r in result.records]
    phase.ttft_ms = [r.ttft_ms for r in result.records if r.ttft_ms is not None]
    phase.window_rate = counter.rate(*_window(t0, ramp, rounds, ramp))
    phase.probe_cpu_peak = round(result.cpu.peak, 3)
    return phase


def start_chaos_upstream(delay_ms: float, tokens: int) -> tuple[subprocess.Popen[str], str]:
    """The chaos upstream on core 1 (the bare reader and the probe run on core 0)."""
    return start_chaos(["--ttft-ms", str(delay_ms), "--inter-token-ms", str(delay_ms),
                        "--tokens", str(tokens)], core=1)


async def calibrate(url: str, api: Api) -> tuple[float, int]:
    """One stream alone: its length (s) and events, i.e. what one stream asks for."""
    phase = await bare_phase(url, 1, 1, 0.0, api)
    return phase.wall_s, phase.events


async def measure_api(args: argparse.Namespace, url: str, server_pid: int, api: Api,
                      tmp: Path) -> dict[str, Any]:
    """Bare reader and probe, interleaved ``--repeat`` times, for one protocol."""
    stream_s, events = await calibrate(url, api)
    asked = args.streams * events / stream_s
    print(f"{api}: one stream alone: {events} events in {stream_s:.2f} s → asked {asked:,.0f} "
          f"events/s at {args.streams} streams", flush=True)
    runs: list[Phase] = []
    for rep in range(args.repeat):
        for kind in ("bare", "probe"):
            server0 = cpu_seconds(server_pid, alone=True)
            if kind == "bare":
                phase = await bare_phase(url, args.streams, args.rounds, stream_s, api)
            else:
                phase = await probe_phase(url, args.streams, args.rounds, stream_s,
                                          tmp / f"probe-{api}-{rep}", api)
            phase.server_cpu = (cpu_seconds(server_pid, alone=True) - server0) / phase.wall_s
            phase.load = round(os.getloadavg()[0], 2)
            runs.append(phase)
            print(json.dumps(phase.summary()), flush=True)
    return {"api": api, "asked": asked, "stream_s": stream_s, "events_per_stream": events,
            "runs": runs}


async def main_async(args: argparse.Namespace, url: str, server_pid: int) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        return [await measure_api(args, url, server_pid, Api(api), Path(tmp))
                for api in args.apis.split(",")]


def report(args: argparse.Namespace, res: dict[str, Any]) -> None:
    runs: list[Phase] = res["runs"]
    bare = [p for p in runs if "bare" in p.name]
    probe = [p for p in runs if "probe" in p.name]

    def med(phases: list[Phase], attr: str) -> float:
        return statistics.median(getattr(p, attr) if attr != "ttft" else
                                 statistics.median(p.ttft_ms) for p in phases)

    asked = res["asked"]
    lines = [
        f"[{res['api']}] {args.streams} streams x {args.rounds} rounds, {args.delay_ms:g} ms between tokens, "
        f"{res['events_per_stream']} events/stream; python {sys.version.split()[0]}, "
        f"{os.cpu_count()} CPUs; median of {args.repeat} interleaved runs",
        f"asked: {asked:,.0f} events/s",
        f"bare reader: {med(bare, 'window_rate'):,.0f} events/s "
        f"({med(bare, 'window_rate') / asked:.1%}), {med(bare, 'cpu_per_event_us'):.1f} us CPU/event, "
        f"TTFT p50 {med(bare, 'ttft'):.1f} ms",
        f"probe:       {med(probe, 'window_rate'):,.0f} events/s "
        f"({med(probe, 'window_rate') / asked:.1%}), {med(probe, 'cpu_per_event_us'):.1f} us CPU/event, "
        f"TTFT p50 {med(probe, 'ttft'):.1f} ms, probe CPU peak "
        f"{max(p.probe_cpu_peak or 0 for p in probe):.0%}",
        f"streams: probe {sum(p.complete for p in probe)}/{sum(p.streams for p in probe)} complete, "
        f"event counts {sorted({n for p in probe for n in p.events_per_stream})}; bare "
        f"{sum(p.complete for p in bare)}/{sum(p.streams for p in bare)}, event counts "
        f"{sorted({n for p in bare for n in p.events_per_stream})}",
        f"CPU per event probe/bare: {med(probe, 'cpu_per_event_us') / med(bare, 'cpu_per_event_us'):.2f}x "
        f"(target <= 1.3x); TTFT p50 difference "
        f"{med(probe, 'ttft') - med(bare, 'ttft'):+.1f} ms (target within 5 ms); "
        f"delivered {med(probe, 'window_rate') / asked:.1%} (target >= 95%)",
    ]
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--delay-ms", type=float, default=50.0)
    parser.add_argument("--tokens", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--apis", default="chat,responses,messages",
                        help="protocols to measure, comma-separated")
    args = parser.parse_args()
    for api in args.apis.split(","):
        Api(api)  # an unknown protocol fails before anything starts
    pin_self(0)
    raise_open_files_limit()
    print(machine(), flush=True)
    proc, url = start_chaos_upstream(args.delay_ms, args.tokens)
    try:
        # The same process settings as `sseguard probe` (run_probe) for both phases.
        with quiet_gc(), asyncio.Runner(loop_factory=loop_factory()) as runner:
            results = runner.run(main_async(args, url, proc.pid))
    finally:
        stop(proc)
    print(f"uptime load average at the end: {os.getloadavg()}")
    for res in results:
        report(args, res)


if __name__ == "__main__":
    main()
