"""How long `sseguard analyze` takes on a large run: load, analyze and write the HTML for N records.

A synthetic run with two causes mixed (a `gw-` route truncating 30 % of its streams, and failures
growing with concurrency) and a per-request header that must be skipped. Run:

    .venv/bin/python bench/bench_analyze.py [N]      (default 100,000)
"""

from __future__ import annotations

import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path

from sseguard.analyze import analyze, load_records, write_html
from sseguard.record import Record, encode_record, id_prefix


def synthetic(n: int, seed: int = 1) -> list[Record]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        gw = rng.random() < 0.2
        level = rng.choice([1, 8, 16, 32, 60])
        bad = (gw and rng.random() < 0.3) or rng.random() < level / 1000
        rid = f"gw-{i}" if gw else str(10**7 + i)
        out.append(Record(run_id="bench", index=i, started_at=1.75e9 + i * 0.01, concurrency=level,
                          ending="truncated" if bad else "complete", response_id=rid,
                          id_prefix=id_prefix(rid), status=200, reuse_index=i % 16,
                          headers={"server": rng.choice("abc"), "x-request-id": f"r{i}"},
                          tail='data: {"choices":[{"delta":{"content":"and then"}}]}\n\n'))
    return out


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "results.jsonl"
        path.write_bytes(b"".join(encode_record(r) for r in synthetic(n)))
        t0 = time.perf_counter()
        records = load_records([str(path)])
        t1 = time.perf_counter()
        analysis = analyze(records)
        t2 = time.perf_counter()
        write_html(analysis, records, Path(tmp) / "report.html")
        t3 = time.perf_counter()
        size = path.stat().st_size / 1e6
    print(f"nproc={os.cpu_count()} python={platform.python_version()} records={n} jsonl={size:.0f} MB")
    print(f"load {t1 - t0:.2f} s · analyze {t2 - t1:.2f} s · html (3 plots) {t3 - t2:.2f} s")
    print(f"top attribute: {analysis.top.key if analysis.top else None}")


if __name__ == "__main__":
    main()
