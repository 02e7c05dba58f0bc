"""What an analysis found, as plain frozen data: tables of rates, the ranked attributes, the headlines.

Everything here is computed once by ``sseguard.analyze.analyze`` and only read by the reports, so the
terminal summary, the HTML file, the PNGs and ``--json`` all show the same numbers. ``to_dict()`` gives
the JSON form; attribute keys in it are stable (``id_prefix``, ``header:<name>``, ``time_window``,
``reuse_index``, ``prompt_size``, ``concurrency``, ``api``, ``arm``, ``workload``) so scripts can rely on
them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sseguard.analyze.facts import DIVERGED_BUCKETS
from sseguard.analyze.stats import Rate
from sseguard.core.policy import Policy

#: The outcome the healing search gives a healed stream that then passed (``Healing``).
HEALED_OUTCOME = "healed"


@dataclass(frozen=True, slots=True)
class GroupRow:
    """One arm (``concurrency`` None) or one (arm, concurrency level): counts and the failure rate."""

    arm: str
    concurrency: int | None
    rate: Rate
    endings: dict[str, int]
    findings: dict[str, int]  # streams carrying each finding kind
    failures: dict[str, int]  # why the failing streams failed under the policy
    api: str = ""  # the protocol(s) the arm's streams spoke, comma-separated (an arm speaks one)

    @property
    def requests(self) -> int:
        return self.rate.total

    def to_dict(self) -> dict[str, Any]:
        return {"arm": self.arm, "api": self.api, "concurrency": self.concurrency,
                "requests": self.requests, **self.rate.to_dict(), "endings": self.endings,
                "findings": self.findings, "failures": self.failures}


@dataclass(frozen=True, slots=True)
class ApiRow:
    """All streams of one protocol (``api``), over every arm that speaks it."""

    api: str
    arms: tuple[str, ...]
    rate: Rate
    endings: dict[str, int]
    failures: dict[str, int]

    @property
    def requests(self) -> int:
        return self.rate.total

    def to_dict(self) -> dict[str, Any]:
        return {"api": self.api, "arms": list(self.arms), "requests": self.requests,
                **self.rate.to_dict(), "endings": self.endings, "failures": self.failures}


@dataclass(frozen=True, slots=True)
class ArmComparison:
    """Fisher's exact test of one arm's failure count against another's (``kind`` ``api``: one
    protocol's streams against another's; ``arm_a``/``arm_b`` are then the two apis)."""

    arm_a: str
    arm_b: str
    rate_a: Rate
    rate_b: Rate
    odds_ratio: float | None
    p: float
    log10_p: float
    kind: str = "arm"  # arm | api

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "arm_a": self.arm_a, "arm_b": self.arm_b,
                "a": self.rate_a.to_dict(), "b": self.rate_b.to_dict(),
                "odds_ratio": self.odds_ratio, "p": self.p, "log10_p": self.log10_p}


@dataclass(frozen=True, slots=True)
class ValueRow:
    """Streams with one value of an attribute, tested against all other (observed) streams."""

    value: str
    rate: Rate
    share: float  # share of the attribute's observed failures that carry this value
    p: float
    log10_p: float
    failures: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "requests": self.rate.total, **self.rate.to_dict(),
                "share_of_failures": self.share, "p": self.p, "log10_p": self.log10_p,
                "failures": self.failures}


@dataclass(frozen=True, slots=True)
class Split:
    """The set of an attribute's values that best separates failing from healthy streams."""

    values: tuple[str, ...]
    rest: tuple[str, ...]
    inside: Rate
    outside: Rate
    coverage: float  # share of the attribute's observed failures inside the set
    separation: float  # inside rate minus outside rate
    p: float
    log10_p: float
    log10_p_adj: float  # Bonferroni over the ``tried`` splits of this attribute
    tried: int
    failures_in: dict[str, int]
    label: str  # the values in short: "2:00–4:00", "32 or 60"
    phrase_in: str  # "had response ids starting `gw-`"
    phrase_out: str | None  # "numeric response ids"; None when the rest is too varied to name

    @property
    def p_adj(self) -> float:
        return min(1.0, float(10.0 ** self.log10_p_adj))

    def to_dict(self) -> dict[str, Any]:
        return {"values": list(self.values), "rest": list(self.rest), "inside": self.inside.to_dict(),
                "outside": self.outside.to_dict(), "coverage": self.coverage,
                "separation": self.separation, "p": self.p, "log10_p": self.log10_p,
                "p_adj": self.p_adj, "log10_p_adj": self.log10_p_adj, "splits_tried": self.tried,
                "failures_in": self.failures_in, "label": self.label, "phrase_in": self.phrase_in,
                "phrase_out": self.phrase_out}


