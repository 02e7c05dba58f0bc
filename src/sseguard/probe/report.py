"""The end of a probe run, for a person (terminal) or a script (``--json``).

The numbers come from ``sseguard.analyze`` so the probe, ``sseguard analyze`` and the demo agree; the
probe adds only what it alone knows: how the run went (interrupted, elapsed, its own CPU) and where
the files are.
"""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console

from sseguard.analyze import analyze_sources, print_summary
from sseguard.analyze.model import Analysis
from sseguard.errors import ConfigError
from sseguard.probe.cpu import CPU_WARN
from sseguard.probe.runner import RunResult
from sseguard.probe.sink import EVIDENCE_DIR, RESULTS


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
    if not result.total:
        raise ConfigError("no records to analyze")
    return analyze_sources([str(result.results)], result.config.policy)


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


def summarize(result: RunResult, console: Console, *, as_json: bool = False) -> Analysis:
    """Print the run's summary; returns the analysis it printed."""
    analysis = analyze_run(result)
    facts = run_facts(result)
    if as_json:
        console.print_json(json.dumps({**facts, "analysis": analysis.to_dict()}, default=str))
        return analysis
    print_summary(analysis, console)
    state = "interrupted — resume with --resume " + facts["out"] if result.interrupted else "done"
    console.print(f"[bold]run {result.run_id}[/]: {state}; {facts['new_records']} requests in "
                  f"{result.elapsed:.1f} s, probe CPU mean {result.cpu.mean:.0%} of a core",
                  highlight=False)
    warning = cpu_warning(result)
    if warning:
        console.print(f"[bold yellow]warning:[/] {warning}", highlight=False)
    console.print(f"results: {facts['results']}  ·  evidence: {facts['evidence_files']} files in "
                  f"{result.out / EVIDENCE_DIR}", highlight=False, soft_wrap=True)
    console.print(f"next: sseguard analyze {facts['results']} --html {result.out / 'report.html'}",
                  highlight=False, soft_wrap=True)
    return analysis
