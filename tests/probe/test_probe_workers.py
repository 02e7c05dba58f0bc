"""``sseguard probe --workers N``: one run shared by N processes, one merged ``results.jsonl``."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from sseguard.chaos import ChaosConfig, Fault
from sseguard.chaos.server import run_chaos_in_thread
from sseguard.cli import app
from sseguard.probe.runner import Share, _Indexes
from sseguard.probe.sink import RESULTS, read_results
from sseguard.probe.workers import run_parallel
from support.probe import FAST, config


def test_two_processes_send_exactly_count_requests_and_merge_every_record(tmp_path: Path) -> None:
    chaos = ChaosConfig(pacing=FAST, seed=3, faults={Fault.TRUNCATED: 0.25})
    with run_chaos_in_thread(chaos) as server:
        result = run_parallel(config(server.url, tmp_path, count=40, concurrency="6"), 2)
        sent = server.stats.requests
    records = list(read_results(tmp_path))
    assert sent == 40
    assert len(records) == 40
    assert result.new_records == 40
    assert sorted(r.index for r in records) == list(range(40))
    assert Counter(r.worker for r in records) == {"0": 20, "1": 20}
    assert {r.concurrency for r in records} == {6}
    assert {r.run_id for r in records} == {result.run_id}
    # What the server injected is what the records say, and each broken stream has its evidence.
    truncated = [r for r in records if r.injected == "truncated"]
    assert truncated and all(r.ending == "truncated" for r in truncated)
    assert all((tmp_path / r.evidence).is_file() for r in truncated if r.evidence)
    assert all(r.evidence for r in truncated)
    assert sorted(p.name for p in tmp_path.glob("results*.jsonl")) == [RESULTS]
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["sessions"][-1]["records"] == 40
    assert run["sessions"][-1]["workers"] == 2
    assert result.exit_code == 1  # the truncated streams fail the strict policy


def test_workers_option_rejects_a_non_number_with_exit_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["probe", "--arm", "a=http://127.0.0.1:9/v1", "--workers", "two",
                                      "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert "--workers 'two'" in result.output


@given(total=st.integers(0, 500), count=st.integers(1, 16))
def test_shares_of_concurrency_add_up_and_differ_by_at_most_one(total: int, count: int) -> None:
    parts = [Share(i, count).part(total) for i in range(count)]
    assert sum(parts) == total
    assert max(parts) - min(parts) <= 1


@given(count=st.integers(0, 200), processes=st.integers(1, 8), base=st.integers(0, 3) )
def test_shares_of_indexes_are_disjoint_and_cover_the_level(count: int, processes: int,
                                                             base: int) -> None:
    taken: list[int] = []
    for i in range(processes):
        indexes = _Indexes("a", base * 1000, count, None, set(), Share(i, processes))
        while (index := indexes.take(0.0)) is not None:
            taken.append(index)
    assert sorted(taken) == list(range(base * 1000, base * 1000 + count))
