"""The chaos upstream's ``POST /v1/messages`` over real loopback sockets: every fault it injects gives
exactly its verdict from the Messages checker, whole and byte by byte; healthy answers, the no_done
dialect, routes, Anthropic-style headers, validation and errors in Anthropic's shape."""

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
    LoadPattern,
    Pacing,
    RoutedPattern,
    ServerDialect,
    WindowPattern,
    decide,
    run_chaos,
)
from sseguard.chaos.frames import ResponseIds
from sseguard.chaos.generate import make_answer
from sseguard.chaos.messages import parse_request, stream_plan
from sseguard.core.contract import detect_api
from sseguard.core.verdict import Ending, FindingKind

API = "messages"
FAST = Pacing(tokens=6, reasoning_tokens=3)
OPTIONS = FaultOptions(stall_then="hang", hang_max_s=30)
STALL_READ_TIMEOUT = 2.0
ANTHROPIC_HEADERS = {"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01"}
WEATHER: dict[str, Any] = {"name": "get_weather", "description": "Weather.", "input_schema": {
    "type": "object", "properties": {"location": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["location"]}}

E, F = Ending, FindingKind
#: What a strict Messages checker must report for each fault the server carries on this protocol —
#: written here, not taken from the chaos package's own fault table.
TABLE: dict[Fault, tuple[Ending, frozenset[FindingKind]]] = {
    Fault.TRUNCATED: (E.TRUNCATED, frozenset()),
    Fault.NO_DONE: (E.NO_DONE, frozenset()),
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
    Fault.EVENT_ORDER: (E.COMPLETE, frozenset({F.EVENT_ORDER})),
    Fault.BLOCK_UNTERMINATED: (E.COMPLETE, frozenset({F.BLOCK_UNTERMINATED})),
    Fault.GARBLED: (E.COMPLETE, frozenset()),  # corrupted text in a perfect stream
}
#: Faults a Messages stream cannot carry: no sequence numbers, no *.done text, one message id sent
#: once, no chat finish_reason, and content after message_stop is event_order here.
SKIPPED = [Fault.SEQUENCE_GAP, Fault.DONE_MISMATCH, Fault.ID_CHANGED,
           Fault.FINISH_REASON_MISMATCH, Fault.FRAME_AFTER_DONE]
NEEDS_TOOLS = {Fault.TOOL_UNDEFINED_FUNCTION, Fault.TOOL_ARGS_SCHEMA_MISMATCH}


def messages_request(*, tools: bool = False, stream: bool = True, thinking: int | None = None,
                     text: str = "Say something.", **extra: Any) -> dict[str, Any]:
    req: dict[str, Any] = {"model": "chaos-1", "max_tokens": 4096, "stream": stream,
                           "messages": [{"role": "user", "content": text}]}
    if tools:
        req["tools"] = [WEATHER]
    if thinking is not None:
        req["thinking"] = {"type": "enabled", "budget_tokens": thinking}
    req.update(extra)
    return req


@pytest.fixture
async def client() -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient(headers=ANTHROPIC_HEADERS) as c:
        yield c


def test_the_table_covers_every_fault() -> None:
    assert set(TABLE) | set(SKIPPED) == set(Fault)


@pytest.mark.parametrize("fault", list(TABLE))
async def test_each_fault_gives_exactly_its_verdict_whole_and_byte_by_byte(
        fault: Fault, client: httpx2.AsyncClient) -> None:
    config = ChaosConfig(seed=11, pacing=FAST, options=OPTIONS, faults={fault: 1.0})
    request = messages_request(tools=fault in NEEDS_TOOLS, thinking=1024)
    async with run_chaos(config) as server:
        out = await fetch(client, server.messages_url, request, api=API,
                          read_timeout=STALL_READ_TIMEOUT)
        assert out.headers["x-sseguard-fault"] == str(fault)
        assert server.stats.injected(fault) == 1 and server.stats.apis == {"messages": 1}
    ending, findings = TABLE[fault]
    for verdict in (out.verdict, recheck_byte_by_byte(API, request, out)):
        assert verdict.api == API
        assert verdict.ending is ending, out.body[-600:]
        assert verdict.finding_kinds == findings, verdict.findings


@pytest.mark.parametrize("fault", SKIPPED)
async def test_faults_a_messages_stream_cannot_carry_are_skipped(
        fault: Fault, client: httpx2.AsyncClient) -> None:
    async with run_chaos(ChaosConfig(pacing=FAST, faults={fault: 1.0})) as server:
        out = await fetch(client, server.messages_url, messages_request(), api=API)
        assert server.stats.skipped[str(fault)] == 1
    assert out.headers["x-sseguard-fault"] == "none"
    assert out.verdict.ending is Ending.COMPLETE and out.verdict.findings == ()


async def test_error_event_is_anthropics_event_error(client: httpx2.AsyncClient) -> None:
    async with run_chaos(ChaosConfig(pacing=FAST)) as server:
        out = await fetch(client, server.messages_url, messages_request(), api=API,
                          inject="error_event")
    event, data = out.body.rstrip(b"\n").rsplit(b"\n\n", 1)[-1].split(b"\n", 1)
    obj = json.loads(data.removeprefix(b"data: "))
    assert event == b"event: error" and obj["type"] == "error"
    assert obj["error"]["type"] in ("api_error", "overloaded_error") and obj["error"]["message"]
    assert b"message_stop" not in out.body
    assert out.verdict.ending is Ending.ERROR_EVENT


@pytest.mark.parametrize(("status", "kind"), [(429, "rate_limit_error"), (500, "api_error"),
                                              (503, "overloaded_error"), (529, "overloaded_error")])
async def test_http_error_has_anthropics_error_shape(status: int, kind: str,
                                                     client: httpx2.AsyncClient) -> None:
    config = ChaosConfig(pacing=FAST, options=FaultOptions(http_statuses=(status,)))
    async with run_chaos(config) as server:
        resp = await client.post(server.messages_url, json=messages_request(),
                                 headers={"x-sseguard-inject": "http_error"})
    assert resp.status_code == status
    body = resp.json()
    assert body["type"] == "error" and body["error"]["type"] == kind and body["error"]["message"]


@pytest.mark.parametrize(("body", "message"), [
    ({"model": "m", "messages": [{"role": "user", "content": "hi"}]}, "max_tokens: Field required"),
    ({"max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}, "model: Field required"),
    ({"model": "m", "max_tokens": 5}, "messages: Field required"),
    ({"model": "m", "max_tokens": 0, "messages": [{"role": "user", "content": "hi"}]},
     "max_tokens must be an integer of at least 1"),
    ({"model": "m", "max_tokens": 5, "messages": [{"role": "system", "content": "hi"}]},
     "messages.0.role: Input should be 'user' or 'assistant'"),
    ({"model": "m", "max_tokens": 5000, "messages": [{"role": "user", "content": "hi"}],
      "thinking": {"type": "enabled", "budget_tokens": 512}},
     "budget_tokens must be an integer of at least 1024"),
    ({"model": "m", "max_tokens": 2000, "messages": [{"role": "user", "content": "hi"}],
      "thinking": {"type": "enabled", "budget_tokens": 2048}},
     "`max_tokens` must be greater than `thinking.budget_tokens`"),
    ({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}],
      "tools": [{"name": "t"}]}, "tools.0.custom.input_schema: Field required"),
    ({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}],
      "tools": [WEATHER], "tool_choice": {"type": "tool", "name": "nope"}},
     "Tool 'nope' not found in tools"),
])
async def test_bad_requests_get_400_in_anthropics_shape(body: dict[str, Any], message: str,
                                                        client: httpx2.AsyncClient) -> None:
    async with run_chaos(ChaosConfig(pacing=FAST)) as server:
        resp = await client.post(server.messages_url, json=body)
        assert server.stats.bad_requests == 1
    assert resp.status_code == 400
    assert resp.json() == {"type": "error", "error": {"type": "invalid_request_error",
                                                      "message": message}}