@dataclass(frozen=True, slots=True)
class AttributeResult:
    """One attribute's comparison: per-value rates, its best split, and where it ranks."""

    key: str
    ordered: bool
    observed: int  # streams for which the attribute has a value
    failed: int  # failing streams among them
    unobserved_failures: int  # failing streams without a value (e.g. no response id on a 503)
    values: tuple[ValueRow, ...]
    best: Split | None
    significant: bool
    confounded_with: str | None = None  # a higher-ranked attribute that picks (nearly) the same streams
    also: tuple[str, ...] = ()  # lower-ranked attributes that pick (nearly) the same streams
    explained_by: str | None = None  # an attribute that, held fixed, leaves this one nothing to add
    headline: str | None = None

    @property
    def lead(self) -> bool:
        """A finding of its own: significant, and neither a mirror nor a by-product of another."""
        return self.significant and self.confounded_with is None and self.explained_by is None

    @property
    def complete(self) -> bool:
        """Every observed failure carries the split's values (and the split is significant)."""
        return self.significant and self.best is not None and self.best.outside.failed == 0

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "ordered": self.ordered, "observed": self.observed,
                "failed": self.failed, "unobserved_failures": self.unobserved_failures,
                "significant": self.significant, "complete": self.complete,
                "confounded_with": self.confounded_with, "also": list(self.also),
                "explained_by": self.explained_by,
                "headline": self.headline,
                "best": self.best.to_dict() if self.best else None,
                "values": [v.to_dict() for v in self.values]}


@dataclass(frozen=True, slots=True)
class UnknownKind:
    """Streams of one protocol that carried one event, block or delta kind its tables do not know.

    Counted, never judged (``docs/design/guarantees.md`` guarantee 6): such a stream passed through byte for
    byte, and it fails or passes by its ending and findings alone. The row says a provider sends something
    new, which someone should classify (``sseguard protocols --sdk-drift``)."""

    api: str
    kind: str
    streams: int  # streams carrying the kind (weighted)
    of: int  # all streams of the api

    def to_dict(self) -> dict[str, Any]:
        return {"api": self.api, "kind": self.kind, "streams": self.streams, "of": self.of}


@dataclass(frozen=True, slots=True)
class TimeBucket:
    """Requests of one arm started in one time window of the run."""

    arm: str
    start_s: float
    end_s: float
    requests: int
    failed: int

    def to_dict(self) -> dict[str, Any]:
        return {"arm": self.arm, "start_s": self.start_s, "end_s": self.end_s,
                "requests": self.requests, "failed": self.failed}


