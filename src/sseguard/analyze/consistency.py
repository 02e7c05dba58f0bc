"""Answers that change under load: the consistency workload's divergences, per level and per attribute.

The ``consistency`` workload (``probe.consistency``) sends fixed prompts with deterministic sampling,
first at concurrency 1 (the reference), then at each level of a sweep, and records how each answer
compares with its prompt's reference (``Record.consistency``, ``diverged_token``). A divergence is an
outcome to count, never a failed stream: a healthy engine whose kernels are not batch-invariant
changes a few answers, late; a corrupting cache changes many, early, and only on cached prompts. So
the analysis counts them apart from the failures: the divergence rate per arm and level with its
interval, where the answers diverged (``facts.DIVERGED_EDGES``: the first bucket is the first 32
tokens), and the attribute search with "diverged" as the outcome, so that "answers change early at
60 sessions, only on cached prompts" is one table.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace

from sseguard.analyze.attributes import search
from sseguard.analyze.columns import columns
from sseguard.analyze.counts import CellSet
from sseguard.analyze.facts import DIVERGED_BUCKETS
from sseguard.analyze.model import AttributeResult, Consistency, LevelDivergence
from sseguard.analyze.stats import Rate

#: The outcome the search gives an answer that differs from its reference.
DIVERGED = "diverged"
IDENTICAL = "identical"
REFERENCE = "reference"
BUCKETS = DIVERGED_BUCKETS


def analyze_consistency(cs: CellSet,
                        headline: Callable[[AttributeResult], AttributeResult]) -> Consistency | None:
    """The divergences of the compared answers in ``cs``, or None when the run has none."""
    compared = [c for c in cs.cells if c.div is not None and c.div != REFERENCE]
    if not compared:
        return None
    reasons = [None if c.div == IDENTICAL else DIVERGED for c in compared]
    weights = [c.weight for c in compared]
    per: dict[tuple[str, int], list[int]] = {}
    where: dict[tuple[str, int], Counter[str]] = {}
    for c, reason in zip(compared, reasons, strict=True):
        key = (c.arm, c.concurrency)
        counts = per.setdefault(key, [0, 0])
        counts[1] += c.weight
        if reason is not None:
            counts[0] += c.weight
            where.setdefault(key, Counter())[str(c.div)] += c.weight
    levels = [LevelDivergence(arm, level, Rate.of(d, n),
                              {b: where.get((arm, level), Counter())[b] for b in BUCKETS})
              for (arm, level), (d, n) in sorted(per.items())]
    found: dict[str, list[AttributeResult]] = {}
    for arm in sorted({c.arm for c in compared}):
        mine = [i for i, c in enumerate(compared) if c.arm == arm]
        cells = [compared[i] for i in mine]
        found[arm] = [headline(a) for a in search(columns(replace(cs, cells=cells)),
                                                  [reasons[i] for i in mine], [weights[i] for i in mine])]
    total = Rate.of(sum(d for d, _ in per.values()), sum(n for _, n in per.values()))
    return Consistency(levels=levels, total=total, attributes=found)
