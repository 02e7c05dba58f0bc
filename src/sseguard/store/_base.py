"""What every record store offers, and the pieces the SQLite and PostgreSQL backends share.

A store holds ``Record``s as JSON plus a few indexed columns (run, arm, ending, start time, id prefix)
that the analyzer filters on, and (schema 2) the facts the analysis counts as plain columns
(``fields.FACT_COLUMNS``), so counting ten million records never parses their JSON. The JSON is the
record exactly as ``sseguard.core.record`` encodes it, so a store and a JSONL file carry the same facts.

Schema 2 migrates a schema-1 store in place when a writer opens it: the fact columns are added (NULL in
the rows already there) and ``FACTS_FROM`` in the meta table records the first ``seq`` written with
them. The analysis reads rows from that ``seq`` on by their columns and the older ones out of their
JSON, so a migrated store is never rewritten, however large.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

import msgspec

from sseguard.core.errors import ConfigError, UsageError
from sseguard.core.record import Record
from sseguard.core.redact import DEFAULT, RedactingFilter, Redactor
from sseguard.store.fields import FACT_COLUMNS, fact_values

#: Version of the table layout (not of the record schema, which each record carries itself).
#: 1: the record and its indexed columns; 2: plus ``fields.FACT_COLUMNS``; 3: plus the cache and
#: consistency facts (``fields.CACHE_FACTS``), NULL in the rows written before (none were reported);
#: 4: plus the unknown kinds (``fields.UNKNOWN_FACT``), NULL in the rows written before, which the
#: analysis reads out of their JSON instead (``UNKNOWN_FROM``): records carried them before the column.
STORE_SCHEMA_VERSION = 4
TABLE = "sseguard_records"
META = "sseguard_meta"
#: The columns both stores index: what ``--since``/``--where``, the id-prefix search and retention's
#: batched deletes select by.
INDEXED = ("run_id", "arm", "ending", "started_at", "id_prefix")
#: The statements after the table's own, the same in both SQL dialects: its indexes and the meta table.
INDEX_AND_META_DDL = [
    *(f"CREATE INDEX IF NOT EXISTS {TABLE}_{c} ON {TABLE} ({c})" for c in INDEXED),
    f"CREATE TABLE IF NOT EXISTS {META} (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
]
#: Meta key: the first ``seq`` whose row has the fact columns filled (0 in a store created at schema 2).
FACTS_FROM = "facts_from"
#: Meta key: the first ``seq`` whose row has the unknown-kinds column filled (0 in a store created at
#: schema 4); the rows before it are read for their unknown kinds out of their JSON.
UNKNOWN_FROM = "unknown_kinds_from"
#: The columns an INSERT writes, in order (see ``stored_row``).
INSERT_COLUMNS = ("run_id", "arm", "ending", "started_at", "id_prefix", "record", "weight",
                  *(c.name for c in FACT_COLUMNS))
#: Rows fetched per round trip when reading: bounded memory however large the store is.
READ_PAGE = 1000

log = logging.getLogger("sseguard.store")
log.addFilter(RedactingFilter())

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Record)


@runtime_checkable
class RecordStore(Protocol):
    """Where records go. Writes are synchronous: call them from a thread (see ``BatchWriter``)."""

    def write(self, records: Sequence[Record], weights: Sequence[int] | None = None) -> None:
        """Store a batch in one transaction: all of it or none of it. ``weights[i]``: how many
        streams record i stands for (see ``retention.SampledStore``); 1 each when omitted."""

    def read(self, run_id: str | None = None, since: float | None = None) -> Iterator[Record]:
        """Records in the order they were written, optionally of one run and started at or after ``since``."""

    def count(self, run_id: str | None = None) -> int:
        """How many records the store holds (of one run, if given)."""

    def close(self) -> None:
        """Release the connection; the store cannot be used afterwards."""


def encode_for_store(record: Record, redactor: Redactor = DEFAULT) -> str:
    """The record as JSON text, with any secret that slipped into it removed before it reaches disk.

    Records built by ``record_from_verdict`` are already clean, so the fast path is one scan of the
    text that changes nothing. When the scan does find something (a hand-built record with a key in
    ``extra``), the record is redacted field by field instead: redacting the JSON text itself could
    eat an escaping backslash and corrupt the document.
    """
    return _redacted(record, redactor)[0]


def _redacted(record: Record, redactor: Redactor) -> tuple[str, bool]:
    text = _encoder.encode(record).decode("utf-8")
    if redactor.text(text) == text:
        return text, False
    cleaned = redactor.obj(msgspec.to_builtins(record))
    return _encoder.encode(cleaned).decode("utf-8"), True


def stored_row(record: Record, weight: int) -> tuple[object, ...]:
    """The values of ``INSERT_COLUMNS`` for one record. The fact columns are derived from the record as
    stored: when redaction changed the JSON, from the redacted record, so a column never holds what
    the JSON does not."""
    text, changed = _redacted(record, DEFAULT)
    stored = _decoder.decode(text) if changed else record
    return (stored.run_id, stored.arm, stored.ending, stored.started_at, stored.id_prefix, text, weight,
            *fact_values(stored))


def stored_rows(records: Sequence[Record], weights: Sequence[int] | None) -> list[tuple[object, ...]]:
    """``stored_row`` of each record (weight 1 each when ``weights`` is None), letting the GIL go
    after each: a store writes from its own thread, and the event loop beside it must not wait for a
    whole batch's encoding to get the GIL back."""
    rows = []
    for record, weight in zip(records, weights or [1] * len(records), strict=True):
        rows.append(stored_row(record, weight))
        yield_gil()
    return rows


