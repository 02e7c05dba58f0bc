"""The chaos upstream over real loopback sockets: every fault and dialect gives exactly its verdict."""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _chaos_support import TIME_TOOL, WEATHER_TOOL, chat_request, fetch
from sseguard.chaos import (
    DIALECT_ENDING,
    ChaosConfig,
    Fault,
    FaultOptions,
    Pacing,
    ServerDialect,
    run_chaos,
)
from sseguard.chaos.chat import parse_request, stream_plan
from sseguard.chaos.decide import decide
from sseguard.chaos.faults import NEEDS_TOOL_CALL
from sseguard.chaos.frames import ResponseIds
from sseguard.chaos.generate import GeneratedCall, make_answer, render_markup
from sseguard.core.contract import StreamChecker
from sseguard.core.verdict import Ending, FindingKind
from support.expected import FAULT_VERDICTS, expected

FAST = Pacing(tokens=6)
# A stalled stream stays silent until the client leaves, so "stalled" never depends on how a
# busy machine schedules the client's timer against the server's.
OPTIONS = FaultOptions(stall_then="hang", hang_max_s=60)


@pytest.fixture
async def client() -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient() as c:
        yield c


def _request_for(fault: Fault | None) -> dict[str, Any]:
    tools = [WEATHER_TOOL] if fault in NEEDS_TOOL_CALL else None
    return chat_request(tools=tools)


#: The faults only Responses/Messages can carry; a chat request drawing one gets none.
NOT_CHAT = (Fault.SEQUENCE_GAP, Fault.EVENT_ORDER, Fault.BLOCK_UNTERMINATED, Fault.DONE_MISMATCH)
CHAT_FAULTS = [f for f in Fault if f not in NOT_CHAT]


@pytest.mark.parametrize("fault", CHAT_FAULTS)
async def test_each_configured_fault_gives_exactly_its_verdict(
        fault: Fault, client: httpx2.AsyncClient) -> None:
    config = ChaosConfig(seed=11, pacing=FAST, options=OPTIONS, faults={fault: 1.0})
    async with run_chaos(config) as server:
        out = await fetch(client, server.chat_url, _request_for(fault), read_timeout=1.5)
        assert out.headers["x-sseguard-fault"] == str(fault)
        assert server.stats.injected(fault) == 1
    want = expected(fault)
    assert out.verdict.ending == want.ending, out.body[-400:]
    assert set(map(str, out.verdict.finding_kinds)) == want.findings, out.verdict.findings


async def test_healthy_server_streams_complete_answers_without_findings(
        client: httpx2.AsyncClient) -> None:
    async with run_chaos(ChaosConfig(pacing=FAST)) as server:
        for request in (chat_request(), chat_request(tools=[WEATHER_TOOL]),
                        chat_request(n=3), chat_request(reasoning_effort="high")):
            out = await fetch(client, server.chat_url, request)
            assert out.verdict.ending is Ending.COMPLETE
            assert out.verdict.findings == ()
            assert out.headers["x-sseguard-fault"] == "none"


@pytest.mark.parametrize("dialect", [d for d in ServerDialect if d is not ServerDialect.TRAILING_DONE])
async def test_each_dialect_gives_its_ending_and_no_finding(
        dialect: ServerDialect, client: httpx2.AsyncClient) -> None:
    config = ChaosConfig(pacing=FAST, dialects=frozenset({dialect}))
    async with run_chaos(config) as server:
        out = await fetch(client, server.chat_url, chat_request())
    assert out.verdict.ending is DIALECT_ENDING[dialect]
    assert out.verdict.findings == ()
    assert out.headers["x-sseguard-fault"] == "none"
    text = out.body.decode()
    if dialect is ServerDialect.EMPTY_FINISH_REASON:
        assert '"finish_reason":""' in text and '"finish_reason":null' not in text
    elif dialect is ServerDialect.USAGE_CHOICES_NULL:
        assert '"choices":null,"usage":' in text
    elif dialect is ServerDialect.NO_DONE:
        assert "[DONE]" not in text and '"usage":' in text
    else:
        assert text.endswith("data: [DONE]\n\n") and '"finish_reason":"stop"' not in text


