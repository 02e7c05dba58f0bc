"""``sseguard export SOURCE --parquet OUT``: records as Parquet, partitioned by day, for a data team.

The Parquet columns are the record's fields (``sources.RECORD_COLUMNS``: scalars typed, ``headers`` a
string map, ``findings``/``usage``/``extra``/``finish_reasons`` JSON text) plus ``weight``, in files
under ``OUT/day=YYYY-MM-DD/`` (UTC day of ``started_at``), the layout Spark, DuckDB, Trino and pandas
read as one partitioned table; ``sseguard analyze OUT`` reads it back. DuckDB writes it from JSONL or
Parquet directly; a store's rows are streamed page by page into a temporary JSONL file first, so
neither path holds the records in memory.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sseguard.analyze.backends import BackendError, DuckDBBackend
from sseguard.analyze.facts import Filter, quote
from sseguard.analyze.sources import RECORD_COLUMNS, FileSource, StoreSource, resolve
from sseguard.core.errors import ConfigError

#: Store rows fetched per round trip while exporting.
PAGE = 5000


def export_parquet(sources: Sequence[str], out: str | Path, flt: Filter | None = None) -> int:
    """Write every record of ``sources`` (in ``flt``) under ``out``; returns how many were written."""
    target = Path(out)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ConfigError(f"--parquet {out}: exists and is not an empty directory")
    resolved = resolve(sources)
    with tempfile.TemporaryDirectory(prefix="sseguard-export-") as tmp:
        files: list[str] = []
        kinds: set[str] = set()
        for source in resolved:
            if isinstance(source, StoreSource):
                files.append(_dump_store(source, Path(tmp) / f"store{len(files)}.jsonl"))
                kinds.add("jsonl")
            else:
                files.extend(source.files)
                kinds.add(source.kind)
        if len(kinds) > 1:
            raise ConfigError("export reads JSONL and stores, or Parquet, not both in one go")
        backend = DuckDBBackend(FileSource(kinds.pop(), tuple(files)))
        try:
            where = (flt or Filter()).where()
            columns = ", ".join(f'"{name}"' for name, _ in RECORD_COLUMNS)
            relation = backend.source.relation("duckdb")  # type: ignore[union-attr]
            select = (f"SELECT {columns}, strftime(to_timestamp(COALESCE(started_at, 0)), '%Y-%m-%d') "
                      f"AS day FROM {relation} WHERE {where}")
            target.mkdir(parents=True, exist_ok=True)
            # A partitioned write buffers rows per partition before it flushes (524,288 by default:
            # ~500 MB of record-sized rows, past the backend's memory limit); flush in small row groups.
            backend.rows("SET partitioned_write_flush_threshold = 32768")
            backend.rows(f"COPY ({select}) TO {quote(str(target))} (FORMAT parquet, PARTITION_BY (day), "
                        "ROW_GROUP_SIZE 16384, OVERWRITE_OR_IGNORE true)")
            written = quote(str(target / "**" / "*.parquet"))
            (count,) = backend.rows(f"SELECT COUNT(*) FROM read_parquet({written})")[0]
        finally:
            backend.close()
    return int(count)


def _dump_store(source: StoreSource, path: Path) -> str:
    """The store's rows as JSONL with each row's ``weight`` in the document, page by page."""
    from sseguard.store._base import TABLE

    mark = "?" if source.kind == "sqlite" else "%s"
    text = "record" if source.kind == "sqlite" else "record::text"
    query = f"SELECT seq, {text}, weight FROM {TABLE} WHERE seq > {mark} ORDER BY seq LIMIT {PAGE}"
    conn: Any
    try:
        if source.kind == "sqlite":
            import sqlite3

            conn = sqlite3.connect(f"file:{source.target}?mode=ro", uri=True)
        else:
            import psycopg

            conn = psycopg.connect(source.target, connect_timeout=10, autocommit=True)
        try:
            with path.open("w", encoding="utf-8") as out:
                last = 0
                while True:
                    rows = conn.execute(query, (last,)).fetchall()
                    for seq, doc, weight in rows:
                        out.write(f'{str(doc).rstrip()[:-1]},"weight":{int(weight)}}}\n')
                        last = int(seq)
                    if len(rows) < PAGE:
                        break
        finally:
            conn.close()
    except Exception as exc:  # the driver's own error types: one line, never a traceback
        raise BackendError(f"cannot read store {source.label}: {' '.join(str(exc).split())}") from None
    return str(path)
