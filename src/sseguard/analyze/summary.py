"""Judge a set of records under a policy and build the ``Analysis``: tables, ranked attributes, headlines.

Records keep the full verdict facts whatever policy was in force when they were written, so the same
run can be judged again here under another policy (a gateway that never sends ``[DONE]``, judged
``no-done-ok``) without probing again.
"""

from __future__ import annotations

import itertools
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import msgspec

from sseguard.analyze import headlines
from sseguard.analyze.attributes import search
from sseguard.analyze.columns import columns
from sseguard.analyze.consistency import analyze_consistency
from sseguard.analyze.counts import Cell, CellSet, Reader
from sseguard.analyze.facts import Filter
from sseguard.analyze.healing import HealReader, analyze_healing
from sseguard.analyze.model import (
    Analysis,
    ApiRow,
    ArmComparison,
    AttributeResult,
    GroupRow,
    TimeBucket,
    UnknownKind,
)
from sseguard.analyze.sources import resolve
from sseguard.analyze.stats import Rate, fisher, ranked
from sseguard.core.errors import ConfigError
from sseguard.core.policy import STRICT, Policy
from sseguard.core.record import Record
from sseguard.core.verdict import Ending

#: A kind of failure gets its own attribute search from this many streams on.
MIN_REASON_FAILURES = 5
#: Arm-vs-arm tests are all pairs up to this many arms; beyond it, each arm against the best one.
MAX_PAIRWISE_ARMS = 6


def failure_reason(record: Record, policy: Policy) -> str | None:
    """Why ``record`` fails under ``policy``: its ending, else its first untolerated finding.

    None when it passes.
    """
    return reason_of(record.ending, record.finding_kinds, policy)


def reason_of(ending: str, kinds: Sequence[str], policy: Policy) -> str | None:
    """``failure_reason`` from the two facts it reads (what a cell of records shares)."""
    if policy.passes_facts(ending, list(kinds)):
        return None
    if ending != Ending.COMPLETE and ending not in policy.tolerate:
        return ending
    return next((k for k in kinds if k not in policy.tolerate), ending)


def analyze(records: Sequence[Record], policy: Policy = STRICT, *, top: int = 5) -> Analysis:
    """The whole analysis of records held in memory (a demo, a test): counted by DuckDB like a file."""
    if not records:
        raise ConfigError("no records to analyze")
    with tempfile.TemporaryDirectory(prefix="sseguard-analyze-") as tmp:
        path = Path(tmp) / "records.jsonl"
        encode = msgspec.json.Encoder().encode
        with path.open("wb") as out:
            for r in records:
                out.write(encode(r) + b"\n")
        return analyze_sources([str(path)], policy, top=top)


def analyze_sources(sources: Sequence[str], policy: Policy = STRICT, *, top: int = 5,
                    flt: Filter | None = None, engine: str = "auto", spark: Any = None,
                    progress: Callable[[float], None] | None = None) -> Analysis:
    """The whole analysis of the records of ``sources`` (see ``sources.resolve``), counted where they
    are; only the counts come back to Python."""
    if top < 1:
        raise ConfigError(f"--top must be at least 1, got {top}")
    with HealReader(resolve(sources), backend=engine, spark=spark, progress=progress) as reader:
        return analyze_counts(reader, policy, top=top, flt=flt or Filter())


def analyze_with_evidence(sources: Sequence[str], policy: Policy = STRICT, *, top: int = 5,
                          evidence: int = 0, flt: Filter | None = None, engine: str = "auto",
                          spark: Any = None, progress: Callable[[float], None] | None = None,
                          ) -> tuple[Analysis, list[Record]]:
    """``analyze_sources`` plus up to ``evidence`` failing records, fetched by query where the records
    are (what an HTML report quotes): a run's own results file is analyzed as it lies on disk."""
    if top < 1:
        raise ConfigError(f"--top must be at least 1, got {top}")
    flt = flt or Filter()
    with HealReader(resolve(sources), backend=engine, spark=spark, progress=progress) as reader:
        cells = reader.cells(flt)
        result = analyze_counts(reader, policy, top=top, flt=flt, counted=cells)
        quoted = reader.evidence(flt, failing_facts(cells, policy), evidence) if evidence else []
    return result, quoted


