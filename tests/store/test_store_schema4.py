"""Store schema 4: the unknown kinds as a column. A schema-3 store analyses as it is (the kinds read
out of each record's JSON, which carried them before the column did); a writer migrates it in place,
and the rows written before keep their NULL column, read from their JSON still."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg

from sseguard.analyze.backends import PostgresBackend, SQLiteBackend
from sseguard.analyze.sources import StoreSource
from sseguard.analyze.summary import analyze_sources
from sseguard.store import open_store
from support.unknown import EXPECTED, records


def schema_3_sqlite(path: Path) -> None:
    """A store as sseguard wrote it at schema 3: no unknown-kinds column, no meta key for it; the
    records' JSON carries the kinds (``Record.unknown_kinds`` came before the column)."""
    store = open_store(str(path))
    store.write(records())
    store.close()
    with sqlite3.connect(path) as conn:
        conn.execute("ALTER TABLE sseguard_records DROP COLUMN unknown_kinds")
        conn.execute("DELETE FROM sseguard_meta WHERE key = 'unknown_kinds_from'")
        conn.execute("UPDATE sseguard_meta SET value = '3' WHERE key = 'schema_version'")


def meta(path: Path) -> dict[str, str]:
    with sqlite3.connect(path) as conn:
        return dict(conn.execute("SELECT key, value FROM sseguard_meta").fetchall())


def doubled() -> list[dict[str, object]]:
    return [{**row, "streams": 2 * int(str(row["streams"])), "of": 2 * int(str(row["of"]))}
            for row in EXPECTED]


def test_a_new_store_writes_the_column(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    store = open_store(str(db))
    store.write(records())
    store.close()
    assert meta(db) == {"schema_version": "4", "facts_from": "0", "unknown_kinds_from": "0"}
    with sqlite3.connect(db) as conn:
        got = conn.execute("SELECT unknown_kinds FROM sseguard_records ORDER BY seq").fetchall()
    assert [g[0] for g in got] == ["delta.foo", "chunk.obfuscation2,delta.foo", None, "delta.foo", None,
                                   None, "block:hologram,delta:hologram_delta", "telepathy", None, None]


def test_a_schema_3_store_analyses_as_it_is_and_the_analyzer_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    schema_3_sqlite(db)
    analysis = analyze_sources([str(db)])
    assert analysis.to_dict()["unknown_kinds"] == EXPECTED
    assert (analysis.requests, analysis.total.failed) == (10, 1)
    assert meta(db) == {"schema_version": "3", "facts_from": "0"}
    eng = SQLiteBackend(StoreSource("sqlite", str(db)))
    try:  # read by its columns (schema 3 has them all but this one), the one column from the JSON
        assert (eng.columns_from, eng.unknown_from) == (0, 0)
    finally:
        eng.close()


def test_a_writer_migrates_schema_3_and_the_older_rows_are_read_from_their_json(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    schema_3_sqlite(db)
    store = open_store(str(db))
    store.write(records(start=100))
    store.close()
    assert meta(db) == {"schema_version": "4", "facts_from": "0", "unknown_kinds_from": "11"}
    with sqlite3.connect(db) as conn:
        filled = conn.execute("SELECT seq > 10, COUNT(unknown_kinds) FROM sseguard_records "
                              "GROUP BY seq > 10 ORDER BY 1").fetchall()
    assert filled == [(0, 0), (1, 5)]  # the old rows keep NULL: a migration never rewrites a store
    eng = SQLiteBackend(StoreSource("sqlite", str(db)))
    try:
        assert (eng.columns_from, eng.unknown_from) == (0, 11)
    finally:
        eng.close()
    assert analyze_sources([str(db)]).to_dict()["unknown_kinds"] == doubled()


def test_postgresql_schema_3_is_read_as_it_is_then_migrated_and_appended(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS sseguard_records, sseguard_meta")
    store = open_store(pg_dsn)
    store.write(records())
    store.close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("ALTER TABLE sseguard_records DROP COLUMN unknown_kinds")
        conn.execute("DELETE FROM sseguard_meta WHERE key = 'unknown_kinds_from'")
        conn.execute("UPDATE sseguard_meta SET value = '3' WHERE key = 'schema_version'")
    assert analyze_sources([pg_dsn]).to_dict()["unknown_kinds"] == EXPECTED
    store = open_store(pg_dsn)
    store.write(records(start=100))
    store.close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        got = dict(conn.execute("SELECT key, value FROM sseguard_meta").fetchall())
        filled = conn.execute("SELECT seq > 10, COUNT(unknown_kinds) FROM sseguard_records "
                              "GROUP BY seq > 10 ORDER BY 1").fetchall()
    assert got == {"schema_version": "4", "facts_from": "0", "unknown_kinds_from": "11"}
    assert filled == [(False, 0), (True, 5)]
    eng = PostgresBackend(StoreSource("postgresql", pg_dsn))
    try:
        assert (eng.columns_from, eng.unknown_from) == (0, 11)
    finally:
        eng.close()
    assert analyze_sources([pg_dsn]).to_dict()["unknown_kinds"] == doubled()


def test_export_of_a_migrated_store_keeps_every_rows_kinds(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from sseguard.analyze.export import export_parquet

    db = tmp_path / "old.db"
    schema_3_sqlite(db)
    store = open_store(str(db))
    store.write(records(start=100))
    store.close()
    assert export_parquet([str(db)], tmp_path / "pq") == 20
    table = pq.read_table(next((tmp_path / "pq").rglob("*.parquet")))
    assert sorted(table.column("unknown_kinds").to_pylist()).count('["delta.foo"]') == 4
    assert analyze_sources([str(tmp_path / "pq")]).to_dict()["unknown_kinds"] == doubled()