@pytest.mark.parametrize("form", ["data", "event"])
async def test_error_event_comes_in_both_wire_forms(form: str, client: httpx2.AsyncClient) -> None:
    config = ChaosConfig(pacing=FAST, faults={Fault.ERROR_EVENT: 1.0},
                         options=FaultOptions(error_event_form=form))
    async with run_chaos(config) as server:
        out = await fetch(client, server.chat_url, chat_request())
    assert out.verdict.ending is Ending.ERROR_EVENT
    assert out.verdict.error == "upstream model worker failed mid-stream"
    if form == "event":
        assert b"event: error\ndata: {\"error\":" in out.body
    else:
        assert b"\ndata: {\"error\":" in out.body and out.body.endswith(b"data: [DONE]\n\n")


@pytest.mark.parametrize("status", [429, 500, 503])
async def test_http_error_has_status_and_openai_error_body(
        status: int, client: httpx2.AsyncClient) -> None:
    config = ChaosConfig(faults={Fault.HTTP_ERROR: 1.0},
                         options=FaultOptions(http_statuses=(status,)))
    async with run_chaos(config) as server:
        out = await fetch(client, server.chat_url, chat_request())
    assert out.status == status and out.verdict.ending is Ending.HTTP_ERROR
    error = json.loads(out.body)["error"]
    assert error["message"] and error["type"] in ("rate_limit_error", "server_error")
    assert (out.headers.get("retry-after") == "1") is (status == 429)


async def test_transport_error_is_a_tcp_reset_after_some_chunks() -> None:
    config = ChaosConfig(pacing=Pacing(tokens=20), faults={Fault.TRANSPORT_ERROR: 1.0})
    payload = json.dumps(chat_request()).encode()
    async with run_chaos(config) as server:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                     b"application/json\r\nContent-Length: " + str(len(payload)).encode()
                     + b"\r\n\r\n" + payload)
        received = b""
        with pytest.raises(ConnectionResetError):
            for _ in range(1000):
                data = await asyncio.wait_for(reader.read(65536), 5)
                if not data:
                    break  # a FIN instead of a reset: the assertion below fails the test
                received += data
        writer.close()
    assert b"x-sseguard-fault: transport_error" in received.lower()


async def test_stalled_stream_resumes_and_completes_for_a_patient_client(
        client: httpx2.AsyncClient) -> None:
    config = ChaosConfig(pacing=FAST, faults={Fault.STALLED: 1.0},
                         options=FaultOptions(stall_ms=4000))
    async with run_chaos(config) as server:
        # 1 s against a 4 s silence, and 60 s: neither depends on the machine being quiet.
        impatient = await fetch(client, server.chat_url, chat_request(), read_timeout=1.0)
        patient = await fetch(client, server.chat_url, chat_request(), read_timeout=60.0)
    assert impatient.verdict.ending is Ending.STALLED
    assert patient.verdict.ending is Ending.COMPLETE


async def test_hanging_stream_ends_when_the_client_leaves(client: httpx2.AsyncClient) -> None:
    config = ChaosConfig(pacing=FAST, faults={Fault.STALLED: 1.0},
                         options=FaultOptions(stall_ms=100, stall_then="hang", hang_max_s=60))
    async with run_chaos(config) as server:
        out = await fetch(client, server.chat_url, chat_request(), read_timeout=1.0)
        assert out.verdict.ending is Ending.STALLED
        for _ in range(1000):  # well before hang_max_s: the hang ended because the client left
            if server.stats.inflight == 0:
                break
            await asyncio.sleep(0.02)
        assert server.stats.inflight == 0


async def test_hang_is_bounded_even_if_the_client_never_leaves() -> None:
    config = ChaosConfig(pacing=FAST, faults={Fault.STALLED: 1.0},
                         options=FaultOptions(stall_then="hang", hang_max_s=1.0))
    async with run_chaos(config) as server, httpx2.AsyncClient() as c:
        out = await fetch(c, server.chat_url, chat_request(), read_timeout=10.0)
    assert out.verdict.ending is Ending.TRANSPORT_ERROR


