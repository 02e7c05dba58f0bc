"""The counts the analysis needs, defined once as SQL over the record schema, for every backend.

The statistics work on counts per combination of attribute labels (a *cell*: arm, api, workload,
concurrency, ending, finding kinds, id prefix, time window, reuse and prompt-size buckets, the values
of the headers worth comparing), weighted by each record's ``weight``. This module writes the queries
that compute those cells where the records are: ``SqlDialect`` holds the few expressions that differ
between DuckDB, SQLite, PostgreSQL and Spark SQL (JSON and map access, ``floor``, the response-id
prefix), and every query is built from the same definitions here, so four backends cannot drift apart.

Each source presents a *facts* relation with the columns of ``FACTS`` (see ``sources``); the queries
below read only those. Bucket edges are computed in Python with the very formula the labels use and
written into the SQL as literal comparisons, so a backend's ``ln`` or rounding never moves a record
into another bucket.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from sseguard.core._renamed import renamed
from sseguard.store.fields import CACHE_FACTS, UNKNOWN_FACT
from sseguard.store.fields import FACTS as _STORED_FACTS

#: The columns every source's facts relation has (see ``sources`` and ``with_prefix``): defined with
#: the columns a store writes them to (``store.fields``), so the two cannot drift apart.
FACTS = _STORED_FACTS
#: Log buckets: (key, base, start). Prompt sizes grow by 4 from 1 KiB, reuse indexes by 2 from 1.
PROMPT_BUCKETS = (4, 1024)
REUSE_BUCKETS = (2, 1)
_MAX_VALUE = 2**63 - 1


def quote(value: str) -> str:
    """A SQL string literal (standard quoting: every dialect here doubles the single quote)."""
    return "'" + value.replace("'", "''") + "'"


def double(value: float) -> str:
    """A float literal every backend reads as exactly ``value``: the shortest round-trip digits in
    scientific notation (a double in DuckDB, Spark and SQLite; in PostgreSQL a numeric that converts
    to the same double). The type names differ between backends; this notation does not."""
    text = repr(float(value))
    return text if "e" in text else f"{text}e0"


@dataclass(frozen=True, slots=True)
class SqlDialect:
    """The expressions that differ between the analysis backends (DuckDB, SQLite, PostgreSQL, Spark);
    everything else in the queries is shared SQL."""

    name: str

    def floor(self, expr: str) -> str:
        # SQLite has floor() only when built with the math functions; the argument is never negative.
        return f"CAST({expr} AS INTEGER)" if self.name == "sqlite" else f"CAST(FLOOR({expr}) AS BIGINT)"

    def header(self, name: str) -> str:
        """The value of response header ``name`` of a record (NULL when it has none)."""
        if self.name == "duckdb":
            return f"headers[{quote(name)}]"
        if self.name == "spark":
            return f"try_element_at(headers, {quote(name)})"
        if self.name == "sqlite":
            return f"json_extract(headers, {quote(chr(36) + '.' + _json_key(name))})"
        return f"(headers ->> {quote(name)})"

    def has_headers(self) -> str:
        if self.name in ("duckdb", "spark"):
            return "(headers IS NOT NULL AND cardinality(headers) > 0)"
        if self.name == "sqlite":
            return "(headers IS NOT NULL AND headers <> '{}')"
        return "(headers IS NOT NULL AND headers <> '{}'::jsonb)"

    def header_pairs(self) -> str:
        """FROM-less tail that turns facts ``f`` into (name, value) rows, one per header of a record."""
        if self.name == "duckdb":
            return "SELECT unnest(map_keys(headers)) AS name, unnest(map_values(headers)) AS value FROM f"
        if self.name == "spark":
            return "SELECT explode(headers) AS (name, value) FROM f"
        if self.name == "sqlite":
            return "SELECT h.key AS name, h.value AS value FROM f, json_each(f.headers) AS h"
        return "SELECT h.key AS name, h.value AS value FROM f, jsonb_each_text(f.headers) AS h"

    def id_prefix(self) -> str:
        """``sseguard.core.record.id_prefix`` of ``response_id``: the leading letters, ``numeric``,
        ``other``."""
        if self.name == "sqlite":
            return "sseguard_id_prefix(response_id)"  # the Python function itself, registered by the backend
        if self.name == "postgresql":
            digits, letters = "response_id ~ '^[0-9]+$'", "substring(response_id from '^[A-Za-z]+')"
        else:  # DuckDB and Spark share regexp_extract
            digits = ("regexp_matches(response_id, '^[0-9]+$')" if self.name == "duckdb"
                      else "response_id RLIKE '^[0-9]+$'")
            letters = "NULLIF(regexp_extract(response_id, '^[A-Za-z]+', 0), '')"
        return (f"CASE WHEN response_id IS NULL OR response_id = '' THEN NULL WHEN {digits} THEN 'numeric' "
                f"ELSE COALESCE({letters}, 'other') END")

    def length(self, expr: str) -> str:
        return f"char_length({expr})" if self.name == "postgresql" else f"length({expr})"


def _json_key(name: str) -> str:
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True, slots=True)
class Filter:
    """Which records the analysis reads: a time range (epoch seconds) and column = value sets."""

    since: float | None = None
    until: float | None = None
    equals: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def where(self) -> str:
        parts = ["1 = 1"]
        if self.since is not None:
            parts.append(f"started_at >= {double(self.since)}")
        if self.until is not None:
            parts.append(f"started_at < {double(self.until)}")
        for column, values in self.equals:
            if column not in FILTERABLE:
                raise ValueError(f"cannot filter on {column!r}")
            if column == "concurrency":
                listed = ", ".join(str(int(v)) for v in values)
            else:
                listed = ", ".join(quote(v) for v in values)
            parts.append(f"{column} IN ({listed})")
        return " AND ".join(parts)

    def narrowed(self, column: str, value: str) -> Filter:
        return Filter(self.since, self.until, (*self.equals, (column, (value,))))


#: Columns ``--where`` accepts (``run`` is an alias of ``run_id``).
FILTERABLE = ("arm", "api", "workload", "run_id", "concurrency", "ending")


def facts_cte(facts: str, flt: Filter) -> str:
    return f"WITH f AS (SELECT * FROM ({facts}) AS src WHERE {flt.where()})"


def profile_query(facts: str, flt: Filter) -> str:
    """Per run: records, weighted records, newest schema, first and last start time (of started ones)."""
    return (f"{facts_cte(facts, flt)} SELECT run_id, COUNT(*), SUM(weight), MAX(schema), "
            "MIN(CASE WHEN started_at > 0 THEN started_at END), "
            "MAX(CASE WHEN started_at > 0 THEN started_at END) FROM f GROUP BY run_id")


#: A header with more distinct values than this among the first ``SCREEN_PAIRS`` header values read is
#: not counted exactly (see ``header_query``); far above ``counts.MAX_CATEGORIES``.
SCREEN_ABOVE = 1000
SCREEN_PAIRS = 100_000


def header_query(facts: str, flt: Filter, dialect: SqlDialect) -> str:
    """Per header name and value, the records carrying it: rows (name, value, lower, records).

    Only a header with few values is ever kept (``counts.MAX_CATEGORIES``), so the values of a
    per-request id (ten million of them) are not needed: a header with more than ``SCREEN_ABOVE``
    distinct values among any ``SCREEN_PAIRS`` header values read first has at least that many in all;
    for such a header the query returns one row, value NULL and that lower bound in ``lower``. Every
    other header comes value by value (``lower`` NULL), so the caller counts its distinct values
    exactly, also over several sources or parts of one store (a sum of distinct counts would not be
    exact). The decision to drop or keep a header is the one an exact count gives, on every backend.
    Counting ten million request ids exactly took 7.5 s of a 10M-record DuckDB analysis, and far
    longer in SQLite."""
    value = "CASE WHEN name IN (SELECT name FROM big) THEN NULL ELSE value END"
    return (f"{facts_cte(facts, flt)}, p AS ({dialect.header_pairs()}), "
            f"s AS (SELECT name, COUNT(DISTINCT value) AS d FROM (SELECT name, value FROM p "
            f"LIMIT {SCREEN_PAIRS}) AS x GROUP BY name), "
            f"big AS (SELECT name, d FROM s WHERE d > {SCREEN_ABOVE}), "
            f"a AS (SELECT name, {value} AS v, COUNT(*) AS n FROM p GROUP BY name, {value}) "
            "SELECT a.name, a.v, big.d, a.n FROM a LEFT JOIN big ON a.name = big.name")


def log_bucket(value: int, base: int, start: int) -> int:
    """The bucket of ``value`` exactly as the labels define it (0 below ``start``)."""
    if value < start:
        return 0
    return math.floor(math.log(value / start, base) + 1e-9) + 1


def bucket_edges(base: int, start: int) -> list[int]:
    """The smallest value of each bucket from 1 up, found with ``log_bucket`` itself (bisection), so
    the SQL ladder agrees with the formula even where floating point puts an edge off a power."""
    edges: list[int] = []
    b = 1
    while True:
        lo, hi = max(start, start * base ** (b - 1) // 2), min(_MAX_VALUE, start * base ** (b - 1) * 2)
        if log_bucket(hi, base, start) < b:
            return edges
        while lo < hi:
            mid = (lo + hi) // 2
            if log_bucket(mid, base, start) >= b:
                hi = mid
            else:
                lo = mid + 1
        edges.append(lo)
        if hi >= _MAX_VALUE:
            return edges
        b += 1


def ladder(expr: str, base: int, start: int) -> str:
    """``log_bucket(expr)`` as portable SQL: a CASE over the bucket edges; NULL stays NULL."""
    whens = [f"WHEN {expr} < {edge} THEN {b}" for b, edge in enumerate(bucket_edges(base, start))]
    return f"CASE WHEN {expr} IS NULL THEN NULL {' '.join(whens)} ELSE {len(whens)} END"


#: The cell columns ``cells_query`` returns before the headers, in order.
CELL_KEYS = ("arm", "api", "workload", "concurrency", "ending", "kinds", "pfx", "sep", "win", "reuse",
             "prompt", "cache", "div")
#: How much of the prompt came from cache (``contract.usage.cache_share``, the same rule in SQL):
#: none | partial (under half) | most; NULL where the server did not report it.
CACHE_LABEL = ("CASE WHEN cached_tokens IS NULL THEN NULL WHEN cached_tokens = 0 THEN 'none' "
               "WHEN prompt_tokens IS NULL OR 2 * cached_tokens >= prompt_tokens THEN 'most' "
               "ELSE 'partial' END")
#: Where a consistency answer diverged from its reference, in tokens: the buckets' lower edges. The
#: first bucket is "early" (``EARLY_TOKENS``): where a corrupting cache shows, and batch effects
#: of a healthy engine rarely do.
EARLY_TOKENS = 32
DIVERGED_EDGES = (0, EARLY_TOKENS, 128, 512)


def diverged_label(lo: int, hi: int | None) -> str:
    """The label of a divergence bucket: tokens ``lo`` to ``hi - 1`` (``hi`` None: and beyond)."""
    return f"diverged at token {lo}–{hi - 1}" if hi is not None else f"diverged at token ≥{lo}"


#: The divergence buckets' labels, earliest first (the first one is "early").
DIVERGED_BUCKETS = tuple(diverged_label(lo, hi) for lo, hi in
                         zip(DIVERGED_EDGES, (*DIVERGED_EDGES[1:], None), strict=True))


def _div_label() -> str:
    """The consistency label of a record: ``identical``, ``reference``, a divergence bucket followed
    by what the probe recorded of the diverged answer (``:<prompt>:<digest>[:flags]``, nothing for
    records written before it did: ``analyze.consistency`` reads it), or NULL (not a consistency
    answer)."""
    edges = DIVERGED_EDGES
    whens = " ".join(f"WHEN diverged_token < {hi} THEN {quote(diverged_label(lo, hi))}"
                     for lo, hi in itertools.pairwise(edges))
    last = quote(diverged_label(edges[-1], None))
    return (f"CASE WHEN consistency = 'diverged' OR consistency LIKE 'diverged:%' "
            f"THEN (CASE {whens} ELSE {last} END) || substr(consistency, 9) "
            "ELSE consistency END")


def with_prefix(raw: str, dialect: SqlDialect, *, extra: str = "") -> str:
    """Facts from ``raw``, a relation with the record's ``id_prefix`` and ``response_id`` in place of
    ``pfx`` and ``sep``: the response-id prefix and the character after it, computed once as the source
    is read. The ids themselves (one distinct value per record) never reach the facts, which stay
    narrow enough to hold ten million records within the memory cap. ``extra``: columns passed along."""
    n = dialect.length
    return (
        "SELECT schema, run_id, idx, started_at, arm, api, workload, concurrency, ending, kinds, pfx, "
        # The character after the prefix (`gw-`, `resp_`): how the report writes the prefix.
        f"CASE WHEN {n('response_id')} > {n('pfx')} AND substr(response_id, 1, {n('pfx')}) = pfx "
        f"THEN substr(response_id, {n('pfx')} + 1, 1) END AS sep, "
        f"reuse_index, prompt_bytes, headers, weight, {', '.join(CACHE_FACTS)}, {UNKNOWN_FACT}{extra} FROM "
        f"(SELECT *, COALESCE(NULLIF(id_prefix, ''), {dialect.id_prefix()}) AS pfx FROM ({raw}) AS r) AS p"
    )


def cells_query(facts: str, flt: Filter, dialect: SqlDialect, *, firsts: dict[str, float],
                width: float | None, headers: Sequence[str]) -> str:
    """Weighted record counts per cell: one row per distinct combination of every label."""
    if width is not None and firsts:
        first = " ".join(f"WHEN {quote(run)} THEN {double(t)}" for run, t in sorted(firsts.items()))
        offset = f"(started_at - CASE run_id {first} END)"
        win = f"CASE WHEN started_at > 0 THEN {dialect.floor(f'{offset} / {double(width)}')} END"
    else:
        win = "CAST(NULL AS BIGINT)"
    has = dialect.has_headers()
    heads = [f"CASE WHEN {has} THEN COALESCE({dialect.header(h)}, '(absent)') END AS h{i}"
             for i, h in enumerate(headers)]
    prompt = ladder("NULLIF(prompt_bytes, 0)", PROMPT_BUCKETS[0], PROMPT_BUCKETS[1])
    labelled = ", ".join([
        "arm", "api", "workload", "concurrency", "ending", "COALESCE(kinds, '') AS kinds", "pfx", "sep",
        f"{win} AS win", f"{ladder('reuse_index', REUSE_BUCKETS[0], REUSE_BUCKETS[1])} AS reuse",
        f"{prompt} AS prompt", f"{CACHE_LABEL} AS cache", f"{_div_label()} AS div", *heads, "weight"])
    keys = [*CELL_KEYS, *(f"h{i}" for i in range(len(headers)))]
    grouped = ", ".join(keys)
    return (f"{facts_cte(facts, flt)} "
            f"SELECT {grouped}, SUM(weight) AS w FROM (SELECT {labelled} FROM f) AS t GROUP BY {grouped}")


def unknown_query(facts: str, flt: Filter) -> str:
    """Weighted streams per (api, unknown kinds joined with commas): rows (api, kinds, streams).

    Apart from the cells on purpose: an unknown kind is never a verdict nor an attribute of the
    search (``docs/design/guarantees.md`` guarantee 6), and counted in the cells it would split every cell by
    a label nothing else reads. Distinct combinations are few; the caller splits them into names."""
    return (f"{facts_cte(facts, flt)} SELECT api, {UNKNOWN_FACT}, SUM(weight) FROM f "
            f"WHERE {UNKNOWN_FACT} IS NOT NULL AND {UNKNOWN_FACT} <> '' GROUP BY api, {UNKNOWN_FACT}")


def evidence_query(facts: str, flt: Filter, failing: Sequence[tuple[str, str]], limit: int,
                   record: str) -> str:
    """The first ``limit`` failing records by start time (``failing``: their (ending, kinds) pairs),
    as the record documents ``record`` names in the source."""
    if not failing:
        return ""
    match = " OR ".join(f"(ending = {quote(e)} AND COALESCE(kinds, '') = {quote(k)})" for e, k in failing)
    return (f"{facts_cte(facts, flt)} SELECT {record} FROM f WHERE {match} "
            f"ORDER BY started_at, arm, idx LIMIT {int(limit)}")

#: Old names → new (docs/design/vocabulary.md "Names": each dialect says its room).
__getattr__ = renamed(__name__, {"Dialect": "SqlDialect"})
