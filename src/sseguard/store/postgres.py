"""PostgreSQL store: one table that a fleet of proxies shares, written with psycopg 3 (sync).

Every instance runs the same idempotent DDL at start, under a transaction-scoped advisory lock so that
proxies starting together do not race on ``CREATE TABLE IF NOT EXISTS`` (which is not atomic in
PostgreSQL: two concurrent creators can collide on the catalog). The record is a ``jsonb`` column, so
ad-hoc SQL can look inside it; the indexed columns are the ones the analyzer filters on.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

import psycopg
from psycopg.rows import TupleRow

from sseguard.core.errors import ConfigError
from sseguard.core.record import Record
from sseguard.core.redact import redact_text
from sseguard.store._base import (
    INDEX_AND_META_DDL,
    INSERT_COLUMNS,
    STORE_SCHEMA_VERSION,
    TABLE,
    SharedConnection,
    insert_sql,
    keyset_pages,
    mark_schema,
    one_line,
    read_query,
    safe_target,
    schema_found,
    stored_rows,
)
from sseguard.store.fields import FACT_COLUMNS, UNKNOWN_FACT

# Any 64-bit constant works; this one spells "sseguard" in ASCII hex, so an operator can recognise it.
_DDL_LOCK = 0x7373656775617264

_SCHEMA = [
    f"""CREATE TABLE IF NOT EXISTS {TABLE} (
        seq BIGSERIAL PRIMARY KEY,
        run_id TEXT NOT NULL,
        arm TEXT NOT NULL,
        ending TEXT NOT NULL,
        started_at DOUBLE PRECISION NOT NULL,
        id_prefix TEXT,
        record JSONB NOT NULL,
        weight BIGINT NOT NULL DEFAULT 1
    )""",
    # Stores from before sampling get the column; every record they hold counts once.
    f"ALTER TABLE {TABLE} ADD COLUMN IF NOT EXISTS weight BIGINT NOT NULL DEFAULT 1",
    *INDEX_AND_META_DDL,
]

_INSERT = insert_sql("%s", {"record": "::jsonb", "headers": "::jsonb"})
_JSON_COLUMNS = frozenset(i for i, c in enumerate(INSERT_COLUMNS) if c in ("record", "headers"))

# jsonb refuses the NUL character (`\u0000`), which a cut binary body tail can contain. An escape is
# only real when preceded by an even number of backslashes.
_JSON_NUL = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")


def _jsonb_safe(text: str) -> str:
    return _JSON_NUL.sub(r"\1\\ufffd", text) if "\\u0000" in text else text


def _text_safe(value: str) -> str:
    return value.replace("\x00", "\ufffd")


def _pg_row(row: tuple[object, ...]) -> tuple[object, ...]:
    """A row PostgreSQL accepts: no NUL in text (a cut body tail, an odd header), none escaped in JSON."""
    return tuple((_jsonb_safe(v) if i in _JSON_COLUMNS else _text_safe(v)) if isinstance(v, str) else v
                 for i, v in enumerate(row))


def _set_up(conn: psycopg.Connection[TupleRow]) -> int:
    """Create the table, or bring an older store up to this schema (see ``sqlite._set_up``); the
    store's version before. Called under the DDL lock, in one transaction."""
    existed, version = schema_found(conn, _SCHEMA)
    if version > STORE_SCHEMA_VERSION:
        return version
    found = {str(r[0]) for r in conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = %s "
        "AND table_schema = current_schema()", (TABLE,)).fetchall()}
    missing = [c for c in FACT_COLUMNS if c.name not in found]
    for c in missing:
        conn.execute(f"ALTER TABLE {TABLE} ADD COLUMN IF NOT EXISTS {c.name} {c.postgres}")
    first = 0
    if missing and existed:  # an old store: its rows so far are read from their JSON
        got = conn.execute(f"SELECT COALESCE(MAX(seq), 0) + 1 FROM {TABLE}").fetchone()
        first = int(got[0]) if got else 0
    # Schema 4: rows written before the unknown-kinds column are read for them from their JSON.
    unknown_first = first if any(c.name == UNKNOWN_FACT for c in missing) else 0
    mark_schema(conn, "%s", facts_first=first, unknown_first=unknown_first)
    return version


class PostgresStore(SharedConnection[psycopg.Connection[TupleRow]]):
    """Records in a PostgreSQL table; one connection, safe to share between threads."""

    backend = "PostgreSQL"

    def __init__(self, dsn: str, *, connect_timeout: float = 10.0) -> None:
        self._target = safe_target(dsn)
        try:
            conn = psycopg.connect(dsn, connect_timeout=max(1, round(connect_timeout)))
        except psycopg.Error as exc:
            raise ConfigError(f"cannot connect to PostgreSQL store {self._target}: "
                              f"{redact_text(safe_target(one_line(exc)))}") from None
        try:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_DDL_LOCK,))
                version = _set_up(conn)
        except psycopg.Error as exc:
            conn.close()
            raise ConfigError(f"cannot set up PostgreSQL store {self._target}: "
                              f"{redact_text(one_line(exc))}") from None
        super().__init__(conn, version=version, label=self._target)

    def write(self, records: Sequence[Record], weights: Sequence[int] | None = None) -> None:
        if not records:
            return
        rows = [_pg_row(row) for row in stored_rows(records, weights)]
        with self._lock:
            conn = self._connection()
            with conn.transaction(), conn.cursor() as cur:
                cur.executemany(_INSERT, rows)

    def read(self, run_id: str | None = None, since: float | None = None) -> Iterator[Record]:
        query, params = read_query(run_id, since, "%s", "record::text")

        def fetch(last: int) -> list[tuple[object, object]]:
            # Each page its own short transaction: no server-side cursor held open.
            with self._lock:
                conn = self._connection()
                with conn.transaction():
                    return list(conn.execute(query, [last, *params]).fetchall())

        return keyset_pages(fetch)

    def count(self, run_id: str | None = None) -> int:
        with self._lock:
            conn = self._connection()
            with conn.transaction():
                if run_id is None:
                    row = conn.execute(f"SELECT count(*) FROM {TABLE}").fetchone()
                else:
                    row = conn.execute(f"SELECT count(*) FROM {TABLE} WHERE run_id = %s",
                                       (run_id,)).fetchone()
        return int(row[0]) if row else 0

    def __repr__(self) -> str:
        return f"PostgresStore({self._target!r})"
