"""What ``sseguard analyze SOURCE…`` can read, and each source's *facts* relation in its own backend.

A source is JSONL files (paths, globs, run directories), Parquet (a file or a directory written by
``sseguard export``), a SQLite store (a ``.db`` file or ``sqlite:///…``) or a PostgreSQL store
(``postgresql://…``). Files are read by DuckDB (or Spark), a store by its own database. Every source
presents the same facts columns (``facts.FACTS``), so the queries in ``facts`` run unchanged on each.
Problems a user can cause (no such file, nothing to read, an unknown scheme) are ``ConfigError``s
raised here, before any backend starts.
"""

from __future__ import annotations

import glob
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sseguard.analyze.facts import FACTS, SqlDialect, quote, with_prefix
from sseguard.core.errors import ConfigError
from sseguard.store.fields import CACHE_FACTS, HEAL_FACTS, UNKNOWN_FACT

#: The record fields a file source is read with, by name and DuckDB type; JSON-valued fields stay JSON
#: text, ``headers`` is a string map. Missing fields are NULL and take the record's defaults below.
RECORD_COLUMNS: tuple[tuple[str, str], ...] = (
    ("schema", "BIGINT"), ("source", "VARCHAR"), ("api", "VARCHAR"), ("run_id", "VARCHAR"),
    ("arm", "VARCHAR"), ("index", "BIGINT"), ("worker", "VARCHAR"), ("workload", "VARCHAR"),
    ("started_at", "DOUBLE"), ("method", "VARCHAR"), ("path", "VARCHAR"), ("model", "VARCHAR"),
    ("stream", "BOOLEAN"), ("status", "BIGINT"), ("ending", "VARCHAR"), ("findings", "JSON"),
    ("passed", "BOOLEAN"), ("policy", "VARCHAR"), ("error", "VARCHAR"), ("response_id", "VARCHAR"),
    ("last_response_id", "VARCHAR"), ("id_prefix", "VARCHAR"), ("headers", "MAP(VARCHAR, VARCHAR)"),
    ("injected", "VARCHAR"), ("ttfb_ms", "DOUBLE"), ("ttft_ms", "DOUBLE"), ("duration_ms", "DOUBLE"),
    ("max_gap_ms", "DOUBLE"), ("chunks", "BIGINT"), ("bytes", "BIGINT"), ("prompt_bytes", "BIGINT"),
    ("concurrency", "BIGINT"), ("reuse_index", "BIGINT"), ("connection", "VARCHAR"),
    ("finish_reasons", "JSON"), ("usage", "JSON"), ("tail", "VARCHAR"), ("evidence", "VARCHAR"),
    ("extra", "JSON"), ("weight", "BIGINT"),
    # Last, so that Parquet exported before they existed still lines up with the fields before them.
    ("heal_of", "BIGINT"), ("healed", "VARCHAR"), ("heal_attempts", "BIGINT"), ("heal_tokens", "BIGINT"),
    # The cache and consistency facts (issue 39), after the heal fields for the same reason.
    ("prompt_tokens", "BIGINT"), ("cached_tokens", "BIGINT"), ("cache_write_tokens", "BIGINT"),
    ("fingerprint", "VARCHAR"), ("consistency", "VARCHAR"), ("diverged_at", "BIGINT"),
    ("diverged_token", "BIGINT"),
    # The kinds the protocol's tables did not know (issue 41), last for the same reason.
    ("unknown_kinds", "JSON"),
)
#: The fields a file may lack (Parquet exported before they existed): read as NULL there.
LATE_COLUMNS = RECORD_COLUMNS[-8:]
SPARK_TYPES = {"BIGINT": "BIGINT", "VARCHAR": "STRING", "DOUBLE": "DOUBLE", "BOOLEAN": "BOOLEAN",
                "JSON": "STRING", "MAP(VARCHAR, VARCHAR)": "MAP<STRING, STRING>"}
_STORE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
_POSTGRES = ("postgresql://", "postgres://")
_PASSWORD_IN_URL = re.compile(r"(://[^:/@\s]*:)[^@/\s]*@")


