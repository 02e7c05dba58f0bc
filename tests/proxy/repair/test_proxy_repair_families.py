"""``--repair-markup`` for the families of docs/design/markup.md §2, end to end with the real openai and
anthropic SDKs, in chat, Responses and Messages.

A chaos upstream leaves each family's markup raw in the text; the proxy repairs it (chat: by the
family's name and by ``auto``; Responses and Messages: by ``auto``), and the stream the client gets
passes its protocol's strict checker. What the SDK gets is checked against the calls the chaos server
generated, seen through a second chaos server with the same seed that sends them structured (never
against a parser's output), with Kimi's ids and Harmony's reasoning written out here."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_proxy_repair import _assemble, _run, _split, _stream

from sseguard.chaos import ChaosConfig, Pacing, run_chaos
from sseguard.chaos.generate import GeneratedCall as Call  # renamed (issue 46)
from sseguard.chaos.generate import render_markup
from sseguard.core.contract import checker_for
from sseguard.core.sse import SSEDecoder
from sseguard.proxy.repair import RepairFrames
from support.proxy import KEY, WEATHER_TOOL, chaos_proxy, chat, raw_post

TIME_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {"name": "get_time", "parameters": {
        "type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}},
}
TOOLS = [WEATHER_TOOL, TIME_TOOL]
ASK = [{"role": "user", "content": "Call get_weather and get_time."}]
#: family → a marker the raw upstream must really have sent (the markup reached the proxy)
MARKERS = {"kimi-k2": "<|tool_call_begin|>", "glm45": "\n<arg_key>", "glm47": "</arg_key><arg_value>",
           "harmony": "<|channel|>commentary to=functions.", "minimax-m2": "<minimax:tool_call>"}
#: text of the markup that must never reach the client as content
NEVER = ("<|", "|>", "<tool_call>", "<arg_", "</arg_", "minimax:", "<invoke", "<parameter",
         "</parameter", "to=functions")
SEED = 21
FAMILIES = ["kimi-k2", "glm45", "glm47", "harmony", "minimax-m2"]
#: every parameter a string, so that GLM and MiniMax keep the values raw (decision 2.5)
STRING_TOOLS = [{"type": "function", "function": {"name": name, "parameters": {
    "type": "object", "properties": {k: {"type": "string"} for k in ("path", "query", "note")}}}}
    for name in ("read", "fs.search")]

_values = st.dictionaries(st.sampled_from(["path", "query", "note"]),
                          st.text(st.sampled_from("ab é1<>.\n\"\\"), max_size=12), max_size=3)


@settings(max_examples=120, deadline=None)
@given(family=st.sampled_from(FAMILIES), auto=st.booleans(),
       prefix=st.text(st.sampled_from("ab <>.é"), max_size=10).filter(lambda s: s.strip()),
       calls=st.lists(st.tuples(st.sampled_from(["read", "fs.search"]), _values), min_size=1,
                      max_size=3),
       thought=st.text(st.sampled_from("ab .é"), max_size=10),
       cuts=st.sets(st.integers(1, 500), max_size=30))
def test_markup2_in_content_becomes_the_same_tool_calls_under_any_split(
        family: str, auto: bool, prefix: str, calls: list[tuple[str, dict[str, str]]], thought: str,
        cuts: set[int]) -> None:
    rendered = render_markup(family, [Call(f"c{i}", name, values, json.dumps(values))
                                      for i, (name, values) in enumerate(calls)])
    if family == "harmony":  # a completion of messages: reasoning, the preface, then the calls
        content = (f"<|channel|>analysis<|message|>{thought}<|end|><|start|>assistant"
                   f"<|channel|>commentary<|message|>{prefix}<|end|>{rendered}")
        visible = prefix
    else:  # the whitespace that frames the answer at its start is not text (decision 2.2); auto
        # sends text before the first marker as it comes, so it cannot know that yet
        content, visible = prefix + rendered, prefix if auto else prefix.lstrip(" ")
    frames = RepairFrames("auto" if auto else family, STRING_TOOLS)
    body, _ = _run(frames, _stream(_split(content, cuts)))
    choice = _assemble(body)
    message = choice["message"]
    assert choice["finish_reason"] == "tool_calls"
    assert (message["content"] or "") == visible
    assert (message.get("reasoning_content") or "") == (thought if family == "harmony" else "")
    got = [(c["function"]["name"], json.loads(c["function"]["arguments"]))
           for c in message["tool_calls"]]
    assert got == [(name, values) for name, values in calls]
    ids = [c["id"] for c in message["tool_calls"]]
    if family == "kimi-k2":
        assert ids == [f"functions.{name}:{i}" for i, (name, _) in enumerate(calls)]
    else:
        assert all(i.startswith("call_") for i in ids) and len(set(ids)) == len(calls)
    assert frames.failure is None and frames.findings() == [] and frames.calls == len(calls)


def _deltas(body: bytes) -> list[dict[str, Any]]:
    return [(json.loads(e.data)["choices"] or [{}])[0].get("delta", {})
            for e in SSEDecoder().feed(body) if e.data != "[DONE]"]


async def _structured(endpoint: str, request: dict[str, Any]) -> bytes:
    """What the chaos server sends for ``request`` at ``SEED`` when it leaves nothing raw."""
    async with run_chaos(ChaosConfig(seed=SEED, pacing=Pacing(tokens=6))) as structured:
        return (await raw_post(getattr(structured, endpoint), request)).body


async def _generated(request: dict[str, Any]) -> tuple[list[tuple[str, Any]], str]:
    """The calls (name, arguments) and reasoning the chaos server makes for ``request`` at ``SEED``,
    as it sends them when it leaves nothing raw."""
    body = await _structured("chat_url", request)
    calls: dict[int, list[str]] = {}
    reasoning = []
    for delta in _deltas(body):
        reasoning.append(delta.get("reasoning_content") or "")
        for call in delta.get("tool_calls") or []:
            entry = calls.setdefault(call["index"], ["", ""])
            entry[0] += call.get("function", {}).get("name") or ""
            entry[1] += call.get("function", {}).get("arguments") or ""
    return [(name, json.loads(args)) for _, (name, args) in sorted(calls.items())], "".join(reasoning)


@pytest.mark.parametrize("mode", ["family", "auto"])
@pytest.mark.parametrize("family", FAMILIES)
async def test_the_sdk_gets_the_generated_tool_calls_from_raw_markup(family: str, mode: str) -> None:
    extra: dict[str, Any] = {"reasoning_effort": "low"} if family == "harmony" else {}
    request = chat(messages=ASK, tools=TOOLS, **extra)
    want_calls, want_reasoning = await _generated(request)
    assert [name for name, _ in want_calls] == ["get_weather", "get_time"]
    chaos = ChaosConfig(seed=SEED, raw_markup=family, pacing=Pacing(tokens=6))
    async with run_chaos(chaos) as direct, \
            chaos_proxy(chaos, repair_markup=family if mode == "family" else "auto") as (_, px):
        raw = await raw_post(direct.chat_url, request)
        reasoning: list[str] = []
        async with openai.AsyncOpenAI(base_url=px.url, api_key=KEY, max_retries=0) as client, \
                client.chat.completions.stream(model="chaos-1", messages=ASK,  # type: ignore[arg-type]
                                               tools=TOOLS, **extra) as stream:  # type: ignore[arg-type]
            async for event in stream:
                if event.type == "chunk" and event.chunk.choices:
                    extra_fields = event.chunk.choices[0].delta.model_extra or {}
                    reasoning.append(extra_fields.get("reasoning_content") or "")
            final = await stream.get_final_completion()
    raw_content = "".join(d.get("content") or "" for d in _deltas(raw.body))
    assert MARKERS[family] in raw_content  # the upstream really left markup in content
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    content = choice.message.content or ""
    assert not any(piece in content for piece in NEVER), content
    calls = choice.message.tool_calls or []
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == want_calls
    if family == "kimi-k2":  # the model's own ids are what it expects back in the tool results
        assert [c.id for c in calls] == ["functions.get_weather:0", "functions.get_time:1"]
    else:
        assert all(c.id.startswith("call_") for c in calls) and len({c.id for c in calls}) == 2
    if family == "harmony":  # the analysis channel arrives as reasoning, word for word
        assert want_reasoning and "".join(reasoning) == want_reasoning
        assert want_reasoning not in content


@pytest.mark.parametrize("mode", ["family", "auto"])
@pytest.mark.parametrize("family", FAMILIES)
async def test_unparseable_markup_reaches_the_sdk_as_an_error_never_as_content(family: str,
                                                                              mode: str) -> None:
    chaos = ChaosConfig(seed=SEED, raw_markup=family, pacing=Pacing(tokens=6))
    async with chaos_proxy(chaos, repair_markup=family if mode == "family" else "auto") as (_, px):
        seen: list[str] = []
        async with openai.AsyncOpenAI(base_url=px.url, api_key=KEY, max_retries=0) as client:
            with pytest.raises(openai.APIError) as info:
                async for chunk in await client.chat.completions.create(
                        model="chaos-1", messages=ASK, tools=TOOLS, stream=True,  # type: ignore[arg-type]
                        extra_headers={"x-sseguard-inject": "malformed_closing_tag"}):
                    seen.extend(c.delta.content or "" for c in chunk.choices)
    assert info.value.code == "markup_malformed_tag"
    assert not any(piece in "".join(seen) for piece in NEVER)


# ── responses and messages: the same repair engine, each protocol's own writer ───────────────────

RESPONSES_TOOLS: list[Any] = [{"type": "function", "name": t["function"]["name"],
                               "parameters": t["function"]["parameters"]} for t in TOOLS]
MESSAGES_TOOLS: list[Any] = [{"name": t["function"]["name"],
                              "input_schema": t["function"]["parameters"]} for t in TOOLS]


def _responses_request(family: str) -> dict[str, Any]:
    request: dict[str, Any] = {"model": "chaos-1", "input": ASK[0]["content"], "stream": True,
                               "tools": RESPONSES_TOOLS}
    if family == "harmony":
        request["reasoning"] = {"effort": "low"}
    return request


def _messages_request(family: str) -> dict[str, Any]:
    request: dict[str, Any] = {"model": "chaos-1", "max_tokens": 4096, "messages": ASK,
                               "stream": True, "tools": MESSAGES_TOOLS}
    if family == "harmony":
        request["thinking"] = {"type": "enabled", "budget_tokens": 1024}
    return request


def _events(body: bytes) -> list[dict[str, Any]]:
    return [json.loads(e.data) for e in SSEDecoder().feed(body) if e.data != "[DONE]"]


async def _strict_verdict(url: str, api: str, request: dict[str, Any]) -> tuple[str, list[Any]]:
    """What the client gets from the proxy, judged by the strict checker of its protocol."""
    got = await raw_post(url, request)
    checker = checker_for(api, request)
    checker.feed(got.body)
    verdict = checker.close()
    assert not any(piece in got.body.decode() for piece in NEVER)
    return str(verdict.ending), list(verdict.findings)


@pytest.mark.parametrize("family", FAMILIES)
async def test_the_openai_sdk_gets_the_generated_function_calls_from_raw_markup_in_responses(
        family: str) -> None:
    request = _responses_request(family)
    want = _events(await _structured("responses_url", request))
    want_calls = [(e["item"]["name"], json.loads(e["item"]["arguments"])) for e in want
                  if e["type"] == "response.output_item.done" and e["item"]["type"] == "function_call"]
    want_reasoning = "".join(e["delta"] for e in want
                             if e["type"] == "response.reasoning_summary_text.delta")
    assert [name for name, _ in want_calls] == ["get_weather", "get_time"]
    chaos = ChaosConfig(seed=SEED, raw_markup=family, pacing=Pacing(tokens=6))
    async with run_chaos(chaos) as direct, chaos_proxy(chaos, repair_markup="auto") as (_, px):
        raw = _events((await raw_post(direct.responses_url, request)).body)
        extra: dict[str, Any] = {"reasoning": request["reasoning"]} if "reasoning" in request else {}
        async with openai.AsyncOpenAI(base_url=px.url, api_key=KEY, max_retries=0) as client, \
                client.responses.stream(model="chaos-1", input=request["input"],
                                        tools=RESPONSES_TOOLS, **extra) as stream:
            final = await stream.get_final_response()
        ending, findings = await _strict_verdict(f"{px.url}/responses", "responses", request)
    raw_text = "".join(e["delta"] for e in raw if e["type"] == "response.output_text.delta")
    assert MARKERS[family] in raw_text  # the upstream really left markup in output_text
    calls = [i for i in final.output if i.type == "function_call"]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == want_calls
    if family == "kimi-k2":
        assert [c.call_id for c in calls] == ["functions.get_weather:0", "functions.get_time:1"]
    assert not any(piece in final.output_text for piece in NEVER)
    if family == "harmony":  # the analysis channel is a reasoning item, word for word
        [reasoning] = [i for i in final.output if i.type == "reasoning"]
        assert want_reasoning and [c.text for c in reasoning.content or []] == [want_reasoning]
        assert final.output[0].type == "reasoning"
    assert (ending, findings) == ("complete", [])


@pytest.mark.parametrize("family", FAMILIES)
async def test_the_anthropic_sdk_gets_the_generated_tool_use_blocks_from_raw_markup(
        family: str) -> None:
    request = _messages_request(family)
    want = _events(await _structured("messages_url", request))
    starts = {e["index"]: e["content_block"] for e in want if e["type"] == "content_block_start"}
    inputs: dict[int, str] = {}
    thinking = []
    for e in want:
        if e["type"] == "content_block_delta":
            if e["delta"]["type"] == "input_json_delta":
                inputs[e["index"]] = inputs.get(e["index"], "") + e["delta"]["partial_json"]
            elif e["delta"]["type"] == "thinking_delta":
                thinking.append(e["delta"]["thinking"])
    want_calls = [(starts[i]["name"], json.loads(inputs[i])) for i in sorted(inputs)]
    assert [name for name, _ in want_calls] == ["get_weather", "get_time"]
    chaos = ChaosConfig(seed=SEED, raw_markup=family, pacing=Pacing(tokens=6))
    extra: dict[str, Any] = {"thinking": request["thinking"]} if "thinking" in request else {}
    async with run_chaos(chaos) as direct, chaos_proxy(chaos, repair_markup="auto") as (_, px):
        raw = _events((await raw_post(direct.messages_url, request)).body)
        async with anthropic.AsyncAnthropic(base_url=px.url.removesuffix("/v1"), api_key=KEY,
                                            max_retries=0) as client, \
                client.messages.stream(model="chaos-1", max_tokens=4096, messages=ASK,  # type: ignore[arg-type]
                                       tools=MESSAGES_TOOLS, **extra) as stream:
            final = await stream.get_final_message()
        ending, findings = await _strict_verdict(f"{px.url}/messages", "messages", request)
    raw_text = "".join(e["delta"].get("text", "") for e in raw if e["type"] == "content_block_delta")
    assert MARKERS[family] in raw_text  # the upstream really left markup in a text block
    assert final.stop_reason == "tool_use"
    blocks = [b for b in final.content if b.type == "tool_use"]
    assert [(b.name, b.input) for b in blocks] == want_calls
    if family == "kimi-k2":
        assert [b.id for b in blocks] == ["functions.get_weather:0", "functions.get_time:1"]
    assert not any(piece in b.text for b in final.content if b.type == "text" for piece in NEVER)
    if family == "harmony":  # the analysis channel is a thinking block, word for word
        assert final.content[0].type == "thinking"
        assert [b.thinking for b in final.content if b.type == "thinking"] == ["".join(thinking)]
    assert (ending, findings) == ("complete", [])


@pytest.mark.parametrize("family", FAMILIES)
async def test_unparseable_markup_reaches_the_responses_and_anthropic_sdks_as_an_error(
        family: str) -> None:
    chaos = ChaosConfig(seed=SEED, raw_markup=family, pacing=Pacing(tokens=6))
    inject = {"x-sseguard-inject": "malformed_closing_tag"}
    async with chaos_proxy(chaos, repair_markup="auto") as (_, px):
        seen: list[str] = []
        async with openai.AsyncOpenAI(base_url=px.url, api_key=KEY, max_retries=0) as client:
            with pytest.raises(openai.APIError) as info:
                async for event in await client.responses.create(
                        model="chaos-1", input=ASK[0]["content"], tools=RESPONSES_TOOLS,
                        stream=True, extra_headers=inject):
                    if event.type == "response.output_text.delta":
                        seen.append(event.delta)
        async with anthropic.AsyncAnthropic(base_url=px.url.removesuffix("/v1"), api_key=KEY,
                                            max_retries=0) as aclient:
            with pytest.raises(anthropic.APIError) as ainfo:
                async for message_event in await aclient.messages.create(
                        model="chaos-1", max_tokens=1024, messages=ASK,  # type: ignore[arg-type]
                        tools=MESSAGES_TOOLS, stream=True, extra_headers=inject):
                    if message_event.type == "content_block_delta" and \
                            message_event.delta.type == "text_delta":
                        seen.append(message_event.delta.text)
    assert info.value.code == "markup_malformed_tag"
    body = ainfo.value.body
    assert isinstance(body, dict) and body["error"]["message"].startswith("markup_malformed_tag:")
    assert not any(piece in "".join(seen) for piece in NEVER)
