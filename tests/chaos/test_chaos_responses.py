"""The chaos upstream's ``POST /v1/responses`` over real loopback sockets: every fault it injects gives
exactly its verdict from the Responses checker, whole and byte by byte; healthy answers, dialects,
routes, request validation and errors in OpenAI's shapes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import httpx2
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _chaos_support import fetch, recheck_byte_by_byte, verdict_in_pieces
from sseguard.chaos import (
    ChaosConfig,
    Fault,
    FaultOptions,
    Pacing,
    RoutedPattern,
    ServerDialect,
    decide,
    run_chaos,
)
from sseguard.chaos.frames import ResponseIds
from sseguard.chaos.generate import make_answer
from sseguard.chaos.responses import parse_request, stream_plan
from sseguard.core.verdict import Ending, FindingKind

API = "responses"
FAST = Pacing(tokens=6, reasoning_tokens=3)
#: Stalls hang until the client leaves; the client's read timeout is generous (a busy machine).
OPTIONS = FaultOptions(stall_then="hang", hang_max_s=30)
STALL_READ_TIMEOUT = 2.0
WEATHER: dict[str, Any] = {"type": "function", "name": "get_weather", "description": "Weather.",
                           "parameters": {"type": "object", "properties": {
                               "location": {"type": "string"}, "days": {"type": "integer"}},
                               "required": ["location"]}}

E, F = Ending, FindingKind
#: What a strict Responses checker must report for each fault the server carries on this protocol —
#: written here, not taken from the chaos package's own fault table.
TABLE: dict[Fault, tuple[Ending, frozenset[FindingKind]]] = {
    Fault.TRUNCATED: (E.TRUNCATED, frozenset()),
    Fault.NO_FINISH: (E.NO_FINISH, frozenset()),
    Fault.CUT_MID_FRAME: (E.CUT_MID_FRAME, frozenset()),
    Fault.TRANSPORT_ERROR: (E.TRANSPORT_ERROR, frozenset()),
    Fault.ERROR_EVENT: (E.ERROR_EVENT, frozenset()),
    Fault.HTTP_ERROR: (E.HTTP_ERROR, frozenset()),
    Fault.STALLED: (E.STALLED, frozenset()),
    Fault.EMPTY: (E.EMPTY, frozenset()),
    Fault.MARKUP_LEAK: (E.COMPLETE, frozenset({F.MARKUP_LEAK})),
    Fault.TOOL_ARGS_INVALID_JSON: (E.COMPLETE, frozenset({F.TOOL_ARGS_INVALID_JSON})),
    Fault.TOOL_UNDEFINED_FUNCTION: (E.COMPLETE, frozenset({F.TOOL_UNDEFINED_FUNCTION})),
    Fault.TOOL_ARGS_SCHEMA_MISMATCH: (E.COMPLETE, frozenset({F.TOOL_ARGS_SCHEMA_MISMATCH})),
    Fault.TOOL_CALL_UNTERMINATED: (E.TRUNCATED, frozenset({F.TOOL_CALL_UNTERMINATED})),
    Fault.MALFORMED_CLOSING_TAG: (E.COMPLETE, frozenset({F.MARKUP_LEAK})),
    Fault.BAD_CHUNK_JSON: (E.COMPLETE, frozenset({F.BAD_CHUNK_JSON})),
    Fault.CHUNK_SCHEMA: (E.COMPLETE, frozenset({F.CHUNK_SCHEMA})),
    Fault.MISSING_USAGE: (E.COMPLETE, frozenset({F.MISSING_USAGE})),
    Fault.ID_CHANGED: (E.COMPLETE, frozenset({F.ID_CHANGED})),
    Fault.SEQUENCE_GAP: (E.COMPLETE, frozenset({F.SEQUENCE_GAP})),
    Fault.EVENT_ORDER: (E.COMPLETE, frozenset({F.EVENT_ORDER})),
    Fault.BLOCK_UNTERMINATED: (E.COMPLETE, frozenset({F.BLOCK_UNTERMINATED})),
    Fault.DONE_MISMATCH: (E.COMPLETE, frozenset({F.DONE_MISMATCH})),
    Fault.GARBLED: (E.COMPLETE, frozenset()),  # corrupted text in a perfect stream
}
#: Faults a Responses stream cannot carry: no [DONE] to omit, no finish_reason to contradict, and
#: content after the end is event_order here.
SKIPPED = [Fault.NO_DONE, Fault.FINISH_REASON_MISMATCH, Fault.FRAME_AFTER_DONE]
NEEDS_TOOLS = {Fault.TOOL_UNDEFINED_FUNCTION, Fault.TOOL_ARGS_SCHEMA_MISMATCH}


def responses_request(*, tools: bool = False, stream: bool = True, effort: str | None = None,
                      text: str = "Say something.", **extra: Any) -> dict[str, Any]:
    req: dict[str, Any] = {"model": "chaos-1", "input": text, "stream": stream}
    if tools:
        req["tools"] = [WEATHER]
    if effort is not None:
        req["reasoning"] = {"effort": effort}
    req.update(extra)
    return req


@pytest.fixture
async def client() -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient() as c:
        yield c


def test_the_table_covers_every_fault() -> None:
    assert set(TABLE) | set(SKIPPED) == set(Fault)


@pytest.mark.parametrize("fault", list(TABLE))
async def test_each_fault_gives_exactly_its_verdict_whole_and_byte_by_byte(
        fault: Fault, client: httpx2.AsyncClient) -> None:
    config = ChaosConfig(seed=11, pacing=FAST, options=OPTIONS, faults={fault: 1.0})
    request = responses_request(tools=fault in NEEDS_TOOLS, effort="low")
    async with run_chaos(config) as server:
        out = await fetch(client, server.responses_url, request, api=API,
                          read_timeout=STALL_READ_TIMEOUT)
        assert out.headers["x-sseguard-fault"] == str(fault)
        assert server.stats.injected(fault) == 1 and server.stats.apis == {"responses": 1}
    ending, findings = TABLE[fault]
    for verdict in (out.verdict, recheck_byte_by_byte(API, request, out)):
        assert verdict.api == API
        assert verdict.ending is ending, out.body[-600:]
        assert verdict.finding_kinds == findings, verdict.findings


@pytest.mark.parametrize("fault", SKIPPED)
async def test_faults_a_responses_stream_cannot_carry_are_skipped(
        fault: Fault, client: httpx2.AsyncClient) -> None:
    async with run_chaos(ChaosConfig(pacing=FAST, faults={fault: 1.0})) as server:
        out = await fetch(client, server.responses_url, responses_request(), api=API)
        assert server.stats.skipped[str(fault)] == 1
    assert out.headers["x-sseguard-fault"] == "none"
    assert out.verdict.ending is Ending.COMPLETE and out.verdict.findings == ()


@pytest.mark.parametrize("form", ["flat", "nested", "failed"])
async def test_error_event_comes_in_each_responses_form(form: str,
                                                        client: httpx2.AsyncClient) -> None:
    config = ChaosConfig(pacing=FAST, options=FaultOptions(responses_error_form=form))
    async with run_chaos(config) as server:
        out = await fetch(client, server.responses_url, responses_request(), api=API,
                          inject="error_event")
    last = out.body.rstrip(b"\n").rsplit(b"\n\n", 1)[-1]
    event, data = last.split(b"\n", 1)
    obj = json.loads(data.removeprefix(b"data: "))
    assert out.verdict.ending is Ending.ERROR_EVENT
    previous = json.loads(out.body.rstrip(b"\n").rsplit(b"\n\n", 2)[-2].split(b"data: ", 1)[1])
    assert obj["sequence_number"] == previous["sequence_number"] + 1
    if form == "flat":
        assert event == b"event: error" and obj["type"] == "error" and "error" not in obj
        assert obj["message"] and obj["code"] == "server_error"
    elif form == "nested":
        assert event == b"event: error" and obj["error"]["message"]
    else:
        assert event == b"event: response.failed"
        assert obj["response"]["status"] == "failed" and obj["response"]["error"]["message"]


async def test_http_error_has_an_openai_error_body(client: httpx2.AsyncClient) -> None:
    config = ChaosConfig(pacing=FAST, options=FaultOptions(http_statuses=(429,)))
    async with run_chaos(config) as server:
        resp = await client.post(server.responses_url, json=responses_request(),
                                 headers={"x-sseguard-inject": "http_error"})
    assert resp.status_code == 429 and resp.headers["retry-after"] == "1"
    assert resp.json()["error"]["type"] == "rate_limit_error"
    assert resp.json()["error"]["code"] == "rate_limit_exceeded"


@pytest.mark.parametrize(("body", "param"), [
    ({"input": "hi"}, "model"),
    ({"model": "m"}, "input"),
    ({"model": "m", "input": []}, "input"),
    ({"model": "m", "input": "hi", "max_output_tokens": 8}, "max_output_tokens"),
    ({"model": "m", "input": "hi", "reasoning": {"effort": "huge"}}, "reasoning.effort"),
    ({"model": "m", "input": "hi", "tools": [{"type": "function"}]}, "tools[0].name"),
    ({"model": "m", "input": "hi", "tools": [WEATHER],
      "tool_choice": {"type": "function", "name": "nope"}}, "tool_choice"),
    ({"model": "m", "input": [{"type": "function_call_output", "output": "x"}]},
     "input[0].call_id"),
    ({"model": "m", "input": "hi", "stream": "yes"}, "stream"),
])
async def test_bad_requests_get_400_in_openais_shape(body: dict[str, Any], param: str,
                                                     client: httpx2.AsyncClient) -> None:
    async with run_chaos(ChaosConfig(pacing=FAST)) as server:
        resp = await client.post(server.responses_url, json=body)
        assert server.stats.bad_requests == 1
    assert resp.status_code == 400
    error = resp.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param
    assert error["message"]


async def test_healthy_answers_are_complete_and_well_formed(client: httpx2.AsyncClient) -> None:
    async with run_chaos(ChaosConfig(pacing=FAST)) as server:
        for request in (responses_request(), responses_request(tools=True),
                        responses_request(effort="high"),
                        responses_request(tools=True, effort="medium",
                                          text="Use get_weather for Oslo.")):
            out = await fetch(client, server.responses_url, request, api=API)
            assert out.verdict.ending is Ending.COMPLETE and out.verdict.findings == ()
            assert out.headers["content-type"].startswith("text/event-stream")
            events = [json.loads(chunk.split(b"data: ", 1)[1])
                      for chunk in out.body.split(b"\n\n") if chunk]
            assert [e["sequence_number"] for e in events] == list(range(len(events)))
            assert events[-1]["type"] == "response.completed"
            assert events[-1]["response"]["id"].startswith("resp_")
            assert events[-1]["response"]["usage"]["output_tokens"] > 0


async def test_max_output_tokens_ends_in_response_incomplete(client: httpx2.AsyncClient) -> None:
    async with run_chaos(ChaosConfig(pacing=Pacing(tokens=40))) as server:
        out = await fetch(client, server.responses_url,
                          responses_request(max_output_tokens=16), api=API)
    assert out.verdict.ending is Ending.COMPLETE and out.verdict.findings == ()
    last = json.loads(out.body.rstrip(b"\n").rsplit(b"\n\n", 1)[-1].split(b"data: ", 1)[1])
    assert last["type"] == "response.incomplete"
    assert last["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    assert len(out.verdict.message["output"][0]["content"][0]["text"].split()) == 16


async def test_trailing_done_dialect_is_complete(client: httpx2.AsyncClient) -> None:
    config = ChaosConfig(pacing=FAST, dialects=frozenset({ServerDialect.TRAILING_DONE}))
    async with run_chaos(config) as server:
        out = await fetch(client, server.responses_url, responses_request(), api=API)
    assert out.body.endswith(b"data: [DONE]\n\n")
    assert out.verdict.ending is Ending.COMPLETE and out.verdict.findings == ()


@pytest.mark.parametrize("family", ["dsml-v32", "hermes", "qwen3-coder", "kimi-k2", "glm45",
                                    "harmony", "minimax-m2"])
async def test_raw_markup_in_output_text_is_a_leak(family: str,
                                                   client: httpx2.AsyncClient) -> None:
    async with run_chaos(ChaosConfig(pacing=FAST, raw_markup=family)) as server:
        out = await fetch(client, server.responses_url, responses_request(tools=True), api=API)
    assert out.verdict.ending is Ending.COMPLETE
    assert out.verdict.finding_kinds == {FindingKind.MARKUP_LEAK}
    assert b"response.function_call_arguments" not in out.body


async def test_routed_prefix_shows_in_response_ids(client: httpx2.AsyncClient) -> None:
    config = ChaosConfig(pacing=FAST, patterns=(RoutedPattern(Fault.TRUNCATED, 0.5, "gw-"),))
    async with run_chaos(config) as server:
        outs = [await fetch(client, server.responses_url, responses_request(), api=API)
                for _ in range(24)]
    for out in outs:
        first = json.loads(out.body.split(b"\n\n", 1)[0].split(b"data: ", 1)[1])
        routed = out.headers["x-sseguard-route"] == "gw"
        assert first["response"]["id"].startswith("gw-" if routed else "resp_")
        assert (out.verdict.ending is Ending.TRUNCATED) == routed
    assert {out.headers["x-sseguard-route"] for out in outs} == {"gw", "default"}


async def test_non_streamed_response_object(client: httpx2.AsyncClient) -> None:
    # seed 1: an answer that is a tool call with no text before it (seed 0's has a preface)
    async with run_chaos(ChaosConfig(seed=1, pacing=FAST)) as server:
        resp = await client.post(server.responses_url,
                                 json=responses_request(stream=False, tools=True, effort="low"))
        missing = await client.post(server.responses_url, json=responses_request(stream=False),
                                    headers={"x-sseguard-inject": "missing_usage"})
    body = resp.json()
    assert resp.headers["content-type"].startswith("application/json")
    assert body["object"] == "response" and body["status"] == "completed"
    assert [item["type"] for item in body["output"]] == ["reasoning", "function_call"]
    assert json.loads(body["output"][1]["arguments"])["location"]
    assert missing.headers["x-sseguard-fault"] == "missing_usage"
    assert missing.json()["usage"] is None


async def test_inject_header_forces_one_requests_fault(client: httpx2.AsyncClient) -> None:
    async with run_chaos(ChaosConfig(pacing=FAST, faults={Fault.TRUNCATED: 1.0})) as server:
        forced = await fetch(client, server.responses_url, responses_request(), api=API,
                             inject="sequence_gap")
        healthy = await fetch(client, server.responses_url, responses_request(), api=API,
                              inject="none")
    assert forced.verdict.finding_kinds == {FindingKind.SEQUENCE_GAP}
    assert healthy.verdict.ending is Ending.COMPLETE


# ── without sockets: every plan, every split ─────────────────────────────────────────────────────

SANS_IO = [f for f in TABLE if f not in (Fault.TRANSPORT_ERROR, Fault.STALLED, Fault.HTTP_ERROR)]


@settings(max_examples=120, deadline=None)
@given(fault=st.sampled_from([None, *SANS_IO]), seed=st.integers(0, 2**32),
       tokens=st.integers(1, 10), tools=st.booleans(),
       effort=st.sampled_from([None, "low", "high"]), cuts=st.lists(st.integers(0, 1 << 16)))
def test_every_encoded_stream_gives_the_table_verdict_under_any_split(
        fault: Fault | None, seed: int, tokens: int, tools: bool, effort: str | None,
        cuts: list[int]) -> None:
    tools = tools or fault in NEEDS_TOOLS
    config = ChaosConfig(seed=seed, pacing=Pacing(tokens=tokens, reasoning_tokens=2))
    request = responses_request(tools=tools, effort=effort)
    req = parse_request(msgspec.json.encode(request))
    decision = replace(decide(config, seed % 1000), fault=fault)
    answers = [make_answer(config, req, fault)]
    ids = ResponseIds("resp_1", "req_1", "0" * 32, "0" * 16, 0)
    body = b"".join(w.data for w in stream_plan(config, req, decision, ids, answers).writes)
    verdict = verdict_in_pieces(API, request, body, cuts)
    ending, findings = TABLE[fault] if fault is not None else (Ending.COMPLETE, frozenset())
    assert verdict.ending is ending
    assert verdict.finding_kinds == findings


def test_only_content_deltas_are_paced_lifecycle_events_ride_along() -> None:
    config = ChaosConfig(pacing=Pacing(ttft_ms=100, inter_token_ms=10, tokens=4))
    request = responses_request()
    req = parse_request(msgspec.json.encode(request))
    ids = ResponseIds("resp_1", "req_1", "0" * 32, "0" * 16, 0)
    plan = stream_plan(config, req, decide(config, 0), ids, [make_answer(config, req, None)])
    timeline = [(w.data.split(b"\n", 1)[0].removeprefix(b"event: response.").decode(),
                 round(w.at * 1000)) for w in plan.writes]
    assert timeline == [
        ("created", 100), ("in_progress", 100), ("output_item.added", 100),
        ("content_part.added", 100), ("output_text.delta", 100), ("output_text.delta", 110),
        ("output_text.delta", 120), ("output_text.delta", 130), ("output_text.done", 130),
        ("content_part.done", 130), ("output_item.done", 130), ("completed", 140)]


async def test_non_streamed_invalid_arguments_are_sent_as_is(client: httpx2.AsyncClient) -> None:
    async with run_chaos(ChaosConfig(pacing=FAST)) as server:
        resp = await client.post(server.responses_url, json=responses_request(stream=False),
                                 headers={"x-sseguard-inject": "tool_args_invalid_json"})
    assert resp.headers["x-sseguard-fault"] == "tool_args_invalid_json"
    arguments = resp.json()["output"][-1]["arguments"]
    assert arguments.endswith(",}")
    with pytest.raises(json.JSONDecodeError):
        json.loads(arguments)


async def test_a_named_function_call_output_without_call_id_is_accepted_as_codex_sends_it(
        client: httpx2.AsyncClient) -> None:
    """Codex CLI 0.171 adds its goal objective as ``{"type": "function_call_output", "name":
    "goal_objective", "namespace": "agent", "output": …}``, no ``call_id``: OpenAI accepts it."""
    body = {"model": "m", "stream": True, "input": [
        {"role": "user", "content": "Say hello"},
        {"type": "function_call_output", "name": "goal_objective", "namespace": "agent",
         "output": "frame hold engine"}]}
    async with run_chaos(ChaosConfig(pacing=FAST)) as server:
        out = await fetch(client, server.responses_url, body, api=API)
        assert server.stats.bad_requests == 0
    assert out.verdict.ending is Ending.COMPLETE
