"""Healed streams in the analysis: what the proxy's ``--retry``/``--resume`` hid from the client.

A stream the proxy healed ended fine for its client, but its upstream broke: a route whose streams are
all healed is still a route that breaks, and it costs time and tokens. So the analysis counts three
things of records written with healing on (``Record.heal_of``/``healed``):

* client streams: a record with ``heal_of`` unset. Each upstream attempt the client never saw has its
  own record pointing at its stream (``heal_of``); those are *not* client streams, so the reader drops
  them from every count (``HealReader``) and counts them apart (how their upstreams ended);
* healed streams: ``healed`` is ``retry`` or ``resume``; one that still failed under the policy is
  "failed despite healing";
* the attribute search again with "the upstream broke" (failed, or healed) as the outcome, so an
  attribute that picks out healed streams is found even though their clients saw nothing.

Every count is SQL run in the records' backend, as in ``facts``. A store's facts relation carries the
heal fields (``store.fields.HEAL_FACTS``), so its client streams and attempts are two selections of
it. Files are read for them once more (``heal_keys``: Parquet exported before the heal columns existed
has none), into a small table of the records that have them, joined to the facts on (run, arm,
index); a source without any (a probe's files) costs that one narrow read and nothing else.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sseguard.analyze.attributes import search
from sseguard.analyze.backends import Backend, BackendError
from sseguard.analyze.columns import columns
from sseguard.analyze.counts import Cell, CellSet, Reader, _cell
from sseguard.analyze.facts import CELL_KEYS, Filter, cells_query, facts_cte, profile_query, quote
from sseguard.analyze.model import HEALED_OUTCOME, AttributeResult, Healing
from sseguard.analyze.sources import FileSource, StoreSource
from sseguard.analyze.stats import Rate, ranked
from sseguard.core.policy import Policy

#: ``Record.healed`` values that mean the proxy healed the stream (``none``: it needed no healing).
HEALED = ("retry", "resume")
#: Attributes whose per-value healed/failed counts the terminal shows (the HTML shows all).
SHOWN_ATTRIBUTES = 3
SHOWN_VALUES = 8

_FIELDS = (("run_id", "VARCHAR", "STRING"), ("arm", "VARCHAR", "STRING"), ("index", "BIGINT", "BIGINT"),
           ("heal_of", "BIGINT", "BIGINT"), ("healed", "VARCHAR", "STRING"),
           ("heal_attempts", "BIGINT", "BIGINT"), ("heal_tokens", "BIGINT", "BIGINT"))
_HEALED_IN = f"healed IN ({', '.join(quote(h) for h in HEALED)})"
_JOIN = "f.run_id = h.run_id AND f.arm = h.arm AND f.idx = h.idx"


def heal_keys(eng: Backend) -> str:
    """The records of ``eng``'s files that carry heal facts: (run_id, arm, idx, heal_of, healed,
    heal_attempts, heal_tokens), keyed like the facts relation."""
    source, name = eng.source, eng.dialect.name
    assert isinstance(source, FileSource), "a store's facts carry the heal fields themselves"
    index = "`index`" if name == "spark" else '"index"'
    rows = (f"SELECT COALESCE(run_id, '') AS run_id, COALESCE(arm, 'default') AS arm, "
            f"COALESCE({index}, 0) AS idx, heal_of, healed, COALESCE(heal_attempts, 0) AS heal_attempts, "
            f"COALESCE(heal_tokens, 0) AS heal_tokens FROM {_file_rows(source, name)}")
    return f"SELECT * FROM ({rows}) AS k WHERE heal_of IS NOT NULL OR {_HEALED_IN}"


def _file_rows(source: FileSource, backend: str) -> str:
    """The heal fields of JSONL or Parquet files as a relation, in DuckDB or Spark SQL."""
    if backend != "spark":
        listed = "[" + ", ".join(quote(f) for f in source.files) + "]"
        if source.kind == "parquet":
            return f"read_parquet({listed}, hive_partitioning = false, union_by_name = true) AS r"
        typed = "{" + ", ".join(f"{quote(n)}: {quote(t)}" for n, t, _ in _FIELDS) + "}"
        return f"read_json({listed}, format = 'newline_delimited', columns = {typed}) AS r"
    paths = [f"`{f.replace('`', '``')}`" for f in source.files]
    if source.kind == "parquet":
        names = ", ".join(f"`{n}`" for n, _, _ in _FIELDS)
        return "(" + " UNION ALL ".join(f"SELECT {names} FROM parquet.{p}" for p in paths) + ") AS r"
    ddl = ", ".join(f"`{n}` {t}" for n, _, t in _FIELDS)
    lines = " UNION ALL ".join(f"SELECT value FROM text.{p}" for p in paths)
    return f"(SELECT s.* FROM (SELECT from_json(value, {quote(ddl)}) AS s FROM ({lines}) AS t) AS j) AS r"


def _temp(eng: Backend, table: str, sql: str) -> None:
    if eng.dialect.name == "spark":
        eng.rows(f"CACHE TABLE {table} AS {sql}")
    else:
        eng.rows(f"CREATE TEMP TABLE {table} AS {sql}")


@dataclass
class HealReader(Reader):
    """A ``Reader`` whose counts are of client streams only: upstream attempts (``heal_of`` set) are
    set apart, healed streams can be counted alone (``heal_rows``, ``healed_cells``)."""

    _healed: list[bool] = field(default_factory=list)  # per backend: its source holds heal facts

    def __enter__(self) -> HealReader:
        super().__enter__()
        try:
            for i, eng in enumerate(self._backends):
                self._healed.append(self._split(eng, self._facts[i]))
                if self._healed[-1]:
                    self._facts[i] = "SELECT * FROM sseguard_streams"
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        for eng, healed in zip(self._backends, self._healed, strict=False):
            if healed and eng.dialect.name == "spark":  # a session outlives us: drop what we cached
                for table in ("sseguard_attempts", "sseguard_streams", "sseguard_heal"):
                    eng.rows(f"UNCACHE TABLE IF EXISTS {table}")
                    eng.rows(f"DROP VIEW IF EXISTS {table}")
        self._healed.clear()
        super().close()

    @staticmethod
    def _split(eng: Backend, facts: str) -> bool:
        if isinstance(eng.source, StoreSource):  # the facts carry the heal fields: no second read
            found = f"SELECT COUNT(*) FROM ({facts}) AS f WHERE heal_of IS NOT NULL OR {_HEALED_IN}"
            if not eng.rows(found)[0][0]:
                return False
            _temp(eng, "sseguard_streams", f"SELECT * FROM ({facts}) AS f WHERE heal_of IS NULL")
            _temp(eng, "sseguard_attempts", f"SELECT * FROM ({facts}) AS f WHERE heal_of IS NOT NULL")
            return True
        try:
            _temp(eng, "sseguard_heal", heal_keys(eng))
        except BackendError:
            if isinstance(eng.source, FileSource) and eng.source.kind == "parquet":
                return False  # Parquet written without the heal columns: nothing was healed
            raise
        if not eng.rows("SELECT COUNT(*) FROM sseguard_heal")[0][0]:
            if eng.dialect.name == "spark":
                eng.rows("UNCACHE TABLE IF EXISTS sseguard_heal")
                eng.rows("DROP VIEW IF EXISTS sseguard_heal")
            return False
        _temp(eng, "sseguard_streams",
              f"SELECT f.*, h.healed AS healed, COALESCE(h.heal_attempts, 0) AS heal_attempts, "
              f"COALESCE(h.heal_tokens, 0) AS heal_tokens FROM ({facts}) AS f "
              f"LEFT JOIN sseguard_heal AS h ON {_JOIN} WHERE h.heal_of IS NULL")
        _temp(eng, "sseguard_attempts", f"SELECT f.* FROM ({facts}) AS f JOIN sseguard_heal AS h ON {_JOIN} "
              "WHERE h.heal_of IS NOT NULL")
        return True

    @property
    def heals(self) -> bool:
        """Some source holds records written with healing on."""
        return any(self._healed)

    def _each(self) -> list[Backend]:
        return [eng for eng, healed in zip(self._backends, self._healed, strict=True) if healed]

    def heal_rows(self, flt: Filter) -> list[tuple[str, str, str, int, int, int]]:
        """Healed client streams per (how, ending, kinds): streams, attempts and tokens spent."""
        out: Counter[tuple[str, str, str]] = Counter()
        spent: Counter[tuple[str, str, str]] = Counter()
        tokens: Counter[tuple[str, str, str]] = Counter()
        sql = (f"{facts_cte('SELECT * FROM sseguard_streams', flt)} SELECT healed, ending, "
               "COALESCE(kinds, ''), SUM(weight), SUM(heal_attempts * weight), "
               "SUM(heal_tokens * weight) FROM f "
               f"WHERE {_HEALED_IN} GROUP BY healed, ending, COALESCE(kinds, '')")
        for eng in self._each():
            for how, ending, kinds, w, attempts, spent_tokens in eng.rows(sql):
                key = (str(how), str(ending), str(kinds))
                out[key] += int(w)
                spent[key] += int(attempts)
                tokens[key] += int(spent_tokens)
        return [(*k, out[k], spent[k], tokens[k]) for k in sorted(out)]

    def attempt_rows(self, flt: Filter) -> list[tuple[str, str, int]]:
        """Upstream attempts the clients never saw, per (ending, kinds)."""
        merged: Counter[tuple[str, str]] = Counter()
        sql = (f"{facts_cte('SELECT * FROM sseguard_attempts', flt)} SELECT ending, COALESCE(kinds, ''), "
               "SUM(weight) FROM f GROUP BY ending, COALESCE(kinds, '')")
        for eng in self._each():
            for ending, kinds, w in eng.rows(sql):
                merged[(str(ending), str(kinds))] += int(w)
        return [(*k, merged[k]) for k in sorted(merged)]

    def healed_cells(self, flt: Filter, cs: CellSet) -> list[Cell]:
        """The healed streams' cells, labelled exactly as ``cs`` (same windows, same headers)."""
        firsts: dict[str, float] = {}
        for eng, facts in zip(self._backends, self._facts, strict=True):
            for run, _, _, _, first, _ in eng.rows(profile_query(facts, flt)):
                if first is not None:
                    firsts[str(run)] = min(float(first), firsts.get(str(run), float(first)))
        merged: Counter[tuple[Any, ...]] = Counter()
        healed = f"SELECT * FROM sseguard_streams WHERE {_HEALED_IN}"
        for eng in self._each():
            sql = cells_query(healed, flt, eng.dialect, firsts=firsts, width=cs.width,
                              headers=cs.header_names)
            for row in eng.rows(sql):
                merged[tuple(row[:-1])] += int(row[-1])
        return [_cell(key, weight, len(CELL_KEYS)) for key, weight in merged.items()]


