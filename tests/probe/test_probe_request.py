"""One request of the probe against a real chaos server: one request in, one faithful Record out."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st

from sseguard.chaos import INJECT_HEADER, ChaosConfig, Fault, FaultOptions, Pacing, run_chaos
from sseguard.chaos.faults import NEEDS_TOOL_CALL
from sseguard.core.policy import Policy
from sseguard.core.redact import Redactor
from sseguard.core.verdict import Verdict
from sseguard.probe.config import WorkloadSpec, make_arm
from sseguard.probe.measure import StreamWatch
from sseguard.probe.request import RequestSettings, run_request
from sseguard.probe.sink import MemorySink
from sseguard.probe.target import ConnectionTracker, Target
from sseguard.probe.workloads import Workload
from support.expected import expected
from support.probe import FAST, free_port, serve_app, silent_server

BODIES = Path(__file__).resolve().parents[2] / "examples" / "bodies"


def _target(url: str, **headers: str) -> Target:
    arm = make_arm("a", url)
    return Target(arm=arm, url=arm.url, headers={"content-type": "application/json", **headers})


def _body(workload: str = "small") -> dict[str, object]:
    w = Workload(WorkloadSpec(name=workload))
    return w.finish(w.conversation(0).next_body(), model="m")


SETTINGS = RequestSettings(policy=Policy(), redactor=Redactor(), stall_timeout=1.0, timeout=30.0,
                          run_id="t")


#: Responses/Messages-only faults: a chat stream cannot carry them.
NOT_CHAT = (Fault.SEQUENCE_GAP, Fault.EVENT_ORDER, Fault.BLOCK_UNTERMINATED, Fault.DONE_MISMATCH)


@pytest.mark.parametrize("fault", [f for f in Fault if f not in NOT_CHAT], ids=str)
async def test_each_injected_fault_is_recorded_as_its_ending_and_finding(fault: Fault) -> None:
    # A stall hangs until the probe leaves: "stalled" never races the server's own timer.
    chaos = ChaosConfig(seed=1, pacing=FAST, options=FaultOptions(stall_then="hang", hang_max_s=60))
    async with run_chaos(chaos) as srv, aiohttp.ClientSession() as session:
        sink = MemorySink()
        body = _body("tools" if fault in NEEDS_TOOL_CALL else "small")
        outcome = await run_request(session, _target(srv.url, **{INJECT_HEADER: str(fault)}), body,
                                    settings=SETTINGS, sink=sink, index=7)
    record = outcome.record
    want = expected(fault)
    assert record.injected == str(fault)
    assert record.ending == want.ending
    assert want.findings <= set(record.finding_kinds)
    assert sink.records == [record]
    # Garbled text in a perfect stream passes: only comparing answers sees it (the consistency
    # workload); every other fault fails the stream.
    assert record.passed is (fault is Fault.GARBLED)
    # Evidence exists exactly for streams that did not end complete.
    assert (record.evidence is not None) == (want.ending != "complete")


#: For a responses or messages arm: the fault forced on the server → (the ending the record must
#: carry, a finding kind it must hold or None). Written here, not taken from the chaos server's table.
PROTOCOL_VERDICTS = {
    "truncated": ("truncated", None), "no_done": ("no_done", None), "no_finish": ("no_finish", None),
    "cut_mid_frame": ("cut_mid_frame", None), "transport_error": ("transport_error", None),
    "error_event": ("error_event", None), "http_error": ("http_error", None),
    "stalled": ("stalled", None), "empty": ("empty", None),
    "markup_leak": ("complete", "markup_leak"),
    "tool_args_invalid_json": ("complete", "tool_args_invalid_json"),
    "tool_undefined_function": ("complete", "tool_undefined_function"),
    "tool_args_schema_mismatch": ("complete", "tool_args_schema_mismatch"),
    "tool_call_unterminated": ("truncated", "tool_call_unterminated"),
    "bad_chunk_json": ("complete", "bad_chunk_json"), "chunk_schema": ("complete", "chunk_schema"),
    "missing_usage": ("complete", "missing_usage"), "id_changed": ("complete", "id_changed"),
    "sequence_gap": ("complete", "sequence_gap"), "event_order": ("complete", "event_order"),
    "block_unterminated": ("complete", "block_unterminated"),
    "done_mismatch": ("complete", "done_mismatch"),
}
#: What each protocol has no way to carry (the server then injects nothing).
CARRIES_NOT = {"responses": {"no_done"}, "messages": {"sequence_gap", "done_mismatch", "id_changed"}}
TOOL_FAULTS = {"tool_args_invalid_json", "tool_undefined_function", "tool_args_schema_mismatch",
               "tool_call_unterminated"}


@pytest.mark.parametrize(("api", "fault"), [(api, f) for api in ("responses", "messages")
                                            for f in PROTOCOL_VERDICTS if f not in CARRIES_NOT[api]],
                         ids=lambda v: str(v))
async def test_each_fault_on_a_responses_or_messages_arm_is_checked_by_that_protocol(
        api: str, fault: str) -> None:
    # A stall hangs until run_request gives up after its 1 s stall timeout (no race of two timers).
    chaos = ChaosConfig(seed=1, pacing=FAST, options=FaultOptions(stall_ms=1000, stall_then="hang"))
    workload = Workload(WorkloadSpec(name="tools" if fault in TOOL_FAULTS else "small"))
    body = workload.finish(workload.conversation(0, api).next_body(), model="m", api=api)
    async with run_chaos(chaos) as srv, aiohttp.ClientSession() as session:
        arm = make_arm("a", srv.url, api=api)
        target = Target(arm=arm, url=arm.url, headers={"content-type": "application/json",
                                                       INJECT_HEADER: fault})
        sink = MemorySink()
        outcome = await run_request(session, target, body, settings=replace(SETTINGS, stall_timeout=1.0),
                                    sink=sink, index=2)
    record = outcome.record
    ending, finding = PROTOCOL_VERDICTS[fault]
    assert (record.api, record.path, record.injected) == (api, f"/v1/{api}", fault)
    assert record.ending == ending, (record.ending, record.finding_kinds, record.error)
    assert finding is None or finding in record.finding_kinds, record.finding_kinds
    assert outcome.verdict.api == api and not record.passed
    if record.evidence is not None:
        assert sink.evidence[record.evidence]["request"]["api"] == api


async def test_healthy_stream_is_complete_with_timings_in_order_and_no_evidence() -> None:
    pacing = Pacing(ttft_ms=40.0, inter_token_ms=15.0, tokens=8)
    async with run_chaos(ChaosConfig(pacing=pacing)) as srv, aiohttp.ClientSession() as session:
        sink = MemorySink()
        out = await run_request(session, _target(srv.url), _body(), settings=SETTINGS, sink=sink,
                                index=0, workload="small", concurrency=3)
    r = out.record
    assert r.ending == "complete" and r.passed and r.evidence is None and not sink.evidence
    assert r.status == 200 and r.injected == "none"
    assert r.ttfb_ms is not None and r.ttft_ms is not None and r.duration_ms is not None
    assert r.ttfb_ms <= r.ttft_ms <= r.duration_ms
    assert r.ttft_ms >= 38.0  # the server waits 40 ms before the first chunk
    assert r.duration_ms >= 40.0 + 6 * 15.0
    assert r.max_gap_ms is not None and 10.0 <= r.max_gap_ms < 200.0
    assert r.concurrency == 3 and r.arm == "a" and r.run_id == "t" and r.prompt_bytes > 100
    assert r.response_id is not None and r.id_prefix == "chatcmpl"
    assert "x-request-id" in r.headers and r.chunks > 8


async def test_evidence_keeps_redacted_headers_and_at_most_two_kib_of_tail() -> None:
    pacing = Pacing(tokens=400)
    async with run_chaos(ChaosConfig(pacing=pacing)) as srv, aiohttp.ClientSession() as session:
        sink = MemorySink()
        out = await run_request(session, _target(srv.url, **{INJECT_HEADER: "truncated"}), _body(),
                                settings=SETTINGS, sink=sink, index=3)
    doc = sink.evidence[out.record.evidence or ""]
    assert doc["ending"] == "truncated" and doc["index"] == 3 and doc["injected"] == "truncated"
    assert 0 < len(doc["tail"].encode()) <= 2048
    assert doc["response_headers"]["x-sseguard-fault"] == "truncated"
    assert doc["request"]["prompt_bytes"] == out.record.prompt_bytes
    assert "tail" not in doc["verdict"]
    json.dumps(doc)  # the document is plain JSON


async def test_http_error_keeps_status_and_error_body() -> None:
    async with run_chaos(ChaosConfig()) as srv, aiohttp.ClientSession() as session:
        out = await run_request(session, _target(srv.url, **{INJECT_HEADER: "http_error"}), _body(),
                                settings=SETTINGS, sink=MemorySink(), index=0)
    assert out.record.ending == "http_error"
    assert out.record.status in (429, 500, 503)
    assert out.record.error and "error" in out.record.tail


async def test_silent_server_is_stalled_before_headers_and_has_no_status() -> None:
    async with silent_server() as url, aiohttp.ClientSession() as session:
        out = await run_request(session, _target(url), _body(), settings=SETTINGS, sink=MemorySink(),
                                index=0)
    assert out.record.ending == "stalled"
    assert out.record.status is None
    assert out.record.duration_ms is not None and 950 <= out.record.duration_ms < 15_000


async def test_a_stream_that_hangs_past_the_request_timeout_is_a_transport_error() -> None:
    chaos = ChaosConfig(pacing=FAST, options=FaultOptions(stall_then="hang", hang_max_s=60))
    quick = RequestSettings(stall_timeout=30.0, timeout=1.5)
    async with run_chaos(chaos) as srv, aiohttp.ClientSession() as session:
        out = await run_request(session, _target(srv.url, **{INJECT_HEADER: "stalled"}), _body(),
                                settings=quick, sink=MemorySink(), index=0)
    assert out.record.ending == "transport_error"
    assert "timeout" in (out.record.error or "")


async def test_refused_connection_is_a_transport_error_without_status() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    async with aiohttp.ClientSession() as session:
        out = await run_request(session, _target(url), _body(), settings=SETTINGS,
                                sink=MemorySink(), index=0)
    assert out.record.ending == "transport_error" and out.record.status is None
    assert out.record.evidence is not None


async def test_reuse_index_counts_requests_per_connection_and_restarts_after_a_reset() -> None:
    async with run_chaos(ChaosConfig(pacing=FAST)) as srv:
        connector = aiohttp.TCPConnector(limit=1)
        async with aiohttp.ClientSession(connector=connector) as session:
            tracker = ConnectionTracker()
            sink = MemorySink()
            for i in range(3):
                await run_request(session, _target(srv.url), _body(), settings=SETTINGS, sink=sink,
                                  index=i, connections=tracker)
            await run_request(session, _target(srv.url, **{INJECT_HEADER: "transport_error"}),
                              _body(), settings=SETTINGS, sink=sink, index=3, connections=tracker)
            await run_request(session, _target(srv.url), _body(), settings=SETTINGS, sink=sink,
                              index=4, connections=tracker)
    reuse = [r.reuse_index for r in sink.records]
    labels = [r.connection for r in sink.records]
    assert reuse == [0, 1, 2, 3, 0]
    assert labels[:4] == [labels[0]] * 4 and labels[4] != labels[0]


async def test_key_values_known_to_the_redactor_never_reach_record_or_evidence() -> None:
    key = "k3y-Plain-Looking-Secret-9876"
    # The server is told to fail, and the key travels in a header the server echoes nowhere; the
    # redactor must still know it, because an upstream that echoes it (see the e2e test) exists.
    async with run_chaos(ChaosConfig(pacing=FAST)) as srv, aiohttp.ClientSession() as session:
        target = _target(srv.url, **{INJECT_HEADER: "truncated", "authorization": f"Bearer {key}"})
        settings = RequestSettings(redactor=Redactor(target.secrets), stall_timeout=1.0)
        sink = MemorySink()
        await run_request(session, target, _body(), settings=settings, sink=sink, index=0,
                          extra={"note": f"used {key}"})
    text = json.dumps([sink.evidence, [r.extra for r in sink.records]])
    assert key not in text and "Bearer" not in text


# ── StreamWatch (sans-IO): chunking never changes what is recorded ───────────────────────────────
SAMPLES = ["complete.sse", "truncated.sse", "cut_mid_frame.sse", "tool_calls.sse", "no_done.sse",
           "error_event.sse", "markup_leak.sse"]


def _watch(body: bytes, cuts: list[int], gaps: list[float]) -> tuple[StreamWatch, Verdict]:
    watch = StreamWatch({"stream": True}, sent_at=0.0, started_at=1.0)
    watch.response(200, [("content-type", "text/event-stream")], 0.001)
    points = sorted({c % (len(body) + 1) for c in cuts} | {0, len(body)})
    now = 0.01
    for i, (a, b) in enumerate(itertools.pairwise(points)):
        now += gaps[i % len(gaps)]
        watch.feed(body[a:b], now)
    return watch, watch.finish(now + 0.001)


@settings(max_examples=150, deadline=None)
@given(name=st.sampled_from(SAMPLES), cuts=st.lists(st.integers(0, 10_000), max_size=40),
       gaps=st.lists(st.floats(0.0, 0.5), min_size=1, max_size=10))
def test_any_chunking_and_pacing_gives_the_same_verdict_and_a_true_max_gap(
        name: str, cuts: list[int], gaps: list[float]) -> None:
    body = (BODIES / name).read_bytes()
    _, whole = _watch(body, [], [0.0])
    watch, verdict = _watch(body, cuts, gaps)
    assert verdict == whole
    points = sorted({c % (len(body) + 1) for c in cuts} | {0, len(body)})
    pieces = len(points) - 1
    used = [gaps[i % len(gaps)] for i in range(pieces)]
    assert watch.max_gap == pytest.approx(max(used[1:], default=0.0))
    record = watch.record(verdict, policy=Policy(), redactor=Redactor(), arm="x", index=1)
    assert record.ending == whole.ending and record.started_at == 1.0
    timings = watch.timings()
    assert timings["ttfb_ms"] == 1.0
    if timings["ttft_ms"] is not None:
        assert timings["ttfb_ms"] <= timings["ttft_ms"] <= timings["duration_ms"]


async def test_a_redirect_is_recorded_not_followed() -> None:
    async def moved(request: web.Request) -> web.Response:
        raise web.HTTPTemporaryRedirect("http://elsewhere.invalid/v1/chat/completions")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", moved)
    async with serve_app(app) as url, aiohttp.ClientSession() as session:
        out = await run_request(session, _target(url, authorization="Bearer k3y-do-not-follow"),
                                _body(), settings=SETTINGS, sink=MemorySink(), index=0)
    assert out.record.ending == "http_error" and out.record.status == 307
