"""Show an ``Analysis``: a rich summary in the terminal, one self-contained HTML file, PNG files.

The HTML report is meant to be attached to a bug report or mailed, so it is one file that needs
nothing else: CSS inline, plots embedded as base64 PNG, no scripts, no links, no fonts fetched. Every
value that came from a peer (headers, body tails, error messages, finding details) is redacted again
and HTML-escaped here, whatever the writer of the records did: a report is the file most likely to
travel, so it must never carry a key.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from sseguard.analyze.facts import EARLY_TOKENS
from sseguard.analyze.healing import SHOWN_ATTRIBUTES, SHOWN_VALUES
from sseguard.analyze.model import (
    Analysis,
    ApiRow,
    ArmComparison,
    AttributeResult,
    Consistency,
    GroupRow,
    Healing,
    UnknownKind,
    value_rows,
)
from sseguard.analyze.stats import Rate, fmt_p, pct
from sseguard.analyze.summary import failure_reason
from sseguard.core.errors import ConfigError
from sseguard.core.record import Record
from sseguard.core.redact import redact_headers, redact_obj, redact_text

#: Failing streams whose evidence the HTML report shows in full.
EVIDENCE_COUNT = 10


# ── terminal ──────────────────────────────────────────────────────────────────────────────────────
def print_summary(analysis: Analysis, console: Console, *, top: int = 8) -> None:
    """Rates per arm (and per level in a sweep), arm-vs-arm tests, the attribute ranking, the headlines."""
    console.print(Text(f"{analysis.requests} requests, policy {analysis.policy.name}, "
                       f"{len(analysis.runs)} run(s), {analysis.span_s:.0f} s", style="bold"))
    console.print(_group_table("Per arm", analysis.arms, level=False))
    if any(len(row.arms) > 1 for row in analysis.apis):
        # With one arm per api the arm table (with its api column) already is this table.
        table = Table(title="Per api (protocol)", title_justify="left")
        for col in ("api", "arms", "requests", "failed", "failure rate [95% CI]", "why they failed"):
            table.add_column(col, overflow="fold")
        for row in analysis.apis:
            table.add_row(*(Text(c) for c in _api_cells(row)))
        console.print(table)
    if len({g.concurrency for g in analysis.levels}) > 1:
        console.print(_group_table("Per arm and concurrency", analysis.levels, level=True))
    for title, comparisons in (("Arm vs arm (Fisher's exact test)", analysis.comparisons),
                               ("Api vs api (Fisher's exact test)", analysis.api_comparisons)):
        if not comparisons:
            continue
        table = Table(title=title, title_justify="left")
        for col in (f"{comparisons[0].kind}s", "failed", "failed", "odds ratio", "p"):
            table.add_column(col)
        for c in comparisons:
            table.add_row(*(Text(cell) for cell in _comparison_cells(c)))
        console.print(table)
    if analysis.total.failed and analysis.attributes:
        table = _share_table("What the failing streams share, best first", first="attribute")
        for attr in analysis.attributes[:top]:
            table.add_row(*_terminal_cells(attr))
        console.print(table)
    for title, first, leads in (("Each kind of failure on its own", "failure", _reason_leads(analysis)),
                                ("Within each api", "api", _api_leads(analysis))):
        if leads:
            table = _share_table(f"{title}: its best attribute", first=first)
            for name, attr in leads:
                table.add_row(f"{name}\n({attr.failed + attr.unobserved_failures})",
                              *_terminal_cells(attr))
            console.print(table)
    if analysis.total.failed and analysis.attributes:
        console.print(Text("rate in / out: failure rate with and without the values, 95% interval below; "
                           "sep.: all = every failure has the values, yes = significant, ≈ X = the same "
                           "streams as X, via X = nothing left once X is held fixed", style="dim"))
    if analysis.healing is not None:
        console.print(_healing_table(analysis.healing))
    if analysis.consistency is not None:
        console.print(_consistency_table(analysis.consistency))
    if analysis.unknown_kinds:
        console.print(_unknown_table(analysis.unknown_kinds))
    console.print(Text("Findings", style="bold"))
    findings = Table.grid(padding=(0, 1))
    findings.add_column(width=3, justify="right")
    findings.add_column(overflow="fold")
    for line in analysis.headlines:
        findings.add_row("•", Text(line))  # a hanging indent keeps long findings readable
    console.print(findings)


_UNKNOWN_COLUMNS = ["api", "kind", "streams", "of the api's"]
_UNKNOWN_TITLE = "Kinds the protocol tables do not know (passed through; never a verdict)"


def _unknown_rows(rows: Sequence[UnknownKind]) -> list[list[str]]:
    return [[u.api, u.kind, str(u.streams), str(u.of)] for u in rows]


def _unknown_table(rows: Sequence[UnknownKind]) -> Table:
    """Per protocol and kind: the streams that carried an event, block or delta kind no table names."""
    table = Table(title=_UNKNOWN_TITLE, title_justify="left", box=box.SIMPLE_HEAD)
    for col in _UNKNOWN_COLUMNS:
        table.add_column(col, justify="right" if col in ("streams", "of the api's") else "left",
                         overflow="fold")
    for row in _unknown_rows(rows):
        table.add_row(*(Text(c) for c in row))  # names come from the wire: no rich markup
    return table


def _html_unknown(rows: Sequence[UnknownKind]) -> list[str]:
    return ["<h2>Unknown kinds</h2>",
            "<p>Event, block and delta kinds the protocol's tables do not know. Such a stream passed "
            "through byte for byte and was judged by its ending alone: a kind here is news to "
            "classify, not a failure.</p>",
            _html_table(_UNKNOWN_COLUMNS, _unknown_rows(rows))]


def _healing_table(h: Healing) -> Table:
    """Per value of the attributes that best separate the streams whose upstream broke: streams,
    healed (the client saw nothing) and failed (the client saw it)."""
    table = Table(title=f"Healed or failed per value (upstream broke on {h.broke.failed} of "
                        f"{h.broke.total})", title_justify="left", box=box.SIMPLE_HEAD)
    table.add_column("attribute", overflow="ellipsis", max_width=22, no_wrap=True)
    table.add_column("value", overflow="ellipsis", max_width=24, no_wrap=True)
    for col in ("streams", "healed", "failed"):
        table.add_column(col, justify="right")
    shown = [a for a in h.attributes if a.lead][:SHOWN_ATTRIBUTES] or h.attributes[:1]
    for attr in shown:
        for i, row in enumerate(value_rows(attr)[:SHOWN_VALUES]):
            table.add_row(attr.key if i == 0 else "", row["value"], str(row["streams"]), str(row["healed"]),
                          str(row["failed"]))
    return table


def _consistency_rows(c: Consistency) -> list[list[str]]:
    return [[lv.arm, str(lv.concurrency), str(lv.rate.total), str(lv.rate.failed), str(lv.rate),
             str(lv.garbled), str(lv.early), ", ".join(f"{b.removeprefix('diverged at token ')}: {n}"
                                      for b, n in lv.positions.items() if n)]
            for lv in c.levels]


_CONSISTENCY_COLUMNS = ["arm", "concurrency", "compared", "diverged", "rate [95% CI]", "garbled",
                        f"in first {EARLY_TOKENS} tokens", "where (tokens)"]


def _consistency_table(c: Consistency) -> Table:
    """Per arm and level: answers compared with their concurrency-1 reference, and how many changed."""
    table = Table(title=f"Answers against their concurrency-1 reference ({c.total.failed} of "
                        f"{c.total.total} diverged, {c.garbled.failed} garbled; a divergence is not a "
                        "failure)", title_justify="left",
                  box=box.SIMPLE_HEAD)
    for col in _CONSISTENCY_COLUMNS:
        table.add_column(col, justify="left" if col in ("arm", "where (tokens)") else "right")
    for row in _consistency_rows(c):
        table.add_row(*row)
    return table


def _html_consistency(c: Consistency) -> list[str]:
    parts = ["<h2>Consistency</h2>",
             f"<p>{c.total.failed} of {c.total.total} answers diverged from their prompt's reference "
             f"answer at concurrency 1, {c.garbled.failed} of them garbled. A divergence is not a "
             "failed stream: a healthy engine whose kernels are not batch-invariant changes a few "
             "prompts' answers to a fluent alternative, the same every time; a corrupting cache "
             "garbles them (a span overwritten, non-text, a prompt answered many ways).</p>",
             _html_table(_CONSISTENCY_COLUMNS, _consistency_rows(c))]
    for arm, found in c.attributes.items():
        for attr in [a for a in found if a.lead and a.significant][:SHOWN_ATTRIBUTES]:
            if attr.headline:
                parts.append(f"<p>Arm {_e(arm)}: {_e(attr.headline)}</p>")
    return parts


def _html_healing(h: Healing) -> list[str]:
    parts = ["<h2>Healing</h2>",
             f"<p>{h.by_retry} streams healed by retry, {h.by_resume} by resume, {h.failed} failed despite "
             f"healing; upstream attempts the clients never saw: {_e(_counts(h.attempts))}. Healed streams "
             "count as streams whose upstream broke: a route whose streams are all healed still breaks.</p>"]
    for attr in h.attributes:
        verdict = _attribute_cells(attr)[-1]
        rows = [[r["value"], str(r["streams"]), str(r["healed"]), str(r["failed"]), str(v.rate)]
                for r, v in zip(value_rows(attr), attr.values, strict=True)]
        parts += [f"<details><summary>{_e(attr.key)}: healed and failed per value (separates: "
                  f"{_e(verdict)})</summary>",
                  _html_table(["value", "streams", "healed", "failed", "broke upstream [95% CI]"], rows),
                  "</details>"]
    return parts


def _group_table(title: str, rows: Sequence[GroupRow], *, level: bool) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("arm")
    table.add_column("api")
    if level:
        table.add_column("concurrency", justify="right")
    for col in ("requests", "failed", "failure rate [95% CI]"):
        table.add_column(col, justify="right")
    table.add_column("why they failed", overflow="fold")
    table.add_column("endings", overflow="fold")
    for g in rows:
        cells = [g.arm, g.api, *([str(g.concurrency)] if level else []), str(g.requests),
                 str(g.rate.failed),
                 str(g.rate), _counts(g.failures), _counts(g.endings)]
        table.add_row(*(Text(c) for c in cells))
    return table


def _api_cells(row: ApiRow) -> list[str]:
    return [row.api, ", ".join(row.arms), str(row.requests), str(row.rate.failed), str(row.rate),
            _counts(row.failures)]


def _comparison_cells(c: ArmComparison) -> list[str]:
    odds = "∞" if c.odds_ratio is None else f"{c.odds_ratio:.2f}"
    return [f"{c.arm_a} vs {c.arm_b}", str(c.rate_a), str(c.rate_b), odds, fmt_p(c.p, c.log10_p)]


def _attribute_cells(attr: AttributeResult) -> list[str]:
    best = attr.best
    if best is None:
        return [attr.key, "—", "—", "—", "—", "—", "no split"]
    if attr.confounded_with:
        verdict = f"≈ {attr.confounded_with}"
    elif attr.explained_by:
        verdict = f"via {attr.explained_by}"
    elif attr.complete:
        verdict = "all"
    elif attr.significant:
        verdict = "yes"
    else:
        verdict = "no"
    values = best.label
    return [attr.key, values if len(values) <= 60 else values[:57] + "…", str(best.inside),
            str(best.outside), pct(best.coverage), fmt_p(best.p_adj, best.log10_p_adj), verdict]


def _share_table(title: str, *, first: str) -> Table:
    # No vertical rules, collapsed padding and capped text columns: it must fit 80 columns.
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                  collapse_padding=True)
    if first in ("failure", "api"):
        table.add_column(first, overflow="fold", max_width=14)
        table.add_column("attribute", overflow="ellipsis", max_width=13, no_wrap=True)
    else:
        table.add_column("attribute", overflow="ellipsis", max_width=22, no_wrap=True)
    table.add_column("values", overflow="ellipsis", max_width=11, no_wrap=True)
    for col in ("rate in", "rate out", "p adj."):
        table.add_column(col, no_wrap=True, justify="right")
    table.add_column("sep.", overflow="fold", min_width=5)
    return table


def _terminal_cells(attr: AttributeResult) -> list[Text]:
    key, values, _, _, _, p_adj, verdict = _attribute_cells(attr)
    if attr.best is None:
        return [Text(key), Text("—"), Text("—"), Text("—"), Text("—"), Text(verdict)]
    return [Text(key), Text(values), Text(_compact(attr.best.inside)), Text(_compact(attr.best.outside)),
            Text(p_adj), Text(verdict)]


def _reason_leads(analysis: Analysis) -> list[tuple[str, AttributeResult]]:
    """Each failure kind's best-ranked attribute (significant or not: the table says which)."""
    return [(reason, attrs[0]) for reason, attrs in analysis.by_reason.items() if attrs]