def analyze_counts(reader: Reader, policy: Policy, *, top: int = 5, flt: Filter | None = None,
                   counted: CellSet | None = None) -> Analysis:
    """The analysis from an open ``Reader``: one count of the filter (unless ``counted`` holds it
    already), one more per api searched alone."""
    flt = flt or Filter()
    cs = counted if counted is not None else reader.cells(flt)
    cells = cs.cells
    weights = [c.weight for c in cells]
    reasons = [reason_of(c.ending, c.kinds, policy) for c in cells]
    arms = _groups(cells, reasons, lambda c: (c.arm, None))
    levels = _groups(cells, reasons, lambda c: (c.arm, c.concurrency))
    cols = columns(cs)
    attributes = [_with_headline(a) for a in search(cols, reasons, weights)]
    failures = _count(reasons, weights)
    by_reason: dict[str, list[AttributeResult]] = {}
    if len(failures) > 1:
        for reason, count in failures.items():
            if count >= MIN_REASON_FAILURES:
                alone = [r if r == reason else None for r in reasons]
                by_reason[reason] = [_with_headline(a, reason) for a in search(cols, alone, weights)]
    comparisons = _comparisons([(g.arm, g.rate) for g in arms])
    apis = _api_rows(cells, reasons)
    api_comparisons = _comparisons([(a.api, a.rate) for a in apis], kind="api")
    within_api = _within_api(reader, flt, policy, apis)
    total = Rate.of(sum(w for r, w in zip(reasons, weights, strict=True) if r is not None), sum(weights))
    healing = analyze_healing(reader, policy, flt, cs, reason_of, _broke_headline)
    consistency = analyze_consistency(cs, _diverged_headline)
    lines = [headlines.overall(total, failures, policy.name)]
    if healing is not None:
        lines.extend(headlines.healing(healing, said=_leads(attributes)))
    lines.extend(_attribute_lines(attributes, by_reason, total, top))
    lines.extend(_within_api_lines(within_api, attributes, by_reason))
    if consistency is not None:
        lines.extend(headlines.consistency(consistency))
    level_line = headlines.by_level(levels, len(arms))
    if level_line:
        lines.append(level_line)
    lines.extend(headlines.comparison(c) for c in comparisons)
    if any(len(a.arms) > 1 for a in apis):
        # With one arm per api the arm comparisons above already say it.
        lines.extend(headlines.comparison(c) for c in api_comparisons)
    unknown = _unknown_kinds(reader.unknown_rows(flt), cells)
    if unknown:
        lines.append(headlines.unknown_kinds(unknown))
    return Analysis(
        policy=policy, total=total,
        endings=_count((c.ending for c in cells), weights),
        findings=_count_kinds(cells, range(len(cells))),
        failures=failures, arms=arms, levels=levels, comparisons=comparisons,
        attributes=attributes, by_reason=by_reason, apis=apis, api_comparisons=api_comparisons,
        within_api=within_api,
        timeline=_timeline(cells, reasons, cs.width), bucket_s=cs.width,
        span_s=cs.span, runs=cs.runs, headlines=lines, healing=healing, consistency=consistency,
        unknown_kinds=unknown,
    )


def _unknown_kinds(found: dict[tuple[str, str], int], cells: Sequence[Cell]) -> list[UnknownKind]:
    """The unknown kinds per (api, kind), each with its api's streams: most streams first."""
    per_api: Counter[str] = Counter()
    for c in cells:
        per_api[c.api] += c.weight
    rows = [UnknownKind(api, kind, n, per_api[api]) for (api, kind), n in found.items()]
    return sorted(rows, key=lambda u: (-u.streams, u.api, u.kind))


def failing_facts(cs: CellSet, policy: Policy) -> list[tuple[str, str]]:
    """The (ending, finding kinds) pairs that fail under ``policy``: what the evidence query selects."""
    return sorted({(c.ending, ",".join(c.kinds)) for c in cs.cells
                   if reason_of(c.ending, c.kinds, policy) is not None})


def _with_headline(res: AttributeResult, reason: str | None = None) -> AttributeResult:
    return replace(res, headline=headlines.attribute(res, reason))


def _diverged_headline(res: AttributeResult) -> AttributeResult:
    return replace(res, headline=headlines.attribute(res, verb="came garbled"))


def _broke_headline(res: AttributeResult) -> AttributeResult:
    return replace(res, headline=headlines.attribute(res, verb="broke upstream"))


def _leads(attributes: list[AttributeResult]) -> list[AttributeResult]:
    return [a for a in attributes if a.lead]


def _attribute_lines(attributes: list[AttributeResult], by_reason: dict[str, list[AttributeResult]],
                     total: Rate, top: int) -> list[str]:
    """Findings in order of how sharp they are, each said once (an attribute and its values).

    Something *every* failure shares comes first. Then each kind of failure's own best attribute:
    when a run fails in several ways the causes usually differ (a route truncates, load cuts), and
    the pooled search blurs them. Then the pooled findings not yet said.
    """
    if total.failed == 0:
        return []
    pooled = _leads(attributes)
    ordered = [a for a in pooled if a.complete]
    ordered += [lead for attrs in by_reason.values() for lead in _leads(attrs)[:1]]
    ordered += [a for a in pooled if not a.complete]
    said: set[tuple[str, tuple[str, ...]]] = set()
    lines: list[str] = []
    for a in ordered:
        key = (a.key, a.best.values if a.best else ())
        if key in said or a.headline is None:
            continue
        said.add(key)
        lines.append(a.headline)
    if not lines:
        return [headlines.no_signal(attributes)]
    by_product = headlines.explained(attributes)
    return lines[:top] + ([by_product] if by_product else [])


def _count(items: Iterable[str | None], weights: Sequence[int]) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for item, w in zip(items, weights, strict=True):
        if item is not None:
            counts[item] += w
    return ranked(counts)


