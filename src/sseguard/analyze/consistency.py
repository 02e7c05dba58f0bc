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
from dataclasses import dataclass, field, replace
from typing import Any

from sseguard.analyze.attributes import search
from sseguard.analyze.columns import columns
from sseguard.analyze.counts import CellSet
from sseguard.analyze.facts import DIVERGED_EDGES, diverged_label
from sseguard.analyze.model import AttributeResult
from sseguard.analyze.stats import Rate

#: The outcome the search gives an answer that differs from its reference.
DIVERGED = "diverged"
IDENTICAL = "identical"
REFERENCE = "reference"
#: The divergence buckets, earliest first (the first one is "early").
BUCKETS = tuple(diverged_label(lo, hi) for lo, hi in zip(DIVERGED_EDGES, (*DIVERGED_EDGES[1:], None),
                                                         strict=True))


@dataclass(frozen=True, slots=True)
class LevelDivergence:
    """One arm at one concurrency level: answers compared, diverged (with its interval), and where."""

    arm: str
    concurrency: int
    rate: Rate  # diverged of compared
    positions: dict[str, int]  # diverged answers per bucket of ``BUCKETS``

    @property
    def early(self) -> int:
        """Diverged within the first ``facts.EARLY_TOKENS`` tokens."""
        return self.positions.get(BUCKETS[0], 0)

    def to_dict(self) -> dict[str, Any]:
        return {"arm": self.arm, "concurrency": self.concurrency, "compared": self.rate.total,
                "diverged": self.rate.failed, "rate": self.rate.to_dict(), "early": self.early,
                "positions": dict(self.positions)}


@dataclass(frozen=True, slots=True)
class Consistency:
    """The consistency workload's answers in a run: divergence per level, and what the diverged share."""

    levels: list[LevelDivergence]
    total: Rate
    #: Per arm, its attributes ranked with "diverged" as the outcome: each arm is its own deployment,
    #: so a healthy arm beside a corrupting one names nothing (pooled, "arm" would be the finding).
    attributes: dict[str, list[AttributeResult]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"compared": self.total.total, "diverged": self.total.failed,
                "levels": [lv.to_dict() for lv in self.levels],
                "attributes": {arm: [a.to_dict() for a in found]
                               for arm, found in self.attributes.items()}}


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
