"""Redactor cost on what it sees per stored record: a 2 KiB body tail, headers, an error line.

Every record's tail goes through ``Redactor.text``, so its cost on *ordinary* text (no secret, the
common case) is what matters; a tail with a secret in it is measured too. ``--baseline PATH`` loads
another ``redact.py`` (e.g. the one on main) and prints both, measured alternately in one run, with
the ratio.

Usage: .venv/bin/python -m bench.store.bench_redact [--baseline /work/main/src/sseguard/core/redact.py]
                                              [--rounds 5] [--calls 20000]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from bench.harness import ROOT, machine
from sseguard.core.redact import Redactor


def _tail() -> str:
    body = (ROOT / "examples" / "bodies" / "complete.sse").read_text()
    return (body * (2048 // len(body) + 1))[-2048:]


INPUTS = {
    "sse tail 2 KiB (usage, no secret)": _tail(),
    "prose 2 KiB (no secret)":
        ("The key to a good stream is that it ends well; tokens are counted. " * 40)[:2048],
    "error line": "upstream returned 503: Service Unavailable (retry after 2 s)",
    "sse tail 2 KiB with a key": _tail()[:-80] + " key sk-proj-Xq3vB8nT2mK9pL4wR7yZ1cF6hJ0dS5aE here",
}


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("baseline_redact", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _per_call_us(fn: Callable[[str], str], text: str, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn(text)
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--baseline", type=Path, default=None, metavar="PATH")
    parser.add_argument("--rounds", type=int, default=5, metavar="N")
    parser.add_argument("--calls", type=int, default=20000, metavar="N")
    args = parser.parse_args()
    print(machine(), flush=True)
    ours = Redactor(["k3y-known-to-the-probe"]).text
    base = _load(args.baseline).Redactor(["k3y-known-to-the-probe"]).text if args.baseline else None
    print(f"{'input':38} {'ours µs':>9} {'base µs':>9} {'ratio':>6}")
    for name, text in INPUTS.items():
        mine, theirs = [], []
        for _ in range(args.rounds):
            mine.append(_per_call_us(ours, text, args.calls))
            if base is not None:
                theirs.append(_per_call_us(base, text, args.calls))
        m = statistics.median(mine)
        if theirs:
            b = statistics.median(theirs)
            print(f"{name:38} {m:9.2f} {b:9.2f} {m / b:6.2f}")
        else:
            print(f"{name:38} {m:9.2f} {'-':>9} {'-':>6}")


if __name__ == "__main__":
    main()