@dataclass(frozen=True, slots=True)
class Healing:
    """What healing did in a run: healed and failed streams, the attempts behind them, and which
    attribute separates the streams whose upstream broke."""

    streams: int  # client streams (attempts excluded)
    by_retry: int  # healed by retry, and passed
    by_resume: int
    failed: int  # healed (retried or resumed) yet failed under the policy
    spent_attempts: int  # upstream attempts beyond the first, over the healed streams
    spent_tokens: int  # completion tokens those attempts cost
    attempts: dict[str, int]  # the attempt records (the upstream failures) by how they ended
    broke: Rate  # streams whose upstream broke: failed, or healed
    attributes: list[AttributeResult] = field(default_factory=list)  # ranked, outcome "broke"

    @property
    def healed(self) -> int:
        return self.by_retry + self.by_resume

    def lead(self) -> AttributeResult | None:
        return next((a for a in self.attributes if a.lead), None)

    def to_dict(self) -> dict[str, Any]:
        return {"streams": self.streams, "healed_by_retry": self.by_retry, "healed_by_resume": self.by_resume,
                "failed_despite_healing": self.failed, "attempts_spent": self.spent_attempts,
                "tokens_spent": self.spent_tokens, "upstream_attempts": self.attempts,
                "upstream_broke": self.broke.to_dict(),
                "per_value": {a.key: value_rows(a) for a in self.attributes},
                "attributes": [a.to_dict() for a in self.attributes]}


def value_rows(attr: AttributeResult) -> list[dict[str, Any]]:
    """Per value of an attribute of the upstream-broke search: streams, healed and failed."""
    return [{"value": v.value, "streams": v.rate.total, "healed": v.failures.get(HEALED_OUTCOME, 0),
             "failed": v.rate.failed - v.failures.get(HEALED_OUTCOME, 0)} for v in attr.values]


@dataclass(frozen=True, slots=True)
class LevelDivergence:
    """One arm at one concurrency level: answers compared, diverged (with its interval), and where."""

    arm: str
    concurrency: int
    rate: Rate  # diverged of compared
    positions: dict[str, int]  # diverged answers per bucket of ``facts.DIVERGED_BUCKETS``
    garbled: int = 0  # of the diverged, those judged garbled (``analyze.consistency``)

    @property
    def early(self) -> int:
        """Diverged within the first ``facts.EARLY_TOKENS`` tokens."""
        return self.positions.get(DIVERGED_BUCKETS[0], 0)

    def to_dict(self) -> dict[str, Any]:
        return {"arm": self.arm, "concurrency": self.concurrency, "compared": self.rate.total,
                "diverged": self.rate.failed, "garbled": self.garbled, "rate": self.rate.to_dict(),
                "early": self.early, "positions": dict(self.positions)}


@dataclass(frozen=True, slots=True)
class Alternative:
    """One distinct diverged answer to one prompt of one arm: how often it came, and the verdict."""

    arm: str
    prompt: str
    digest: str
    answers: int
    flags: tuple[str, ...]  # overwritten, nontext (``probe.consistency.divergence``)
    garbled: bool
    why: str  # stable | once | overwritten | nontext | varying | unidentified

    def to_dict(self) -> dict[str, Any]:
        return {"arm": self.arm, "prompt": self.prompt, "digest": self.digest,
                "answers": self.answers, "flags": list(self.flags), "garbled": self.garbled,
                "why": self.why}


@dataclass(frozen=True, slots=True)
class Consistency:
    """The consistency workload's answers in a run: divergence per level, and what the diverged share."""

    levels: list[LevelDivergence]
    total: Rate
    #: Per arm, its attributes ranked with "garbled" as the outcome: each arm is its own deployment,
    #: so a healthy arm beside a corrupting one names nothing (pooled, "arm" would be the finding).
    #: Benign divergences are never searched: they are not independent observations, and a cause
    #: of batch variance is no finding.
    attributes: dict[str, list[AttributeResult]] = field(default_factory=dict)
    #: The garbled answers of all compared (``analyze.consistency``: the corruption).
    garbled: Rate = field(default_factory=lambda: Rate.of(0, 0))
    #: Every distinct diverged answer, per arm and prompt, with its verdict.
    alternatives: list[Alternative] = field(default_factory=list)

    @property
    def benign(self) -> list[Alternative]:
        return [a for a in self.alternatives if not a.garbled]

    def to_dict(self) -> dict[str, Any]:
        benign = self.benign
        return {"compared": self.total.total, "diverged": self.total.failed,
                "garbled": self.garbled.failed, "garbled_rate": self.garbled.to_dict(),
                "benign": {"answers": sum(a.answers for a in benign), "alternatives": len(benign),
                           "prompts": len({(a.arm, a.prompt) for a in benign})},
                "alternatives": [a.to_dict() for a in self.alternatives],
                "levels": [lv.to_dict() for lv in self.levels],
                "attributes": {arm: [a.to_dict() for a in found]
                               for arm, found in self.attributes.items()}}


