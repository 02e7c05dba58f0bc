"""The guarded relay's own per-event work, in instructions, apart from the checker and from aiohttp.

``proxy_instructions.py`` counts the whole proxy (aiohttp, the checker, the relay, the record); this
splits out what the relay engine adds: ``StreamDriver._pump`` over the answers of
``bench_checker.ANSWERS`` (one read per event, as at 100 real streams), from an in-memory body into a
response whose ``write`` does nothing, against the checker alone fed the same reads. ``stream`` adds
the per-stream work around the pump: building the checker and the relay, judging the stream and
``ProxyState.stream_done`` (metrics and the record; the store's writer thread is not started).
Each figure is a run of 11 answers minus a run of 1, divided by 10 (start-up and imports cancel).

Run: .venv/bin/python -m bench.proxy.relay_instructions [--apis chat,responses,messages]
     [--modes checker,pump,stream]
"""

from __future__ import annotations

import argparse
import sys

from bench.harness import callgrind_total, machine

SCRIPT = r'''
import asyncio, sys
from bench.checker.bench_checker import ANSWER_REQUESTS, ANSWERS, frames_of
from sseguard.core.contract import checker_for
from sseguard.proxy import ProxyConfig
from sseguard.proxy.machines.frames import Frames
from sseguard.proxy.driver.stream import StreamDriver
from sseguard.proxy.driver.stall import StallWatch
from sseguard.proxy.driver.state import ProxyState
from sseguard.core.contract import protocol
from sseguard.core.redact import DEFAULT

api, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
reads = frames_of(ANSWERS[api](100))
request_obj = {"model": "m", "stream": True, **ANSWER_REQUESTS[api]}
config = ProxyConfig.from_options(upstream="http://127.0.0.1:9/v1", listen="127.0.0.1:0")
state = ProxyState(config)

class Body:
    def __init__(self):
        self.it = iter(reads)
    async def read(self, n=-1):
        return next(self.it, b"")
    def set_exception(self, exc):
        pass

class Resp:
    async def write(self, data):
        pass

class Request:
    method, path = "POST", "/v1/x"

async def main():
    loop = asyncio.get_running_loop()
    for _ in range(n):
        checker = checker_for(api, request_obj, keep_text=False)
        if mode == "checker":
            for r in reads:
                checker.feed(r)
            checker.close()
            continue
        relay = StreamDriver(config, state.policy, state.stream_done, Request(), b"{}", request_obj,
                            Frames(), checker, DEFAULT, protocol(api).relay, api=protocol(api).api)
        relay._resp = relay._writer = Resp()
        body = Body()
        watch = StallWatch(loop, config.stall_timeout, body)
        await relay._pump(body, watch, b"", None)
        watch.close()
        if mode == "stream":
            verdict = relay.machine._verdict(None, False)
            state.stream_done(relay, verdict, relay.identity)
        else:
            relay.machine._verdict(None, False)

asyncio.run(main())
print(len(reads))
'''


def instructions(api: str, mode: str, rounds: int) -> tuple[int, int]:
    total, printed = callgrind_total([sys.executable, "-c", SCRIPT, api, mode, str(rounds)])
    return total, int(printed)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--apis", default="chat,responses,messages")
    ap.add_argument("--modes", default="checker,pump,stream")
    args = ap.parse_args()
    print(machine(), flush=True)
    modes = args.modes.split(",")
    print("| protocol | " + " | ".join(f"{m}, instr./event" for m in modes) + " |")
    print("|---|" + "---|" * len(modes))
    for api in args.apis.split(","):
        cells = []
        for mode in modes:
            (many, events), (one, _) = instructions(api, mode, 11), instructions(api, mode, 1)
            cells.append(f"{(many - one) / 10 / events:,.0f}")
        print(f"| {api} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
