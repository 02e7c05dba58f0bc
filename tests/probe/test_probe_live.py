"""The probe's live board: counts per arm and ending, rates with their interval, bars per arm — rendered
to a recording rich console and read back as text."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from sseguard.core.policy import Policy
from sseguard.core.record import Record
from sseguard.probe.live import LiveView, Tally, endings_table, rate_text, wilson


def _console(*, terminal: bool) -> Console:
    return Console(record=True, file=io.StringIO(), width=140, force_terminal=terminal,
                   color_system=None)


def _rec(arm: str, ending: str, *, level: int = 4, findings: tuple[str, ...] = ()) -> Record:
    return Record(arm=arm, ending=ending, concurrency=level,
                  findings=[{"kind": k, "detail": ""} for k in findings])


def _run() -> list[Record]:
    """Arm `a`: 7 complete, 2 truncated (one with missing_usage), 1 no_done; arm `b`: 3 complete at
    two levels, one with a markup_leak."""
    return ([_rec("a", "complete") for _ in range(7)]
            + [_rec("a", "truncated", findings=("missing_usage",)), _rec("a", "truncated"),
               _rec("a", "no_done")]
            + [_rec("b", "complete", level=1), _rec("b", "complete", level=8),
               _rec("b", "complete", level=8, findings=("markup_leak",))])


@pytest.mark.parametrize(("failed", "total", "low", "high"), [
    (0, 10, 0.0, 0.2775),  # the published Wilson 95 % bounds
    (1, 3, 0.0615, 0.7923),
    (3, 100, 0.0103, 0.0845),
    (10, 10, 0.7225, 1.0),
])
def test_wilson_interval_matches_published_values(failed: int, total: int, low: float,
                                                  high: float) -> None:
    lo, hi = wilson(failed, total)
    assert lo == pytest.approx(low, abs=1e-4) and hi == pytest.approx(high, abs=1e-4)


def test_rate_text_says_the_rate_and_its_interval_or_a_dash() -> None:
    assert rate_text(3, 100) == "3.0 % [1.0–8.5]"
    assert rate_text(1, 3) == "33.3 % [6.1–79.2]"
    assert rate_text(0, 0) == "–"


def test_tally_judges_each_record_under_the_runs_policy() -> None:
    strict, lenient = Tally(Policy.from_spec("strict")), Tally(Policy.from_spec("no-done-ok"))
    for tally in (strict, lenient):
        tally.extend(_run())
    assert (strict.total, strict.failed) == (13, 4)  # 2 truncated, 1 no_done, 1 markup_leak
    assert (lenient.total, lenient.failed) == (13, 3)
    assert strict.arms["a"].endings == {"complete": 7, "truncated": 2, "no_done": 1}
    assert (strict.levels[("b", 8)].total, strict.levels[("b", 8)].failed) == (2, 1)
    assert strict.levels[("b", 1)].failed == 0


def test_endings_table_shows_each_arm_its_endings_findings_and_failure_rate() -> None:
    tally = Tally(Policy())
    tally.extend(_run())
    console = _console(terminal=False)
    console.print(endings_table(tally, title="so far"))
    text = console.export_text()
    lines = text.splitlines()
    header = next(line for line in lines if "requests" in line)
    # Only the endings seen get a column, in the order of the Ending enum.
    assert [h for h in ("complete", "truncated", "no_done", "stalled") if h in header] == [
        "complete", "truncated", "no_done"]
    assert "failed (strict)" in header and "so far" in text
    row_a = next(line for line in lines if line.strip("│ ").startswith("a "))
    # arm, its api, requests, then one column per ending seen
    assert row_a.split("│")[1:7] == [" a   ", " chat ", "       10 ", "        7 ", "         2 ",
                                     "       1 "]
    assert "api" in header
    assert "missing_usage 1" in row_a and "3 · 30.0 % [10.8–60.3]" in row_a
    row_b = next(line for line in lines if line.strip("│ ").startswith("b "))
    assert "markup_leak 1" in row_b and "1 · 33.3 % [6.1–79.2]" in row_b


def test_endings_table_by_level_has_a_row_per_arm_and_level() -> None:
    tally = Tally(Policy())
    tally.extend(_run())
    console = _console(terminal=False)
    console.print(endings_table(tally, by_level=True))
    text = console.export_text()
    assert "arm @ concurrency" in text
    for label, rate in (("a @ 4", "3 · 30.0 %"), ("b @ 1", "0 · 0.0 %"), ("b @ 8", "1 · 50.0 %")):
        row = next(line for line in text.splitlines() if label in line)
        assert rate in row, row


def test_live_board_on_a_terminal_shows_a_bar_per_arm_with_counts_and_the_table() -> None:
    console = _console(terminal=True)
    view = LiveView(console, Tally(Policy()))
    assert view.enabled  # a terminal: the board is live
    view.start(["a", "b"], {"a": 10, "b": None}, completed={"a": 0})
    for record in _run():
        view.add(record)
    view.note("level 8 starts")
    view.stop()
    text = console.export_text()
    assert "level 8 starts" in text
    bar_a = next(line for line in text.splitlines() if line.startswith("a ") and "/" in line)
    assert "10/10" in bar_a and "failed 30.0 % [10.8–60.3]" in bar_a
    bar_b = next(line for line in text.splitlines() if line.startswith("b ") and "failed" in line)
    assert "failed 33.3 % [6.1–79.2]" in bar_b
    assert "failed (strict)" in text and "truncated" in text


def test_a_resumed_run_starts_its_bar_at_what_it_already_has() -> None:
    console = _console(terminal=True)
    view = LiveView(console, Tally(Policy()))
    view.start(["a"], {"a": 20}, completed={"a": 12})
    view.add(_rec("a", "complete"))
    view.stop()
    assert "13/20" in console.export_text()


def test_off_a_terminal_the_board_prints_nothing_but_still_counts() -> None:
    console = _console(terminal=False)
    view = LiveView(console, Tally(Policy()))
    assert not view.enabled
    view.start(["a", "b"], {"a": 10, "b": 3})
    for record in _run():
        view.add(record)
    view.note("level 8 starts")
    view.stop()
    assert console.export_text() == ""
    assert (view.tally.total, view.tally.failed) == (13, 4)