@dataclass(frozen=True, slots=True)
class Analysis:
    """A run judged under one policy: rates per arm and level, the attribute ranking, the headlines."""

    policy: Policy
    total: Rate
    endings: dict[str, int]
    findings: dict[str, int]
    failures: dict[str, int]
    arms: list[GroupRow]
    levels: list[GroupRow]
    comparisons: list[ArmComparison]
    attributes: list[AttributeResult]  # ranked: the best explanation of the failures first
    timeline: list[TimeBucket]
    bucket_s: float | None  # width of the time windows; None when start times are missing
    span_s: float  # seconds from the first start to the last start (per run)
    runs: list[str]
    headlines: list[str]
    #: The same search for each kind of failure on its own (``truncated``, ``markup_leak``, …) when a
    #: run failed in several ways: a routed truncation and load-dependent cuts have different causes,
    #: and pooled together each would blur the other.
    by_reason: dict[str, list[AttributeResult]] = field(default_factory=dict)
    #: With streams of two or more protocols: the rates per api, api against api (Fisher), and the
    #: attribute search within each api's own streams (across apis, ``api`` is an attribute).
    apis: list[ApiRow] = field(default_factory=list)
    api_comparisons: list[ArmComparison] = field(default_factory=list)
    within_api: dict[str, list[AttributeResult]] = field(default_factory=dict)
    #: Streams the proxy healed, when records were written with healing on (``healing``).
    healing: Healing | None = None
    #: The consistency workload's answers against their references, when the run has any.
    consistency: Consistency | None = None
    #: Streams that carried kinds their protocol's tables do not know, per (api, kind): most first.
    unknown_kinds: list[UnknownKind] = field(default_factory=list)

    @property
    def requests(self) -> int:
        return self.total.total

    @property
    def top(self) -> AttributeResult | None:
        """The best-ranked attribute that separates failing streams significantly, if any."""
        first = self.attributes[0] if self.attributes else None
        return first if first is not None and first.significant else None

    def attribute(self, key: str) -> AttributeResult | None:
        return next((a for a in self.attributes if a.key == key), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": {"name": self.policy.name, "tolerate": self.policy.listed},
            "requests": self.requests, **self.total.to_dict(),
            "endings": self.endings, "findings": self.findings, "failures": self.failures,
            "runs": self.runs, "span_s": self.span_s, "bucket_s": self.bucket_s,
            "arms": [g.to_dict() for g in self.arms],
            "levels": [g.to_dict() for g in self.levels],
            "comparisons": [c.to_dict() for c in self.comparisons],
            "attributes": [a.to_dict() for a in self.attributes],
            "timeline": [t.to_dict() for t in self.timeline],
            "headlines": list(self.headlines),
            "by_reason": {reason: [a.to_dict() for a in attrs]
                          for reason, attrs in self.by_reason.items()},
            "apis": [a.to_dict() for a in self.apis],
            "api_comparisons": [c.to_dict() for c in self.api_comparisons],
            "within_api": {api: [a.to_dict() for a in attrs]
                           for api, attrs in self.within_api.items()},
            **({"healing": self.healing.to_dict()} if self.healing is not None else {}),
            **({"consistency": self.consistency.to_dict()} if self.consistency is not None else {}),
            # Like healing and consistency, only when there is something to say: a run whose streams
            # the tables knew throughout reads as it did before the row existed.
            **({"unknown_kinds": [u.to_dict() for u in self.unknown_kinds]} if self.unknown_kinds else {}),
        }
