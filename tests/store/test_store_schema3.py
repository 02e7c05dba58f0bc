"""Store schema 3: the cache and consistency facts as columns; a schema-2 store still analyses."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sseguard.analyze.summary import analyze_sources
from sseguard.core.record import Record
from sseguard.store import open_store

CACHE_COLUMNS = ("prompt_tokens", "cached_tokens", "consistency", "diverged_token")


def recs(n: int, *, cached: bool, start: int = 0) -> list[Record]:
    return [Record(run_id="r", arm="a", index=start + i, started_at=1000.0 + i, ending="complete",
                   passed=True, concurrency=60 if i % 2 else 1, response_id=f"chatcmpl-{i}",
                   prompt_tokens=100 if cached else None, cached_tokens=80 if cached else None,
                   consistency=("diverged" if i % 4 == 1 else "identical") if cached else None,
                   diverged_token=3 if cached and i % 4 == 1 else None)
            for i in range(n)]


def schema_2_store(path: Path, records: list[Record]) -> None:
    """A store as sseguard wrote it before schema 3: the same table without the cache columns (nor
    schema 4's unknown kinds)."""
    store = open_store(str(path))
    store.write(records)
    store.close()
    with sqlite3.connect(path) as conn:
        for column in (*CACHE_COLUMNS, "unknown_kinds"):
            conn.execute(f"ALTER TABLE sseguard_records DROP COLUMN {column}")
        conn.execute("DELETE FROM sseguard_meta WHERE key = 'unknown_kinds_from'")
        conn.execute("UPDATE sseguard_meta SET value = '2' WHERE key = 'schema_version'")


def meta(path: Path) -> dict[str, str]:
    with sqlite3.connect(path) as conn:
        return dict(conn.execute("SELECT key, value FROM sseguard_meta").fetchall())


def test_a_schema_2_store_analyses_as_it_is_and_the_analyzer_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    schema_2_store(db, recs(40, cached=False))
    analysis = analyze_sources([str(db)])
    assert analysis.requests == 40 and analysis.total.failed == 0
    assert analysis.consistency is None
    assert meta(db)["schema_version"] == "2"


def test_a_writer_migrates_schema_2_and_the_new_rows_carry_their_cache_facts(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    schema_2_store(db, recs(40, cached=False))
    store = open_store(str(db))
    store.write(recs(40, cached=True, start=100))
    store.close()
    assert meta(db)["schema_version"] == "4"
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT cached_tokens, consistency, COUNT(*) FROM sseguard_records "
                            "GROUP BY 1, 2 ORDER BY 1, 2").fetchall()
    assert rows == [(None, None, 40), (80, "diverged", 10), (80, "identical", 30)]
    analysis = analyze_sources([str(db)])
    assert analysis.requests == 80
    assert analysis.consistency is not None
    assert (analysis.consistency.total.failed, analysis.consistency.total.total) == (10, 40)
    by_level = {lv.concurrency: (lv.rate.failed, lv.rate.total, lv.early)
                for lv in analysis.consistency.levels}
    assert by_level == {1: (0, 20, 0), 60: (10, 20, 10)}


def test_export_keeps_the_cache_facts(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from sseguard.analyze.export import export_parquet

    db = tmp_path / "s.db"
    store = open_store(str(db))
    store.write(recs(8, cached=True))
    store.close()
    assert export_parquet([str(db)], tmp_path / "pq") == 8
    table = pq.read_table(next((tmp_path / "pq").rglob("*.parquet")))
    got = sorted(zip(table.column("cached_tokens").to_pylist(), table.column("consistency").to_pylist(),
                     table.column("diverged_token").to_pylist(), strict=True), key=str)
    assert got == sorted([(80, "identical", None)] * 6 + [(80, "diverged", 3)] * 2, key=str)