async def test_healthy_answers_are_complete_and_well_formed(client: httpx2.AsyncClient) -> None:
    async with run_chaos(ChaosConfig(pacing=FAST)) as server:
        for request in (messages_request(), messages_request(tools=True),
                        messages_request(thinking=3000),
                        messages_request(tools=True, thinking=1024,
                                         text="Use get_weather for Oslo.")):
            out = await fetch(client, server.messages_url, request, api=API)
            assert out.verdict.ending is Ending.COMPLETE and out.verdict.findings == ()
            events = [chunk.split(b"\n", 1)[0].removeprefix(b"event: ").decode()
                      for chunk in out.body.split(b"\n\n") if chunk]
            assert events[:2] == ["message_start", "ping"]
            assert events[-2:] == ["message_delta", "message_stop"]
            start = json.loads(out.body.split(b"\n\n", 1)[0].split(b"data: ", 1)[1])
            assert start["message"]["id"].startswith("msg_")
            if "thinking" in request:
                assert b'"thinking_delta"' in out.body and b'"signature_delta"' in out.body
            if "tools" in request:
                assert b'"input_json_delta"' in out.body and b'"stop_reason":"tool_use"' in out.body


async def test_max_tokens_stops_with_max_tokens(client: httpx2.AsyncClient) -> None:
    async with run_chaos(ChaosConfig(pacing=FAST)) as server:
        out = await fetch(client, server.messages_url, messages_request(max_tokens=3), api=API)
    assert out.verdict.ending is Ending.COMPLETE and out.verdict.findings == ()
    assert b'"stop_reason":"max_tokens"' in out.body


