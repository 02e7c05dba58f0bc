"""``sseguard demo``: the whole story in half a minute, with no network and no key.

A chaos upstream starts in this process on a free loopback port with four hidden faults of the kinds
real incidents have — cuts that grow with load, truncation on one route (response ids ``gw-…`` among
the protocols' own), a burst of error events in one time window, and streams without a
``stop_reason`` on the Anthropic Messages path only (as reported of one gateway's Anthropic path) —
then a short sweep probes it over every registered protocol side by side (one arm each: chat
completions, responses, messages, gemini) and the analyzer says, in plain words, what the failing
streams share. The demo ends by checking its own answer: each hidden pattern against what the
analysis named.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from sseguard._serve import loop_factory
from sseguard.analyze import analyze, print_summary, write_html, write_pngs
from sseguard.analyze.model import Analysis, Split
from sseguard.chaos import (
    ApiPattern,
    ChaosConfig,
    Fault,
    LoadPattern,
    Pacing,
    RoutedPattern,
    WindowPattern,
    run_chaos,
)
from sseguard.contract import protocols
from sseguard.errors import ConfigError
from sseguard.policy import Policy
from sseguard.probe.config import ProbeConfig, make_arm
from sseguard.probe.runner import RunResult, execute, quiet_gc
from sseguard.verdict import Api

DEFAULT_SECONDS = 20.0
LEVELS = (1, 8, 32)
#: One arm per protocol, side by side against the same upstream.
APIS = tuple(p.api for p in protocols())
#: Streams of ~0.2 s: 24 content chunks 6 ms apart after 15 ms to the first.
PACING = Pacing(ttft_ms=15.0, inter_token_ms=6.0, tokens=24)


@dataclass(frozen=True, slots=True)
class Scenario:
    """The hidden faults and the sweep that should expose them."""

    chaos: ChaosConfig
    level_seconds: float
    window: tuple[float, float]  # seconds after the server started


def scenario(seconds: float = DEFAULT_SECONDS, *, seed: int = 12) -> Scenario:
    """Four patterns: load-dependent cuts, a routed truncation, a window of error events, and a
    fault only the messages path has."""
    if not 3.0 <= seconds <= 600.0:
        raise ConfigError(f"--seconds {seconds:g}: give between 3 and 600")
    level = seconds / len(LEVELS)
    # The window sits inside the last level and is much shorter than it: a sweep runs its levels one
    # after another, so a window as long as a level could not be told apart from that level.
    window = (level * 2.35, level * 2.65)
    arms = float(len(APIS))  # the streams in flight at a level: the level on each arm
    chaos = ChaosConfig(
        seed=seed,
        id_prefix="",  # numeric chat ids (responses and messages keep `resp_…`, `msg_…`)
        pacing=PACING,
        patterns=(
            # 0 % at 1 stream in flight per arm, 3 % at 8, 30 % at 32
            LoadPattern(Fault.CUT_MID_FRAME, ((arms, 0.0), (8 * arms, 0.03), (32 * arms, 0.3))),
            RoutedPattern(Fault.TRUNCATED, share=0.2, prefix="gw-", probability=0.5),
            # An overload burst: error events inside 200 streams, as a saturated engine sends them.
            WindowPattern(Fault.ERROR_EVENT, window[0], window[1], probability=0.9),
            # The Anthropic path of a gateway: message_stop without any stop_reason.
            ApiPattern(Fault.NO_FINISH, str(Api.MESSAGES), probability=0.25),
        ),
    )
    return Scenario(chaos=chaos, level_seconds=level, window=window)


@dataclass
class DemoResult:
    run: RunResult
    analysis: Analysis
    report: Path
    plots: list[Path]
    named: dict[str, bool]  # hidden pattern → did the analysis name its attribute


def _named(analysis: Analysis) -> dict[str, bool]:
    """Which hidden patterns the analysis found: a significant attribute whose best split is the one
    hidden (the ``gw`` prefix; the highest level and not the lowest; a window of error events; the
    messages api) — searched among the streams that failed the way the pattern fails them, as the
    analysis does for each kind of failure, else over all failures."""
    prefix = _best(analysis, "id_prefix", "truncated")
    level = _best(analysis, "concurrency", "cut_mid_frame")
    window = _best(analysis, "time_window", "error_event")
    api = _best(analysis, "api", "no_finish")
    return {
        "routed: ids gw-… truncated": prefix is not None and prefix.values == ("gw",),
        "load: cuts grow with concurrency": level is not None and str(LEVELS[-1]) in level.values
        and str(LEVELS[0]) not in level.values,
        "window: error events for a few seconds": window is not None and bool(window.failures_in)
        and max(window.failures_in, key=lambda k: window.failures_in[k]) == "error_event",
        "api: messages streams end without stop_reason": api is not None
        and api.values == (str(Api.MESSAGES),),
    }


def _best(analysis: Analysis, key: str, reason: str) -> Split | None:
    """The significant best split of attribute ``key`` for failures of one kind (``reason``), else
    over all failures; None when neither search found it significant."""
    for attrs in (analysis.by_reason.get(reason, []), analysis.attributes):
        attr = next((a for a in attrs if a.key == key), None)
        if attr is not None and attr.significant and attr.best is not None:
            return attr.best
    return None


async def demo_async(out: str | Path, *, seconds: float = DEFAULT_SECONDS,
                     console: Console | None = None, err_console: Console | None = None,
                     live: bool | None = None) -> DemoResult:
    """Run the demo inside the running loop; files go to ``out``."""
    console = console or Console()
    err_console = err_console or Console(stderr=True)
    plan = scenario(seconds)
    out_dir = Path(out)
    async with run_chaos(plan.chaos) as server:
        err_console.print(
            f"[bold]sseguard demo[/]: a chaos upstream on {server.url} with four hidden faults; "
            f"probing it over {', '.join(map(str, APIS))} at concurrency "
            f"{', '.join(map(str, LEVELS))} for {plan.level_seconds:.0f} s each…",
            highlight=False, soft_wrap=True)
        arms = tuple(make_arm(str(api), server.url, model="chaos-1", api=api) for api in APIS)
        config = ProbeConfig(
            arms=arms, levels=LEVELS, count=None,
            duration=plan.level_seconds, stall_timeout=5.0, timeout=30.0, out=str(out_dir),
            policy=Policy(), check_reachable=False)
        result = await execute(config, console=err_console, live=live)
    analysis = analyze(result.records, config.policy)
    print_summary(analysis, console)
    report = write_html(analysis, result.records, out_dir / "report.html")
    plots = write_pngs(analysis, result.records, out_dir / "plots")
    named = _named(analysis)
    console.print("[bold]What the demo hid, and whether the analysis named it[/]", highlight=False)
    for pattern, ok in named.items():
        mark = "[green]found[/]" if ok else "[red]missed[/]"
        console.print(f"  {mark}  {pattern}", highlight=False)
    console.print(f"report: {report}  ·  plots: {out_dir / 'plots'}  ·  results: "
                  f"{out_dir / 'results.jsonl'}", highlight=False, soft_wrap=True)
    return DemoResult(run=result, analysis=analysis, report=report, plots=plots, named=named)


def run_demo(out: str | Path | None = None, *, seconds: float = DEFAULT_SECONDS,
             console: Console | None = None, err_console: Console | None = None,
             live: bool | None = None) -> DemoResult:
    """``sseguard demo`` on a fresh event loop (uvloop when installed)."""
    target = Path(out) if out is not None else Path(f"sseguard-runs/demo-{time.strftime('%Y%m%d-%H%M%S')}")
    scenario(seconds)  # bad --seconds fails before anything starts
    with quiet_gc(), asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(demo_async(target, seconds=seconds, console=console,
                                     err_console=err_console, live=live))