def _api_leads(analysis: Analysis) -> list[tuple[str, AttributeResult]]:
    """Each api's best-ranked attribute within its own streams."""
    return [(api, attrs[0]) for api, attrs in analysis.within_api.items() if attrs]


def _compact(rate: Rate) -> str:
    return f"{pct(rate.value)}\n{100 * rate.low:.1f}–{100 * rate.high:.1f}"


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "—"


# ── files ─────────────────────────────────────────────────────────────────────────────────────────
def write_pngs(analysis: Analysis, records: Sequence[Record], directory: str | Path) -> list[Path]:
    """Every plot as a PNG file in ``directory`` (created if needed); returns the paths written."""
    from sseguard.analyze import plots

    target = Path(directory)
    try:
        target.mkdir(parents=True, exist_ok=True)
        written = []
        for name, data in plots.render(analysis, records).items():
            path = target / name
            path.write_bytes(data)
            written.append(path)
    except OSError as exc:
        raise ConfigError(f"cannot write plots to {target}: {exc.strerror or exc}") from None
    return written


def write_html(analysis: Analysis, records: Sequence[Record], path: str | Path) -> Path:
    """One self-contained HTML report (plots embedded, no external reference); returns its path."""
    from sseguard.analyze import plots

    images = plots.render(analysis, records)
    target = Path(path)
    try:
        target.write_text(render_html(analysis, records, images), encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot write {target}: {exc.strerror or exc}") from None
    return target


def render_html(analysis: Analysis, records: Sequence[Record], images: dict[str, bytes]) -> str:
    """The report as one string: the plots in ``images`` are embedded as data URIs."""
    parts = [_HEAD, "<h1>sseguard analysis</h1>",
             f"<p class=meta>{analysis.requests} requests · policy <b>{_e(analysis.policy.name)}</b> · "
             f"runs {_e(', '.join(analysis.runs) or '—')} · {analysis.span_s:.0f} s · written "
             f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC</p>",
             "<h2>Findings</h2><ul class=findings>",
             *(f"<li>{_e(line)}</li>" for line in analysis.headlines), "</ul>",
             "<h2>Failure rate per arm</h2>", _html_groups(analysis.arms, level=False)]
    if analysis.apis:
        parts += ["<h2>Failure rate per api</h2>",
                  _html_table(["api", "arms", "requests", "failed", "failure rate [95% CI]",
                               "why they failed"], [_api_cells(row) for row in analysis.apis])]
    if plots_timeline := images.get("failures_over_time.png"):
        parts += ["<h2>Failures over time</h2>", _img(plots_timeline, "failures over time per arm")]
    if plots_level := images.get("failure_rate_vs_concurrency.png"):
        parts += ["<h2>Failure rate vs concurrency</h2>",
                  _img(plots_level, "failure rate vs concurrency with 95% intervals"),
                  _html_groups(analysis.levels, level=True)]
    for title, comparisons in (("Arm vs arm", analysis.comparisons),
                               ("Api vs api", analysis.api_comparisons)):
        if comparisons:
            parts += [f"<h2>{title} (Fisher's exact test)</h2>",
                      _html_table([f"{comparisons[0].kind}s", "failed (a)", "failed (b)",
                                   "odds ratio", "p"], [_comparison_cells(c) for c in comparisons])]
    parts += ["<h2>What the failing streams share</h2>", _ATTRIBUTE_NOTE]
    if top := images.get("top_attribute.png"):
        parts.append(_img(top, "failure rate per value of the best-ranked attribute"))
    parts.append(_html_table(["#", "attribute", "values", "rate in", "rate out",
                              "share of failures", "p adj.", "separates"],
                             [[str(i), *_attribute_cells(a)]
                              for i, a in enumerate(analysis.attributes, start=1)]))
    for title, first, leads in (("Each kind of failure on its own", "failure", _reason_leads(analysis)),
                                ("Within each api", "api", _api_leads(analysis))):
        if leads:
            parts += [f"<h3>{title}</h3>",
                      _html_table([first, "attribute", "values", "rate in", "rate out",
                                   "share of failures", "p adj.", "separates"],
                                  [[f"{name} ({a.failed + a.unobserved_failures})", *_attribute_cells(a)]
                                   for name, a in leads])]
    for attr in analysis.attributes:
        rows = [[v.value, str(v.rate.total), str(v.rate.failed), str(v.rate), pct(v.share),
                 fmt_p(v.p, v.log10_p), _counts(v.failures)] for v in attr.values]
        parts += [f"<details><summary>{_e(attr.key)}: every value against the rest</summary>",
                  _html_table(["value", "requests", "failed", "failure rate", "share of failures",
                               "p (vs rest)", "why"], rows), "</details>"]
    if analysis.healing is not None:
        parts += _html_healing(analysis.healing)
    if analysis.consistency is not None:
        parts += _html_consistency(analysis.consistency)
    if analysis.unknown_kinds:
        parts += _html_unknown(analysis.unknown_kinds)
    parts += ["<h2>Evidence of the first failures</h2>", *_evidence(analysis, records), "</body></html>"]
    return "\n".join(parts)


def _html_groups(rows: Iterable[GroupRow], *, level: bool) -> str:
    head = ["arm", "api", *(["concurrency"] if level else []), "requests", "failed",
            "failure rate [95% CI]", "why they failed", "endings", "findings"]
    body = [[g.arm, g.api, *([str(g.concurrency)] if level else []), str(g.requests), str(g.rate.failed),
             str(g.rate), _counts(g.failures), _counts(g.endings), _counts(g.findings)] for g in rows]
    return _html_table(head, body)


def _evidence(analysis: Analysis, records: Sequence[Record]) -> list[str]:
    # An upstream attempt the proxy healed (``heal_of``) is not a stream its client saw fail.
    failing = [r for r in records if failure_reason(r, analysis.policy) and r.heal_of is None]
    if not failing:
        return ["<p>No stream failed under this policy.</p>"]
    failing.sort(key=lambda r: (r.started_at, r.arm, r.index))
    out = [f"<p>The first {min(EVIDENCE_COUNT, len(failing))} of {analysis.total.failed} failing streams, by "
           "start time. Secrets are redacted.</p>"]
    for r in failing[:EVIDENCE_COUNT]:
        facts = [
            ("arm / index", f"{r.arm} / {r.index}"), ("api", r.api), ("run", r.run_id),
            ("workload", r.workload),
            ("started", datetime.fromtimestamp(r.started_at, UTC).isoformat() if r.started_at else "—"),
            ("status", str(r.status)), ("ending", r.ending),
            ("fails because", failure_reason(r, analysis.policy) or "—"),
            ("response id", r.response_id or "—"),
            ("concurrency / reuse", f"{r.concurrency} / {'–' if r.reuse_index is None else r.reuse_index}"),
            ("chunks / bytes", f"{r.chunks} / {r.bytes}"), ("error", r.error or "—"),
            ("evidence file", r.evidence or "—"),
        ]
        findings = [f"{f.get('kind')}: {redact_obj(f.get('detail', ''))} (frame {f.get('frame')}, "
                    f"byte {f.get('offset')})" for f in r.findings]
        headers = redact_headers(r.headers)
        out += [f"<section class=evidence><h3>{_e(r.arm)} #{r.index}: {_e(r.ending)}</h3>",
                _html_table(["fact", "value"], [[k, v] for k, v in facts]),
                "<p><b>findings</b></p>" + ("<ul>" + "".join(f"<li>{_e(f)}</li>" for f in findings)
                                            + "</ul>" if findings else "<p>none</p>"),
                "<p><b>response headers</b></p>",
                _html_table(["header", "value"], sorted(map(list, headers.items()))),
                "<p><b>last bytes of the body</b></p>",
                f"<pre>{_e(r.tail) or '(empty)'}</pre></section>"]
    return out


def _html_table(head: list[str], rows: Iterable[list[str]]) -> str:
    th = "".join(f"<th>{_e(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _img(data: bytes, alt: str) -> str:
    return (f'<img alt="{_e(alt)}" src="data:image/png;base64,'
            f'{base64.b64encode(data).decode("ascii")}">')


def _e(text: str) -> str:
    """Redact, then escape: the one way any text enters the report."""
    return html.escape(redact_text(text), quote=True)


_ATTRIBUTE_NOTE = (
    "<p class=note><i>separates</i>: <i>all</i> = every failure has the values, <i>yes</i> = "
    "significantly more failures there, <i>≈ X</i> = the same streams as attribute X. "
    "Each attribute's best split is the set of its values that concentrates the failures "
    "(contiguous ranges for ordered attributes). Attributes are ranked by Fisher's exact p-value, "
    "adjusted for the number of splits tried on that attribute; ties by separation. Attributes that "
    "select nearly the same streams are marked as such: the data cannot tell them apart.</p>")

_HEAD = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>sseguard analysis</title>
<style>
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222;
       padding: 0 1em; }
h1 { margin-bottom: 0.2em; } h2 { margin-top: 1.8em; border-bottom: 1px solid #ddd; }
.meta, .note { color: #555; } .findings li { margin: 0.4em 0; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; } img { max-width: 100%; }
pre { background: #f7f7f7; border: 1px solid #ddd; padding: 0.6em; white-space: pre-wrap;
      word-break: break-all; }
section.evidence { border-left: 3px solid #c33; padding-left: 1em; margin: 1.2em 0; }
details { margin: 0.3em 0; }
</style></head><body>"""
