"""The analysis in plain words: the sentences an operator reads first.

A headline names the failing streams by how they ended ("all 45 truncated streams"), says what they
share ("had response ids starting `gw-`"), and what the others did ("none of 125 numeric response ids
failed"), with the rate and its interval where a share is partial. Numbers come from the ``Analysis``
tables only, so the words never disagree with the tables.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from sseguard.analyze.columns import MANY_VALUES, bucket_span, int_range
from sseguard.analyze.facts import log_bucket
from sseguard.analyze.model import (
    ArmComparison,
    AttributeResult,
    Consistency,
    GroupRow,
    Healing,
    UnknownKind,
)
from sseguard.analyze.stats import Rate, fmt_p, pct
from sseguard.core.verdict import Ending

_ENDINGS = frozenset(str(e) for e in Ending)


def describe_failures(count: int, reasons: Mapping[str, int], *, noun: str = "streams") -> str:
    """``45 truncated streams``; ``12 streams with markup_leak``; ``45 failing streams (30 truncated, …)``."""
    if len(reasons) == 1:
        (reason,) = reasons
        if reason in _ENDINGS:
            return f"{count} {reason} {noun}"
        return f"{count} {noun} with {reason}"
    listed = ", ".join(f"{n} {r}" for r, n in reasons.items())
    return f"{count} failing {noun}" + (f" ({listed})" if listed else "")


def overall(total: Rate, failures: Mapping[str, int], policy: str) -> str:
    if total.failed == 0:
        return (f"no stream of {total.total} failed under policy {policy} "
                f"(95% interval for the failure rate: {pct(total.low)}–{pct(total.high)})")
    listed = ", ".join(f"{n} {r}" for r, n in failures.items())
    return (f"{total.failed} of {total.total} streams failed under policy {policy}, "
            f"{total}: {listed}")


def outcome_verb(reason: str | None) -> str:
    """How a sentence says a stream had the outcome: ``failed``, ``ended truncated``, ``had markup_leak``."""
    if reason is None:
        return "failed"
    return f"ended {reason}" if reason in _ENDINGS else f"had {reason}"


def attribute(res: AttributeResult, reason: str | None = None, *, verb: str | None = None) -> str | None:
    """One sentence for an attribute's best split, or None when it has none.

    ``reason`` set: the attribute was searched for that one kind of failure (``truncated``), so the
    rates are of that outcome, and the sentence says so. ``verb``: the outcome in other words (the
    healing search's ``broke upstream``).
    """
    verb = verb or outcome_verb(reason)
    split = res.best
    if split is None:
        return None
    inside, outside = split.inside, split.outside
    if outside.failed == 0 and inside.failed == 1:
        (reason,) = split.failures_in or {"failing": 1}
        lead = f"the only failing stream ({reason}) {split.phrase_in}"
    elif outside.failed == 0:
        lead = f"all {describe_failures(inside.failed, split.failures_in)} {split.phrase_in}"
    else:
        everywhere: set[str] = {r for row in res.values for r in row.failures}
        if len(everywhere) == 1:
            lead = f"{inside.failed} of {describe_failures(res.failed, split.failures_in)}"
        else:
            listed = ", ".join(f"{n} {r}" for r, n in split.failures_in.items())
            lead = f"{inside.failed} of {res.failed} failing streams ({listed})"
        lead += f" {split.phrase_in}"
    text = f"{lead} ({inside.failed} of {inside.total} such streams {verb}, {inside})"
    others = split.phrase_out or "other streams"
    if outside.failed == 0:
        text += f"; none of {outside.total} {others} {verb}"
    else:
        text += f"; {outside.failed} of {outside.total} {others} {verb}, {outside}"
    text += f" (Fisher p {_p(split.p, split.log10_p)}"
    if split.tried > 1:
        text += f"; {fmt_p(split.p_adj, split.log10_p_adj)} adjusted for {split.tried} splits tried"
    text += ")"
    if res.unobserved_failures:
        text += f"; {res.unobserved_failures} more failing streams had no value for {res.key}"
    if res.also:
        text += f"; the same streams as {', '.join(res.also)}: the data cannot tell these apart"
    return text


#: Upstream requests per client request above which the retries themselves are a headline.
AMPLIFICATION = 1.5


def healing(h: Healing, said: Sequence[AttributeResult] = ()) -> list[str]:
    """What healing hid from the clients: how many streams it saved, how many it could not, the
    upstream failures behind them, and the attribute that separates the streams whose upstream broke
    (unless the failure search already named it: a route whose streams are all healed still breaks)."""
    text = (f"{h.by_retry} streams healed by retry, {h.by_resume} by resume, "
            f"{h.failed} failed despite healing")
    made = sum(h.attempts.values())
    if made:
        listed = ", ".join(f"{n} {r}" for r, n in h.attempts.items())
        text += (f"; behind them {made} upstream attempts the clients never saw ({listed}), "
                 f"{h.spent_tokens} completion tokens spent on them")
    if h.healed:
        text += (f"; counting healed streams, the upstream broke on {h.broke.failed} of "
                 f"{h.broke.total}, {h.broke}")
    lines = [text]
    if h.streams and (h.streams + made) / h.streams > AMPLIFICATION:
        # Retries stacked on a persistent failure multiply the load on the upstream that fails
        # (issue 42: one agent question became 31 upstream requests).
        lines.append(f"retry amplification: {(h.streams + made) / h.streams:.2f} upstream requests "
                     f"per client request ({h.streams + made} for {h.streams} client streams); "
                     "retries are adding load to an upstream that keeps failing")
    lead = h.lead()
    named = {(a.key, a.best.values if a.best else ()) for a in said}
    if (lead is not None and lead.headline is not None and h.healed
            and (lead.key, lead.best.values if lead.best else ()) not in named):
        lines.append(f"healed or failed: {lead.headline}")
    return lines


def consistency(c: Consistency) -> list[str]:
    """The consistency workload in words: how many answers changed against their reference; of
    those, the benign ones as what they are (stable alternatives, one observation per prompt), and
    the garbled ones as corruption, with the significant attributes they share."""
    total = c.total
    lines = [f"{total.failed} of {total.total} answers of the consistency workload diverged from their "
             f"prompt's reference (its answer at concurrency 1): {total}"]
    benign = c.benign
    if benign:
        prompts = len({(a.arm, a.prompt) for a in benign})
        answers = sum(a.answers for a in benign)
        lines.append(f"{answers} of them are {len(benign)} fluent alternative(s) of {prompts} "
                     "prompt(s), each prompt's answer changing to the same text wherever it changed "
                     "(repeats of a prompt are one observation): the batch variance of a healthy "
                     "engine, not corruption")
    if not c.garbled.failed:
        return lines
    why = Counter[str]()
    for a in c.alternatives:
        if a.garbled:
            why[a.why] += a.answers
    said = ", ".join(f"{n} {_WHY[w]}" for w, n in why.most_common())
    lines.append(f"corrupted answers: {c.garbled.failed} of {total.total} garbled ({said}): "
                 f"{c.garbled}")
    for arm, found in c.attributes.items():
        named = [a for a in found if a.lead and a.significant and a.headline]
        # Garbled answers that the cache separates on its own are the cache's corruption.
        kind = "cache corruption" if any(a.key == "cache" and a.significant for a in found) \
            else "corruption"
        for attr in named:
            lines.append(f"{kind} on arm {arm}: {attr.headline}")
        # An interaction (a cache that corrupts only under load) shows as several attributes, each
        # significant alone; the ranking keeps one lead, so name the others too.
        more = [f"{a.key} {'/'.join(a.best.values)}" for a in found
                if a.significant and a.best is not None and a not in named]
        if named and more:
            lines.append(f"{kind} on arm {arm}: also significant on their own: {', '.join(more)}")
        if not named and any(a.failed for a in found):
            lines.append(f"corruption on arm {arm}: no attribute separates its garbled answers")
    return lines


#: Why an alternative was judged garbled, in words (``analyze.consistency``).
_WHY = {"overwritten": "with a span overwritten in place", "nontext": "carrying non-text or leaked markup",
        "varying": "answers of a prompt answered three or more different ways"}


def explained(attributes: Sequence[AttributeResult]) -> str | None:
    """One line for the significant attributes that only follow stronger ones, so a reader sees them
    set aside rather than missing: ``reuse_index 16–31 follows time_window``."""
    parts = [f"{a.key} {a.best.label} follows {a.explained_by}" for a in attributes
             if a.significant and a.explained_by and a.confounded_with is None and a.best is not None]
    if not parts:
        return None
    return "not causes of their own, only following the findings above: " + "; ".join(parts)


def no_signal(attributes: Sequence[AttributeResult]) -> str:
    closest = next((a for a in attributes if a.best is not None), None)
    if closest is None or closest.best is None:
        return "no recorded attribute varies enough to compare failing with healthy streams"
    best = closest.best
    return (f"no recorded attribute separates failing from healthy streams; the closest, "
            f"{closest.key} ({', '.join(best.values)}), has p {_p(best.p_adj, best.log10_p_adj)} "
            f"adjusted for {best.tried} splits tried")


def by_level(levels: Sequence[GroupRow], arms: int) -> str | None:
    """Failure rate per concurrency level, pooled over arms: the load curve in one line."""
    pooled: dict[int, list[int]] = {}
    for row in levels:
        if row.concurrency is None:
            continue
        cell = pooled.setdefault(row.concurrency, [0, 0])
        cell[0] += row.rate.failed
        cell[1] += row.rate.total
    if len(pooled) < 2 or not any(f for f, _ in pooled.values()):
        return None
    if len(pooled) > MANY_VALUES:  # a proxy's streams in flight: one range per power of two
        ranges: dict[int, list[int]] = {}
        for level, (f, n) in pooled.items():
            cell = ranges.setdefault(log_bucket(level, 2, 1), [0, 0])
            cell[0] += f
            cell[1] += n
        parts = [f"{pct(f / n)} at {int_range(*bucket_span(b, 2, 1))}"
                 for b, (f, n) in sorted(ranges.items())]
    else:
        parts = [f"{pct(f / n)} at {level}" for level, (f, n) in sorted(pooled.items())]
    scope = " (all arms)" if arms > 1 else ""
    return f"failure rate by concurrency{scope}: " + ", ".join(parts)


def comparison(c: ArmComparison) -> str:
    """Arm against arm (or api against api: ``c.kind``), in words."""
    p = _p(c.p, c.log10_p)
    kind = c.kind
    if c.p >= ALPHA_ARMS:
        return (f"{kind}s `{c.arm_a}` and `{c.arm_b}` do not differ significantly: {c.rate_a} vs "
                f"{c.rate_b} (Fisher p {p})")
    worse, better = (c.arm_a, c.arm_b) if c.rate_a.value > c.rate_b.value else (c.arm_b, c.arm_a)
    worse_rate, better_rate = ((c.rate_a, c.rate_b) if worse == c.arm_a else (c.rate_b, c.rate_a))
    return (f"{kind} `{worse}` fails more often than {kind} `{better}`: {worse_rate} vs "
            f"{better_rate} (Fisher p {p})")


ALPHA_ARMS = 0.05


def _p(p: float, log10_p: float) -> str:
    text = fmt_p(p, log10_p)
    return text if text.startswith("<") else f"= {text}"


def unknown_kinds(rows: Sequence[UnknownKind]) -> str:
    """One sentence for the kinds the protocols' tables did not know: which, on how many streams.

    Said as news, never as a failure: the streams passed or failed by their endings alone."""
    listed = ", ".join(f"{u.kind} ({u.api}) in {u.streams} of {u.of}" for u in rows[:SHOWN_UNKNOWN])
    more = f" and {len(rows) - SHOWN_UNKNOWN} more" if len(rows) > SHOWN_UNKNOWN else ""
    return (f"streams carried kinds their protocol's tables do not know: {listed}{more}; passed "
            "through and judged by their endings alone (classify them: sseguard protocols --sdk-drift)")


#: Unknown kinds a headline names (the tables list them all).
SHOWN_UNKNOWN = 4
