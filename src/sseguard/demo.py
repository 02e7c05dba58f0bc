"""``sseguard demo``: the whole story in half a minute, with no network and no key.

A chaos upstream starts in this process on a free loopback port with five hidden faults of the kinds
real incidents have — cuts that grow with load, truncation on one route (response ids ``gw-…`` among
the protocols' own), a burst of error events in one time window, streams without a ``stop_reason`` on
the Anthropic Messages path only (as reported of one gateway's Anthropic path), and markup leaked into
the text of answers built on a cached prompt prefix, only under load (issue 39's incident: a race in a
hierarchical KV cache) — then a short sweep probes it over every registered protocol side by side (one
arm each: chat completions, responses, messages, gemini) with the ``consistency`` workload (half its
prompts share one long prefix, which the upstream's prefix cache serves; half are short and never
cached), and the analyzer says, in plain words, what the failing streams share. The demo ends by
checking its own answer: each hidden pattern against what the analysis named.

The demo paces its hidden patterns by its own events, never by how fast the machine is: the load the
load and cache patterns see is the load the sweep asks for at its current level (the level's streams
in flight on every arm), told by the probe as each level begins, and the window of error events is
placed in seconds after the last level began (``Sweep``). On a busy machine the sweep may never reach
that many streams in flight at once; the faults still follow the level, as the analysis expects.

A second act sends the same hidden faults through an in-process ``sseguard proxy --retry 2 --resume
vllm,anthropic`` (chat and messages, which each continue in their own dialect) and counts, per ending,
the streams the client saw fail without the proxy and with it: fewer fail, and each one that still does
fails explicitly (an error the client raises), never silently.

It sits above the adapters it strings together (chaos, probe, proxy, store, analyze), beside the CLI
command that calls it, so that none of them has to import another for its sake.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from sseguard._serve import loop_factory
from sseguard.analyze import print_summary, write_html, write_pngs
from sseguard.analyze.model import Analysis, Split
from sseguard.analyze.report import EVIDENCE_COUNT
from sseguard.analyze.summary import analyze_with_evidence
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
from sseguard.chaos.config import CachePattern
from sseguard.core.contract import protocols
from sseguard.core.errors import ConfigError
from sseguard.core.policy import Policy
from sseguard.core.verdict import Api, Ending
from sseguard.probe.config import ProbeConfig, WorkloadSpec, make_arm
from sseguard.probe.runner import RunResult, execute, quiet_gc
from sseguard.proxy import ProxyConfig, run_proxy
from sseguard.store import open_store

DEFAULT_SECONDS = 20.0
LEVELS = (1, 8, 32)
#: One arm per protocol, side by side against the same upstream.
APIS = tuple(p.api for p in protocols())
#: Streams of ~0.2 s: 24 content chunks 6 ms apart after 15 ms to the first.
PACING = Pacing(ttft_ms=15.0, inter_token_ms=6.0, tokens=24)
#: The second act: the protocols that can be continued, streams per arm, in flight per arm (bounded
#: by count alone, so a slow machine plays it whole).
HEAL_APIS = (Api.CHAT, Api.MESSAGES)
HEAL_COUNT = 120
HEAL_LEVEL = 16
#: The share of cached answers at the last level whose text the cache pattern corrupts (of those no
#: earlier pattern took).
CACHE_LEAK = 0.4
#: Endings a client raises on (an error event, an error status, a broken connection); every other bad
#: ending (truncated, no_finish, a cut frame, …) is a silent half answer.
EXPLICIT = frozenset({Ending.ERROR_EVENT, Ending.HTTP_ERROR, Ending.TRANSPORT_ERROR})


@dataclass(frozen=True, slots=True)
class Scenario:
    """The hidden faults and the sweep that should expose them."""

    chaos: ChaosConfig
    level_seconds: float
    window: tuple[float, float]  # seconds after the sweep's last level began (``Sweep``)


def scenario(seconds: float = DEFAULT_SECONDS, *, seed: int = 12) -> Scenario:
    """Five patterns: load-dependent cuts, a routed truncation, a window of error events, a fault
    only the messages path has, and markup leaked only from a cached prefix under load.

    The window's seconds count from the start of the sweep's last level, and the load the patterns
    see is the level's (``Sweep``): how long the references or the earlier levels took, and how many
    streams the machine managed to hold in flight, change nothing."""
    if not 3.0 <= seconds <= 600.0:
        raise ConfigError(f"--seconds {seconds:g}: give between 3 and 600")
    level = seconds / len(LEVELS)
    # The window sits inside the last level and is much shorter than it: a sweep runs its levels one
    # after another, so a window as long as a level could not be told apart from that level.
    window = (level * 0.35, level * 0.65)
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
            # The incident: answers built on a cached prefix get markup in their text, only when more
            # than 8 streams per arm are in flight (the last level); uncached prompts never do.
            CachePattern(Fault.MARKUP_LEAK, above=int(8 * arms), probability=CACHE_LEAK),
        ),
    )
    return Scenario(chaos=chaos, level_seconds=level, window=window)


class Sweep:
    """What the demo's chaos upstream paces its patterns by: the sweep's own events.

    ``level_began(level)`` (the probe's ``on_level``) moves it on; ``load(measured)`` is the load the
    sweep asks for at its level — the level on each of ``arms`` arms — while it runs, else the
    requests in flight measured (the references before, the second act after); ``clock()`` is 0
    until the last level began, then the seconds since (the window of error events)."""

    def __init__(self, levels: tuple[int, ...], arms: int,
                 now: Callable[[], float] = time.monotonic) -> None:
        self.levels = levels
        self.arms = arms
        self._now = now
        self.level: int | None = None  # the level running, None outside the sweep
        self._zero: float | None = None

    def level_began(self, level: int) -> None:
        self.level = level
        if level == self.levels[-1]:
            self._zero = self._now()

    def ended(self) -> None:
        self.level = None

    def load(self, measured: int) -> int:
        return measured if self.level is None else self.level * self.arms

    def clock(self) -> float:
        return 0.0 if self._zero is None else self._now() - self._zero


@dataclass
class DemoResult:
    run: RunResult
    analysis: Analysis
    report: Path
    plots: list[Path]
    named: dict[str, bool]  # hidden pattern → did the analysis name its attribute
    heal: HealAct | None = None


@dataclass(frozen=True, slots=True)
class HealAct:
    """The second act: client-side failures per ending without the proxy and through it."""

    streams: int  # per side
    before: dict[str, int]
    after: dict[str, int]
    healed: dict[str, int]  # healed client streams by how (retry, resume), from the proxy's records

    @property
    def silent_after(self) -> int:
        """Failures the client saw through the proxy that were not explicit (should be none)."""
        return sum(n for ending, n in self.after.items() if ending not in EXPLICIT)


def _named(analysis: Analysis) -> dict[str, bool]:
    """Which hidden patterns the analysis found: a significant attribute whose best split is the one
    hidden (the ``gw`` prefix; the highest level and not the lowest; a window of error events; the
    messages api; the prompts served from cache, and the highest level and not the lowest, for the
    leaked markup) — searched among the streams that failed the way the pattern fails them, as the
    analysis does for each kind of failure, else over all failures."""
    prefix = _best(analysis, "id_prefix", "truncated")
    level = _best(analysis, "concurrency", "cut_mid_frame")
    window = _best(analysis, "time_window", "error_event")
    api = _best(analysis, "api", "no_finish")
    cache = _best(analysis, "cache", "markup_leak")
    leak_level = _best(analysis, "concurrency", "markup_leak")
    return {
        "routed: ids gw-… truncated": prefix is not None and prefix.values == ("gw",),
        "load: cuts grow with concurrency": level is not None and str(LEVELS[-1]) in level.values
        and str(LEVELS[0]) not in level.values,
        "window: error events for a few seconds": window is not None and bool(window.failures_in)
        and max(window.failures_in, key=lambda k: window.failures_in[k]) == "error_event",
        "api: messages streams end without stop_reason": api is not None
        and api.values == (str(Api.MESSAGES),),
        "cache: markup leaks from a cached prefix, under load": cache is not None
        and cache.values == ("most",) and leak_level is not None
        and str(LEVELS[-1]) in leak_level.values and str(LEVELS[0]) not in leak_level.values,
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
                     live: bool | None = None, healing: bool = True) -> DemoResult:
    """Run the demo inside the running loop; files go to ``out``."""
    console = console or Console()
    err_console = err_console or Console(stderr=True)
    plan = scenario(seconds)
    out_dir = Path(out)
    sweep = Sweep(LEVELS, len(APIS))
    async with run_chaos(plan.chaos, clock=sweep.clock, load=sweep.load) as server:
        err_console.print(
            f"[bold]sseguard demo[/]: a chaos upstream on {server.url} with {len(plan.chaos.patterns)} "
            f"hidden faults; probing it over {', '.join(map(str, APIS))} with the consistency workload "
            f"at concurrency {', '.join(map(str, LEVELS))} for {plan.level_seconds:.0f} s each…",
            highlight=False, soft_wrap=True)
        arms = tuple(make_arm(str(api), server.url, model="chaos-1", api=api) for api in APIS)
        config = ProbeConfig(
            arms=arms, workload=WorkloadSpec(name="consistency"), levels=LEVELS, count=None,
            duration=plan.level_seconds, stall_timeout=5.0, timeout=30.0, out=str(out_dir),
            policy=Policy(), check_reachable=False)
        try:
            result = await execute(config, console=err_console, live=live,
                                   on_level=sweep.level_began)
        finally:
            sweep.ended()
        heal = await heal_act(server.url, out_dir, config.policy, err_console, live=live) if healing else None
    # The probe's results file, analyzed where it lies; only the failures the report quotes come back.
    analysis, evidence = analyze_with_evidence([str(result.results)], config.policy,
                                               evidence=EVIDENCE_COUNT)
    print_summary(analysis, console)
    report = write_html(analysis, evidence, out_dir / "report.html")
    plots = write_pngs(analysis, evidence, out_dir / "plots")
    named = _named(analysis)
    console.print("[bold]What the demo hid, and whether the analysis named it[/]", highlight=False)
    for pattern, ok in named.items():
        mark = "[green]found[/]" if ok else "[red]missed[/]"
        console.print(f"  {mark}  {pattern}", highlight=False)
    if heal is not None:
        console.print(heal_table(heal))
    console.print(f"report: {report}  ·  plots: {out_dir / 'plots'}  ·  results: "
                  f"{out_dir / 'results.jsonl'}", highlight=False, soft_wrap=True)
    return DemoResult(run=result, analysis=analysis, report=report, plots=plots, named=named, heal=heal)


async def heal_act(upstream: str, out_dir: Path, policy: Policy, err_console: Console, *,
                   live: bool | None = None, count: int = HEAL_COUNT) -> HealAct:
    """The same upstream probed directly, then through ``proxy --retry 2 --resume vllm,anthropic``
    (``count`` streams per arm whatever the time they take, one concurrency level)."""
    err_console.print(f"[bold]second act[/]: {count} streams per protocol ({', '.join(map(str, HEAL_APIS))}) "
                      f"straight to the upstream, then through sseguard proxy --retry 2 --resume "
                      "vllm,anthropic…", highlight=False, soft_wrap=True)

    async def probe(url: str, side: str) -> RunResult:
        arms = tuple(make_arm(str(api), url, model="chaos-1", api=api) for api in HEAL_APIS)
        config = ProbeConfig(arms=arms, levels=(HEAL_LEVEL,), count=count, duration=None,
                             stall_timeout=5.0, timeout=30.0, out=str(out_dir / side), policy=policy,
                             check_reachable=False)
        return await execute(config, console=err_console, live=live)

    before = await probe(upstream, "heal-before")
    proxy = ProxyConfig.from_options(upstream=upstream, listen="127.0.0.1:0", retry=2,
                                     resume="vllm,anthropic", stall_timeout=5.0, timeout=30.0,
                                     store=str(out_dir / "proxy.db"))
    async with run_proxy(proxy) as px:
        after = await probe(px.url, "heal-after")
    healed: Counter[str] = Counter()
    store = open_store(str(out_dir / "proxy.db"))
    try:
        for record in store.read():
            if record.heal_of is None and record.healed in ("retry", "resume"):
                healed[record.healed] += 1
    finally:
        store.close()

    def failed(run: RunResult) -> dict[str, int]:
        return dict(Counter(r.ending for r in run.records if not r.passed))

    return HealAct(streams=count * len(HEAL_APIS), before=failed(before), after=failed(after),
                   healed=dict(healed))


def heal_table(act: HealAct) -> Table:
    """Per ending: streams the client saw fail without the proxy, and through it."""
    table = Table(title=f"Second act: {act.streams} streams straight to the upstream, then through "
                        "proxy --retry 2 --resume vllm,anthropic", title_justify="left")
    table.add_column("ending")
    table.add_column("client saw it fail: before", justify="right")
    table.add_column("after", justify="right")
    table.add_column("the client", overflow="fold")
    endings = sorted(set(act.before) | set(act.after), key=lambda e: (-act.before.get(e, 0), e))
    for ending in endings:
        how = "raises an error" if ending in EXPLICIT else "gets a silent half answer"
        table.add_row(ending, str(act.before.get(ending, 0)), str(act.after.get(ending, 0)), how)
    table.add_row("all", str(sum(act.before.values())), str(sum(act.after.values())),
                  f"healed: {act.healed.get('retry', 0)} by retry, {act.healed.get('resume', 0)} by resume",
                  style="bold")
    return table


def run_demo(out: str | Path | None = None, *, seconds: float = DEFAULT_SECONDS,
             console: Console | None = None, err_console: Console | None = None,
             live: bool | None = None, healing: bool = True) -> DemoResult:
    """``sseguard demo`` on a fresh event loop (uvloop when installed); ``healing``: with the second
    act."""
    target = Path(out) if out is not None else Path(f"sseguard-runs/demo-{time.strftime('%Y%m%d-%H%M%S')}")
    scenario(seconds)  # bad --seconds fails before anything starts
    with quiet_gc(), asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(demo_async(target, seconds=seconds, console=console,
                                     err_console=err_console, live=live, healing=healing))
