"""The analysis as pictures: PNG bytes drawn with matplotlib's Agg canvas.

Figures are built with ``matplotlib.figure.Figure`` and an explicit Agg canvas rather than ``pyplot``:
no global figure state, no GUI backend picked from the environment, safe to call from a worker thread
or a headless CI box. matplotlib is imported here only, and this module only when a plot is drawn.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from sseguard.analyze.model import Analysis
from sseguard.core.record import Record

TIMELINE = "failures_over_time.png"
CONCURRENCY = "failure_rate_vs_concurrency.png"
TOP_ATTRIBUTE = "top_attribute.png"


def render(analysis: Analysis, records: Sequence[Record]) -> dict[str, bytes]:
    """Every plot the analysis supports, by file name (a plot without data is left out)."""
    out: dict[str, bytes] = {}
    for name, draw in ((TIMELINE, _timeline), (CONCURRENCY, _concurrency), (TOP_ATTRIBUTE, _top)):
        fig = draw(analysis, records)
        if fig is not None:
            out[name] = _png(fig)
    return out


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    FigureCanvasAgg(fig)
    fig.savefig(buf, format="png", dpi=96, metadata={"Software": None})
    return buf.getvalue()


def _timeline(analysis: Analysis, records: Sequence[Record]) -> Figure | None:
    """Failure rate per time window per arm, with the failing streams of each window underneath."""
    if not analysis.timeline:
        return None
    arms = sorted({b.arm for b in analysis.timeline})
    fig = Figure(figsize=(8, 4.2), layout="constrained")
    rate_ax, rug_ax = fig.subplots(2, 1, sharex=True, height_ratios=(3, 1))
    for arm in arms:
        buckets = [b for b in analysis.timeline if b.arm == arm]
        xs = [(b.start_s + b.end_s) / 2 for b in buckets]
        ys = [100 * b.failed / b.requests for b in buckets]
        rate_ax.plot(xs, ys, marker="o", label=f"{arm}")
    rate_ax.set_ylabel("failed (%)")
    rate_ax.set_title(f"Failures over time (policy {analysis.policy.name}, windows of "
                      f"{analysis.bucket_s:g} s)")
    rate_ax.set_ylim(bottom=0)
    rate_ax.grid(alpha=0.3)
    if len(arms) > 1:
        rate_ax.legend(title="arm")
    # Failing streams per window underneath, from the counts (the records themselves stay where they are).
    for row, arm in enumerate(arms):
        failing = [b for b in analysis.timeline if b.arm == arm and b.failed]
        top = max((b.failed for b in failing), default=1)
        rug_ax.scatter([(b.start_s + b.end_s) / 2 for b in failing], [row] * len(failing),
                       s=[12 + 120 * b.failed / top for b in failing], marker="|")
    rug_ax.set_yticks(range(len(arms)), arms)
    rug_ax.set_ylim(-0.7, len(arms) - 0.3)
    rug_ax.set_xlabel("seconds since the start of the run")
    rug_ax.set_ylabel("failing")
    return fig


def _concurrency(analysis: Analysis, records: Sequence[Record]) -> Figure | None:
    """Failure rate per concurrency level per arm, with Wilson 95 % intervals as error bars."""
    if not analysis.levels:
        return None
    fig = Figure(figsize=(8, 4), layout="constrained")
    ax = fig.subplots()
    arms = sorted({g.arm for g in analysis.levels})
    for arm in arms:
        rows = sorted((g for g in analysis.levels if g.arm == arm), key=lambda g: g.concurrency or 0)
        xs = [g.concurrency or 0 for g in rows]
        ys = [100 * g.rate.value for g in rows]
        low = [100 * (g.rate.value - g.rate.low) for g in rows]
        high = [100 * (g.rate.high - g.rate.value) for g in rows]
        ax.errorbar(xs, ys, yerr=[low, high], marker="o", capsize=4, label=arm)
    ax.set_xlabel("concurrency")
    ax.set_ylabel("failed (%), 95% Wilson interval")
    ax.set_title(f"Failure rate vs concurrency (policy {analysis.policy.name})")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    if len(arms) > 1:
        ax.legend(title="arm")
    return fig


def _top(analysis: Analysis, records: Sequence[Record]) -> Figure | None:
    """The best-ranked attribute's values: failure rate with its interval, the split's values marked."""
    attr = analysis.attributes[0] if analysis.attributes else None
    if attr is None or attr.best is None:
        return None
    rows = list(attr.values)[:30]
    fig = Figure(figsize=(8, max(2.5, 0.35 * len(rows) + 1.2)), layout="constrained")
    ax = fig.subplots()
    inside = set(attr.best.values)
    ys = list(range(len(rows)))[::-1]
    rates = [100 * v.rate.value for v in rows]
    err = [[100 * (v.rate.value - v.rate.low) for v in rows],
           [100 * (v.rate.high - v.rate.value) for v in rows]]
    colors = ["tab:red" if v.value in inside else "tab:gray" for v in rows]
    ax.barh(ys, rates, xerr=err, color=colors, capsize=3)
    ax.set_yticks(ys, [f"{v.value} (n={v.rate.total})" for v in rows])
    ax.set_xlabel("failed (%), 95% Wilson interval")
    verdict = "red: the values that concentrate the failures" if attr.significant else (
        "no significant separation")
    ax.set_title(f"{attr.key}: failure rate per value\n{verdict}")
    ax.set_xlim(left=0)
    ax.grid(axis="x", alpha=0.3)
    return fig
