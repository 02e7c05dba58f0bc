"""Judge a set of records under a policy and build the ``Analysis``: tables, ranked attributes, headlines.

Records keep the full verdict facts whatever policy was in force when they were written, so the same
run can be judged again here under another policy (a gateway that never sends ``[DONE]``, judged
``no-done-ok``) without probing again.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from sseguard.analyze import headlines
from sseguard.analyze.attributes import search
from sseguard.analyze.columns import columns, time_offsets
from sseguard.analyze.model import Analysis, ArmComparison, AttributeResult, GroupRow, TimeBucket
from sseguard.analyze.stats import Rate, fisher
from sseguard.errors import ConfigError
from sseguard.policy import STRICT, Policy
from sseguard.record import Record
from sseguard.verdict import Ending

#: A kind of failure gets its own attribute search from this many streams on.
MIN_REASON_FAILURES = 5
#: Arm-vs-arm tests are all pairs up to this many arms; beyond it, each arm against the best one.
MAX_PAIRWISE_ARMS = 6


def failure_reason(record: Record, policy: Policy) -> str | None:
    """Why ``record`` fails under ``policy``: its ending, else its first untolerated finding.

    None when it passes.
    """
    if not record.failed_under(policy):
        return None
    if record.ending != Ending.COMPLETE and record.ending not in policy.tolerate:
        return record.ending
    return next((k for k in record.finding_kinds if k not in policy.tolerate), record.ending)


def analyze(records: Sequence[Record], policy: Policy = STRICT, *, top: int = 5) -> Analysis:
    """The whole analysis of ``records`` under ``policy``; ``top`` bounds the attribute headlines."""
    if not records:
        raise ConfigError("no records to analyze")
    if top < 1:
        raise ConfigError(f"--top must be at least 1, got {top}")
    reasons = [failure_reason(r, policy) for r in records]
    arms = _groups(records, reasons, lambda r: (r.arm, None))
    levels = _groups(records, reasons, lambda r: (r.arm, r.concurrency))
    cols = columns(records)
    attributes = [_with_headline(a) for a in search(cols, reasons)]
    failures = _count(reasons)
    by_reason: dict[str, list[AttributeResult]] = {}
    if len(failures) > 1:
        for reason, count in failures.items():
            if count >= MIN_REASON_FAILURES:
                alone = [r if r == reason else None for r in reasons]
                by_reason[reason] = [_with_headline(a, reason) for a in search(cols, alone)]
    offsets, width = time_offsets(records)
    comparisons = _comparisons(arms)
    total = Rate.of(sum(r is not None for r in reasons), len(records))
    lines = [headlines.overall(total, failures, policy.name)]
    lines.extend(_attribute_lines(attributes, by_reason, total, top))
    level_line = headlines.by_level(levels, len(arms))
    if level_line:
        lines.append(level_line)
    lines.extend(headlines.comparison(c) for c in comparisons)
    return Analysis(
        policy=policy, total=total,
        endings=_count(r.ending for r in records),
        findings=_count(k for r in records for k in set(r.finding_kinds)),
        failures=failures, arms=arms, levels=levels, comparisons=comparisons,
        attributes=attributes, by_reason=by_reason,
        timeline=_timeline(records, reasons, offsets, width), bucket_s=width,
        span_s=max((o for o in offsets if o is not None), default=0.0),
        runs=sorted({r.run_id for r in records}), headlines=lines,
    )


def _with_headline(res: AttributeResult, reason: str | None = None) -> AttributeResult:
    return replace(res, headline=headlines.attribute(res, reason))


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


def _count(items: Iterable[str | None]) -> dict[str, int]:
    counts: Counter[str] = Counter(i for i in items if i is not None)
    return dict(counts.most_common())


def _groups(records: Sequence[Record], reasons: Sequence[str | None],
            key: Callable[[Record], tuple[str, int | None]]) -> list[GroupRow]:
    by: dict[tuple[str, int | None], list[int]] = defaultdict(list)
    for i, r in enumerate(records):
        by[key(r)].append(i)
    rows = []
    for (arm, level), idx in sorted(by.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
        rows.append(GroupRow(
            arm=arm, concurrency=level,
            rate=Rate.of(sum(reasons[i] is not None for i in idx), len(idx)),
            endings=_count(records[i].ending for i in idx),
            findings=_count(k for i in idx if records[i].findings
                            for k in set(records[i].finding_kinds)),
            failures=_count(reasons[i] for i in idx),
        ))
    return rows


def _comparisons(arms: list[GroupRow]) -> list[ArmComparison]:
    if len(arms) < 2:
        return []
    if len(arms) <= MAX_PAIRWISE_ARMS:
        pairs = list(itertools.combinations(arms, 2))
    else:
        best = min(arms, key=lambda g: g.rate.value)
        pairs = [(best, g) for g in arms if g is not best]
    out = []
    for a, b in pairs:
        test = fisher(a.rate.failed, a.rate.total - a.rate.failed, b.rate.failed,
                      b.rate.total - b.rate.failed)
        out.append(ArmComparison(a.arm, b.arm, a.rate, b.rate, test.odds_ratio, test.p, test.log10_p))
    return out


def _timeline(records: Sequence[Record], reasons: Sequence[str | None], offsets: list[float | None],
              width: float | None) -> list[TimeBucket]:
    if width is None:
        return []
    cells: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0])
    for r, reason, offset in zip(records, reasons, offsets, strict=True):
        if offset is None:
            continue
        cell = cells[(r.arm, int(offset // width))]
        cell[0] += 1
        cell[1] += reason is not None
    return [TimeBucket(arm, b * width, (b + 1) * width, n, f)
            for (arm, b), (n, f) in sorted(cells.items())]
