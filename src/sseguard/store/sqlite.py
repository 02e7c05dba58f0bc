"""The default store: one SQLite file in WAL mode, nothing to start or administer.

WAL lets the analyzer read while a proxy writes, and lets several processes append to one file (each
waits on the others through ``busy_timeout`` instead of failing). ``synchronous=NORMAL`` is durable
against a crash of the process, which is what evidence needs; only a power loss can cost the last
transactions.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator, Sequence

from sseguard.core.errors import ConfigError
from sseguard.core.record import Record
from sseguard.store._base import (
    INDEX_AND_META_DDL,
    STORE_SCHEMA_VERSION,
    TABLE,
    SharedConnection,
    insert_sql,
    keyset_pages,
    mark_schema,
    one_line,
    read_query,
    schema_found,
    stored_rows,
)
from sseguard.store.fields import FACT_COLUMNS, UNKNOWN_FACT

_FACTS_DDL = "".join(f"    {c.name} {c.sqlite},\n" for c in FACT_COLUMNS)
_SCHEMA = [
    f"""CREATE TABLE IF NOT EXISTS {TABLE} (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    arm TEXT NOT NULL,
    ending TEXT NOT NULL,
    started_at REAL NOT NULL,
    id_prefix TEXT,
{_FACTS_DDL}    record TEXT NOT NULL,
    weight INTEGER NOT NULL DEFAULT 1
)""",
    *INDEX_AND_META_DDL,
]

_INSERT = insert_sql("?")

BUSY_TIMEOUT_S = 30.0


def _set_up(conn: sqlite3.Connection) -> int:
    """Create the tables, or bring an older store up to this schema; the store's version before.

    Inside the caller's write transaction, so two processes opening one old store migrate it once.
    A store of a newer schema is left untouched (the caller refuses it)."""
    _, version = schema_found(conn, _SCHEMA)
    if version > STORE_SCHEMA_VERSION:
        return version
    columns = {r[1] for r in conn.execute(f"PRAGMA table_info({TABLE})")}
    if "weight" not in columns:  # a store from before sampling: every record counted once
        conn.execute(f"ALTER TABLE {TABLE} ADD COLUMN weight INTEGER NOT NULL DEFAULT 1")
    missing = [c for c in FACT_COLUMNS if c.name not in columns]
    for c in missing:  # schema 1: the rows already there keep NULL, read from their JSON
        conn.execute(f"ALTER TABLE {TABLE} ADD COLUMN {c.name} {c.sqlite}")
    first = conn.execute(f"SELECT COALESCE(MAX(seq), 0) + 1 FROM {TABLE}").fetchone()[0] if missing else 0
    # Schema 4: rows written before the unknown-kinds column are read for them from their JSON.
    unknown_first = first if any(c.name == UNKNOWN_FACT for c in missing) else 0
    mark_schema(conn, "?", facts_first=first, unknown_first=unknown_first)
    return version


class SQLiteStore(SharedConnection[sqlite3.Connection]):
    """Records in a SQLite file. Safe to share between threads (one connection behind a lock)."""

    backend = "SQLite"

    def __init__(self, path: str) -> None:
        self.path = path
        if os.path.isdir(path):
            raise ConfigError(f"store path {path!r} is a directory, not a database file")
        try:
            conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, check_same_thread=False,
                                   isolation_level=None)
        except sqlite3.Error as exc:
            raise ConfigError(f"cannot open SQLite store {path!r}: {one_line(exc)}") from None
        try:
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise ConfigError(f"SQLite store {path!r} cannot use WAL mode (got {mode!r})")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("BEGIN IMMEDIATE")  # one writer sets up or migrates; the others wait
            try:
                version = _set_up(conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            conn.close()
            raise ConfigError(f"cannot use SQLite store {path!r}: {one_line(exc)}") from None
        except ConfigError:
            conn.close()
            raise
        super().__init__(conn, version=version, label=repr(path))

    def write(self, records: Sequence[Record], weights: Sequence[int] | None = None) -> None:
        if not records:
            return
        rows = stored_rows(records, weights)
        with self._lock:
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(_INSERT, rows)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def read(self, run_id: str | None = None, since: float | None = None) -> Iterator[Record]:
        query, params = read_query(run_id, since, "?")

        def fetch(last: int) -> list[tuple[object, object]]:
            with self._lock:
                return list(self._connection().execute(query, [last, *params]).fetchall())

        return keyset_pages(fetch)

    def count(self, run_id: str | None = None) -> int:
        with self._lock:
            conn = self._connection()
            if run_id is None:
                row = conn.execute(f"SELECT count(*) FROM {TABLE}").fetchone()
            else:
                row = conn.execute(f"SELECT count(*) FROM {TABLE} WHERE run_id = ?", (run_id,)).fetchone()
        return int(row[0])

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"
