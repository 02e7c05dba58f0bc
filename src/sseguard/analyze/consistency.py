"""Answers that change under load: benign divergence told from corruption.

The ``consistency`` workload (``probe.consistency``) sends fixed prompts with deterministic sampling,
first at concurrency 1 (the reference), then at each level of a sweep, and records how each answer
compares with its prompt's reference: identical, or diverged — with which prompt it answered, a
digest of its text and two flags (``overwritten``: a span overwritten in place, the text agreeing with
the reference again position for position after it; ``nontext``: the stream carried text that is
no text). A divergence is never a failed stream. What the analysis decides is whether it is benign.

Real engines are not batch-invariant (measured on vLLM with bfloat16, ``docs/analyze.md``): a
near-tie token tips at another batch size, and the prompt's answer goes its own fluent way — to the
same alternative every time. Repeats of one deterministic prompt are therefore one observation, not
many. So the rule is per arm and prompt, over its distinct diverged answers (*alternatives*):

- an alternative is **garbled** when it carries non-text (``nontext``), when a span of it was
  overwritten in place (``overwritten``), or when it came once to a prompt that was answered
  ``VARYING`` or more different ways (a race writes new bytes each time; a near tie has one or two
  alternatives);
- every other alternative is **benign**: it is counted once per prompt, and never searched for a
  cause (batch variance has none worth a finding; and in today's workload cached and long prompts are
  the same split by construction, so a cause found there would say nothing).

The corruption is the garbled answers: their rate per level, and the attribute search with "garbled"
as the outcome, per arm (a healthy arm beside a corrupting one names nothing). Records written before
the probe identified the answer (``diverged`` alone) are benign and unidentified.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import replace

from sseguard.analyze.attributes import search
from sseguard.analyze.columns import columns
from sseguard.analyze.counts import Cell, CellSet
from sseguard.analyze.facts import DIVERGED_BUCKETS
from sseguard.analyze.model import Alternative, AttributeResult, Consistency, LevelDivergence
from sseguard.analyze.stats import Rate

#: The outcome the search gives a garbled answer.
GARBLED = "garbled"
IDENTICAL = "identical"
REFERENCE = "reference"
BUCKETS = DIVERGED_BUCKETS
#: A prompt answered this many different ways is no near tie: its answers seen once are garbled.
VARYING = 3


def _parts(div: str) -> tuple[str, str | None, str | None, tuple[str, ...]]:
    """A diverged cell's label: its bucket, and the prompt, digest and flags the probe recorded."""
    bucket, _, rest = div.partition(":")
    if not rest:
        return bucket, None, None, ()
    prompt, _, rest = rest.partition(":")
    digest, _, flags = rest.partition(":")
    return bucket, prompt, digest, tuple(f for f in flags.split(":") if f)


def judge(cells: list[Cell]) -> dict[tuple[str, str], Alternative]:
    """Every distinct diverged answer of ``cells`` (by arm and label), with its verdict."""
    answers: Counter[tuple[str, str, str]] = Counter()
    flags: dict[tuple[str, str, str], tuple[str, ...]] = {}
    labels: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for c in cells:
        _, prompt, digest, marks = _parts(str(c.div))
        if prompt is None or digest is None:
            continue
        key = (c.arm, prompt, digest)
        answers[key] += c.weight
        flags[key] = tuple(sorted(set(flags.get(key, ())) | set(marks)))
        labels[key].append(str(c.div))
    ways = Counter((arm, prompt) for arm, prompt, _ in answers)
    out: dict[tuple[str, str], Alternative] = {}
    for key, count in answers.items():
        arm, prompt, digest = key
        marks = flags[key]
        if "nontext" in marks:
            why = "nontext"
        elif "overwritten" in marks:
            why = "overwritten"
        elif ways[(arm, prompt)] >= VARYING and count == 1:
            why = "varying"
        else:
            why = "stable" if count > 1 else "once"
        alt = Alternative(arm, prompt, digest, count, marks, why not in ("stable", "once"), why)
        for label in labels[key]:
            out[(arm, label)] = alt
    return out


def analyze_consistency(cs: CellSet,
                        headline: Callable[[AttributeResult], AttributeResult]) -> Consistency | None:
    """The divergences of the compared answers in ``cs``, judged, or None when the run has none."""
    compared = [c for c in cs.cells if c.div is not None and c.div != REFERENCE]
    if not compared:
        return None
    verdicts = judge([c for c in compared if c.div != IDENTICAL])
    garbled = [c.div != IDENTICAL and (v := verdicts.get((c.arm, str(c.div)))) is not None
               and v.garbled for c in compared]
    per: dict[tuple[str, int], list[int]] = {}
    where: dict[tuple[str, int], Counter[str]] = {}
    for c, is_garbled in zip(compared, garbled, strict=True):
        key = (c.arm, c.concurrency)
        counts = per.setdefault(key, [0, 0, 0])
        counts[1] += c.weight
        if c.div != IDENTICAL:
            counts[0] += c.weight
            counts[2] += c.weight if is_garbled else 0
            where.setdefault(key, Counter())[_parts(str(c.div))[0]] += c.weight
    levels = [LevelDivergence(arm, level, Rate.of(d, n),
                              {b: where.get((arm, level), Counter())[b] for b in BUCKETS}, g)
              for (arm, level), (d, n, g) in sorted(per.items())]
    found: dict[str, list[AttributeResult]] = {}
    reasons = [GARBLED if g else None for g in garbled]
    weights = [c.weight for c in compared]
    for arm in sorted({c.arm for c in compared}):
        mine = [i for i, c in enumerate(compared) if c.arm == arm]
        if not any(garbled[i] for i in mine):
            found[arm] = []
            continue
        cells = [compared[i] for i in mine]
        found[arm] = [headline(a) for a in search(columns(replace(cs, cells=cells)),
                                                  [reasons[i] for i in mine], [weights[i] for i in mine])]
    total = Rate.of(sum(d for d, _, _ in per.values()), sum(n for _, n, _ in per.values()))
    corrupted = Rate.of(sum(g for _, _, g in per.values()), total.total)
    alternatives = sorted({(a.arm, a.prompt, a.digest): a for a in verdicts.values()}.values(),
                          key=lambda a: (a.arm, a.prompt, -a.answers, a.digest))
    return Consistency(levels=levels, total=total, attributes=found, garbled=corrupted,
                       alternatives=alternatives)
