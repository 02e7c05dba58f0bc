"""The end of a probe run: the summary analyzes the results file the run wrote, where it lies, and
the run's counts come from the run itself, not from reading every record back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

import sseguard.analyze.summary
import sseguard.probe.runner
from sseguard.chaos import ChaosConfig, Fault, run_chaos
from sseguard.probe.report import summarize
from sseguard.probe.runner import execute
from support.probe import FAST, config


def _no_read_back(*args: object, **kwargs: object) -> None:
    raise AssertionError("the records were read back into memory")


async def test_summary_counts_the_results_file_without_reading_records_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with run_chaos(ChaosConfig(pacing=FAST, faults={Fault.TRUNCATED: 0.5}, seed=4)) as srv:
        cfg = config(srv.url, tmp_path, count=12, concurrency="2")
        result = await execute(cfg, live=False)
    lines = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    failed = sum(1 for line in lines if line["ending"] != "complete")
    assert result.results == tmp_path / "results.jsonl"
    assert (result.total, result.new_records, result.failed, result.new_failed) == (12, 12, failed, failed)
    assert 0 < failed < 12  # the seed cuts some streams and not others
    monkeypatch.setattr(sseguard.probe.runner, "read_results", _no_read_back)
    monkeypatch.setattr(sseguard.analyze.summary, "analyze", _no_read_back)
    console = Console(record=True, width=120)
    analysis = summarize(result, console)
    assert (analysis.total.total, analysis.total.failed) == (12, failed)
    assert "requests" in console.export_text()


async def test_a_resumed_run_counts_its_earlier_records_too(tmp_path: Path) -> None:
    async with run_chaos(ChaosConfig(pacing=FAST)) as srv:
        first = await execute(config(srv.url, tmp_path, count=3, concurrency="1"), live=False)
        second = await execute(config(srv.url, tmp_path, count=5, concurrency="1"), resume=True,
                               live=False)
    assert (first.total, first.new_records) == (3, 3)
    assert (second.total, second.new_records, second.failed, second.new_failed) == (5, 2, 0, 0)
    assert sorted(r.index for r in second.records) == [0, 1, 2, 3, 4]