async def test_no_done_dialect_omits_message_stop(client: httpx2.AsyncClient) -> None:
    config = ChaosConfig(pacing=FAST, dialects=frozenset({ServerDialect.NO_DONE}))
    async with run_chaos(config) as server:
        out = await fetch(client, server.messages_url, messages_request(), api=API)
    assert b"message_stop" not in out.body and b'"stop_reason":"end_turn"' in out.body
    assert out.verdict.ending is Ending.NO_DONE and out.verdict.findings == ()


@pytest.mark.parametrize("family", ["dsml-v41", "deepseek-v31", "hermes", "kimi-k2", "glm47", "harmony",
                                    "minimax-m2"])
async def test_raw_markup_in_text_delta_is_a_leak(family: str,
                                                  client: httpx2.AsyncClient) -> None:
    async with run_chaos(ChaosConfig(pacing=FAST, raw_markup=family)) as server:
        out = await fetch(client, server.messages_url, messages_request(tools=True), api=API)
    assert out.verdict.ending is Ending.COMPLETE
    assert out.verdict.finding_kinds == {FindingKind.MARKUP_LEAK}
    assert b"tool_use" not in out.body


async def test_routed_prefix_shows_in_message_ids(client: httpx2.AsyncClient) -> None:
    config = ChaosConfig(pacing=FAST, patterns=(RoutedPattern(Fault.NO_FINISH, 0.5, "gw-"),))
    async with run_chaos(config) as server:
        outs = [await fetch(client, server.messages_url, messages_request(), api=API)
                for _ in range(24)]
    for out in outs:
        start = json.loads(out.body.split(b"\n\n", 1)[0].split(b"data: ", 1)[1])
        routed = out.headers["x-sseguard-route"] == "gw"
        assert start["message"]["id"].startswith("gw-" if routed else "msg_")
        assert (out.verdict.ending is Ending.NO_FINISH) == routed
    assert {out.headers["x-sseguard-route"] for out in outs} == {"gw", "default"}


