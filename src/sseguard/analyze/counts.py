"""Cells: the analysis's whole input, counted by the backends, merged here, O(distinct labels) in size.

``Reader`` opens one backend per source and, for a filter, asks each for the run profile (records and
start times per run), the header statistics, and then the weighted cells (see ``facts``). Cells of
several sources are summed key by key, so a JSONL directory and a store analyze as one run. Python
never holds a record here; only ``evidence`` fetches a bounded number of them for the report.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import msgspec

from sseguard.analyze.backends import Backend, Row, facts_of, open_backends
from sseguard.analyze.facts import (
    CELL_KEYS,
    Filter,
    cells_query,
    evidence_query,
    header_query,
    profile_query,
    quote,
    unknown_query,
)
from sseguard.analyze.sources import RECORD_COLUMNS, FileSource, Source, StoreSource
from sseguard.core.errors import ConfigError
from sseguard.core.record import SCHEMA_VERSION, Record

T = TypeVar("T")
#: Headers that carry ground truth (what the chaos server injected), not evidence.
GROUND_TRUTH_HEADERS = frozenset({"x-sseguard-fault"})
#: More distinct values than this and a header is an id or a timing, not a route.
MAX_CATEGORIES = 50
#: A header whose distinct values reach this share of its records is per-request (x-request-id, trace ids).
UNIQUE_SHARE = 0.5
_NICE_WIDTHS = (0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600,
                43200, 86400)


@dataclass(frozen=True, slots=True)
class Cell:
    """Records that agree on every label the analysis uses, and their summed weight."""

    arm: str
    api: str
    workload: str
    concurrency: int
    ending: str
    kinds: tuple[str, ...]
    pfx: str | None  # response-id prefix
    sep: str | None  # the character after it in the ids (`-` of `gw-`)
    win: int | None  # time window index
    reuse: int | None  # reuse-index bucket
    prompt: int | None  # prompt-size bucket
    cache: str | None  # how much of the prompt came from cache (``facts.CACHE_LABEL``)
    div: str | None  # the consistency workload's comparison (``facts._div_label``); None: not one
    headers: tuple[str | None, ...]  # values of ``CellSet.header_names``; None: no headers at all
    weight: int


@dataclass(frozen=True, slots=True)
class CellSet:
    """The cells of one filter, and what the labels need: header names, window width, runs."""

    cells: list[Cell]
    header_names: list[str]
    width: float | None
    span: float
    runs: list[str]
    records: int  # rows read (unweighted)


def bucket_width(span: float) -> float | None:
    """Minute windows; finer for a short run, wider for a long one: at most 24 windows either way.

    Faults that come in bursts last seconds in a demo and minutes in production; a window much wider
    than the burst dilutes it, and then a finer proxy of time (the connection reuse index grows with
    it) would explain the failures better than time itself.
    """
    if span <= 0:
        return None
    if span < 180:
        return float(next(w for w in _NICE_WIDTHS if span / w <= 24))
    if span <= 24 * 60:
        return 60.0
    return float(next((w for w in _NICE_WIDTHS if w >= 60 and span / w <= 24), _NICE_WIDTHS[-1]))


@dataclass
class Reader:
    """Open backends over the sources; ``cells(filter)`` counts, ``evidence`` fetches a few records."""

    sources: list[Source]
    backend: str = "auto"
    spark: Any = None
    progress: Callable[[float], None] | None = None
    _backends: list[Backend] = field(default_factory=list)
    _facts: list[str] = field(default_factory=list)  # each backend's facts relation, read once

    def __enter__(self) -> Reader:
        try:
            for source in self.sources:
                self._backends.extend(open_backends(source, backend=self.backend, spark=self.spark,
                                                    progress=self.progress))
            self._facts.extend(self._each_backend(_materialize))
        except BaseException:
            self.close()
            raise
        return self

    def _each_backend(self, work: Callable[[Backend], T]) -> list[T]:
        """``work`` on every backend, in backend order; at once when they are all SQLite (the parts of
        a store, or several stores): each has its own connection, and ``sqlite3`` lets go of the GIL
        while SQLite works, so two parts use both cores. DuckDB and Spark use every core by
        themselves (and DuckDB backends at once would each take their memory limit), a PostgreSQL
        server plans its own parallel scans: those run one after the other, as before."""
        if len(self._backends) < 2 or any(e.dialect.name != "sqlite" for e in self._backends):
            return [work(e) for e in self._backends]
        with ThreadPoolExecutor(max_workers=len(self._backends)) as pool:
            return list(pool.map(work, self._backends))

    def _per_backend(self, work: Callable[[Backend, str], T]) -> list[tuple[Backend, T]]:
        """``work(backend, facts)`` on every backend (see ``_each_backend``), with its backend."""
        facts = dict(zip(map(id, self._backends), self._facts, strict=True))
        return list(zip(self._backends, self._each_backend(lambda e: work(e, facts[id(e)])), strict=True))

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._facts.clear()
        while self._backends:
            self._backends.pop().close()

    def cells(self, flt: Filter) -> CellSet:
        runs: dict[str, list[Any]] = {}
        for eng, rows in self._per_backend(lambda eng, facts: eng.rows(profile_query(facts, flt))):
            for run, n, w, schema, first, last in rows:
                if schema is not None and int(schema) > SCHEMA_VERSION:
                    raise ConfigError(f"{eng.source.label} holds records of schema {int(schema)}; this "
                                      f"sseguard reads schema {SCHEMA_VERSION} and older: upgrade sseguard")
                cell = runs.setdefault(str(run), [0, 0, None, None])
                cell[0] += int(n)
                cell[1] += int(w)
                cell[2] = _pick(min, cell[2], first)
                cell[3] = _pick(max, cell[3], last)
        if not runs:
            raise ConfigError("no records to analyze" + (" in the time range or --where given"
                                                         if flt != Filter() else ""))
        firsts = {run: float(c[2]) for run, c in runs.items() if c[2] is not None}
        span = max((float(c[3]) - float(c[2]) for c in runs.values() if c[2] is not None), default=0.0)
        width = bucket_width(span)
        names = self._header_names(flt)
        merged: dict[tuple[Any, ...], int] = {}

        def count(eng: Backend, facts: str) -> list[Row]:
            return eng.rows(cells_query(facts, flt, eng.dialect, firsts=firsts, width=width, headers=names))

        for _, rows in self._per_backend(count):
            for row in rows:
                key = tuple(row[:-1])
                merged[key] = merged.get(key, 0) + int(row[-1])
        cells = [_cell(key, weight, len(CELL_KEYS)) for key, weight in merged.items()]
        cells.sort(key=_order)
        return CellSet(cells, names, width, span, sorted(runs), sum(c[0] for c in runs.values()))

    def _header_names(self, flt: Filter) -> list[str]:
        values: dict[str, set[str]] = {}
        lower: dict[str, int] = {}
        present: dict[str, int] = {}

        def query(eng: Backend, facts: str) -> list[Row]:
            return eng.rows(header_query(facts, flt, eng.dialect))

        for _, rows in self._per_backend(query):
            for name, value, bound, n in rows:
                key = str(name)
                present[key] = present.get(key, 0) + int(n)
                seen = values.setdefault(key, set())
                if bound is not None:  # a per-request id: more values than any kept header has
                    lower[key] = max(lower.get(key, 0), int(bound))
                elif value is not None:
                    seen.add(str(value))
        stats = {name: (max(lower.get(name, 0), len(seen)), present[name]) for name, seen in values.items()}
        kept = []
        for name, (distinct, carrying) in sorted(stats.items()):
            if name in GROUND_TRUTH_HEADERS:
                continue
            if distinct > MAX_CATEGORIES or (distinct > 3 and distinct >= UNIQUE_SHARE * carrying):
                continue  # per-request ids and timings: every value unique, nothing to share
            kept.append(name)
        return kept

    def unknown_rows(self, flt: Filter) -> dict[tuple[str, str], int]:
        """Streams carrying each (api, unknown kind) in the filter, over all sources: a stream that
        carried a kind several times counts once (the record keeps each kind once)."""
        found: dict[tuple[str, str], int] = {}
        for _, rows in self._per_backend(lambda eng, facts: eng.rows(unknown_query(facts, flt))):
            for api, joined, w in rows:
                for name in set(str(joined).split(",")):
                    key = (str(api), name)
                    found[key] = found.get(key, 0) + int(w)
        return found

    def evidence(self, flt: Filter, failing: Sequence[tuple[str, str]], limit: int) -> list[Record]:
        """The first ``limit`` failing records by start time over all sources (bounded memory)."""
        found: list[Record] = []
        for _, some in self._per_backend(lambda eng, _facts: _evidence(eng, flt, failing, limit)):
            found.extend(some)
        found.sort(key=lambda r: (r.started_at, r.arm, r.index))
        return found[:limit]


def _materialize(eng: Backend) -> str:
    """Read the source once: its facts (a few narrow columns) into a table of the backend, so the
    profile, header and cell queries (and one set per api) do not parse the JSON again each."""
    return eng.materialize(facts_of(eng))


def _evidence(eng: Backend, flt: Filter, failing: Sequence[tuple[str, str]], limit: int) -> list[Record]:
    if not failing:
        return []
    source = eng.source
    if isinstance(source, StoreSource):
        sql = evidence_query(facts_of(eng, doc=True), flt, failing, limit, "doc")
        texts = [row[0] if isinstance(row[0], str | bytes) else msgspec.json.encode(row[0])
                 for row in eng.rows(sql)]
        return [msgspec.json.decode(t, type=Record) for t in texts]
    assert isinstance(source, FileSource)
    name = eng.dialect.name
    relation = "sseguard_src" if name == "spark" else source.relation(name)
    raw = f"(SELECT * FROM {relation}) AS raw"
    keyed = evidence_query(source.facts(name), flt, failing, limit, "run_id, idx")
    keys = eng.rows(keyed)
    if not keys:
        return []
    index = "`index`" if name == "spark" else '"index"'
    match = " OR ".join(f"(run_id = {_lit(r)} AND {index} = {int(i)})" for r, i in keys)
    rows = eng.rows(f"SELECT * FROM {raw} WHERE {match}")
    columns = [c for c, _ in RECORD_COLUMNS]  # the raw relation's columns, in this order
    return [_record(dict(zip(columns, row, strict=False))) for row in rows]


def _record(row: dict[str, Any]) -> Record:
    fields = {k: v for k, v in row.items() if v is not None and k != "weight"}
    for key in ("findings", "finish_reasons", "usage", "extra", "unknown_kinds"):
        if isinstance(fields.get(key), str):
            fields[key] = msgspec.json.decode(fields[key])
    if "headers" in fields and not isinstance(fields["headers"], dict):
        fields["headers"] = dict(fields["headers"])
    return msgspec.convert(fields, Record)


def _lit(value: object) -> str:
    return quote(str(value))


def _pick(fn: Callable[[Iterable[float]], float], a: Any, b: Any) -> Any:
    values = [float(v) for v in (a, b) if v is not None]
    return fn(values) if values else None


def _cell(key: tuple[Any, ...], weight: int, fixed: int) -> Cell:
    arm, api, workload, level, ending, kinds, pfx, sep, win, reuse, prompt, cache, div = key[:fixed]
    return Cell(str(arm), str(api), str(workload), int(level), str(ending),
                tuple(str(kinds).split(",")) if kinds else (), pfx, sep,
                None if win is None else int(win), None if reuse is None else int(reuse),
                None if prompt is None else int(prompt),
                None if cache is None else str(cache), None if div is None else str(div),
                tuple(None if h is None else str(h) for h in key[fixed:]), weight)


def _order(c: Cell) -> tuple[Any, ...]:
    return (c.arm, c.api, c.workload, c.concurrency, c.ending, c.kinds, c.pfx or "", c.sep or "",
            -1 if c.win is None else c.win, -1 if c.reuse is None else c.reuse,
            -1 if c.prompt is None else c.prompt, c.cache or "", c.div or "",
            tuple(h or "" for h in c.headers))