def shown(source: str) -> str:
    """A source fit for a message: any password in a URL replaced."""
    return _PASSWORD_IN_URL.sub(r"\1***@", source)


@dataclass(frozen=True, slots=True)
class FileSource:
    """JSONL or Parquet files, read together as one relation."""

    kind: str  # jsonl | parquet
    files: tuple[str, ...]

    @property
    def label(self) -> str:
        return self.files[0] if len(self.files) == 1 else f"{len(self.files)} {self.kind} files"

    def relation(self, dialect: str) -> str:
        """The raw records as a relation (DuckDB); Spark registers its own view (``spark_view``)."""
        listed = "[" + ", ".join(quote(f) for f in self.files) + "]"
        if self.kind == "parquet":
            # Parquet exported before the late fields existed lacks their columns: a typed empty row
            # set unioned by name supplies them as NULL.
            late = ", ".join(f"CAST(NULL AS {kind}) AS {name}" for name, kind in LATE_COLUMNS)
            return (f"(SELECT * FROM read_parquet({listed}, hive_partitioning = false, union_by_name = "
                    f"true) UNION ALL BY NAME SELECT {late} WHERE false)")
        columns = "{" + ", ".join(f"{quote(name)}: {quote(kind)}" for name, kind in RECORD_COLUMNS) + "}"
        return f"read_json({listed}, format = 'newline_delimited', columns = {columns})"

    def facts(self, dialect: str) -> str:
        relation = "sseguard_src" if dialect == "spark" else self.relation(dialect)
        if dialect == "spark":
            kinds = "concat_ws(',', from_json(findings, 'array<struct<kind:string>>').kind)"
            unknown = "concat_ws(',', from_json(unknown_kinds, 'array<string>'))"
        else:
            kinds = "array_to_string(CAST(json_extract_string(findings, '$[*].kind') AS VARCHAR[]), ',')"
            unknown = "array_to_string(CAST(json_extract_string(unknown_kinds, '$[*]') AS VARCHAR[]), ',')"
        return with_prefix(typed_facts(relation, kinds, "`index`" if dialect == "spark" else '"index"',
                                       f"NULLIF({unknown}, '')"), SqlDialect(dialect))


def unknown_in_json(kind: str) -> str:
    """The unknown kinds of a store row, out of its record's JSON, joined with commas (NULL without
    any): what ``store.fields.unknown_of`` writes to the column, for rows written before it existed.
    In SQLite only a record whose text holds a non-empty list is parsed: the encoder writes
    ``"unknown_kinds":[]`` (or, before the field, nothing), and a string value cannot hold the
    unescaped quotes of that key, so the test never misses one."""
    if kind == "sqlite":
        return (f"CASE WHEN instr(record, '\"{UNKNOWN_FACT}\":[\"') > 0 THEN "
                f"(SELECT group_concat(e.value, ',') FROM json_each(record, '$.{UNKNOWN_FACT}') AS e) END")
    return (f"(SELECT string_agg(e.value, ',' ORDER BY e.n) FROM jsonb_array_elements_text("
            f"record -> '{UNKNOWN_FACT}') WITH ORDINALITY AS e(value, n))")


def typed_facts(relation: str, kinds: str, index: str, unknown: str) -> str:
    """Facts from a relation that has the record fields as columns (JSONL or Parquet)."""
    return (
        "SELECT COALESCE(schema, 1) AS schema, COALESCE(run_id, '') AS run_id, "
        f"COALESCE({index}, 0) AS idx, COALESCE(started_at, 0.0) AS started_at, "
        "COALESCE(arm, 'default') AS arm, COALESCE(api, 'chat') AS api, "
        "COALESCE(workload, 'small') AS workload, COALESCE(concurrency, 1) AS concurrency, "
        f"COALESCE(ending, 'empty') AS ending, {kinds} AS kinds, id_prefix, response_id, "
        "reuse_index, COALESCE(prompt_bytes, 0) AS prompt_bytes, headers, "
        f"COALESCE(weight, 1) AS weight, {', '.join(CACHE_FACTS)}, {unknown} AS {UNKNOWN_FACT} "
        f"FROM {relation}"
    )