async def test_window_pattern_applies_to_messages(client: httpx2.AsyncClient) -> None:
    now = [0.0]
    config = ChaosConfig(pacing=FAST, patterns=(WindowPattern(Fault.EMPTY, 10.0, 20.0),))
    async with run_chaos(config, clock=lambda: now[0]) as server:
        faults = []
        for t in (0.0, 15.0, 25.0):
            now[0] = t
            out = await fetch(client, server.messages_url, messages_request(), api=API)
            faults.append((out.headers["x-sseguard-fault"], out.verdict.ending))
    assert faults == [("none", Ending.COMPLETE), ("empty", Ending.EMPTY),
                      ("none", Ending.COMPLETE)]


async def test_load_pattern_applies_to_messages(client: httpx2.AsyncClient) -> None:
    config = ChaosConfig(pacing=FAST, options=OPTIONS,
                         patterns=(LoadPattern(Fault.TRUNCATED, ((1, 0.0), (2, 1.0))),))
    # A hanging stream keeps one request in flight while the second arrives.
    async with run_chaos(config) as server, client.stream(
            "POST", server.messages_url, json=messages_request(),
            headers={"x-sseguard-inject": "stalled"}) as held:
        chunks = held.aiter_raw()  # not left by `break`, which would close the response
        assert await anext(chunks)
        out = await fetch(client, server.messages_url, messages_request(), api=API)
    assert held.headers["x-sseguard-inflight"] == "1"
    assert out.headers["x-sseguard-inflight"] == "2"
    assert out.headers["x-sseguard-fault"] == "truncated"
    assert out.verdict.ending is Ending.TRUNCATED


async def test_non_streamed_message_object(client: httpx2.AsyncClient) -> None:
    # seed 1: an answer that is a tool call with no text before it (seed 0's has a preface)
    async with run_chaos(ChaosConfig(seed=1, pacing=FAST)) as server:
        resp = await client.post(server.messages_url,
                                 json=messages_request(stream=False, tools=True, thinking=1024))
        broken = await client.post(server.messages_url, json=messages_request(stream=False),
                                   headers={"x-sseguard-inject": "tool_args_invalid_json"})
    body = resp.json()
    assert body["type"] == "message" and body["stop_reason"] == "tool_use"
    assert [b["type"] for b in body["content"]] == ["thinking", "tool_use"]
    assert isinstance(body["content"][1]["input"]["location"], str)
    assert body["usage"]["output_tokens"] > 0
    # broken JSON cannot be sent in a tool_use block's input object: not injected, said so
    assert broken.headers["x-sseguard-fault"] == "none"


# ── without sockets: every plan, every split ─────────────────────────────────────────────────────

SANS_IO = [f for f in TABLE if f not in (Fault.TRANSPORT_ERROR, Fault.STALLED, Fault.HTTP_ERROR)]


@settings(max_examples=120, deadline=None)
@given(fault=st.sampled_from([None, *SANS_IO]), seed=st.integers(0, 2**32),
       tokens=st.integers(1, 10), tools=st.booleans(),
       thinking=st.sampled_from([None, 1024, 4096]), cuts=st.lists(st.integers(0, 1 << 16)))
def test_every_encoded_stream_gives_the_table_verdict_under_any_split(
        fault: Fault | None, seed: int, tokens: int, tools: bool, thinking: int | None,
        cuts: list[int]) -> None:
    tools = tools or fault in NEEDS_TOOLS
    config = ChaosConfig(seed=seed, pacing=Pacing(tokens=tokens, reasoning_tokens=2))
    request = messages_request(tools=tools, thinking=thinking, max_tokens=8192)
    req = parse_request(msgspec.json.encode(request))
    decision = replace(decide(config, seed % 1000), fault=fault)
    answers = [make_answer(config, req, fault)]
    ids = ResponseIds("msg_1", "req_1", "0" * 32, "0" * 16, 0)
    body = b"".join(w.data for w in stream_plan(config, req, decision, ids, answers).writes)
    verdict = verdict_in_pieces(API, request, body, cuts)
    ending, findings = TABLE[fault] if fault is not None else (Ending.COMPLETE, frozenset())
    assert verdict.ending is ending
    assert verdict.finding_kinds == findings


