"""The backends that run the counting queries where the records are.

DuckDB reads JSONL and Parquet files (embedded, multi-threaded, spilling to disk past its memory limit),
SQLite and PostgreSQL stores answer in their own database, and Spark (``backend="spark"``) reads the
same files on a cluster or in local mode. Each backend only runs SQL text and returns rows; the queries
come from ``facts``. Drivers import when their backend opens, so reading JSONL never loads psycopg or
pyspark. A driver's own error becomes one line (``BackendError``), never a traceback.

"Backend", not "engine": in sseguard an engine is a serving engine (vLLM, SGLang; see
docs/design/vocabulary.md "Names"). The CLI's ``--engine`` option and the ``engine=`` keyword of
``analyze_sources`` keep their name: they pick one of these backends. This module was
``sseguard.analyze.engines``; its old names still work, with a ``DeprecationWarning``.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import sqlite3
import tempfile
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import quote

from sseguard.analyze.facts import SqlDialect
from sseguard.analyze.sources import (
    FileSource,
    Source,
    StoreSource,
    spark_columns,
    spark_schema,
    unknown_in_json,
)
from sseguard.core._renamed import renamed
from sseguard.core.errors import ConfigError
from sseguard.core.record import id_prefix
from sseguard.extras import require
from sseguard.store.fields import CACHE_FACTS, UNKNOWN_FACT

#: Old names (``sseguard.analyze.engines``) → new.
__getattr__ = renamed(__name__, {
    "EngineError": "BackendError", "Engine": "Backend", "DuckDBEngine": "DuckDBBackend",
    "SQLiteEngine": "SQLiteBackend", "PostgresEngine": "PostgresBackend", "SparkEngine": "SparkBackend",
    "open_engine": "open_backend", "open_engines": "open_backends",
})

Row = tuple[Any, ...]
#: DuckDB's working memory (MB); past it, large aggregations spill to a temporary directory.
DUCKDB_MEMORY_MB = 600
#: What one DuckDB thread holds that cannot spill: reading JSONL, each thread keeps its own read
#: buffers (a 32 MiB allocation each for records of a few KiB). DuckDB starts one thread per core, so a
#: fixed limit that passes on 2 cores fails on 16 ("failed to allocate data of size 32.0 MiB (571.1
#: MiB/572.2 MiB used)", issue 39): the threads are chosen with the limit, one per this many MB.
DUCKDB_THREAD_MB = 48
#: Where a backend keeps the facts it read once (see ``Backend.materialize``).
FACTS_TABLE = "sseguard_facts"
#: A SQLite store is read in this many parts at once (two cores; see ``SQLiteBackend``).
SQLITE_PARTS = 2


class BackendError(ConfigError):
    """A source a backend cannot read: refused connection, a file that is not records, bad SQL."""


class Backend(Protocol):
    dialect: SqlDialect
    source: Source

    def rows(self, sql: str) -> list[Row]:
        """All rows of ``sql``."""

    def materialize(self, facts: str) -> str:
        """Keep the rows of ``facts`` in the backend (read once); returns the query that reads them."""

    def close(self) -> None:
        """Release the connection."""


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split("\n")[0].split())
    return text or type(exc).__name__


class DuckDBBackend:
    """JSONL and Parquet files in an in-process DuckDB."""

    dialect = SqlDialect("duckdb")

    def __init__(self, source: FileSource, *, threads: int | None = None,
                 progress: Callable[[float], None] | None = None,
                 memory_mb: int = DUCKDB_MEMORY_MB) -> None:
        import duckdb

        self.source: Source = source
        self._progress = progress
        # Past the memory limit DuckDB spills to disk: to a temporary directory of ours, not `.tmp` in
        # whatever directory the user ran sseguard from. The facts table lives in a database file
        # there too (see ``materialize``).
        self._spill = tempfile.mkdtemp(prefix="sseguard-duckdb-")
        try:
            self._con = duckdb.connect(os.path.join(self._spill, "facts.duckdb"))
        except BaseException:
            shutil.rmtree(self._spill, ignore_errors=True)
            raise
        self._con.execute(f"SET temp_directory = '{self._spill}'")
        self._con.execute(f"SET memory_limit = '{int(memory_mb)}MB'")
        # Track progress for our own bar (``query_progress``) when there is one; never print DuckDB's.
        self._con.execute(f"SET enable_progress_bar = {'true' if progress is not None else 'false'}")
        self._con.execute("SET enable_progress_bar_print = false")
        self._con.execute("SET preserve_insertion_order = false")
        wanted = threads if threads is not None else int(self._con.execute(
            "SELECT current_setting('threads')").fetchone()[0])  # type: ignore[index]  # (one row)
        #: The threads DuckDB runs with: as many as asked (one per core), as few as the limit affords.
        self.threads = duckdb_threads(wanted, memory_mb)
        self._con.execute(f"SET threads = {self.threads}")

    def rows(self, sql: str) -> list[Row]:
        import duckdb

        done = threading.Event()
        watcher = None
        if self._progress is not None:
            watcher = threading.Thread(target=self._watch, args=(done,), daemon=True)
            watcher.start()
        try:
            while True:
                try:
                    return list(self._con.execute(sql).fetchall())
                except duckdb.OutOfMemoryException:
                    # Our own limit, too small for this many threads' buffers after all (records
                    # wider than ``DUCKDB_THREAD_MB`` reckons with): half the threads, the same
                    # limit, the same statement (a failed statement leaves nothing behind).
                    if self.threads <= 1:
                        raise
                    self.threads //= 2
                    self._con.execute(f"SET threads = {self.threads}")
        except duckdb.Error as exc:
            raise BackendError(_duckdb_message(exc, self.source.label)) from None
        finally:
            done.set()
            if watcher is not None:
                watcher.join()

    def materialize(self, facts: str) -> str:
        """The facts as a table of the database file, not a temporary table: DuckDB compresses the
        columns of a stored table (dictionaries for the few distinct labels), while a temporary table
        is kept uncompressed in memory and, past the memory limit, spilled block by block. Ten million
        records of JSONL took 35 to 45 s to read into a temporary table and 22 s into a stored one
        (parsing the JSON alone: 17.5 s; see docs/benchmarks.md for the whole analysis)."""
        self.rows(f"CREATE TABLE {FACTS_TABLE} AS {facts}")
        return f"SELECT * FROM {FACTS_TABLE}"

    def _watch(self, done: threading.Event) -> None:
        assert self._progress is not None
        while not done.wait(0.2):
            try:
                share = float(self._con.query_progress())
            except Exception:  # the query may end between the check and the call
                return
            if share >= 0:
                self._progress(min(1.0, share / 100.0))

    def close(self) -> None:
        self._con.close()
        shutil.rmtree(self._spill, ignore_errors=True)


def duckdb_threads(wanted: int, memory_mb: int) -> int:
    """The threads a DuckDB with ``memory_mb`` of memory reads JSONL with: ``wanted`` (its cores), at
    most one per ``DUCKDB_THREAD_MB``, at least one. Memory is the target that holds; threads give."""
    return max(1, min(int(wanted), int(memory_mb) // DUCKDB_THREAD_MB))


_BAD_LINE = re.compile(r'in file "(?P<file>[^"]+)", at byte \d+ in line (?P<line>\d+): (?P<why>[^\n]*)')


def _duckdb_message(exc: BaseException, label: str) -> str:
    """A line a person can act on: ``file:line: not a valid record: why`` for malformed JSON (the
    line found again by reading the file here: DuckDB's line numbers are not the editor's)."""
    m = _BAD_LINE.search(str(exc))
    if m:
        found = _first_bad_line(m["file"])
        if found is not None:
            return found
        return f"{m['file']}: not a valid record: {m['why'].strip()}"
    return f"cannot read {label}: {one_line(exc)}"


def _first_bad_line(path: str) -> str | None:
    """``path:N: not a valid record: why`` for the first line that is not a record (streamed)."""
    import msgspec

    from sseguard.core.record import Record

    decode = msgspec.json.Decoder(Record).decode
    try:
        with open(path, "rb") as f:
            for number, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    decode(line)
                except msgspec.DecodeError as exc:
                    hint = ("" if line.endswith(b"\n") else
                            " (the last line is incomplete: was the writer killed mid-line?)")
                    return f"{path}:{number}: not a valid record: {one_line(exc)}{hint}"
    except OSError:
        return None
    return None


def older_columns(columns: set[str], kind: str) -> str:
    """What a store of an older layout lacks, as SQL columns of its ``kind`` (sqlite | postgresql):
    ``weight`` (before sampling, every record counts once), the cache facts (before schema 3: NULL,
    not reported) and the unknown kinds (before schema 4: out of each record's JSON, which carried
    them before the column did). Empty: none."""
    added = [] if "weight" in columns else ["1 AS weight"]
    added += [f"CAST(NULL AS BIGINT) AS {c}" if c != "consistency" else f"CAST(NULL AS TEXT) AS {c}"
              for c in CACHE_FACTS if c not in columns]
    if UNKNOWN_FACT not in columns:
        added.append(f"{unknown_in_json(kind)} AS {UNKNOWN_FACT}")
    return ", ".join(added)


def _meta_seq(columns: set[str], fetch: Callable[[str], list[Row]], meta: str,
              key: str) -> int | None:
    """A ``seq`` the meta table records under ``key`` (``FACTS_FROM``, ``UNKNOWN_FROM``), or None
    when the store has no fact columns (schema 1, never opened by a writer of schema 2) or no such
    key: then every row is read from its JSON (``FACTS_FROM``), or the column is (``UNKNOWN_FROM``:
    a schema-3 store's view computes it from the JSON, see ``older_columns``)."""
    from sseguard.store.fields import FACT_COLUMNS

    if not all(c.name in columns for c in FACT_COLUMNS if c.name != UNKNOWN_FACT):
        return None
    try:
        found = fetch(f"SELECT value FROM {meta} WHERE key = '{key}'")
    except Exception:  # no meta table: not a store a writer of schema 2 set up
        return None
    return int(found[0][0]) if found else None


def facts_of(eng: Backend, *, doc: bool = False) -> str:
    """The facts relation of ``eng``'s source in its backend (a store's: by its fact columns)."""
    source = eng.source
    if isinstance(source, StoreSource):
        return source.facts(eng.dialect.name, doc=doc, columns_from=getattr(eng, "columns_from", None),
                            seqs=getattr(eng, "seqs", None), unknown_from=getattr(eng, "unknown_from", 0))
    if doc:
        raise ValueError("only a store's facts carry the record document")
    return source.facts(eng.dialect.name)


class _StoreBackend(ABC):
    """A record store read over its own database connection (SQLite, PostgreSQL): the facts are
    materialised as a temporary table of that connection, gone when it closes."""

    source: Source

    @abstractmethod
    def rows(self, sql: str) -> list[Row]:
        """The rows of one statement, or a ``BackendError`` naming the store."""

    def materialize(self, facts: str) -> str:
        self.rows(f"CREATE TEMP TABLE {FACTS_TABLE} AS {facts}")
        return f"SELECT * FROM {FACTS_TABLE}"

    def unreadable(self, exc: BaseException) -> BackendError:
        """The error for a driver's failure to read this store, in one line."""
        return BackendError(f"cannot read store {self.source.label}: {one_line(exc)}")


class SQLiteBackend(_StoreBackend):
    """A SQLite store, or a part of it (``seqs``), read in its own file (read-only: the analyzer never
    writes a store). SQLite counts on one core per connection, and sorts every ``GROUP BY``: so a
    store is read as ``SQLITE_PARTS`` parts of its ``seq`` range, each on its own connection and
    thread (see ``counts.Reader``), whose counts add up like those of several sources."""

    dialect = SqlDialect("sqlite")

    def __init__(self, source: StoreSource, seqs: tuple[int, int] | None = None) -> None:
        self.source: Source = source
        self.columns_from: int | None = None
        self.unknown_from = 0
        self.seqs = seqs
        try:
            # check_same_thread off: the reader's pool thread uses it, one thread at a time.
            self._con = sqlite3.connect(f"file:{quote(source.target)}?mode=ro", uri=True, timeout=30.0,
                                        check_same_thread=False)
            self._con.create_function("sseguard_id_prefix", 1, id_prefix, deterministic=True)
            self._check()
        except sqlite3.Error as exc:
            raise self.unreadable(exc) from None

    def _check(self) -> None:
        from sseguard.store._base import FACTS_FROM, META, TABLE, UNKNOWN_FROM

        columns = {row[1] for row in self._con.execute(f"PRAGMA table_info({TABLE})")}
        if not columns:
            raise BackendError(f"{self.source.label} is not an sseguard store (no {TABLE} table)")
        added = older_columns(columns, "sqlite")
        if added:
            self._con.execute(f"CREATE TEMP VIEW {TABLE} AS SELECT *, {added} FROM main.{TABLE}")
        fetch = self._con.execute
        self.columns_from = _meta_seq(columns, lambda sql: fetch(sql).fetchall(), META, FACTS_FROM)
        self.unknown_from = _meta_seq(columns, lambda sql: fetch(sql).fetchall(), META, UNKNOWN_FROM) or 0

    def seq_span(self) -> tuple[int, int]:
        """The smallest ``seq`` less one and the largest: the store's rows as of now, as a part."""
        from sseguard.store._base import TABLE

        lo, hi = self.rows(f"SELECT MIN(seq), MAX(seq) FROM {TABLE}")[0]
        return (0, 0) if lo is None else (int(lo) - 1, int(hi))

    def rows(self, sql: str) -> list[Row]:
        try:
            return list(self._con.execute(sql).fetchall())
        except sqlite3.Error as exc:
            raise self.unreadable(exc) from None

    def close(self) -> None:
        self._con.close()


class PostgresBackend(_StoreBackend):
    """A PostgreSQL store: the server counts, only the cells cross the wire."""

    dialect = SqlDialect("postgresql")

    def __init__(self, source: StoreSource) -> None:
        require("postgres", "a PostgreSQL store")
        import psycopg

        from sseguard.store._base import FACTS_FROM, META, TABLE, UNKNOWN_FROM

        self.source: Source = source
        try:
            self._con = psycopg.connect(source.target, connect_timeout=10, autocommit=True)
            found = self._con.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = %s",
                (TABLE,)).fetchall()
        except psycopg.Error as exc:
            raise self.unreadable(exc) from None
        columns = {str(r[0]) for r in found}
        if not columns:
            self._con.close()
            raise BackendError(f"{source.label} is not an sseguard store (no {TABLE} table)")
        added = older_columns(columns, "postgresql")
        if added:
            self._con.execute(f"CREATE TEMP VIEW {TABLE} AS SELECT *, {added} FROM public.{TABLE}")
        self.columns_from = _meta_seq(columns, self.rows, META, FACTS_FROM)
        self.unknown_from = _meta_seq(columns, self.rows, META, UNKNOWN_FROM) or 0

    def rows(self, sql: str) -> list[Row]:
        import psycopg

        try:  # no parameters: psycopg sends the text as it is (a `%` in a literal stays a `%`)
            cursor = self._con.execute(sql.encode())
            return list(cursor.fetchall()) if cursor.description is not None else []
        except psycopg.Error as exc:
            raise self.unreadable(exc) from None

    def close(self) -> None:
        self._con.close()