def spark_columns() -> list[tuple[str, str]]:
    """The record fields with their Spark SQL types."""
    return [(name, SPARK_TYPES[kind]) for name, kind in RECORD_COLUMNS]


def spark_schema() -> str:
    """The record fields as a Spark DDL schema: Spark reads JSONL with the same columns as DuckDB."""
    return ", ".join(f"`{name}` {kind}" for name, kind in spark_columns())


@dataclass(frozen=True, slots=True)
class StoreSource:
    """A SQLite file or a PostgreSQL database holding a record store."""

    kind: str  # sqlite | postgresql
    target: str  # a file path, or the DSN

    @property
    def label(self) -> str:
        return shown(self.target)

    def facts(self, dialect: str, *, doc: bool = False, columns_from: int | None = None,
              seqs: tuple[int, int] | None = None, unknown_from: int = 0) -> str:
        """The facts of the store's rows, heal fields included; ``doc``: with the record's JSON (for
        the evidence only). ``columns_from``: the first ``seq`` whose row has the fact columns
        (``store.fields``; 0: every row), read as they are; the rows before it (a store migrated
        from schema 1) and every row when None (a schema-1 store) are read out of their JSON.
        ``seqs``: only the rows with ``lo < seq <= hi`` (a part of the store, see ``backends``).
        ``unknown_from``: the first ``seq`` whose row has the unknown-kinds column (schema 4); the
        rows before it are read for them from their JSON."""
        from sseguard.store._base import TABLE

        part = [] if seqs is None else [f"seq > {int(seqs[0])}", f"seq <= {int(seqs[1])}"]
        facts = list(FACTS)
        if unknown_from > 0:
            facts[facts.index(UNKNOWN_FACT)] = (
                f"CASE WHEN seq < {int(unknown_from)} THEN {unknown_in_json(self.kind)} "
                f"ELSE {UNKNOWN_FACT} END AS {UNKNOWN_FACT}")
        named = [*facts, *HEAL_FACTS, *(["record AS doc"] if doc else [])]
        columns = f"SELECT {', '.join(named)} FROM {TABLE}"
        if columns_from is None:
            return self._parsed(dialect, doc, part)
        columns += " WHERE " + " AND ".join([*part, f"seq >= {int(columns_from)}"])
        if columns_from == 0:
            return columns
        parsed = self._parsed(dialect, doc, [*part, f"seq < {int(columns_from)}"])
        return f"SELECT * FROM ({columns}) AS c UNION ALL SELECT * FROM ({parsed}) AS j"

    def _parsed(self, dialect: str, doc: bool, where: list[str]) -> str:
        """The facts of rows written before the fact columns existed, out of each record's JSON."""
        from sseguard.store._base import TABLE

        if self.kind == "sqlite":
            def field(name: str) -> str:
                return f"json_extract(record, '$.{name}')"
            kinds = ("(SELECT group_concat(json_extract(e.value, '$.kind'), ',') "
                     "FROM json_each(record, '$.findings') AS e)")
            headers = "json_extract(record, '$.headers')"
        else:
            def field(name: str) -> str:
                return f"(record ->> '{name}')"
            kinds = ("(SELECT string_agg(e.value ->> 'kind', ',' ORDER BY e.n) "
                     "FROM jsonb_array_elements(record -> 'findings') WITH ORDINALITY AS e(value, n))")
            headers = "(record -> 'headers')"
        cast = "INTEGER" if self.kind == "sqlite" else "BIGINT"
        raw = (
            f"SELECT CAST(COALESCE({field('schema')}, '1') AS {cast}) AS schema, run_id, "
            f"CAST(COALESCE({field('index')}, '0') AS {cast}) AS idx, started_at, arm, "
            f"COALESCE({field('api')}, 'chat') AS api, COALESCE({field('workload')}, 'small') AS workload, "
            f"CAST(COALESCE({field('concurrency')}, '1') AS {cast}) AS concurrency, ending, "
            f"{kinds} AS kinds, {field('id_prefix')} AS id_prefix, "
            f"{field('response_id')} AS response_id, CAST({field('reuse_index')} AS {cast}) AS reuse_index, "
            f"CAST(COALESCE({field('prompt_bytes')}, '0') AS {cast}) AS prompt_bytes, {headers} AS headers, "
            f"weight, CAST({field('prompt_tokens')} AS {cast}) AS prompt_tokens, "
            f"CAST({field('cached_tokens')} AS {cast}) AS cached_tokens, "
            f"{field('consistency')} AS consistency, "
            f"CAST({field('diverged_token')} AS {cast}) AS diverged_token, "
            f"{unknown_in_json(self.kind)} AS {UNKNOWN_FACT}, "
            f"CAST({field('heal_of')} AS {cast}) AS heal_of, {field('healed')} AS healed, "
            f"CAST(COALESCE({field('heal_attempts')}, '0') AS {cast}) AS heal_attempts, "
            f"CAST(COALESCE({field('heal_tokens')}, '0') AS {cast}) AS heal_tokens"
            f"{', record AS doc' if doc else ''} FROM {TABLE}"
            f"{' WHERE ' + ' AND '.join(where) if where else ''}"
        )
        extra = ", " + ", ".join([*HEAL_FACTS, *(["doc"] if doc else [])])
        return with_prefix(raw, SqlDialect(dialect), extra=extra)