async def test_inject_header_forces_one_requests_fault(client: httpx2.AsyncClient) -> None:
    async with run_chaos(ChaosConfig(pacing=FAST, faults={Fault.TRUNCATED: 1.0})) as server:
        forced = await fetch(client, server.chat_url, chat_request(), inject="no_done")
        healthy = await fetch(client, server.chat_url, chat_request(), inject="none")
        bad = await fetch(client, server.chat_url, chat_request(), inject="nonsense")
        assert server.stats.sources["forced"] == 1
    assert forced.verdict.ending is Ending.NO_DONE
    assert healthy.verdict.ending is Ending.COMPLETE
    assert bad.status == 400 and "nonsense" in json.loads(bad.body)["error"]["message"]


async def test_responses_carry_gateway_headers_and_keep_an_incoming_trace(
        client: httpx2.AsyncClient) -> None:
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    async with run_chaos(ChaosConfig(pacing=FAST)) as server:
        out = await fetch(client, server.chat_url, chat_request(),
                          headers={"traceparent": f"00-{trace}-00f067aa0ba902b7-01"})
        other = await fetch(client, server.chat_url, chat_request())
    h = out.headers
    assert h["server"].startswith("sseguard-chaos/")
    assert re.fullmatch(r"req_[0-9a-f]{24}", h["x-request-id"])
    assert re.fullmatch(rf"00-{trace}-[0-9a-f]{{16}}-01", h["traceparent"])
    assert h["x-trace-id"] == trace and other.headers["x-trace-id"] != trace
    assert h["x-sseguard-route"] == "default" and h["x-sseguard-inflight"] == "1"
    assert h["content-type"].startswith("text/event-stream")
    assert h["cache-control"] == "no-cache"
    assert h["x-request-id"] != other.headers["x-request-id"]


async def test_same_seed_replays_the_same_bytes_and_faults(client: httpx2.AsyncClient) -> None:
    config = ChaosConfig(seed=5, pacing=FAST, faults={Fault.TRUNCATED: 0.3, Fault.NO_DONE: 0.3})

    async def run(cfg: ChaosConfig) -> list[tuple[str, bytes]]:
        async with run_chaos(cfg) as server:
            outs = [await fetch(client, server.chat_url, chat_request(content=f"q{i}"))
                    for i in range(12)]
        return [(o.headers["x-sseguard-fault"], re.sub(rb'"created":\d+', b"", o.body))
                for o in outs]

    first, again, other = await run(config), await run(config), await run(replace(config, seed=6))
    assert first == again
    assert [f for f, _ in first] != [f for f, _ in other]
    assert len({f for f, _ in first}) == 3  # truncated, no_done and none all occur


async def test_answer_honours_n_max_tokens_and_reasoning_effort(
        client: httpx2.AsyncClient) -> None:
    async with run_chaos(ChaosConfig(pacing=Pacing(tokens=10, reasoning_tokens=4))) as server:
        many = await fetch(client, server.chat_url, chat_request(n=3))
        short = await fetch(client, server.chat_url, chat_request(max_tokens=3))
        thinking = await fetch(client, server.chat_url, chat_request(reasoning_effort="high"))
        plain = await fetch(client, server.chat_url, chat_request(usage=False))
    assert [c["finish_reason"] for c in many.verdict.message["choices"]] == ["stop"] * 3
    assert len({c["message"]["content"] for c in many.verdict.message["choices"]}) == 3
    choice = short.verdict.message["choices"][0]
    assert choice["finish_reason"] == "length"
    assert short.verdict.message["usage"]["completion_tokens"] == 3
    message = thinking.verdict.message["choices"][0]["message"]
    assert len(message["reasoning_content"].split()) == 8
    first_reasoning = thinking.body.index(b"reasoning_content")
    assert first_reasoning < thinking.body.index(b'"content":"', first_reasoning)
    assert thinking.verdict.message["usage"]["completion_tokens_details"]["reasoning_tokens"] == 8
    assert "usage" not in plain.verdict.message and plain.verdict.ending is Ending.COMPLETE


