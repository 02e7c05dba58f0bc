"""The asyncio runner: bounds, concurrency, rate, ramp, arms side by side, stop and resume."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import Counter
from pathlib import Path

import pytest

from sseguard.chaos import ChaosConfig, Fault, Pacing, run_chaos
from sseguard.core.errors import ConfigError
from sseguard.core.record import Record
from sseguard.probe.config import build_config
from sseguard.probe.runner import execute
from sseguard.probe.sink import RESULTS, read_results
from support.probe import FAST, config, free_port


async def test_count_bounds_each_arm_and_concurrency_is_never_exceeded(tmp_path: Path) -> None:
    async with run_chaos(ChaosConfig(pacing=FAST)) as a, run_chaos(ChaosConfig(pacing=FAST)) as b:
        cfg = config([f"left={a.url}", f"right={b.url}"], tmp_path, count=40, concurrency="6")
        result = await execute(cfg, live=False)
        assert a.stats.max_inflight <= 6 and b.stats.max_inflight <= 6
        assert a.stats.max_inflight >= 4  # the workers really ran side by side
    by_arm = Counter(r.arm for r in result.records)
    assert by_arm == {"left": 40, "right": 40}
    for arm in ("left", "right"):
        assert sorted(r.index for r in result.records if r.arm == arm) == list(range(40))
    assert {r.concurrency for r in result.records} == {6}
    assert {r.run_id for r in result.records} == {result.run_id}
    assert result.exit_code == 0 and not result.interrupted
    run_doc = json.loads((tmp_path / "run.json").read_text())
    assert run_doc["sessions"][0]["records"] == 80
    assert run_doc["config"]["arms"][0]["name"] == "left"


async def test_duration_bounds_a_run_without_a_count(tmp_path: Path) -> None:
    async with run_chaos(ChaosConfig(pacing=Pacing(inter_token_ms=5.0, tokens=10))) as srv:
        cfg = config(srv.url, tmp_path, count=None, duration="1.0", concurrency="4")
        result = await execute(cfg, live=False)
    assert 1.0 <= result.elapsed < 10.0  # no earlier than asked; a busy machine may run over
    assert 10 < len(result.records) < 400


async def test_rate_spaces_request_starts(tmp_path: Path) -> None:
    async with run_chaos(ChaosConfig(pacing=FAST)) as srv:
        cfg = config(srv.url, tmp_path, count=11, concurrency="8", rate=20.0)
        result = await execute(cfg, live=False)
    starts = sorted(r.started_at for r in result.records)
    # Slots are 50 ms apart and never bunch up after a lag; a start is recorded a little after its
    # slot, by however long a busy loop takes to get to it, so single gaps may shrink somewhat.
    assert starts[-1] - starts[0] >= 10 / 20.0 - 0.1
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert sum(g >= 0.04 for g in gaps) >= len(gaps) // 2


async def test_explicit_ramp_spreads_the_first_requests(tmp_path: Path) -> None:
    pacing = Pacing(inter_token_ms=20.0, tokens=40)  # streams of ~0.8 s
    async with run_chaos(ChaosConfig(pacing=pacing)) as srv:
        cfg = config(srv.url, tmp_path, count=8, concurrency="8", ramp=0.8)
        result = await execute(cfg, live=False)
    starts = sorted(r.started_at for r in result.records)
    assert 0.6 <= starts[-1] - starts[0] <= 5.0


async def test_default_ramp_waits_for_one_stream_then_spreads_over_its_length(tmp_path: Path) -> None:
    pacing = Pacing(inter_token_ms=10.0, tokens=30)  # ~0.3 s per stream
    async with run_chaos(ChaosConfig(pacing=pacing)) as srv:
        cfg = config(srv.url, tmp_path, count=24, concurrency="6", ramp=None)
        result = await execute(cfg, live=False)
    starts = sorted(r.started_at for r in result.records)
    assert starts[1] - starts[0] >= 0.25  # the pilot stream went alone
    # then the six workers started spread over about one stream length (5 × 0.3 s / 5 … 0.24 s)
    assert 0.15 <= starts[6] - starts[1] <= 2.0  # a busy machine may stretch it, never shrink it


async def test_stop_keeps_finished_records_and_resume_does_exactly_the_rest(tmp_path: Path) -> None:
    pacing = Pacing(inter_token_ms=5.0, tokens=10)
    async with run_chaos(ChaosConfig(pacing=pacing)) as srv:
        cfg = config(srv.url, tmp_path, count=60, concurrency="3")
        stop = asyncio.Event()
        task = asyncio.create_task(execute(cfg, live=False, stop=stop))
        while len(list(read_results(tmp_path))) < 10:
            await asyncio.sleep(0.02)
        stop.set()
        first = await task
        assert first.interrupted and first.exit_code == 130
        kept = len(first.records)
        assert 10 <= kept < 60
        # A torn last line (killed mid-write) is cut off, not misread.
        with (tmp_path / RESULTS).open("ab") as f:
            f.write(b'{"arm": "arm1", "ind')
        second = await execute(cfg, resume=True, live=False)
    indexes = sorted(r.index for r in second.records)
    assert indexes == list(range(60))
    assert second.new_records == 60 - kept and not second.interrupted
    assert {r.run_id for r in second.records} == {first.run_id}
    sessions = json.loads((tmp_path / "run.json").read_text())["sessions"]
    assert [s["interrupted"] for s in sessions] == [True, False]


async def test_a_new_run_refuses_a_directory_that_holds_one(tmp_path: Path) -> None:
    async with run_chaos(ChaosConfig(pacing=FAST)) as srv:
        await execute(config(srv.url, tmp_path, count=2, concurrency="1"), live=False)
        with pytest.raises(ConfigError, match="--resume"):
            await execute(config(srv.url, tmp_path, count=2, concurrency="1"), live=False)


async def test_unreachable_arm_at_start_is_unusable_input(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(ConfigError, match=r"cannot reach 127\.0\.0\.1"):
        await execute(config(url, tmp_path, count=2), live=False)
    assert not (tmp_path / RESULTS).exists()


async def test_arm_that_dies_mid_run_records_transport_errors_and_the_other_goes_on(
        tmp_path: Path) -> None:
    pacing = Pacing(inter_token_ms=4.0, tokens=10)
    async with run_chaos(ChaosConfig(pacing=pacing)) as good:
        doomed = run_chaos(ChaosConfig(pacing=pacing))
        bad = await doomed.__aenter__()
        cfg = config([f"good={good.url}", f"bad={bad.url}"], tmp_path, count=24, concurrency="4")
        task = asyncio.create_task(execute(cfg, live=False))
        while bad.stats.requests < 8:
            await asyncio.sleep(0.005)
        await doomed.__aexit__(None, None, None)
        result = await task
    good_records = [r for r in result.records if r.arm == "good"]
    bad_records = [r for r in result.records if r.arm == "bad"]
    assert len(good_records) == 24 and all(r.ending == "complete" for r in good_records)
    assert len(bad_records) == 24
    endings = Counter(r.ending for r in bad_records)
    assert endings["transport_error"] >= 12
    assert any(r.status is None for r in bad_records)
    assert result.exit_code == 1


async def test_reuse_workload_grows_one_conversation_per_kept_alive_connection(tmp_path: Path) -> None:
    async with run_chaos(ChaosConfig(pacing=FAST)) as srv:
        cfg = config(srv.url, tmp_path, count=60, concurrency="4", workload="reuse", max_turns=100)
        result = await execute(cfg, live=False)
    assert len(result.records) == 60
    by_conn: dict[str | None, list[Record]] = {}
    for r in sorted(result.records, key=lambda r: r.started_at):
        by_conn.setdefault(r.connection, []).append(r)
    assert None not in by_conn  # every stream's connection was seen, for the whole run
    assert len(by_conn) == 4  # one connection per worker, kept alive throughout
    for turns in by_conn.values():
        sizes = [r.prompt_bytes for r in turns]
        assert sizes == sorted(sizes) and sizes[-1] > sizes[0]
        # Each turn is the next request on its worker's one connection: 0, 1, 2, … to the end.
        assert [r.reuse_index for r in turns] == list(range(len(turns)))


async def test_reuse_conversation_does_not_grow_after_a_cut_answer(tmp_path: Path) -> None:
    chaos = ChaosConfig(pacing=FAST, faults={Fault.TRUNCATED: 0.5}, seed=4)
    async with run_chaos(chaos) as srv:
        cfg = config(srv.url, tmp_path, count=16, concurrency="1", workload="reuse",
                     max_turns=100)
        result = await execute(cfg, live=False)
    records = sorted(result.records, key=lambda r: r.index)
    for prev, cur in itertools.pairwise(records):
        if prev.ending == "truncated":
            assert cur.prompt_bytes == prev.prompt_bytes  # the same turn again
        elif prev.ending == "complete":
            assert cur.prompt_bytes > prev.prompt_bytes
    assert any(r.ending == "truncated" for r in records)


async def test_tools_workload_answers_tool_calls_with_tool_results(tmp_path: Path) -> None:
    async with run_chaos(ChaosConfig(pacing=FAST)) as srv:
        cfg = config(srv.url, tmp_path, count=6, concurrency="1", workload="tools")
        result = await execute(cfg, live=False)
    records = sorted(result.records, key=lambda r: r.index)
    assert all(r.ending == "complete" for r in records)
    # call → tool result (longer prompt) → text answer → a new task (short prompt again)
    assert records[0].finish_reasons == ["tool_calls"]
    assert records[1].finish_reasons == ["stop"] and records[1].prompt_bytes > records[0].prompt_bytes
    assert records[2].finish_reasons == ["tool_calls"] and records[2].prompt_bytes < records[1].prompt_bytes


async def test_big_workload_sends_unique_prompts_of_the_configured_size(tmp_path: Path) -> None:
    async with run_chaos(ChaosConfig(pacing=FAST)) as srv:
        cfg = config(srv.url, tmp_path, count=3, concurrency="3", workload="big", big_bytes=200_000)
        result = await execute(cfg, live=False)
    assert all(200_000 < r.prompt_bytes < 201_000 for r in result.records)
    assert len({r.response_id for r in result.records}) == 3
    assert all(r.ending == "complete" for r in result.records)


async def test_cpu_is_sampled_each_second_and_kept_in_run_json(tmp_path: Path) -> None:
    async with run_chaos(ChaosConfig(pacing=Pacing(inter_token_ms=5.0, tokens=20))) as srv:
        cfg = config(srv.url, tmp_path, count=None, duration="2.2", concurrency="4")
        result = await execute(cfg, live=False)
    assert len(result.cpu.samples) >= 2
    assert 0.0 < result.cpu.mean < 2.0
    cpu = json.loads((tmp_path / "run.json").read_text())["sessions"][0]["cpu"]
    assert len(cpu["per_second"]) == len(result.cpu.samples) and cpu["cpu_seconds"] > 0


async def test_a_body_file_run_resumes_with_the_same_body(tmp_path: Path) -> None:
    body = tmp_path / "req.json"
    body.write_text(json.dumps({"messages": [{"role": "user", "content": "hello from a file"}],
                                "model": "mine", "temperature": 0.1}))
    out = tmp_path / "out"
    async with run_chaos(ChaosConfig(pacing=FAST)) as srv:
        first = await execute(config(srv.url, out, count=4, concurrency="1", body=str(body)),
                              live=False)
        saved = json.loads((out / "run.json").read_text())["config"]
        resumed = build_config({"out": str(out), "count": 6}, saved=saved)
        second = await execute(resumed, resume=True, live=False)
    assert first.config.workload.body_file == resumed.workload.body_file == str(body)
    assert sorted(r.index for r in second.records) == list(range(6))
    assert {r.model for r in second.records} == {"mine"}
    assert {r.workload for r in second.records} == {"body"}
