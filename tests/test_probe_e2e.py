"""End to end against a real chaos server: the probe finds exactly what was injected, the analyzer
names the pattern behind it, policies re-judge a run, and no secret reaches a file."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from aiohttp import web

from _probe_support import FAST, config, expected_of, mismatches, serve_app
from sseguard.analyze import analyze
from sseguard.chaos import (
    ChaosConfig,
    Dialect,
    Fault,
    FaultOptions,
    LoadPattern,
    Pacing,
    RoutedPattern,
    WindowPattern,
    run_chaos,
)
from sseguard.policy import Policy
from sseguard.probe.runner import execute

COUNTER = web.AppKey("counter", list[int])
MIXED = {Fault.TRUNCATED: 0.08, Fault.NO_DONE: 0.05, Fault.NO_FINISH: 0.05, Fault.CUT_MID_FRAME: 0.06,
         Fault.TRANSPORT_ERROR: 0.06, Fault.ERROR_EVENT: 0.05, Fault.HTTP_ERROR: 0.06,
         Fault.STALLED: 0.03, Fault.EMPTY: 0.04, Fault.MARKUP_LEAK: 0.04,
         Fault.BAD_CHUNK_JSON: 0.04, Fault.FINISH_REASON_MISMATCH: 0.04, Fault.MISSING_USAGE: 0.03,
         Fault.ID_CHANGED: 0.03, Fault.FRAME_AFTER_DONE: 0.03}


async def test_counts_per_ending_equal_the_faults_the_server_injected(tmp_path: Path) -> None:
    # Stalls hang until the probe gives up (after 1 s): no race between two timers.
    chaos = ChaosConfig(seed=5, pacing=FAST, faults=MIXED,
                        options=FaultOptions(stall_then="hang", hang_max_s=60))
    async with run_chaos(chaos) as srv:
        cfg = config(srv.url, tmp_path, count=240, concurrency="12", stall_timeout=1.0)
        result = await execute(cfg, live=False)
        injected_by_server = Counter(srv.stats.faults)
    records = result.records
    assert len(records) == 240
    # Request by request: what the header says was injected is what the record says happened.
    assert mismatches(records) == []
    # And in total: the probe's counts per ending are the server's counts per fault.
    assert Counter(r.injected for r in records) == injected_by_server
    assert Counter(r.ending for r in records) == Counter(expected_of(r)[0] for r in records)
    assert len(set(injected_by_server)) >= 12  # the draw really mixed many faults
    evidence = {p.name for p in (tmp_path / "evidence").glob("*.json")}
    assert len(evidence) == sum(r.ending != "complete" for r in records)


async def test_routed_faults_make_the_id_prefix_the_top_attribute(tmp_path: Path) -> None:
    chaos = ChaosConfig(seed=2, pacing=FAST, id_prefix="",
                        patterns=(RoutedPattern(Fault.TRUNCATED, share=0.25, prefix="gw-"),))
    async with run_chaos(chaos) as srv:
        result = await execute(config(srv.url, tmp_path, count=200, concurrency="8"), live=False)
    analysis = analyze(result.records, Policy())
    top = analysis.top
    assert top is not None and top.key == "id_prefix"
    assert top.best is not None and top.best.values == ("gw",) and top.complete
    assert {r.id_prefix for r in result.records if r.ending == "truncated"} == {"gw"}
    assert {r.id_prefix for r in result.records if r.ending == "complete"} == {"numeric"}
    assert "gw-" in analysis.headlines[1]


async def test_load_dependent_faults_rise_with_the_sweeps_concurrency(tmp_path: Path) -> None:
    load = LoadPattern(Fault.CUT_MID_FRAME, ((1.0, 0.0), (8.0, 0.05), (24.0, 0.35)))
    # The server sees the load it is sent only while streams overlap: a 150 ms first token keeps
    # them open long enough for a level's workers to be in flight together on a busy machine too.
    pacing = Pacing(ttft_ms=150.0, inter_token_ms=1.0, tokens=12)
    async with run_chaos(ChaosConfig(seed=3, pacing=pacing, patterns=(load,))) as srv:
        cfg = config(srv.url, tmp_path, count=48, concurrency="1,8,24")
        result = await execute(cfg, live=False)
    rates = {}
    for level in (1, 8, 24):
        at = [r for r in result.records if r.concurrency == level]
        assert len(at) == 48
        rates[level] = sum(r.ending == "cut_mid_frame" for r in at) / len(at)
    assert rates[1] == 0.0 < rates[24] and rates[8] < rates[24]
    analysis = analyze(result.records, Policy())
    level_rows = {g.concurrency: g.rate.value for g in analysis.levels}
    assert level_rows[1] <= level_rows[8] < level_rows[24]
    concurrency = analysis.attribute("concurrency")
    assert concurrency is not None and concurrency.significant
    assert concurrency.best is not None and "24" in concurrency.best.values
    assert "1" not in concurrency.best.values


async def test_time_window_faults_make_the_analysis_name_the_window(tmp_path: Path) -> None:
    window = WindowPattern(Fault.ERROR_EVENT, 1.2, 1.8)
    async with run_chaos(ChaosConfig(seed=4, pacing=FAST, patterns=(window,))) as srv:
        cfg = config(srv.url, tmp_path, count=None, duration="3", concurrency="4")
        result = await execute(cfg, live=False)
    analysis = analyze(result.records, Policy())
    window_attr = analysis.attribute("time_window")
    why = f"top {analysis.top and analysis.top.key}; {analysis.headlines}"
    # The window is named: significant, in the headlines, and its best split is the failing window.
    assert window_attr is not None and window_attr.significant, why
    assert window_attr.headline is not None and window_attr.headline in analysis.headlines, why
    # 0.5 s windows around a 0.6 s fault window: every failure inside, few healthy streams with them.
    assert window_attr.best is not None and window_attr.best.coverage >= 0.95, why
    assert window_attr.best.inside.value >= 0.4 and window_attr.best.outside.value <= 0.01, why
    # Connections live through the run here, so the reuse index grows with time and may share the
    # lead; nothing else may.
    assert analysis.top is not None and analysis.top.key in ("time_window", "reuse_index"), why
    failing = [r for r in result.records if r.ending != "complete"]
    assert failing and {r.ending for r in failing} == {"error_event"}
    start = min(r.started_at for r in result.records)
    offsets = [r.started_at - start for r in failing]
    # Server time and probe time differ by the probe's start-up and by loop lag under load; a
    # request is sent before the server decides on it, never after.
    assert min(offsets) >= 0.2 and max(offsets) <= 1.8


async def test_random_faults_name_no_attribute(tmp_path: Path) -> None:
    # One stream in ten truncated at random: nothing the probe records may be named as the cause.
    # The seed fixes which requests fail; timing still moves time windows, so a "no" is a p-value
    # and can be wrong by chance (about one run in forty with seed 21, whose failures cluster a
    # little; none in repeated runs with this one).
    async with run_chaos(ChaosConfig(seed=23, pacing=FAST, faults={Fault.TRUNCATED: 0.1})) as srv:
        cfg = config(srv.url, tmp_path, count=400, concurrency="4")
        result = await execute(cfg, live=False)
    records = result.records
    assert 15 <= sum(r.ending == "truncated" for r in records) <= 70
    # Every stream's connection was seen: reuse is a measured fact, not a default.
    assert all(r.connection is not None and r.reuse_index is not None for r in records)
    analysis = analyze(records, Policy())
    assert not [a.key for a in analysis.attributes if a.significant], analysis.headlines
    assert analysis.headlines[1].startswith("no recorded attribute separates"), analysis.headlines


async def test_one_run_judged_under_two_policies(tmp_path: Path) -> None:
    # A gateway dialect (no [DONE] after a proper finish) plus real truncations.
    chaos = ChaosConfig(seed=6, pacing=FAST, dialects=frozenset({Dialect.NO_DONE}),
                        faults={Fault.TRUNCATED: 0.2})
    async with run_chaos(chaos) as srv:
        cfg = config(srv.url, tmp_path, count=100, concurrency="8", policy="no-done-ok")
        result = await execute(cfg, live=False)
    endings = Counter(r.ending for r in result.records)
    assert set(endings) == {"no_done", "truncated"}
    strict = analyze(result.records, Policy.from_spec("strict"))
    dialect = analyze(result.records, Policy.from_spec("no-done-ok"))
    assert strict.total.failed == 100
    assert dialect.total.failed == endings["truncated"] == sum(r.injected == "truncated"
                                                               for r in result.records)
    # The records keep the full verdict: the run's own policy only set `passed`.
    assert all(r.passed == (r.ending == "no_done") for r in result.records)
    assert result.exit_code == 1 and result.failed == endings["truncated"]


async def test_secrets_never_reach_any_file_under_out(tmp_path: Path) -> None:
    key = "k3y-Upstream-Echoes-This-7731"

    async def echo(request: web.Request) -> web.StreamResponse:
        """A careless upstream: echoes the Authorization header in headers, cookies, body and errors."""
        auth = request.headers.get("Authorization", "")
        await request.read()
        seen = request.app[COUNTER]
        seen[0] += 1
        if seen[0] % 3 == 1:
            return web.json_response({"error": {"message": f"bad credentials {auth}"}}, status=401,
                                     headers={"www-authenticate": auth, "x-echo": auth})
        resp = web.StreamResponse(headers={"content-type": "text/event-stream", "x-echo": auth,
                                           "set-cookie": f"session={key}"})
        await resp.prepare(request)
        chunk = ('{"id":"e-1","object":"chat.completion.chunk","choices":[{"index":0,'
                 f'"delta":{{"content":"you sent {auth} and {key}"}},"finish_reason":null}}]}}')
        await resp.write(f"data: {chunk}\n\n".encode())  # then a clean EOF: truncated
        return resp

    app = web.Application()
    app[COUNTER] = [0]
    app.router.add_post("/v1/chat/completions", echo)
    async with serve_app(app) as url, run_chaos(ChaosConfig(pacing=FAST, faults={
            Fault.TRUNCATED: 0.3, Fault.HTTP_ERROR: 0.2})) as srv:
        cfg = config([f"echo={url}", f"chaos={srv.url}"], tmp_path, count=12, concurrency="3",
                     key_env="PROBE_TEST_KEY", headers=["X-Team: probe-tests"],
                     environ={"PROBE_TEST_KEY": key})
        result = await execute(cfg, live=False, environ={"PROBE_TEST_KEY": key})
    assert {r.ending for r in result.records if r.arm == "echo"} >= {"truncated", "http_error"}
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) >= 10
    for path in files:
        text = path.read_text("utf-8", errors="replace")
        assert key not in text, path
        assert "Bearer" not in text and "bearer" not in text, path