class SparkBackend:
    """JSONL or Parquet files in Spark: ``local[2]`` by default, or the session the caller passes."""

    dialect = SqlDialect("spark")

    def __init__(self, source: FileSource, session: Any = None) -> None:
        self.source: Source = source
        self._spark = session if session is not None else spark_session()
        reader = self._spark.read
        try:
            if source.kind == "parquet":
                frame = _with_record_columns(reader.parquet(*source.files))
            else:
                frame = reader.schema(spark_schema()).option("mode", "FAILFAST").json(list(source.files))
        except Exception as exc:  # pyspark's AnalysisException and friends
            raise BackendError(f"cannot read {source.label}: {one_line(exc)}") from None
        frame.createOrReplaceTempView("sseguard_src")

    def rows(self, sql: str) -> list[Row]:
        try:
            return [tuple(r) for r in self._spark.sql(sql).collect()]
        except Exception as exc:
            raise BackendError(f"cannot read {self.source.label}: {one_line(exc)}") from None

    def materialize(self, facts: str) -> str:
        self.rows(f"CACHE TABLE {FACTS_TABLE} AS {facts}")
        return f"SELECT * FROM {FACTS_TABLE}"

    def close(self) -> None:
        self._spark.sql(f"UNCACHE TABLE IF EXISTS {FACTS_TABLE}")
        self._spark.catalog.dropTempView(FACTS_TABLE)
        self._spark.catalog.dropTempView("sseguard_src")


