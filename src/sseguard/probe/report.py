"""The end of a probe run, for a person (terminal) or a script (``--json``).

The numbers come from ``sseguard.analyze`` so the probe, ``sseguard analyze`` and the demo agree; the
probe adds only what it alone knows: how the run went (interrupted, elapsed, its own CPU) and where
the files are. The analysis is the ``[analyze]`` extra (DuckDB, the statistics stack); without it the
summary is the live board's table — counts per ending and failure rates with their Wilson intervals,
per arm and per level — read from the results file one record at a time, and one line saying what the
extra adds.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rich.console import Console

from sseguard import extras
from sseguard.analyze.rates import Rate
from sseguard.core.errors import ConfigError
from sseguard.probe.cpu import CPU_WARN
from sseguard.probe.live import ArmCounts, Tally, endings_table
from sseguard.probe.runner import RunResult
from sseguard.probe.sink import EVIDENCE_DIR, RESULTS, read_results

if TYPE_CHECKING:
    from sseguard.analyze.model import Analysis


def cpu_warning(result: RunResult) -> str | None:
    """Plain words when the probe itself was busy enough to distort its timings."""
    cpu = result.cpu
    if not cpu.overloaded:
        return None
    return (f"the probe used more than {CPU_WARN:.0%} of a core for {cpu.seconds_over} s "
            f"(peak {cpu.peak:.0%}): its timings (TTFB, TTFT, gaps) then measure the probe as much "
            "as the endpoint — lower --concurrency or spread the load over more processes")


def analyze_run(result: RunResult) -> Analysis:
    """The analysis of the run's results file, read where it lies (as ``sseguard analyze`` reads it)."""
    from sseguard.analyze import analyze_sources

    if not result.total:
        raise ConfigError("no records to analyze")
    return analyze_sources([str(result.results)], result.config.policy)


def tally_run(result: RunResult) -> Tally:
    """The run's counts per arm and level under its policy, the results file read record by record
    (the summary without the ``[analyze]`` extra)."""
    if not result.total:
        raise ConfigError("no records to summarize")
    tally = Tally(result.config.policy)
    tally.extend(read_results(result.results.parent, result.results.name))
    return tally


def tally_dict(tally: Tally) -> dict[str, Any]:
    """The counts as JSON: per arm, and per arm at each concurrency level."""
    def cell(c: ArmCounts) -> dict[str, Any]:
        return {"api": c.api, "endings": dict(c.endings), "findings": dict(c.findings),
                **Rate.of(c.failed, c.total).to_dict()}

    return {"arms": {arm: cell(c) for arm, c in sorted(tally.arms.items())},
            "levels": [{"arm": arm, "concurrency": level, **cell(c)}
                       for (arm, level), c in sorted(tally.levels.items())]}


def run_facts(result: RunResult) -> dict[str, Any]:
    evidence = result.out / EVIDENCE_DIR
    return {
        "out": str(result.out), "results": str(result.out / RESULTS),
        "evidence_files": len(list(evidence.glob("*.json"))) if evidence.is_dir() else 0,
        "run_id": result.run_id, "records": result.total, "new_records": result.new_records,
        "failed": result.failed, "policy": result.config.policy.name,
        "interrupted": result.interrupted, "elapsed_s": round(result.elapsed, 3),
        "cpu": result.cpu.to_dict(), "exit_code": result.exit_code,
    }


#: What the summary says when the ``[analyze]`` extra is not installed.
NO_ANALYSIS = ("what the failing streams share (attributes, arm vs arm tests, plots) needs the [analyze] "
               "extra: pip install 'sseguard[analyze]'")


def summarize(result: RunResult, console: Console, *, as_json: bool = False) -> Analysis | None:
    """Print the run's summary; returns the analysis it printed (None without ``[analyze]``)."""
    facts = run_facts(result)
    analysis: Analysis | None = None
    if extras.has("analyze"):
        from sseguard.analyze import print_summary

        analysis = analyze_run(result)
        if as_json:
            console.print_json(json.dumps({**facts, "analysis": analysis.to_dict()}, default=str))
            return analysis
        print_summary(analysis, console)
    else:
        tally = tally_run(result)
        if as_json:
            console.print_json(json.dumps({**facts, "analysis": None, "counts": tally_dict(tally)},
                                          default=str))
            return None
        console.print(endings_table(tally, title="Per arm"))
        if len({level for _, level in tally.levels}) > 1:
            console.print(endings_table(tally, by_level=True, title="Per arm and concurrency"))
        console.print(NO_ANALYSIS, markup=False, highlight=False, soft_wrap=True)
    state = "interrupted — resume with --resume " + facts["out"] if result.interrupted else "done"
    console.print(f"[bold]run {result.run_id}[/]: {state}; {facts['new_records']} requests in "
                  f"{result.elapsed:.1f} s, probe CPU mean {result.cpu.mean:.0%} of a core",
                  highlight=False)
    warning = cpu_warning(result)
    if warning:
        console.print(f"[bold yellow]warning:[/] {warning}", highlight=False)
    console.print(f"results: {facts['results']}  ·  evidence: {facts['evidence_files']} files in "
                  f"{result.out / EVIDENCE_DIR}", highlight=False, soft_wrap=True)
    if analysis is not None:
        console.print(f"next: sseguard analyze {facts['results']} --html {result.out / 'report.html'}",
                      highlight=False, soft_wrap=True)
    return analysis
