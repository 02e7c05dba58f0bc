"""Parser cost of the families of docs/design/markup.md classes F, G and H on one long string argument.

The argument of ``bench_parsers.py`` (code-like text: ``<`` every ~25 characters, quotes,
backslashes, newlines) is written by each family's own ``render`` as the ``content`` parameter of one
``write_file`` call, typed as a string by the offered tool's schema, and streamed in 4-character
chunks at 80 KB and 320 KB. Targets (issue 36): linear (4x input => <= 4.5x time) and under 3 µs per
chunk. The families these are built on (``qwen3-coder``, ``glm47``, ``minimax-m2``, ``dsml-v4``) are
measured in the same run as the reference. Each figure is the best of ``--repeat`` runs, in the
process's CPU time (``time.process_time``: on a shared, loaded machine wall time mostly measures the
wait for a core) and, for comparison, wall time.

Run: .venv/bin/python -m bench.parsers.bench_xml_families [--repeat 5] [--families seed-oss zaya ...]
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from dataclasses import dataclass
from typing import Any

from bench.harness import machine
from bench.parsers.bench_parsers import CHUNK, TOOLS, make_value
from sseguard.core.toolcalls import FAMILIES, ToolCallEnd, parser_for

OURS = ("seed-oss", "zaya", "dots", "step3", "minicpm5", "gigachat35", "kimi-k3", "minimax-m3", "muse",
        "iquest-q1", "hunyuan", "k2-horizon")
REFERENCE = ("qwen3-coder", "glm47", "minimax-m2", "dsml-v4")
SIZES_KB = (80, 320)


@dataclass(frozen=True)
class WriteFile:
    name: str
    values: dict[str, Any]

    @property
    def arguments(self) -> str:
        return json.dumps(self.values, ensure_ascii=False)


def stream(family: str, value: str) -> str:
    call = WriteFile("write_file", {"path": "src/page.html", "content": value})
    return "I will write the file." + FAMILIES[family].render([call], False)


def once(family: str, chunks: list[str], expect: dict[str, Any]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one stream."""
    gc.collect()
    c0, t0 = time.process_time(), time.perf_counter()
    parser = parser_for(family, TOOLS)
    ends = []
    for chunk in chunks:
        ends.extend(e for e in parser.feed(chunk) if isinstance(e, ToolCallEnd))
    ends.extend(e for e in parser.close() if isinstance(e, ToolCallEnd))
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    assert len(ends) == 1 and json.loads(ends[0].arguments) == expect, family
    return cpu, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--families", nargs="*", default=[*OURS, *REFERENCE])
    args = ap.parse_args()
    print(f"# {machine()}, {CHUNK}-char chunks, best of {args.repeat}")
    print(f"{'family':<12} {'80 KB ms':>9} {'µs/chunk':>9} {'320 KB ms':>10} {'µs/chunk':>9} "
          f"{'x4 input':>9}  {'wall 80/320 KB µs/chunk':>24}  targets (CPU)")
    values = {kb: make_value(kb) for kb in SIZES_KB}
    for family in args.families:
        best, per_chunk, wall = {}, {}, {}
        for kb in SIZES_KB:
            text = stream(family, values[kb])
            chunks = [text[i:i + CHUNK] for i in range(0, len(text), CHUNK)]
            expect = {"path": "src/page.html", "content": values[kb]}
            runs = [once(family, chunks, expect) for _ in range(args.repeat)]
            best[kb] = min(cpu for cpu, _ in runs)
            per_chunk[kb] = best[kb] / len(chunks) * 1e6
            wall[kb] = min(w for _, w in runs) / len(chunks) * 1e6
        growth = best[320] / best[80]
        ok = growth <= 4.5 and per_chunk[320] <= 3.0
        print(f"{family:<12} {best[80] * 1e3:>9.2f} {per_chunk[80]:>9.3f} {best[320] * 1e3:>10.2f} "
              f"{per_chunk[320]:>9.3f} {growth:>8.2f}x  {wall[80]:>11.3f} {wall[320]:>11.3f}  "
              f"{'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    main()
