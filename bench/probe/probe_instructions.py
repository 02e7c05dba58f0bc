"""The probe's CPU per event in instructions, against the bare aiohttp reader: stable on a busy machine.

``bench_probe.py`` measures CPU seconds at 1,000 streams, which move ±30 % with whatever else the
machine runs; instruction counts do not. This runs the same two phases (``bench_probe.bare_phase``
and ``bench_probe.probe_phase``: the same runner, engine, checker and JSONL sink as ``sseguard
probe``) in one process under ``valgrind --tool=callgrind`` with instrumentation off until a phase
starts: a tiny C helper built here from valgrind's ``callgrind.h`` switches it on and dumps at the
end of each phase, so start-up, imports and the warm-up are not counted. The chaos upstream runs
outside valgrind. Each phase runs with ``--rounds`` 1 and 2: the total per event includes the
phase's fixed cost (session, run file, reading the results back); the difference between the two,
per event, is the steady per-stream cost (request, stream, record) that 1,000 streams pay.

Few streams at a time (``--streams``, default 4, 50 ms between tokens) so that one read carries one
event at valgrind's speed, as it does in the real benchmark.

Run: .venv/bin/python -m bench.probe.probe_instructions [--apis chat] [--streams 4] [--keep DIR]
``--inner`` is the mode valgrind runs.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import gc
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.harness import ROOT, build_callgrind_helper, machine, stop
from bench.probe import bench_probe as bp  # the bench phases, measured here

HELPER = r"""
#include <valgrind/callgrind.h>
void cg_start(void) { CALLGRIND_ZERO_STATS; CALLGRIND_START_INSTRUMENTATION; }
void cg_stop(const char *name) { CALLGRIND_STOP_INSTRUMENTATION; CALLGRIND_DUMP_STATS_AT(name); }
"""
KINDS = ("bare", "probe", "nocheck")


class _NoCheck:
    """A checker that does nothing and returns a fixed verdict: what the probe costs on its own."""

    saw_content = True

    def __init__(self, verdict: object) -> None:
        self._verdict = verdict

    def feed(self, data: bytes) -> list[object]:
        return []

    def close(self, **_: object) -> object:
        return self._verdict


def no_checker(api: object) -> object:
    """``measure.checker_for`` replaced by one that hands out ``_NoCheck`` with a real verdict."""
    from bench.checker.bench_checker import ANSWER_REQUESTS, ANSWERS, frames_of
    from sseguard.core.contract import checker_for

    real = checker_for(api, ANSWER_REQUESTS[api])
    for read in frames_of(ANSWERS[api](100)):
        real.feed(read)
    verdict = real.close()
    return lambda *_a, **_k: _NoCheck(verdict)


async def inner_main(args: argparse.Namespace) -> None:
    from sseguard.core.contract import checker_for
    from sseguard.core.verdict import Api
    from sseguard.probe import measure

    lib = ctypes.CDLL(args.helper)
    lib.cg_stop.argtypes = [ctypes.c_char_p]
    out = Path(args.out)
    for api_name in args.apis.split(","):
        api = Api(api_name)
        stream_s, _ = await bp.calibrate(args.url, api)
        # Warm-up: first-use code paths, imports, the checker's registry.
        await bp.bare_phase(args.url, 1, 1, 0.0, api)
        await bp.probe_phase(args.url, 1, 1, 0.0, out / f"warm-{api}", api)
        nocheck = no_checker(api)
        measure.checker_for = nocheck  # type: ignore[assignment]
        try:
            await bp.probe_phase(args.url, 1, 1, 0.0, out / f"warm-nocheck-{api}", api)
        finally:
            measure.checker_for = checker_for
        for rounds in (1, 3):
            for kind in KINDS:
                label = f"{api}-{kind}-{rounds}"
                if kind == "nocheck":
                    measure.checker_for = nocheck  # type: ignore[assignment]
                lib.cg_start()
                if kind == "bare":
                    phase = await bp.bare_phase(args.url, args.streams, rounds, stream_s, api)
                else:
                    try:
                        phase = await bp.probe_phase(args.url, args.streams, rounds, stream_s,
                                                     out / label, api)
                    finally:
                        measure.checker_for = checker_for
                lib.cg_stop(label.encode())
                print(json.dumps({"label": label, "events": phase.events,
                                  "complete": phase.complete, "streams": phase.streams}),
                      flush=True)


def totals(out_dir: Path) -> dict[str, int]:
    """Instructions per dump, by the label each dump was taken with."""
    found: dict[str, int] = {}
    for path in out_dir.glob("cg.out*"):
        text = path.read_text(errors="replace")
        trigger = re.search(r"^desc: Trigger: Client Request: (\S+)", text, re.M)
        total = re.search(r"^totals: (\d+)", text, re.M)
        if trigger and total:
            found[trigger.group(1)] = int(total.group(1))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--apis", default="chat")
    parser.add_argument("--streams", type=int, default=4)
    parser.add_argument("--delay-ms", type=float, default=50.0)
    parser.add_argument("--tokens", type=int, default=100)
    parser.add_argument("--keep", metavar="DIR", help="Keep the callgrind dumps in DIR "
                        "(read them with callgrind_annotate).")
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--helper", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        from sseguard._serve import loop_factory
        from sseguard.probe.runner import quiet_gc

        with quiet_gc(), asyncio.Runner(loop_factory=loop_factory()) as runner:
            # No cyclic collection: where one falls would move a phase's count by more than the
            # differences measured here (its cost follows allocations, which the counts show).
            gc.disable()
            runner.run(inner_main(args))
        return
    print(machine(), flush=True)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        out_dir = Path(args.keep) if args.keep else tmp / "dumps"
        out_dir.mkdir(parents=True, exist_ok=True)
        helper = build_callgrind_helper(tmp, HELPER)
        proc, url = bp.start_chaos_upstream(args.delay_ms, args.tokens)
        try:
            command = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                       f"--callgrind-out-file={out_dir}/cg.out",
                       sys.executable, "-m", "bench.probe.probe_instructions",
                       "--inner", "--url", url, "--helper", str(helper), "--out", str(tmp / "runs"),
                       "--apis", args.apis, "--streams", str(args.streams)]
            done = subprocess.run(command, check=True, capture_output=True, text=True, cwd=ROOT)
        finally:
            stop(proc)
        phases = {d["label"]: d for d in map(json.loads, done.stdout.splitlines())}
        instr = totals(out_dir)
        print(f"{args.streams} streams at a time, {args.tokens} tokens {args.delay_ms:g} ms apart; "
              "instructions per event")
        print("| protocol | side | total, 1 round | total, 3 rounds | per event of rounds 2-3 |")
        print("|---|---|---|---|---|")
        per: dict[tuple[str, str], float] = {}
        for api in args.apis.split(","):
            for kind in KINDS:
                one, two = phases[f"{api}-{kind}-1"], phases[f"{api}-{kind}-3"]
                i1, i2 = instr[f"{api}-{kind}-1"], instr[f"{api}-{kind}-3"]
                steady = (i2 - i1) / max(two["events"] - one["events"], 1)
                per[api, kind] = steady
                print(f"| {api} | {kind} | {i1 / one['events']:,.0f} | {i2 / two['events']:,.0f} | "
                      f"{steady:,.0f} |")
        for api in args.apis.split(","):
            print(f"{api}: per event of rounds 2-3, probe ÷ bare "
                  f"{per[api, 'probe'] / per[api, 'bare']:.2f}×, probe with a do-nothing checker "
                  f"÷ bare {per[api, 'nocheck'] / per[api, 'bare']:.2f}×")


if __name__ == "__main__":
    main()