def analyze_healing(reader: Reader, policy: Policy, flt: Filter, cs: CellSet,
                    reason_of: Callable[[str, Sequence[str], Policy], str | None],
                    headline: Callable[[AttributeResult], AttributeResult]) -> Healing | None:
    """The healing counts of a filter, or None when no record was written with healing on."""
    if not isinstance(reader, HealReader) or not reader.heals:
        return None
    how: Counter[str] = Counter()
    failed = spent = tokens = 0
    for healed, ending, kinds, w, attempts, used in reader.heal_rows(flt):
        if reason_of(ending, tuple(kinds.split(",")) if kinds else (), policy) is None:
            how[healed] += w
        else:
            failed += w
        spent += attempts
        tokens += used
    attempts_by: Counter[str] = Counter()
    for ending, kinds, w in reader.attempt_rows(flt):
        attempts_by[reason_of(ending, tuple(kinds.split(",")) if kinds else (), policy) or ending] += w
    healed_w: Counter[Cell] = Counter()
    for c in reader.healed_cells(flt, cs):
        healed_w[replace(c, weight=0)] += c.weight
    cells: list[Cell] = []
    reasons: list[str | None] = []
    for c in cs.cells:
        h = healed_w.get(replace(c, weight=0), 0)
        reason = reason_of(c.ending, c.kinds, policy)
        if c.weight > h:
            cells.append(replace(c, weight=c.weight - h))
            reasons.append(reason)
        if h:
            cells.append(replace(c, weight=h))
            reasons.append(reason or HEALED_OUTCOME)
    weights = [c.weight for c in cells]
    split = replace(cs, cells=cells)
    found = [headline(a) for a in search(columns(split), reasons, weights)]
    broke = Rate.of(sum(w for r, w in zip(reasons, weights, strict=True) if r is not None), sum(weights))
    return Healing(streams=sum(weights), by_retry=how["retry"], by_resume=how["resume"], failed=failed,
                   spent_attempts=spent, spent_tokens=tokens, attempts=ranked(attempts_by), broke=broke,
                   attributes=found)