def yield_gil() -> None:
    """Let another thread that waits for the GIL run now (a writer thread calls it between records).

    Python hands the GIL over only every ``sys.getswitchinterval()`` (5 ms) to a thread that asks for
    it; ``sched_yield`` runs with the GIL released, so a waiting thread on the same core takes it at
    once. When no thread waits, it costs one system call."""
    os.sched_yield()


def insert_sql(mark: str, casts: dict[str, str] | None = None) -> str:
    """The INSERT of one row of ``INSERT_COLUMNS`` (``mark``: the driver's placeholder, ``casts``:
    a cast per column where the driver's type needs one, as ``::jsonb``)."""
    marks = ", ".join(mark + (casts or {}).get(c, "") for c in INSERT_COLUMNS)
    return f"INSERT INTO {TABLE} ({', '.join(INSERT_COLUMNS)}) VALUES ({marks})"


def read_query(run_id: str | None, since: float | None, mark: str,
               record_column: str = "record") -> tuple[str, list[object]]:
    """The page query both stores run (``mark`` is the driver's placeholder) and its filter params."""
    where = [f"seq > {mark}"]
    params: list[object] = []
    if run_id is not None:
        where.append(f"run_id = {mark}")
        params.append(run_id)
    if since is not None:
        where.append(f"started_at >= {mark}")
        params.append(since)
    query = (f"SELECT seq, {record_column} FROM {TABLE} WHERE {' AND '.join(where)} "
             f"ORDER BY seq LIMIT {READ_PAGE}")
    return query, params


def keyset_pages(fetch: Callable[[int], Sequence[tuple[object, object]]]) -> Iterator[Record]:
    """Records page by page, each page fetched after the last ``seq`` seen.

    Paging by key instead of holding a cursor open across yields: the store's lock is never held while
    the caller works, and a writer thread is never starved by a slow reader.
    """
    last = 0
    while True:
        rows = fetch(last)
        for seq, text in rows:
            last = int(str(seq))
            yield decode_from_store(text if isinstance(text, str | bytes) else str(text))
        if len(rows) < READ_PAGE:
            return


class _Executes(Protocol):
    def execute(self, query: str, params: Any = ..., /) -> Any: ...


def schema_found(conn: _Executes, schema: Sequence[str]) -> tuple[bool, int]:
    """Run the idempotent DDL, then read the store's schema version before this open: whether the
    meta table had one (False: a new store), and the version (this one's for a new store). Both
    backends migrate from there in their own SQL, and leave a newer store untouched."""
    for statement in schema:
        conn.execute(statement)
    row = conn.execute(f"SELECT value FROM {META} WHERE key = 'schema_version'").fetchone()
    return row is not None, int(row[0]) if row else STORE_SCHEMA_VERSION


def mark_schema(conn: _Executes, mark: str, *, facts_first: int, unknown_first: int) -> None:
    """Write the meta rows of this schema: the first ``seq`` whose fact columns, and whose unknown
    kinds column, were written (each kept from the first migration that set it: the rows before it
    are read from their JSON), and the schema version now. ``mark`` is the driver's placeholder
    (``?``, ``%s``); the upserts are SQL both SQLite (3.24 on) and PostgreSQL speak."""
    keep = f"INSERT INTO {META} (key, value) VALUES ({mark}, {mark}) ON CONFLICT (key) DO NOTHING"
    conn.execute(keep, (FACTS_FROM, str(facts_first)))
    conn.execute(keep, (UNKNOWN_FROM, str(unknown_first)))
    conn.execute(f"INSERT INTO {META} (key, value) VALUES ('schema_version', {mark}) "
                 "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (str(STORE_SCHEMA_VERSION),))


class _Closes(Protocol):
    def close(self) -> None: ...


_Conn = TypeVar("_Conn", bound=_Closes)


class SharedConnection(Generic[_Conn]):
    """One database connection behind a lock, shared by every thread of a store, so a backend's
    methods are only its SQL. ``backend`` names it in errors.

    It takes the connection once set up, with the store's schema ``version`` before (``label``
    names the store): a store of a newer schema is refused, the connection closed, so an older
    sseguard never writes rows a newer one would misread."""

    backend: str

    def __init__(self, conn: _Conn, *, version: int, label: str) -> None:
        if version > STORE_SCHEMA_VERSION:
            conn.close()
            raise ConfigError(f"{self.backend} store {label} has schema version {version}; this "
                              f"sseguard reads up to {STORE_SCHEMA_VERSION}: upgrade sseguard")
        self._conn: _Conn | None = conn
        self._lock = threading.Lock()

    def _connection(self) -> _Conn:
        if self._conn is None:
            raise UsageError(f"the {self.backend} store is closed")
        return self._conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def decode_from_store(text: str | bytes) -> Record:
    return _decoder.decode(text)


_PASSWORD_IN_URL = re.compile(r"(://[^:/@\s]*:)[^@/\s]*@")
_PASSWORD_KV = re.compile(r"(?i)(password\s*=\s*)('[^']*'|\S+)")


def safe_target(target: str) -> str:
    """A store URL fit for an error message or a log line: any password replaced."""
    target = _PASSWORD_IN_URL.sub(r"\1***@", target)
    return _PASSWORD_KV.sub(r"\1***", target)


def one_line(exc: BaseException) -> str:
    """An exception as one line of text (drivers like to add hints on further lines)."""
    text = " ".join(str(exc).split())
    return text or type(exc).__name__
