"""`sseguard analyze` of a SQLite store written by several proxy workers at once (issue 39).

Several processes each open the store (``SQLiteStore``, WAL) and write their share of the records in
batches of 50 while the others do (as each ``--workers`` process's ``ProcessWriter`` child does), then
the store is analyzed in a fresh child process under a time limit. The records are proxy records of
~4.7 KB (headers and a body tail); their ``concurrency`` is what a proxy records — the streams in flight
at that worker when the stream started — drawn up to ``--levels`` (10,000 streams over seven workers:
~1,400 distinct values), with failures growing with it and a ``gw-`` route truncating a fifth:

    .venv/bin/python -m bench.analyze.bench_store_workers [--rows 16593] [--workers 7] [--levels 1430]
                                                  [--src CHECKOUT/src] [--timeout 300] [--db FILE]

``--src``: the sseguard the analysis imports (another checkout's ``src``, to compare before and after).
Prints the rows and size of the store, how long the writing took, and the analysis's wall and CPU
seconds (its imports included), or that it passed the time limit.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.harness import machine
from sseguard.core.record import Record

TAIL = "x" * 3000  # a body tail's worth: rows as long as the (78 MB / 16,593 rows)


def _records(worker: int, workers: int, rows: int, levels: int) -> list[Record]:
    rng = random.Random(worker)
    out: list[Record] = []
    for k in range(rows):
        i = worker + k * workers
        level = rng.randint(1, levels)
        gw = rng.random() < 0.2
        bad = (gw and rng.random() < 0.3) or rng.random() < level / (levels * 10)
        out.append(Record(
            source="proxy", run_id="proxy-bench", arm="proxy", index=i, worker=str(worker),
            started_at=1.75e9 + i * 0.01, status=200, ending="truncated" if bad else "complete",
            passed=not bad, response_id=f"gw-{i}" if gw else str(10_000_000 + i),
            id_prefix="gw" if gw else "numeric", concurrency=level, prompt_bytes=900,
            headers={"server": "chaos", "x-request-id": f"r{i}", "content-type": "text/event-stream"},
            extra={"tail": TAIL}))
    return out


def _write(db: str, worker: int, workers: int, rows: int, levels: int) -> None:
    from sseguard.store.sqlite import SQLiteStore

    records = _records(worker, workers, rows, levels)
    store = SQLiteStore(db)
    try:
        for start in range(0, len(records), 50):
            store.write(records[start:start + 50])
    finally:
        store.close()


def _analyze(db: str, src: str | None, timeout: float) -> str:
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = src
    code = ("import sys\nfrom sseguard.analyze.summary import analyze_sources\n"
            "a = analyze_sources([sys.argv[1]])\nprint(a.total)")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-c", code, db], env=env, capture_output=True,
                              text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return f"analysis: not done in {timeout:g} s"
    wall = time.monotonic() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode:
        return f"analysis failed: {done.stderr.strip().splitlines()[-1:]}"
    return f"analysis: {wall:.1f} s wall, {cpu:.1f} s CPU ({done.stdout.strip()} failed)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=16_593)
    ap.add_argument("--workers", type=int, default=7)
    ap.add_argument("--levels", type=int, default=1430)
    ap.add_argument("--src", default=None)
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--db", default=None, help="analyze this store instead of writing one")
    args = ap.parse_args()
    print(machine(), flush=True)
    if args.db:
        db = args.db
    else:
        db = str(Path(tempfile.mkdtemp(prefix="sseguard-workers-")) / "store.db")
        share = [args.rows // args.workers + (w < args.rows % args.workers) for w in range(args.workers)]
        began = time.monotonic()
        context = multiprocessing.get_context("spawn")
        procs = [context.Process(target=_write, args=(db, w, args.workers, share[w], args.levels))
                 for w in range(args.workers)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        print(f"wrote {args.rows} rows from {args.workers} processes in {time.monotonic() - began:.1f} s: "
              f"{os.path.getsize(db) / 1e6:.0f} MB, WAL "
              f"{os.path.getsize(db + '-wal') / 1e6 if os.path.exists(db + '-wal') else 0:.0f} MB; {db}")
    print(f"load {os.getloadavg()[0]:.1f}; " + _analyze(db, args.src, args.timeout), flush=True)


if __name__ == "__main__":
    main()