def test_thinking_budget_scales_the_thinking() -> None:
    config = ChaosConfig(pacing=Pacing(tokens=4, reasoning_tokens=4))

    def thinking_deltas(budget: int | None) -> int:
        req = parse_request(msgspec.json.encode(messages_request(thinking=budget)))
        plan = stream_plan(config, req, decide(config, 0), ResponseIds("msg_1", "r", "0" * 32,
                                                                       "0" * 16, 0),
                           [make_answer(config, req, None)])
        return sum(w.data.count(b'"thinking_delta"') for w in plan.writes)

    assert [thinking_deltas(b) for b in (None, 1024, 2048, 4000)] == [0, 2, 4, 8]


async def test_same_seed_replays_the_same_bytes(client: httpx2.AsyncClient) -> None:
    bodies = []
    for _ in range(2):
        config = ChaosConfig(seed=9, pacing=FAST, faults={Fault.TRUNCATED: 0.5})
        async with run_chaos(config) as server:
            outs = [await fetch(client, server.messages_url, messages_request(tools=tools), api=API)
                    for tools in (False, True, False, True)]
        bodies.append([(o.headers["x-sseguard-fault"], o.body) for o in outs])
    assert bodies[0] == bodies[1]
    assert {fault for fault, _ in bodies[0]} == {"none", "truncated"}


async def test_unknown_injected_fault_is_a_400_in_anthropics_shape(
        client: httpx2.AsyncClient) -> None:
    async with run_chaos(ChaosConfig(pacing=FAST)) as server:
        resp = await client.post(server.messages_url, json=messages_request(),
                                 headers={"x-sseguard-inject": "meltdown"})
    assert resp.status_code == 400
    assert resp.json() == {"type": "error", "error": {
        "type": "invalid_request_error", "message": "x-sseguard-inject: unknown fault 'meltdown'"}}


async def test_each_protocols_stream_is_detected_as_that_protocol(
        client: httpx2.AsyncClient) -> None:
    async with run_chaos(ChaosConfig(pacing=FAST)) as server:
        bodies = {
            "chat": await client.post(server.chat_url, json={
                "model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}),
            "responses": await client.post(server.responses_url, json={
                "model": "m", "stream": True, "input": "hi"}),
            "messages": await client.post(server.messages_url, json=messages_request()),
        }
    assert {api: str(detect_api(resp.content)) for api, resp in bodies.items()} == {
        "chat": "chat", "responses": "responses", "messages": "messages"}


@pytest.mark.parametrize(("thinking", "shown"), [
    ({"type": "adaptive"}, False),  # the API's default on the adaptive-only models: omitted
    ({"type": "adaptive", "display": "omitted"}, False),
    ({"type": "adaptive", "display": "summarized"}, True),
    ({"type": "enabled", "budget_tokens": 2048}, True),
    ({"type": "enabled", "budget_tokens": 2048, "display": "omitted"}, False),
])
def test_thinking_text_is_sent_as_display_says_and_adaptive_omits_it_by_default(
        thinking: dict[str, Any], shown: bool) -> None:
    config = ChaosConfig(pacing=Pacing(tokens=4, reasoning_tokens=4))
    req = parse_request(msgspec.json.encode(messages_request()
                                            | {"thinking": thinking}))
    plan = stream_plan(config, req, decide(config, 0),
                       ResponseIds("msg_1", "r", "0" * 32, "0" * 16, 0),
                       [make_answer(config, req, None)])
    body = b"".join(w.data for w in plan.writes)
    assert b'"signature_delta"' in body
    assert (b'"thinking_delta"' in body) is shown
