"""What a checker's lane saves on the streams the probe and the proxy read: per event, lane vs general way.

The bodies are the chaos upstream's own (what ``bench_probe.py`` and ``bench_proxy.py`` stream),
captured once over loopback for every protocol and fed one frame per read, as the probe reads events
that arrive milliseconds apart. Each body is checked with the lane (the default) and with learning
switched off (every event the general way: SSE decoding, JSON decoding, the fold), alternately in
one process, and the two verdicts are compared. ``--callgrind`` counts instructions instead, the
figure that does not move with the machine's load: runs of 1 and 3 answers, the difference halved.

Run: .venv/bin/python -m bench.checker.bench_lane [--apis chat,responses,messages,gemini] [--tokens 100]
     [--repeat 5] [--callgrind]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.harness import callgrind_total, machine, start_chaos, stop
from sseguard.core.contract import checker_for

BODIES: dict[str, tuple[str, dict[str, Any]]] = {
    "chat": ("/v1/chat/completions", {"model": "chaos-1", "stream": True,
                                      "messages": [{"role": "user", "content": "hi"}]}),
    "responses": ("/v1/responses", {"model": "chaos-1", "stream": True, "input": "hi"}),
    "messages": ("/v1/messages", {"model": "chaos-1", "stream": True, "max_tokens": 512,
                                  "messages": [{"role": "user", "content": "hi"}]}),
    "gemini": ("/v1beta/models/chaos-1:streamGenerateContent?alt=sse",
               {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}),
}

CHILD = """
import json, sys
from sseguard.core.contract import checker_for
frames = [bytes.fromhex(h) for h in json.load(open(sys.argv[1]))["frames"]]
request = json.load(open(sys.argv[1]))["request"]
api, n, lane = sys.argv[2], int(sys.argv[3]), sys.argv[4] == "lane"
for _ in range(n):
    c = checker_for(api, request)
    if not lane:
        c._learn_lane = lambda *a, **k: False
    for f in frames:
        c.feed(f)
    c.close()
"""


def capture(url: str, api: str) -> tuple[list[bytes], dict[str, Any]]:
    path, request = BODIES[api]
    req = urllib.request.Request(url + path, data=json.dumps(request).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        body = resp.read()
    sep = b"\r\n\r\n" if b"\r\n\r\n" in body else b"\n\n"
    frames = [part + sep for part in body.split(sep) if part]
    return frames, request


def check(api: str, frames: list[bytes], request: dict[str, Any], lane: bool) -> Any:
    c = checker_for(api, request)
    if not lane:
        c._learn_lane = lambda *a, **k: False  # type: ignore[method-assign]
    for f in frames:
        c.feed(f)
    return c.close()


def wall(api: str, frames: list[bytes], request: dict[str, Any], repeat: int) -> dict[str, float]:
    best = {"lane": 1e9, "general": 1e9}
    for _ in range(repeat):
        for kind in best:
            t0 = time.perf_counter()
            for _ in range(200):
                check(api, frames, request, kind == "lane")
            best[kind] = min(best[kind], (time.perf_counter() - t0) / 200 / len(frames) * 1e6)
    return best


def instructions(api: str, fixture: Path, kind: str, events: int) -> float:
    """Instructions per event: a run judging the answer three times minus one judging it once, halved."""
    once, thrice = (callgrind_total([sys.executable, "-c", CHILD, str(fixture), api, str(n), kind])[0]
                    for n in (1, 3))
    return (thrice - once) / 2 / events


def start_chaos_upstream(tokens: int) -> tuple[subprocess.Popen[str], str]:
    """A chaos upstream answering ``tokens`` tokens at once; its URL without the ``/v1``."""
    server, url = start_chaos(["--ttft-ms", "0", "--inter-token-ms", "0", "--tokens", str(tokens)])
    return server, url.rstrip("/").removesuffix("/v1")


def per_event(api: str, short: list[bytes], long: list[bytes], request: dict[str, Any],
              kind: str) -> float:
    """Instructions per event of the steady stream: two answers of different lengths, so what
    each stream costs once (the checker, the first events, learning, the ending) cancels."""
    totals = []
    for frames in (short, long):
        with tempfile.TemporaryDirectory() as tmp:
            fixture = Path(tmp) / "frames.json"
            fixture.write_text(json.dumps({"frames": [f.hex() for f in frames],
                                           "request": request}))
            totals.append(instructions(api, fixture, kind, 1))
    return (totals[1] - totals[0]) / (len(long) - len(short))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--apis", default="chat,responses,messages,gemini")
    parser.add_argument("--tokens", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--callgrind", action="store_true")
    args = parser.parse_args()
    servers = [start_chaos_upstream(args.tokens), start_chaos_upstream(args.tokens * 3)]
    try:
        url, url_long = servers[0][1], servers[1][1]
        print(machine())
        if args.callgrind:
            print("| protocol | general way, per event | lane, per event | fewer |")
            print("|---|---|---|---|")
        else:
            print("| protocol | events | general way | lane | ratio |")
            print("|---|---|---|---|---|")
        for api in args.apis.split(","):
            frames, request = capture(url, api)
            a, b = check(api, frames, request, True), check(api, frames, request, False)
            assert a == b, f"{api}: the lane changed the verdict"
            assert a.ending == "complete", a
            if args.callgrind:
                long, _ = capture(url_long, api)
                general = per_event(api, frames, long, request, "general")
                lane = per_event(api, frames, long, request, "lane")
                print(f"| {api} | {general:,.0f} | {lane:,.0f} | {general / lane:.2f}× |",
                      flush=True)
            else:
                best = wall(api, frames, request, args.repeat)
                print(f"| {api} | {len(frames)} | {best['general']:.2f} µs | {best['lane']:.2f} µs "
                      f"| {best['general'] / best['lane']:.2f}× |", flush=True)
    finally:
        for server, _ in servers:
            stop(server)


if __name__ == "__main__":
    main()
