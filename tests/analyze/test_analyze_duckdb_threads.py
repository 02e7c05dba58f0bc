"""DuckDB's memory limit and threads are chosen together: analysis never fails for a limit it set itself.

On a 16-core machine a fixed 600 MB limit failed on wide records ("failed to allocate data of size
32.0 MiB (571.1 MiB/572.2 MiB used)"): every thread holds its own read buffers. The test scales the
machine down: 16 threads forced on a file of wide records, with a 100 MB target (where 16 threads
fail and one or two do not).
"""

from __future__ import annotations

from pathlib import Path

from sseguard.analyze.backends import DuckDBBackend, duckdb_threads, facts_of
from sseguard.analyze.sources import FileSource
from sseguard.core.record import Record, encode_record


def wide_records(path: Path, n: int) -> Path:
    with path.open("wb") as out:
        for i in range(n):
            out.write(encode_record(Record(
                run_id="wide", index=i, ending="complete" if i % 10 else "truncated",
                started_at=1000.0 + i, concurrency=(1, 8, 60)[i % 3], response_id=f"chatcmpl-{i}",
                headers={"server": "gw", "x-request-id": f"req-{i}"}, tail="x" * 3500)))
    return path


def test_the_threads_follow_the_memory_limit() -> None:
    assert duckdb_threads(16, 600) == 12
    assert duckdb_threads(2, 600) == 2
    assert duckdb_threads(16, 100) == 2
    assert duckdb_threads(16, 10) == 1


def test_sixteen_threads_forced_on_wide_records_still_analyse(tmp_path: Path) -> None:
    path = wide_records(tmp_path / "wide.jsonl", 11_000)  # ~40 MB
    engine = DuckDBBackend(FileSource("jsonl", (str(path),)), threads=16, memory_mb=100)
    try:
        assert engine.threads <= 2
        facts = engine.materialize(facts_of(engine))
        rows = engine.rows(f"SELECT ending, COUNT(*) FROM ({facts}) AS f GROUP BY ending ORDER BY ending")
        assert rows == [("complete", 9900), ("truncated", 1100)]
        limit = engine.rows("SELECT current_setting('memory_limit')")[0][0]
        assert limit.endswith("MiB") and float(limit.split()[0]) < 100
    finally:
        engine.close()