def _with_record_columns(frame: Any) -> Any:
    """``frame`` with every record field it lacks as a typed NULL column: Parquet exported before a
    field existed (the heal fields, the cache facts of issue 39) has no column for it, and Spark fails
    a query naming one ("cannot resolve"), where DuckDB unions them in by name (``FileSource``)."""
    from pyspark.sql import functions

    have = {name.lower() for name in frame.columns}
    missing = [(name, kind) for name, kind in spark_columns() if name.lower() not in have]
    if not missing:
        return frame
    return frame.select("*", *(functions.lit(None).cast(kind).alias(name) for name, kind in missing))


def spark_session(master: str = "local[2]") -> Any:
    """A SparkSession (the active one if any): UTC, no UI, few shuffle partitions for local mode."""
    require("spark", "the Spark engine (--engine spark)")  # the CLI option's word
    from pyspark.sql import SparkSession

    return (SparkSession.builder.master(master).appName("sseguard-analyze")
            .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "4")
            .config("spark.sql.session.timeZone", "UTC").getOrCreate())


def open_backends(source: Source, *, backend: str = "auto", spark: Any = None,
                  progress: Callable[[float], None] | None = None) -> list[Backend]:
    """The backends that read ``source`` together: one, or a SQLite store's parts (``SQLiteBackend``).
    The parts end at the store's last row as the analysis starts: rows a proxy appends meanwhile
    are not half counted (in the profile but not in the cells)."""
    first = open_backend(source, backend=backend, spark=spark, progress=progress)
    if not isinstance(first, SQLiteBackend):
        return [first]
    assert isinstance(source, StoreSource)
    lo, hi = first.seq_span()
    cuts = [lo + (hi - lo) * i // SQLITE_PARTS for i in range(SQLITE_PARTS + 1)]
    first.seqs = (cuts[0], cuts[1])
    out: list[Backend] = [first]
    try:
        for a, b in itertools.pairwise(cuts[1:]):
            out.append(SQLiteBackend(source, (a, b)))
    except BaseException:
        for eng in out:
            eng.close()
        raise
    return out


def open_backend(source: Source, *, backend: str = "auto", spark: Any = None,
                 progress: Callable[[float], None] | None = None) -> Backend:
    """The backend that reads ``source``: DuckDB for files (Spark when asked), the store's own database."""
    if isinstance(source, StoreSource):
        return SQLiteBackend(source) if source.kind == "sqlite" else PostgresBackend(source)
    if backend == "spark":
        return SparkBackend(source, spark)
    return DuckDBBackend(source, progress=progress)