def _count_kinds(cells: Sequence[Cell], idx: Iterable[int]) -> dict[str, int]:
    """Streams carrying each finding kind (a stream with two findings of a kind counts once)."""
    counts: Counter[str] = Counter()
    for i in idx:
        for kind in set(cells[i].kinds):
            counts[kind] += cells[i].weight
    return ranked(counts)


def _groups(cells: Sequence[Cell], reasons: Sequence[str | None],
            key: Callable[[Cell], tuple[str, int | None]]) -> list[GroupRow]:
    by: dict[tuple[str, int | None], list[int]] = defaultdict(list)
    for i, c in enumerate(cells):
        by[key(c)].append(i)
    rows = []
    for (arm, level), idx in sorted(by.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
        w = [cells[i].weight for i in idx]
        rows.append(GroupRow(
            arm=arm, concurrency=level, api=",".join(sorted({cells[i].api for i in idx})),
            rate=Rate.of(sum(cells[i].weight for i in idx if reasons[i] is not None), sum(w)),
            endings=_count((cells[i].ending for i in idx), w),
            findings=_count_kinds(cells, idx),
            failures=_count((reasons[i] for i in idx), w),
        ))
    return rows


def _comparisons(groups: list[tuple[str, Rate]], kind: str = "arm") -> list[ArmComparison]:
    """Fisher's exact test of each pair of groups (arms, or apis), or each against the best one."""
    if len(groups) < 2:
        return []
    if len(groups) <= MAX_PAIRWISE_ARMS:
        pairs = list(itertools.combinations(groups, 2))
    else:
        best = min(groups, key=lambda g: g[1].value)
        pairs = [(best, g) for g in groups if g is not best]
    out = []
    for (name_a, a), (name_b, b) in pairs:
        test = fisher(a.failed, a.total - a.failed, b.failed, b.total - b.failed)
        out.append(ArmComparison(name_a, name_b, a, b, test.odds_ratio, test.p, test.log10_p, kind))
    return out


def _api_rows(cells: Sequence[Cell], reasons: Sequence[str | None]) -> list[ApiRow]:
    """Rates per protocol, when the run spoke more than one (otherwise the arm rows say it all)."""
    by: dict[str, list[int]] = defaultdict(list)
    for i, c in enumerate(cells):
        by[c.api].append(i)
    if len(by) < 2:
        return []
    out = []
    for api, idx in sorted(by.items()):
        w = [cells[i].weight for i in idx]
        out.append(ApiRow(api=api, arms=tuple(sorted({cells[i].arm for i in idx})),
                          rate=Rate.of(sum(cells[i].weight for i in idx if reasons[i] is not None), sum(w)),
                          endings=_count((cells[i].ending for i in idx), w),
                          failures=_count((reasons[i] for i in idx), w)))
    return out


def _within_api(reader: Reader, flt: Filter, policy: Policy,
                apis: list[ApiRow]) -> dict[str, list[AttributeResult]]:
    """The attribute search on each protocol's own streams: a route that breaks only on the messages
    path is plain there, while pooled with healthy chat streams it is diluted. Each api is counted
    again on its own, because its time windows and headers are its own."""
    out: dict[str, list[AttributeResult]] = {}
    for row in apis:
        if row.rate.failed < MIN_REASON_FAILURES:
            continue
        cs = reader.cells(flt.narrowed("api", row.api))
        reasons = [reason_of(c.ending, c.kinds, policy) for c in cs.cells]
        found = search(columns(cs), reasons, [c.weight for c in cs.cells])
        out[row.api] = [_within_headline(a, row.api) for a in found]
    return out


def _within_headline(res: AttributeResult, api: str) -> AttributeResult:
    text = headlines.attribute(res)
    return replace(res, headline=None if text is None else f"within {api}: {text}")


def _within_api_lines(within_api: dict[str, list[AttributeResult]], pooled: list[AttributeResult],
                      by_reason: dict[str, list[AttributeResult]]) -> list[str]:
    """Each api's own best finding, when no pooled finding already named that attribute."""
    said = {a.key for a in _leads(pooled)}
    said |= {lead.key for attrs in by_reason.values() for lead in _leads(attrs)[:1]}
    lines = []
    for attrs in within_api.values():
        lead = next(iter(_leads(attrs)), None)
        if lead is not None and lead.key not in said and lead.headline is not None:
            lines.append(lead.headline)
    return lines


def _timeline(cells: Sequence[Cell], reasons: Sequence[str | None], width: float | None) -> list[TimeBucket]:
    if width is None:
        return []
    buckets: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0])
    for c, reason in zip(cells, reasons, strict=True):
        if c.win is None:
            continue
        bucket = buckets[(c.arm, c.win)]
        bucket[0] += c.weight
        bucket[1] += c.weight if reason is not None else 0
    return [TimeBucket(arm, b * width, (b + 1) * width, n, f)
            for (arm, b), (n, f) in sorted(buckets.items())]