Source = FileSource | StoreSource


def resolve(sources: Sequence[str]) -> list[Source]:
    """The sources named on the command line; all files of one kind become one ``FileSource``."""
    if not sources:
        raise ConfigError("no source given (results .jsonl files, run directories, Parquet, or a store)")
    jsonl: list[str] = []
    parquet: list[str] = []
    stores: list[Source] = []
    for source in sources:
        if source.startswith(_POSTGRES):
            stores.append(StoreSource("postgresql", source))
        elif source.startswith("sqlite://"):
            rest = source.removeprefix("sqlite://")
            if not rest.startswith("/") or rest == "/":
                raise ConfigError(f"bad SQLite URL {source!r}: write sqlite:///relative.db or "
                                  "sqlite:////absolute/path.db")
            stores.append(_sqlite(rest[1:], source))
        elif "://" in source:
            raise ConfigError(f"unknown source scheme {source.split('://', 1)[0]!r} in {shown(source)!r} "
                              "(use a path, sqlite:///path or postgresql://…)")
        elif source.lower().endswith(_STORE_SUFFIXES):
            stores.append(_sqlite(source, source))
        else:
            _files(source, jsonl, parquet)
    out: list[Source] = []
    if jsonl:
        out.append(FileSource("jsonl", tuple(jsonl)))
    if parquet:
        out.append(FileSource("parquet", tuple(parquet)))
    return out + stores


def _sqlite(path: str, source: str) -> StoreSource:
    # Opening a SQLite store creates the file: a typo must be an error, not an empty analysis.
    if not Path(path).is_file():
        raise ConfigError(f"cannot read store {source}: no such file {path}")
    return StoreSource("sqlite", path)


def _files(source: str, jsonl: list[str], parquet: list[str]) -> None:
    if any(ch in source for ch in "*?["):
        matches = sorted(glob.glob(source, recursive=True))
        if not matches:
            raise ConfigError(f"no file matches {source}")
        for match in matches:
            _files(match, jsonl, parquet)
        return
    path = Path(source)
    if path.is_dir():
        pq = sorted(str(p) for p in path.rglob("*.parquet") if p.is_file())
        js = sorted(str(p) for p in path.glob("*.jsonl") if p.is_file())
        if not pq and not js:
            raise ConfigError(f"no *.jsonl or *.parquet files in directory {source}")
        parquet.extend(pq)
        jsonl.extend(js)
    elif path.is_file():
        (parquet if path.suffix.lower() == ".parquet" else jsonl).append(str(path))
    else:
        raise ConfigError(f"cannot read {source}: no such file or directory")
