"""The guard proxy's CPU per event in instructions, against the bare relay: stable on a busy machine.

Wall-clock CPU figures (``bench_proxy.py``) move with whatever else the machine runs; instruction
counts do not. The bare aiohttp relay (``bench_proxy.py --bare-relay``) and ``sseguard proxy`` (as
deployed: strict policy, in-flight checking, records to SQLite) each run under ``valgrind
--tool=callgrind`` with instrumentation off; after a warm-up, it is switched on for N streams
asked one after the other (each 100 events 20 ms apart, so that one read carries one event even at
valgrind's speed, as at 100 real streams), then dumped. Reported per protocol: instructions per event
delivered (per-stream work, the request and its record, included) and the ratio proxy ÷ bare relay.

``--stores sqlite,none`` runs the proxy once per store (``none``: no records), and ``--baseline-src
DIR`` each proxy once more importing ``sseguard`` from ``DIR``: what the record store costs the
proxy's own process, before and after, in one run. Only the proxy's process is counted (callgrind does
not follow a child process: a store writer process of its own is not in the count).

Run: .venv/bin/python -m bench.proxy.proxy_instructions [--apis chat,responses,messages,gemini] [--streams 4]
     [--stores sqlite,none] [--baseline-src DIR] [--proxy-only]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from pathlib import Path

import aiohttp

from bench.harness import SSEGUARD, callgrind_control, dumped_instructions, machine, server
from bench.proxy import bench_proxy as bp  # the bench's requests and bare relay

TOKENS, GAP_MS = 100, 20


async def streams(url: str, api: str, n: int) -> int:
    """Ask ``n`` streams one after the other; the events received."""
    path, body = bp.REQUESTS[api]
    events = 0
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        for _ in range(n):
            async with session.post(f"{url}/{path}", data=body, headers=bp.HEADERS) as resp:
                async for chunk in resp.content.iter_any():
                    events += chunk.count(b"\n\n") + chunk.count(b"\n\r\n")
    return events


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--apis", default="chat,responses,messages,gemini")
    parser.add_argument("--streams", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=TOKENS, help="Content events per stream.")
    parser.add_argument("--proxy-only", action="store_true",
                        help="Skip the bare relay (its counts do not change between trees).")
    parser.add_argument("--stores", default="sqlite", metavar="STORE[,STORE…]",
                        help="Proxy variants by store: sqlite, none (default sqlite).")
    parser.add_argument("--baseline-src", metavar="DIR",
                        help="Run every proxy variant once more from this src directory.")
    parser.add_argument("--keep", metavar="DIR", help="Keep the callgrind dumps in DIR "
                        "(read them with callgrind_annotate).")
    args = parser.parse_args()
    print(machine(), flush=True)
    apis = args.apis.split(",")
    with tempfile.TemporaryDirectory() as tmp, server(
            ["chaos", "--listen", "127.0.0.1:0", "--json", "--tokens", str(args.tokens),
             "--inter-token-ms", str(GAP_MS)], None) as (_, chaos_line):
        out_dir = Path(args.keep or tmp)
        out_dir.mkdir(parents=True, exist_ok=True)
        upstream = json.loads(chaos_line)["url"]
        valgrind = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                    f"--callgrind-out-file={out_dir}/cg.%p"]
        targets = {
            "bare relay": [*valgrind, *bp.SELF, "--bare-relay", upstream],
        }
        sources: dict[str, str | None] = {"": None}
        if args.baseline_src:
            sources[" (baseline)"] = args.baseline_src
        for suffix, src in sources.items():
            for store in args.stores.split(","):
                name = "sseguard proxy" + (", no store" if store == "none" else "") + suffix
                db = "none" if store == "none" else str(out_dir / f"s{len(targets)}.db")
                targets[name] = [*valgrind, *SSEGUARD, "proxy", "--upstream", upstream,
                                 "--listen", "127.0.0.1:0", "--store", db]
                if src:
                    targets[name] = ["env", f"PYTHONPATH={src}", *targets[name]]
        if args.proxy_only:
            del targets["bare relay"]
        results: dict[str, dict[str, float]] = {}
        for name, command in targets.items():
            with server(command, None, raw=True) as (proc, line):
                url = line.split()[4]
                for api in apis:
                    asyncio.run(streams(url, api, 1))  # warm-up: first-use code paths and imports
                    before = set(out_dir.glob(f"cg.{proc.pid}.*"))
                    callgrind_control(proc.pid, "-z")
                    callgrind_control(proc.pid, "-i", "on")
                    events = asyncio.run(streams(url, api, args.streams))
                    callgrind_control(proc.pid, "-i", "off")
                    callgrind_control(proc.pid, "-d")
                    ir = dumped_instructions(out_dir, proc.pid, before)
                    results.setdefault(api, {})[name] = ir / events
                    print(f"  {api:10} {name:15} {ir / events:12,.0f} instructions per event "
                          f"({events} events)", flush=True)
        names = [n for n in targets if n != "bare relay"]
        print("\n| protocol | bare relay | " + " | ".join(names) + " |")
        print("|---|---|" + "---|" * len(names))
        for api in apis:
            bare = results[api].get("bare relay", float("nan"))
            print(f"| {api} | {bare:,.0f} | "
                  + " | ".join(f"{results[api][n]:,.0f}" for n in names) + " |")


if __name__ == "__main__":
    main()
