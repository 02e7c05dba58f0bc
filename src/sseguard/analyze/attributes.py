"""The attribute search: which recorded attribute separates the failing streams from the healthy ones.

For each attribute (see ``columns``) the search compares failure rates between its values and looks for
the set of values that concentrates the failures best:

* unordered attributes (response-id prefix, header values, arm, workload): each single value, and the
  values sorted by failure rate taken 2, 3, … at a time (for a binary outcome that order contains the
  best split of the categories);
* ordered attributes (time window, concurrency, reuse index, prompt size): every contiguous range of
  values, because faults come in windows ("minutes 2–3") and thresholds ("concurrency 32 and up").

Only sets whose failure rate is higher than the rest's count. Each candidate is a 2×2 table (in/out ×
failed/healthy) judged by Fisher's exact test; an attribute's best split is the one with the smallest
p-value (ties: larger separation, then fewer values).

**Ranking rule.** Attributes are ranked by the best split's p-value *adjusted* for the number of splits
tried on that attribute (Bonferroni), so an attribute with 24 time windows (300 ranges to fit noise
with) must show stronger evidence than one with 5 concurrency levels; ties are broken by separation
(failure rate inside minus outside), then by a fixed order of directness (api, id prefix, concurrency, time
window, arm, workload, prompt size, reuse index, headers). An attribute is *significant* when its
adjusted p is below 0.05 divided by the number of attributes searched. When two significant attributes
pick nearly the same streams (Jaccard index ≥ 0.8 — a sweep runs its concurrency levels one after
another, so a time window can mirror a concurrency level; a ``x-backend`` header can mirror the id
prefix) the data cannot tell them apart: the simpler one (a recorded attribute before a header, then
fewer splits tried, then the more direct) is ranked first and names the others in ``also``; they follow
it with ``confounded_with`` set. Finally a significant attribute that adds nothing once a stronger one
is held fixed (see ``_explained``) gets ``explained_by`` and moves behind the findings that stand on
their own.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

from sseguard.analyze.columns import Column
from sseguard.analyze.model import AttributeResult, Split, ValueRow
from sseguard.analyze.stats import Rate, cmh_log10_p, fisher, fisher_log10_p, ranked

ALPHA = 0.05
CONFOUNDED_JACCARD = 0.8
#: A lead whose failing streams are at least this share inside stronger splits may be their by-product.
CONTAINED_SHARE = 0.8


@dataclass(frozen=True, slots=True)
class _Found:
    result: AttributeResult
    members: frozenset[int]  # cells inside the best split
    observed: frozenset[int]  # cells with a value for the attribute
    priority: int
    weights: Sequence[int]  # records per cell

    @property
    def key(self) -> str:
        return self.result.key

    @property
    def tried(self) -> int:
        return self.result.best.tried if self.result.best else 1


def search(cols: Sequence[Column], reasons: Sequence[str | None],
           weights: Sequence[int]) -> list[AttributeResult]:
    """Every column compared and ranked; ``reasons[i]`` is why the records of cell i failed (None if
    they passed), ``weights[i]`` how many records the cell holds."""
    found = [f for f in (_search_one(col, reasons, weights) for col in cols) if f is not None]
    return _rank(found, [r is not None for r in reasons])


def _search_one(col: Column, reasons: Sequence[str | None], weights: Sequence[int]) -> _Found | None:
    n_v: Counter[str] = Counter()
    f_v: Counter[str] = Counter()
    why: dict[str, Counter[str]] = {}
    unobserved_failures = 0
    for label, reason, w in zip(col.labels, reasons, weights, strict=True):
        if label is None:
            unobserved_failures += w if reason is not None else 0
            continue
        n_v[label] += w
        if reason is not None:
            f_v[label] += w
            why.setdefault(label, Counter())[reason] += w
    values = [v for v in col.order if n_v[v] > 0]
    if len(values) < 2:
        return None
    n_all, f_all = sum(n_v.values()), sum(f_v.values())
    rows = []
    for v in values:
        a, n = f_v[v], n_v[v]
        test = fisher(a, n - a, f_all - a, (n_all - n) - (f_all - a))
        rows.append(ValueRow(v, Rate.of(a, n), a / f_all if f_all else 0.0, test.p, test.log10_p,
                             ranked(why.get(v, Counter()))))
    candidates = _candidates(col.ordered, values, n_v, f_v)
    best: tuple[float, float, int, tuple[str, ...]] | None = None
    if 0 < f_all < n_all:
        for cand in candidates:
            n_in = sum(n_v[v] for v in cand)
            f_in = sum(f_v[v] for v in cand)
            n_out, f_out = n_all - n_in, f_all - f_in
            separation = f_in / n_in - f_out / n_out
            if separation <= 0:
                continue
            lp = fisher_log10_p(f_in, n_in - f_in, f_out, n_out - f_out)
            key = (lp, -separation, len(cand), cand)
            if best is None or key < best:
                best = key
    split = None
    members: frozenset[int] = frozenset()
    if best is not None:
        inside = set(best[3])
        rest = tuple(v for v in values if v not in inside)
        split = _split(col, best[3], rest, n_v, f_v, why, len(candidates), n_all, f_all)
        members = frozenset(i for i, label in enumerate(col.labels) if label in inside)
    result = AttributeResult(key=col.key, ordered=col.ordered, observed=n_all, failed=f_all,
                             unobserved_failures=unobserved_failures, values=tuple(rows), best=split,
                             significant=False)
    observed = frozenset(i for i, label in enumerate(col.labels) if label is not None)
    return _Found(result, members, observed, col.priority, weights)


def _candidates(ordered: bool, values: list[str], n_v: Counter[str],
                f_v: Counter[str]) -> list[tuple[str, ...]]:
    k = len(values)
    if ordered:
        return [tuple(values[i:j + 1]) for i in range(k) for j in range(i, k) if j - i + 1 < k]
    by_rate = sorted(values, key=lambda v: (-f_v[v] / n_v[v], values.index(v)))
    seen: set[frozenset[str]] = set()
    out: list[tuple[str, ...]] = []
    for cand in [(v,) for v in values] + [tuple(by_rate[:size]) for size in range(2, k)]:
        if frozenset(cand) not in seen:
            seen.add(frozenset(cand))
            out.append(cand)
    return out


def _split(col: Column, values: tuple[str, ...], rest: tuple[str, ...], n_v: Counter[str],
           f_v: Counter[str], why: dict[str, Counter[str]], tried: int, n_all: int,
           f_all: int) -> Split:
    n_in = sum(n_v[v] for v in values)
    f_in = sum(f_v[v] for v in values)
    n_out, f_out = n_all - n_in, f_all - f_in
    test = fisher(f_in, n_in - f_in, f_out, n_out - f_out)
    reasons: Counter[str] = Counter()
    for v in values:
        reasons.update(why.get(v, Counter()))
    inside, outside = Rate.of(f_in, n_in), Rate.of(f_out, n_out)
    return Split(values=values, rest=rest, inside=inside, outside=outside,
                 coverage=f_in / f_all, separation=inside.value - outside.value, p=test.p,
                 log10_p=test.log10_p, log10_p_adj=min(0.0, test.log10_p + math.log10(tried)),
                 tried=tried, failures_in=ranked(reasons), label=col.label(values),
                 phrase_in=col.had(values),
                 phrase_out=col.noun(rest))


def _rank(found: list[_Found], failed: Sequence[bool]) -> list[AttributeResult]:
    if not found:
        return []
    threshold = math.log10(ALPHA / len(found))

    def strength(f: _Found) -> tuple[float, float, int]:
        best = f.result.best
        return (best.log10_p_adj, -best.separation, f.priority) if best else (0.0, 0.0, f.priority)

    marked = [replace(f, result=replace(f.result, significant=f.result.best is not None
                                        and f.result.best.log10_p_adj < threshold))
              for f in found]
    ordered = sorted(marked, key=lambda f: (not f.result.significant, strength(f)))
    # Group significant attributes that select (nearly) the same streams; keep the strongest order
    # of groups, and lead each group with its simplest member.
    groups: list[list[_Found]] = []
    for f in (f for f in ordered if f.result.significant):
        for group in groups:
            if _jaccard(group[0].members, f.members, f.weights) >= CONFOUNDED_JACCARD:
                group.append(f)
                break
        else:
            groups.append([f])
    # A header leads only when no recorded attribute picks the same streams: every response has an id
    # prefix, while a routing header (`x-backend`, chaos's own `x-sseguard-route`) is the server's
    # choice to send, and with each protocol's own prefixes it would win on fewer splits alone.
    leads = [min(group, key=lambda f: (f.key.startswith("header:"), f.tried, f.priority))
             for group in groups]
    explained = _explained(leads, failed, threshold)
    out: list[AttributeResult] = []
    for only_explained in (False, True):
        for lead, group in zip(leads, groups, strict=True):
            if (lead.key in explained) != only_explained:
                continue
            others = [f for f in group if f is not lead]
            out.append(replace(lead.result, also=tuple(f.key for f in others),
                               explained_by=explained.get(lead.key)))
            out.extend(replace(f.result, confounded_with=lead.key) for f in others)
    out.extend(f.result for f in ordered if not f.result.significant)
    return out


def _explained(leads: list[_Found], failed: Sequence[bool], threshold: float) -> dict[str, str]:
    """Leads that add nothing once stronger ones are held fixed, mapped to those (``"a + b"``).

    In a sweep the connection reuse index grows with time and load, so a window of failures and a
    load threshold also make some reuse bucket look bad. Two tests say "by-product", either enough:
    held fixed (a Cochran–Mantel–Haenszel test within the strata of the stronger splits) the reuse
    bucket no longer matters; or its failing streams are mostly ones the stronger splits already
    hold, and among the streams no stronger split holds it separates nothing (``_residual``). Only a
    higher-ranked lead explains a lower one; one lead alone is tried first, then all together.
    """
    out: dict[str, str] = {}
    kept: list[_Found] = []
    for b in leads:
        margin = math.log10(b.tried)

        def explains(causes: list[_Found], b: _Found = b, margin: float = margin) -> bool:
            return (_given(b, causes, failed) + margin >= threshold
                    or _residual(b, causes, failed) + margin >= threshold)

        alone = next((a for a in kept if explains([a])), None)
        if alone is not None:
            out[b.key] = alone.key
        elif len(kept) > 1 and explains(kept):
            out[b.key] = " + ".join(a.key for a in kept)
        else:
            kept.append(b)
    return out


def _residual(b: _Found, causes: list[_Found], failed: Sequence[bool]) -> float:
    """log10 p of b's split among the streams none of ``causes`` selects, or 0 (nothing to say) when
    fewer than ``CONTAINED_SHARE`` of b's failing streams are ones the causes already hold."""
    covered = frozenset().union(*(a.members for a in causes))
    w = b.weights
    failing = [i for i in b.members if failed[i]]
    inside = sum(w[i] for i in failing if i in covered)
    if not failing or inside < CONTAINED_SHARE * sum(w[i] for i in failing):
        return -math.inf
    cell = [0, 0, 0, 0]
    for i in b.observed - covered:
        cell[(0 if i in b.members else 2) + (0 if failed[i] else 1)] += w[i]
    f_in, h_in, f_out, h_out = cell
    if f_in + h_in == 0 or f_out + h_out == 0 or f_in / (f_in + h_in) <= f_out / (f_out + h_out):
        return 0.0  # no excess left where the causes are absent
    return fisher_log10_p(f_in, h_in, f_out, h_out)


def _given(b: _Found, fixed: list[_Found], failed: Sequence[bool]) -> float:
    """log10 p that b's split still has excess failures within the strata of the ``fixed`` splits."""
    cells: dict[tuple[int, ...], list[int]] = {}
    for i in b.observed:
        stratum = tuple(2 if i not in a.observed else int(i in a.members) for a in fixed)
        cell = cells.setdefault(stratum, [0, 0, 0, 0])
        cell[(0 if i in b.members else 2) + (0 if failed[i] else 1)] += b.weights[i]
    return cmh_log10_p([(t[0], t[1], t[2], t[3]) for t in cells.values()])


def _jaccard(a: frozenset[int], b: frozenset[int], weights: Sequence[int]) -> float:
    union = sum(weights[i] for i in a | b)
    return sum(weights[i] for i in a & b) / union if union else 0.0
