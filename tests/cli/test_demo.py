"""`sseguard demo`: a short sweep over all four protocols against an in-process chaos upstream finds
all four hidden patterns."""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console

from sseguard.chaos import ApiPattern, Fault, LoadPattern, RoutedPattern, WindowPattern
from sseguard.demo import LEVELS, run_demo, scenario


def test_scenario_hides_one_pattern_of_each_kind_inside_the_sweep() -> None:
    plan = scenario(20.0)
    kinds = {type(p) for p in plan.chaos.patterns}
    assert kinds == {LoadPattern, RoutedPattern, WindowPattern, ApiPattern}
    (api,) = [p for p in plan.chaos.patterns if isinstance(p, ApiPattern)]
    assert (api.api, api.fault) == ("messages", Fault.NO_FINISH)
    start, end = plan.window
    # The window lies inside the last level and is far shorter than it (time ≠ load).
    assert (len(LEVELS) - 1) * plan.level_seconds < start < end < len(LEVELS) * plan.level_seconds
    assert end - start < plan.level_seconds / 2


def test_short_demo_names_every_hidden_pattern_and_writes_the_report(tmp_path: Path) -> None:
    console = Console(record=True, width=120)
    began = time.monotonic()
    result = run_demo(tmp_path / "demo", seconds=9.0, console=console,
                      err_console=Console(stderr=True, quiet=True), live=False, healing=False)
    elapsed = time.monotonic() - began
    assert result.named == dict.fromkeys(result.named, True), console.export_text()
    assert elapsed < 30
    records = result.run.records
    assert {r.concurrency for r in records} == set(LEVELS)
    assert {(r.arm, r.api) for r in records} == {("chat", "chat"), ("responses", "responses"),
                                                 ("messages", "messages"), ("gemini", "gemini")}
    assert {r.api for r in records if r.ending == "no_finish"} == {"messages"}
    assert len(result.named) == 4
    assert {r.id_prefix for r in records} >= {"gw", "numeric"}
    html = result.report.read_text("utf-8")
    assert result.report.name == "report.html" and "<html" in html.lower()
    assert result.plots and all(p.stat().st_size > 1000 for p in result.plots)
    assert any((tmp_path / "demo" / "evidence").iterdir())
    text = console.export_text()
    assert "gw-" in text and str(result.report) in text
    # The headlines name the four hidden causes, and nothing else as a cause of its own: every
    # other attribute that separates is the same streams as one of them, or only follows them.
    causes = {"id_prefix", "concurrency", "time_window", "api"}
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