async def test_tool_calls_stream_structured_with_schema_valid_arguments(
        client: httpx2.AsyncClient) -> None:
    request = chat_request(tools=[WEATHER_TOOL, TIME_TOOL],
                           content="Use get_time and then get_weather, please.")
    after_tool = chat_request(tools=[WEATHER_TOOL])
    after_tool["messages"] += [{"role": "assistant", "content": None},
                               {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]
    async with run_chaos(ChaosConfig(pacing=FAST)) as server:
        out = await fetch(client, server.chat_url, request)
        text = await fetch(client, server.chat_url, after_tool)
        none = await fetch(client, server.chat_url, {**request, "tool_choice": "none"})
    choice = out.verdict.message["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and out.verdict.findings == ()
    calls = choice["message"]["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["get_time", "get_weather"]
    assert all(c["id"].startswith("call_") for c in calls)
    assert isinstance(json.loads(calls[1]["function"]["arguments"])["location"], str)
    assert out.body.count(b'"arguments":') > 4  # arguments arrive in fragments
    for plain in (text, none):
        assert plain.verdict.message["choices"][0]["finish_reason"] == "stop"
        assert "tool_calls" not in plain.verdict.message["choices"][0]["message"]


@pytest.mark.parametrize("family", ["dsml-v32", "dsml-v4", "dsml-v41", "deepseek-v3",
                                    "deepseek-v31", "hermes", "qwen3-coder", "kimi-k2", "glm45",
                                    "glm47", "harmony", "minimax-m2"])
async def test_raw_markup_mode_leaves_family_markup_in_content(
        family: str, client: httpx2.AsyncClient) -> None:
    async with run_chaos(ChaosConfig(pacing=FAST, raw_markup=family)) as server:
        out = await fetch(client, server.chat_url, chat_request(tools=[WEATHER_TOOL]))
    choice = out.verdict.message["choices"][0]
    assert choice["finish_reason"] == "stop" and "tool_calls" not in choice["message"]
    assert out.verdict.ending is Ending.COMPLETE
    assert out.verdict.finding_kinds == {FindingKind.MARKUP_LEAK}
    content = choice["message"]["content"]
    call = GeneratedCall("call_x", "get_weather", {}, "")
    opener = render_markup(family, [call]).lstrip("\n")[:12]
    assert opener in content


def test_the_markup2_families_are_written_exactly_as_each_writes_it() -> None:
    calls = _two_calls()
    assert render_markup("kimi-k2", calls) == (
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
        '<|tool_call_argument_begin|>{"location": "Hangzhou", "days": 3}<|tool_call_end|>'
        "<|tool_call_begin|>functions.get_time:1<|tool_call_argument_begin|>"
        '{"tz": "Asia/Shanghai"}<|tool_call_end|><|tool_calls_section_end|>')
    assert render_markup("glm45", calls) == (
        "\n<tool_call>get_weather\n<arg_key>location</arg_key>\n<arg_value>Hangzhou</arg_value>\n"
        "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>"
        "\n<tool_call>get_time\n<arg_key>tz</arg_key>\n<arg_value>Asia/Shanghai</arg_value>\n"
        "</tool_call>")
    assert render_markup("glm47", calls[1:]) == (
        "<tool_call>get_time<arg_key>tz</arg_key><arg_value>Asia/Shanghai</arg_value></tool_call>")
    assert render_markup("harmony", calls) == (
        "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
        '<|message|>{"location": "Hangzhou", "days": 3}<|call|>'
        "<|start|>assistant<|channel|>commentary to=functions.get_time <|constrain|>json"
        '<|message|>{"tz": "Asia/Shanghai"}<|call|>')
    assert render_markup("minimax-m2", calls) == (
        '\n<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="location">Hangzhou'
        '</parameter>\n<parameter name="days">3</parameter>\n</invoke>\n<invoke name="get_time">\n'
        '<parameter name="tz">Asia/Shanghai</parameter>\n</invoke>\n</minimax:tool_call>')


def test_malformed_markup2_misspells_one_closer_of_the_first_call() -> None:
    calls = [GeneratedCall("c0", "get_weather", {"location": "Oslo", "days": 3}, '{"location": "Oslo"}')]
    assert "}<|tool_call_ed|><|tool_calls_section_end|>" in render_markup("kimi-k2", calls,
                                                                          malformed=True)
    assert "<arg_value>3</arg_valu></tool_call>" in render_markup("glm47", calls, malformed=True)
    assert '<parameter name="days">3</parametr>\n</invoke>' in render_markup(
        "minimax-m2", calls, malformed=True)
    assert "<|channel|>commentry to=functions.get_weather" in render_markup(
        "harmony", calls, malformed=True)
    bare = [GeneratedCall("c0", "ping", {}, "{}")]
    assert render_markup("glm45", bare, malformed=True) == "\n<tool_call>ping\n</arg_key></tool_call>"
    assert "</invok>" in render_markup("minimax-m2", bare, malformed=True)


async def test_raw_harmony_carries_reasoning_and_preface_as_messages(
        client: httpx2.AsyncClient) -> None:
    async with run_chaos(ChaosConfig(pacing=FAST, raw_markup="harmony")) as server:
        out = await fetch(client, server.chat_url, chat_request(tools=[WEATHER_TOOL],
                                                                reasoning_effort="low"))
    message = out.verdict.message["choices"][0]["message"]
    assert not message.get("reasoning_content")  # a server without Harmony's parser sends it all
    content = message["content"]
    assert content.startswith("<|channel|>analysis<|message|>")
    analysis_end = content.index("<|end|><|start|>assistant<|channel|>commentary<|message|>")
    preface_end = content.index("<|end|><|start|>assistant<|channel|>commentary to=functions."
                                "get_weather <|constrain|>json<|message|>{")
    assert 0 < analysis_end < preface_end and content.endswith("}<|call|>")


def _two_calls() -> list[GeneratedCall]:
    return [GeneratedCall("c0", "get_weather", {"location": "Hangzhou", "days": 3},
                 '{"location": "Hangzhou", "days": 3}'),
            GeneratedCall("c1", "get_time", {"tz": "Asia/Shanghai"}, '{"tz": "Asia/Shanghai"}')]


def test_markup_is_written_exactly_as_each_family_writes_it() -> None:
    calls = _two_calls()
    m = "｜DSML｜"
    v32 = (f'\n\n<{m}function_calls>\n<{m}invoke name="get_weather">\n'
           f'<{m}parameter name="location" string="true">Hangzhou</{m}parameter>\n'
           f'<{m}parameter name="days" string="false">3</{m}parameter>\n</{m}invoke>\n'
           f'<{m}invoke name="get_time">\n'
           f'<{m}parameter name="tz" string="true">Asia/Shanghai</{m}parameter>\n</{m}invoke>\n'
           f'</{m}function_calls>')
    assert render_markup("dsml-v32", calls) == v32
    assert render_markup("dsml-v4", calls) == v32.replace("function_calls", "tool_calls")
    v41 = render_markup("dsml-v41", calls[:1])
    assert v41.startswith(f"\n\n<{m} calls>\n<{m} invoke name=\"get_weather\">\n<{m} parameter ")
    assert v41.endswith(f"</{m} parameter>\n</{m} invoke>\n</{m} calls>")
    assert render_markup("deepseek-v3", calls[:1]) == (
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
        '{"location": "Hangzhou", "days": 3}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>')
    assert render_markup("deepseek-v31", calls[:1]) == (
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
        '{"location": "Hangzhou", "days": 3}<｜tool▁call▁end｜><｜tool▁calls▁end｜>')
    assert render_markup("hermes", calls) == (
        '\n<tool_call>\n{"name": "get_weather", "arguments": {"location": "Hangzhou", "days": 3}}'
        '\n</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": {"tz": "Asia/Shanghai"}}'
        "\n</tool_call>")
    assert render_markup("qwen3-coder", calls) == (
        "\n\n<tool_call>\n<function=get_weather>\n<parameter=location>\nHangzhou\n</parameter>\n"
        "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"
        "\n<tool_call>\n<function=get_time>\n<parameter=tz>\nAsia/Shanghai\n</parameter>\n"
        "</function>\n</tool_call>")


def test_malformed_closing_tag_misspells_one_dsml_closer() -> None:
    calls = [GeneratedCall("c0", "get_weather", {"days": 3, "location": "Oslo"}, "")]
    broken = render_markup("dsml-v32", calls, malformed=True)
    assert broken.count("</｜DSML｜parametr>") == 1
    assert 'string="true">Oslo</｜DSML｜parametr>' in broken
    no_strings = render_markup("dsml-v41", [GeneratedCall("c0", "ping", {}, "")], malformed=True)
    assert "</｜DSML｜ invok>" in no_strings


async def test_non_streamed_completion_is_a_chat_completion_with_usage(
        client: httpx2.AsyncClient) -> None:
    config = ChaosConfig(pacing=FAST, faults={Fault.TRUNCATED: 1.0})
    async with run_chaos(config) as server:
        r = await client.post(server.chat_url, json=chat_request(stream=False))
        tools = await client.post(server.chat_url, json=chat_request(
            stream=False, tools=[WEATHER_TOOL]), headers={"x-sseguard-inject":
                                                          "tool_args_invalid_json"})
        assert server.stats.skipped["truncated"] == 1  # a stream-only fault drawn, not applied
    body = r.json()
    assert r.headers["x-sseguard-fault"] == "none" and r.headers["content-type"].startswith(
        "application/json")
    assert body["object"] == "chat.completion" and body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"]["completion_tokens"] == 6
    args = tools.json()["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
    with pytest.raises(json.JSONDecodeError):
        json.loads(args)


async def test_bad_requests_get_400_with_an_openai_error(client: httpx2.AsyncClient) -> None:
    async with run_chaos() as server:
        cases = [b"not json", b"[]", json.dumps({"messages": []}).encode(),
                 json.dumps({"messages": [{"role": "user", "content": "x"}], "n": 0}).encode(),
                 json.dumps({"messages": [{"role": "user", "content": "x"}],
                             "reasoning_effort": "max"}).encode(),
                 json.dumps({"messages": [{"role": "user", "content": "x"}],
                             "tool_choice": {"type": "function", "function": {"name": "nope"}},
                             "tools": [WEATHER_TOOL]}).encode()]
        for payload in cases:
            r = await client.post(server.chat_url, content=payload)
            assert r.status_code == 400, payload
            assert r.json()["error"]["type"] == "invalid_request_error"
        assert server.stats.bad_requests == len(cases)


async def test_models_healthz_and_stats_endpoints(client: httpx2.AsyncClient) -> None:
    async with run_chaos(ChaosConfig(model="m-1", faults={Fault.HTTP_ERROR: 1.0})) as server:
        models = (await client.get(f"{server.url}/models")).json()
        health = await client.get(f"{server.root}/healthz")
        await client.post(server.chat_url, json=chat_request())
        stats = (await client.get(f"{server.root}/chaos/stats")).json()
    assert models["data"][0]["id"] == "m-1" and health.json() == {"status": "ok", "pid": os.getpid()}
    assert stats["requests"] == 1 and stats["faults"] == {"http_error": 1}
    assert stats["max_inflight"] == 1 and stats["inflight"] == 0


async def test_pacing_delays_first_token_and_spaces_chunks(client: httpx2.AsyncClient) -> None:
    loop = asyncio.get_running_loop()
    config = ChaosConfig(pacing=Pacing(ttft_ms=150, inter_token_ms=30, tokens=6))
    async with run_chaos(config) as server:
        start = loop.time()
        arrivals: list[float] = []
        async with client.stream("POST", server.chat_url, json=chat_request()) as resp:
            async for _ in resp.aiter_raw():
                arrivals.append(loop.time() - start)
    assert arrivals[0] >= 0.14
    assert arrivals[-1] - arrivals[0] >= 0.14  # five gaps of 30 ms
    assert arrivals[-1] < 2.0


# ── without sockets: every plan the encoder makes, checked by the real checker ─────────────────

SANS_IO_FAULTS = [f for f in CHAT_FAULTS if f not in (Fault.TRANSPORT_ERROR, Fault.STALLED,
                                                       Fault.HTTP_ERROR)]


@settings(max_examples=150, deadline=None)
@given(fault=st.sampled_from([None, *SANS_IO_FAULTS]), seed=st.integers(0, 2**32),
       tokens=st.integers(1, 12), n=st.integers(1, 3), usage=st.booleans(),
       tools=st.booleans(), effort=st.sampled_from([None, "low", "high"]))
def test_every_encoded_stream_gives_the_expected_verdict(
        fault: Fault | None, seed: int, tokens: int, n: int, usage: bool, tools: bool,
        effort: str | None) -> None:
    if fault in (Fault.TOOL_UNDEFINED_FUNCTION, Fault.TOOL_ARGS_SCHEMA_MISMATCH):
        tools = True
    if fault is Fault.MISSING_USAGE:
        usage = True
    config = ChaosConfig(seed=seed, pacing=Pacing(tokens=tokens))
    request = chat_request(usage=usage, tools=[WEATHER_TOOL] if tools else None, n=n,
                           **({"reasoning_effort": effort} if effort else {}))
    req = parse_request(json.dumps(request).encode())
    decision = replace(decide(config, seed % 1000), fault=fault)
    answers = [make_answer(config, req, fault, i) for i in range(n)]
    ids = ResponseIds("chatcmpl-1", "req_1", "0" * 32, "0" * 16, 0)
    plan = stream_plan(config, req, decision, ids, answers)
    checker = StreamChecker(request)
    for write in plan.writes:
        checker.feed(write.data)
    verdict = checker.close()
    if fault is None:
        assert verdict.ending is Ending.COMPLETE and verdict.findings == ()
        return
    assert verdict.ending == expected(fault).ending
    assert set(map(str, verdict.finding_kinds)) == expected(fault).findings


# ── the markup the server writes is what sseguard.core.toolcalls reads ─────────────────────────────────

FAMILIES = ["dsml-v32", "dsml-v4", "dsml-v41", "deepseek-v3", "deepseek-v31", "hermes",
            "qwen3-coder", "kimi-k2", "glm45", "glm47", "harmony", "minimax-m2",
            # docs/design/markup.md classes C, D and E
            "pythonic", "olmo3", "lfm2", "mistral", "plamo3", "functiongemma", "gemma4",
            # docs/design/markup.md classes F, G, H
            "seed-oss", "zaya", "dots", "step3", "minicpm5", "gigachat35", "iquest-q1", "hunyuan",
            "k2-horizon", "kimi-k3", "minimax-m3", "muse"]


@pytest.mark.parametrize("family", FAMILIES)
async def test_raw_markup_parses_back_to_the_calls_with_the_real_parser(
        family: str, client: httpx2.AsyncClient) -> None:
    from sseguard.core.toolcalls import MarkupError, Text, ToolCallEnd, parser_for

    tools = [WEATHER_TOOL, TIME_TOOL]
    request = chat_request(tools=tools, content="Call get_weather and get_time.")
    async with run_chaos(ChaosConfig(seed=2, pacing=FAST, raw_markup=family)) as server:
        out = await fetch(client, server.chat_url, request)
    parser = parser_for(family, tools)
    events = []
    for part in re.findall(rb'"content":("(?:[^"\\]|\\.)*")', out.body):
        events += parser.feed(json.loads(part))  # chunk by chunk, as the stream delivered it
    events += parser.close()
    ends = [e for e in events if isinstance(e, ToolCallEnd)]
    assert [e.name for e in ends] == ["get_weather", "get_time"]
    assert isinstance(json.loads(ends[0].arguments)["location"], str)
    assert not [e for e in events if isinstance(e, MarkupError)]
    visible = "".join(e.text for e in events if isinstance(e, Text))
    assert "<" not in visible and "｜" not in visible


@pytest.mark.parametrize("family", ["dsml-v32", "dsml-v4", "dsml-v41", "kimi-k2", "glm45", "glm47",
                                    "harmony", "minimax-m2", "dots", "step3", "minicpm5",
                                    "gigachat35", "iquest-q1", "hunyuan", "k2-horizon",
                                    "kimi-k3", "minimax-m3"])
async def test_malformed_closing_tag_is_a_malformed_tag_for_the_real_parser(
        family: str, client: httpx2.AsyncClient) -> None:
    from sseguard.core.toolcalls import MarkupError, ToolCallEnd, parser_for

    config = ChaosConfig(seed=4, pacing=FAST, raw_markup=family,
                         faults={Fault.MALFORMED_CLOSING_TAG: 1.0})
    async with run_chaos(config) as server:
        out = await fetch(client, server.chat_url, chat_request(tools=[WEATHER_TOOL]))
    content = out.verdict.message["choices"][0]["message"]["content"]
    parser = parser_for(family, [WEATHER_TOOL])
    events = parser.feed(content) + parser.close()
    errors = [e for e in events if isinstance(e, MarkupError)]
    assert [str(e.kind) for e in errors] == [FAULT_VERDICTS["malformed_closing_tag"].markup_error]
    assert not [e for e in events if isinstance(e, ToolCallEnd)]
