"""Store schema 2 (the counted facts as columns) over stores written by schema 1.

A schema-1 store is built here with the literal DDL and INSERT of schema 1 (not with today's code), then:
the analyzer reads it as it is (every row out of its JSON); a writer opens it, migrates it in place and
appends (its rows carry the columns, the old ones keep NULL and are read from their JSON); and the
analysis of either equals the golden answers, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import msgspec
import psycopg
import pytest

from sseguard.analyze.backends import PostgresBackend, SQLiteBackend
from sseguard.analyze.sources import StoreSource
from sseguard.analyze.summary import analyze_sources
from sseguard.core.errors import ConfigError
from sseguard.core.policy import Policy
from sseguard.core.record import Record
from sseguard.store import open_store
from support.analyze_golden import CASES, assert_same, golden, records

V1_SQLITE = """
CREATE TABLE IF NOT EXISTS sseguard_records (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    arm TEXT NOT NULL,
    ending TEXT NOT NULL,
    started_at REAL NOT NULL,
    id_prefix TEXT,
    record TEXT NOT NULL,
    weight INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX IF NOT EXISTS sseguard_records_run_id ON sseguard_records (run_id);
CREATE INDEX IF NOT EXISTS sseguard_records_started_at ON sseguard_records (started_at);
CREATE TABLE IF NOT EXISTS sseguard_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT OR IGNORE INTO sseguard_meta (key, value) VALUES ('schema_version', '1');
"""
V1_INSERT = ("INSERT INTO sseguard_records (run_id, arm, ending, started_at, id_prefix, record, weight) "
             "VALUES (?, ?, ?, ?, ?, ?, 1)")
V1_POSTGRES = [
    """CREATE TABLE sseguard_records (
        seq BIGSERIAL PRIMARY KEY, run_id TEXT NOT NULL, arm TEXT NOT NULL, ending TEXT NOT NULL,
        started_at DOUBLE PRECISION NOT NULL, id_prefix TEXT, record JSONB NOT NULL,
        weight BIGINT NOT NULL DEFAULT 1)""",
    "CREATE TABLE sseguard_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "INSERT INTO sseguard_meta (key, value) VALUES ('schema_version', '1')",
]


def _v1_rows(recs: list[Record]) -> list[tuple[Any, ...]]:
    return [(r.run_id, r.arm, r.ending, r.started_at, r.id_prefix, msgspec.json.encode(r).decode())
            for r in recs]


def v1_sqlite(path: Path, recs: list[Record]) -> None:
    conn = sqlite3.connect(path)
    conn.executescript(V1_SQLITE)
    conn.executemany(V1_INSERT, _v1_rows(recs))
    conn.commit()
    conn.close()


def _check(sources: list[str], name: str) -> None:
    for data, tag, tolerate in CASES:
        if data == name:
            got = analyze_sources(sources, Policy.from_spec("strict", tolerate))
            assert_same(golden(data, tag), got.to_dict())


def _meta(path: Path) -> dict[str, str]:
    with sqlite3.connect(path) as conn:
        return dict(conn.execute("SELECT key, value FROM sseguard_meta").fetchall())


def _columns_from(path: Path) -> int | None:
    eng = SQLiteBackend(StoreSource("sqlite", str(path)))
    try:
        return eng.columns_from
    finally:
        eng.close()


@pytest.mark.parametrize("name", ["demo", "every_kind"])
def test_the_analyzer_reads_a_schema_1_store_as_it_is(tmp_path: Path, name: str) -> None:
    db = tmp_path / "old.db"
    v1_sqlite(db, records(name))
    _check([str(db)], name)
    assert _meta(db) == {"schema_version": "1"}  # the analyzer never writes a store
    assert _columns_from(db) is None


@pytest.mark.parametrize("name", ["demo", "every_kind"])
def test_a_writer_migrates_a_schema_1_store_and_appends_with_columns(tmp_path: Path, name: str) -> None:
    recs = records(name)
    half = len(recs) // 2
    db = tmp_path / "old.db"
    v1_sqlite(db, recs[:half])
    store = open_store(str(db))
    store.write(recs[half:])
    assert store.count() == len(recs)
    assert [r.index for r in store.read()] == [r.index for r in recs]
    store.close()
    assert _meta(db) == {"schema_version": "4", "facts_from": str(half + 1),
                         "unknown_kinds_from": str(half + 1)}
    assert _columns_from(db) == half + 1
    with sqlite3.connect(db) as conn:
        nulls = conn.execute("SELECT COUNT(*) FROM sseguard_records WHERE api IS NULL").fetchone()[0]
        filled = conn.execute("SELECT COUNT(*) FROM sseguard_records WHERE api IS NOT NULL AND "
                              f"seq > {half}").fetchone()[0]
    assert (nulls, filled) == (half, len(recs) - half)
    _check([str(db)], name)
    open_store(str(db)).close()  # opening again migrates nothing
    assert _meta(db) == {"schema_version": "4", "facts_from": str(half + 1),
                         "unknown_kinds_from": str(half + 1)}


def test_a_new_store_reads_every_row_by_its_columns(tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    store = open_store(str(db))
    store.write(records("demo"))
    store.close()
    assert _meta(db) == {"schema_version": "4", "facts_from": "0", "unknown_kinds_from": "0"}
    assert _columns_from(db) == 0
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT schema, idx, api, kinds, pfx, sep, headers, heal_attempts "
                           "FROM sseguard_records ORDER BY seq LIMIT 1").fetchone()
    first = records("demo")[0]
    assert row[:2] == (first.schema, first.index)
    assert row[2] == first.api and row[4] == first.id_prefix
    assert msgspec.json.decode(row[6]) == first.headers
    assert row[7] == 0


def test_the_columns_are_what_the_json_path_computes(tmp_path: Path) -> None:
    """Rows with columns and the same rows read out of their JSON give one facts relation."""
    recs = [Record(run_id="r", index=1, response_id="gw-17", id_prefix=None, headers={"server": "a"},
                   findings=[{"kind": "missing_usage"}, {"kind": "truncated"}]),
            Record(run_id="r", index=2, response_id="8731209", id_prefix="numeric", reuse_index=3,
                   unknown_kinds=["block:hologram", "telepathy"]),
            Record(run_id="r", index=3, response_id=None, heal_of=1, healed=None),
            Record(run_id="r", index=4, response_id="resp_x", healed="resume", heal_attempts=2,
                   heal_tokens=30, findings=[{"kind": None}])]
    db = tmp_path / "s.db"
    v1_sqlite(db, recs)
    open_store(str(db)).close()
    store = open_store(str(db))
    store.write(recs)
    store.close()
    eng = SQLiteBackend(StoreSource("sqlite", str(db)))
    try:
        facts = eng.source.facts("sqlite", columns_from=eng.columns_from)  # type: ignore[call-arg]
        rows = eng.rows(f"SELECT * FROM ({facts}) AS f")
    finally:
        eng.close()
    assert len(rows) == 8
    stored, parsed = rows[:4], rows[4:]  # the rows from ``facts_from`` on first, then the older ones
    for a, b in zip(stored, parsed, strict=True):
        assert a[:14] == b[:14] and a[15:] == b[15:]
        assert msgspec.json.decode(a[14]) == msgspec.json.decode(b[14])  # headers: the same JSON
    assert stored[0][9:12] == ("missing_usage,truncated", "gw", "-")
    assert stored[1][10:13] == ("numeric", None, 3)
    assert stored[1][20] == "block:hologram,telepathy" and stored[0][20] is None
    assert stored[2][21] == 1 and stored[3][22:] == ("resume", 2, 30)


def test_a_store_of_a_newer_schema_is_left_untouched(tmp_path: Path) -> None:
    db = tmp_path / "future.db"
    v1_sqlite(db, records("demo")[:3])
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE sseguard_meta SET value = '5' WHERE key = 'schema_version'")
    with pytest.raises(ConfigError, match=r"schema version 5; this sseguard reads up to 4"):
        open_store(str(db))
    assert _meta(db) == {"schema_version": "5"}
    with sqlite3.connect(db) as conn:
        assert "api" not in {r[1] for r in conn.execute("PRAGMA table_info(sseguard_records)")}


def test_a_record_of_a_newer_schema_in_the_columns_names_both_versions(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "s.db"))
    store.write([Record(run_id="r", schema=9, ending="complete")])
    store.close()
    with pytest.raises(ConfigError, match=r"schema 9; this sseguard reads schema 1 and older"):
        analyze_sources([str(tmp_path / "s.db")])


# ── PostgreSQL (the real server the test session starts) ─────────────────────────────────────────
@pytest.mark.parametrize("name", ["demo", "every_kind"])
def test_postgresql_schema_1_is_read_as_it_is_then_migrated_and_appended(pg_dsn: str, name: str,
                                                                         tmp_path: Path) -> None:
    recs = records(name)
    half = len(recs) // 2
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS sseguard_records, sseguard_meta")
        for statement in V1_POSTGRES:
            conn.execute(statement)
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO sseguard_records (run_id, arm, ending, started_at, id_prefix, "
                            "record, weight) VALUES (%s, %s, %s, %s, %s, %s::jsonb, 1)",
                            _v1_rows(recs[:half]))
    # Schema 1, never opened by a writer: every row out of its JSON, counted as DuckDB counts the file.
    part = tmp_path / "half.jsonl"
    part.write_bytes(b"".join(msgspec.json.encode(r) + b"\n" for r in recs[:half]))
    assert_same(analyze_sources([str(part)]).to_dict(), analyze_sources([pg_dsn]).to_dict())
    store = open_store(pg_dsn)
    store.write(recs[half:])
    store.close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        meta = dict(conn.execute("SELECT key, value FROM sseguard_meta").fetchall())
        nulls = conn.execute("SELECT COUNT(*) FROM sseguard_records WHERE api IS NULL").fetchone()
    assert meta == {"schema_version": "4", "facts_from": str(half + 1), "unknown_kinds_from": str(half + 1)}
    assert nulls is not None and nulls[0] == half
    eng = PostgresBackend(StoreSource("postgresql", pg_dsn))
    try:
        assert eng.columns_from == half + 1
    finally:
        eng.close()
    _check([pg_dsn], name)


def test_a_new_postgresql_store_reads_every_row_by_its_columns(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS sseguard_records, sseguard_meta")
    store = open_store(pg_dsn)
    store.write(records("every_kind"))
    store.close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        meta = dict(conn.execute("SELECT key, value FROM sseguard_meta").fetchall())
        filled = conn.execute("SELECT COUNT(*) FROM sseguard_records WHERE api IS NOT NULL").fetchone()
    assert meta == {"schema_version": "4", "facts_from": "0", "unknown_kinds_from": "0"}
    assert filled is not None and filled[0] == len(records("every_kind"))
    eng = PostgresBackend(StoreSource("postgresql", pg_dsn))
    try:
        assert eng.columns_from == 0  # the analysis reads the columns, no JSON
    finally:
        eng.close()
    _check([pg_dsn], "every_kind")
