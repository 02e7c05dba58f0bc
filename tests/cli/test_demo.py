"""`sseguard demo`: a short sweep over all four protocols against an in-process chaos upstream finds
all five hidden patterns (the fifth: markup leaked only from a cached prefix, only under load)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from sseguard.chaos import ApiPattern, ChaosStats, Fault, LoadPattern, RoutedPattern, WindowPattern
from sseguard.chaos.config import CachePattern
from sseguard.demo import LEVELS, SweepClock, run_demo, scenario


def test_scenario_hides_one_pattern_of_each_kind_inside_the_sweep() -> None:
    plan = scenario(20.0)
    kinds = {type(p) for p in plan.chaos.patterns}
    assert kinds == {LoadPattern, RoutedPattern, WindowPattern, ApiPattern, CachePattern}
    (api,) = [p for p in plan.chaos.patterns if isinstance(p, ApiPattern)]
    assert (api.api, api.fault) == ("messages", Fault.NO_FINISH)
    (cache,) = [p for p in plan.chaos.patterns if isinstance(p, CachePattern)]
    # Four arms: 32 streams in flight at level 8, 128 at level 32; only the last level is above.
    assert (cache.fault, cache.above) == (Fault.MARKUP_LEAK, 32)
    assert cache.p(cached=True, inflight=32) == 0.0 < cache.p(cached=True, inflight=33)
    assert cache.p(cached=False, inflight=128) == 0.0
    start, end = plan.window
    # The window lies inside the last level and is far shorter than it (time ≠ load).
    assert (len(LEVELS) - 1) * plan.level_seconds < start < end < len(LEVELS) * plan.level_seconds
    assert end - start < plan.level_seconds / 2


def test_the_sweep_clock_stands_still_until_the_references_are_in() -> None:
    clock = SweepClock(after=64)
    assert clock() == 0.0  # before the server is up
    stats = ChaosStats()
    clock.stats = stats
    stats.requests = 64  # the references: each of 16 prompts once on each of 4 arms
    assert clock() == 0.0
    stats.requests = 65  # the sweep's first request
    first = clock()
    assert 0.0 <= first <= clock()


def test_short_demo_names_every_hidden_pattern_and_writes_the_report(tmp_path: Path) -> None:
    console = Console(record=True, width=120)
    result = run_demo(tmp_path / "demo", seconds=9.0, console=console,
                      err_console=Console(stderr=True, quiet=True), live=False, healing=False)
    assert result.named == dict.fromkeys(result.named, True), console.export_text()
    records = result.run.records
    assert {r.concurrency for r in records} == set(LEVELS)
    assert {(r.arm, r.api) for r in records} == {("chat", "chat"), ("responses", "responses"),
                                                 ("messages", "messages"), ("gemini", "gemini")}
    assert {r.api for r in records if r.ending == "no_finish"} == {"messages"}
    assert len(result.named) == 5
    assert {r.id_prefix for r in records} >= {"gw", "numeric"}
    html = result.report.read_text("utf-8")
    assert result.report.name == "report.html" and "<html" in html.lower()
    assert result.plots and all(p.stat().st_size > 1000 for p in result.plots)
    assert any((tmp_path / "demo" / "evidence").iterdir())
    text = console.export_text()
    assert "gw-" in text and str(result.report) in text
    # The fifth cause: leaked markup only on prompts served from cache, only at the last level; the
    # uncached prompts (half of the consistency workload's) never leak, at any level.
    leaked = [r for r in records if r.injected == "markup_leak"]
    assert leaked and {r.concurrency for r in leaked} == {LEVELS[-1]}
    assert all(r.cache == "most" and not r.passed for r in leaked)
    assert not [r for r in records if r.cache == "none" and r.injected == "markup_leak"]
    # The headlines name the five hidden causes, and nothing else as a cause of its own: every
    # other attribute that separates is the same streams as one of them, or only follows them.
    causes = {"id_prefix", "concurrency", "time_window", "api", "cache"}
    analysis = result.analysis
    assert {a.key for a in analysis.attributes if a.lead} <= causes, analysis.headlines
    for a in analysis.attributes:
        if a.significant and a.key not in causes:
            assert a.confounded_with in causes or (
                a.explained_by and set(a.explained_by.split(" + ")) <= causes), (a.key, a.headline)
    said = " ".join(analysis.headlines)
    assert "`gw-`" in said and "concurrency 32" in said and "into the run" in said, said
    for a in analysis.attributes:
        if a.significant and a.explained_by and a.confounded_with is None:
            assert f"{a.key} " in said.split("not causes of their own", 1)[1], said
    assert "came over messages" in text
    assert "streams with markup_leak had most of the prompt served from cache" in said, said
    # Answers change only under load and only on cached prompts: none diverged from its reference at
    # 1 or 8 (the healthy control), some at 32, every one built on the cache; the search per arm names
    # the cache and the load (on a loaded machine an arm may have too few divergences alone: pooled).
    c = analysis.consistency
    assert c is not None
    assert not [lv for lv in c.levels if lv.concurrency != LEVELS[-1] and lv.rate.failed]
    assert sum(lv.rate.failed for lv in c.levels) > 0
    diverged = [r for r in records if str(r.consistency).startswith("diverged")]
    assert diverged and all(r.cache == "most" and r.concurrency == LEVELS[-1] for r in diverged)
    named = {a.key for found in c.attributes.values() for a in found if a.significant}
    assert {"cache", "concurrency"} <= named, named
