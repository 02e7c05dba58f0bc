"""The official ``openai`` SDK (3.x) against the chaos server: a healthy server must satisfy it fully."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from _chaos_support import WEATHER_TOOL
from sseguard.chaos import (
    ChaosConfig,
    ChaosServer,
    Fault,
    FaultOptions,
    Pacing,
    run_chaos,
    run_chaos_in_thread,
)

MESSAGES: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture(scope="module")
def server() -> Iterator[ChaosServer]:
    with run_chaos_in_thread(ChaosConfig(seed=3, pacing=Pacing(tokens=8))) as s:
        yield s


@pytest.fixture
def client(server: ChaosServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.url, api_key="sk-test", max_retries=0) as c:
        yield c


def test_sdk_streams_text_and_usage(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(model="chaos-1", messages=MESSAGES, stream=True,
                                            stream_options={"include_usage": True})
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert len(text.split()) == 8 and text.endswith(".")
    assert finishes[-1] == "stop" and all(f is None for f in finishes[:-1])
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 8
    assert len({c.id for c in chunks}) == 1 and chunks[0].id.startswith("chatcmpl-")


def test_sdk_accumulates_streamed_tool_calls(client: openai.OpenAI) -> None:
    with client.chat.completions.stream(model="chaos-1", messages=MESSAGES,
                                        tools=[WEATHER_TOOL]) as stream:
        final = stream.get_final_completion()
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls or []
    assert len(calls) == 1 and calls[0].function.name == "get_weather"
    arguments = json.loads(calls[0].function.arguments)
    assert set(arguments) == {"location", "days"} and isinstance(arguments["days"], int)


def test_sdk_reads_non_streamed_completion_and_tool_calls(client: openai.OpenAI) -> None:
    plain = client.chat.completions.create(model="chaos-1", messages=MESSAGES)
    assert plain.object == "chat.completion" and plain.choices[0].finish_reason == "stop"
    assert plain.usage is not None and plain.usage.total_tokens > plain.usage.completion_tokens
    tools = client.chat.completions.with_raw_response.create(
        model="chaos-1", messages=MESSAGES, tools=[WEATHER_TOOL], tool_choice="required")
    assert tools.headers["x-sseguard-fault"] == "none"
    assert tools.request_id is not None and tools.request_id.startswith("req_")
    calls = tools.parse().choices[0].message.tool_calls or []
    assert calls and json.loads(calls[0].function.arguments)["location"]


def test_sdk_sees_reasoning_content_before_the_answer(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(model="chaos-1", messages=MESSAGES, stream=True,
                                            reasoning_effort="low")
    kinds = []
    for chunk in stream:
        delta = chunk.choices[0].delta
        if getattr(delta, "reasoning_content", None):
            kinds.append("reasoning")
        if delta.content:
            kinds.append("content")
    assert kinds[0] == "reasoning" and kinds[-1] == "content"
    assert kinds.index("content") == kinds.count("reasoning")


def test_sdk_lists_models(client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list()] == ["chaos-1"]


def test_sdk_raises_on_http_error(server: ChaosServer) -> None:
    with openai.OpenAI(base_url=server.url, api_key="sk-test", max_retries=0,
                       default_headers={"x-sseguard-inject": "http_error"}) as c:
        with pytest.raises(openai.APIStatusError) as info:
            c.chat.completions.create(model="chaos-1", messages=MESSAGES)
        assert info.value.status_code in (429, 500, 503)



@pytest.mark.parametrize("form", ["data", "event"])
def test_sdk_raises_on_both_forms_of_error_event(form: str) -> None:
    config = ChaosConfig(faults={Fault.ERROR_EVENT: 1.0},
                         options=FaultOptions(error_event_form=form))
    with (run_chaos_in_thread(config) as s,
          openai.OpenAI(base_url=s.url, api_key="sk-test", max_retries=0) as c,
          pytest.raises(openai.APIError, match="upstream model worker failed")):
        list(c.chat.completions.create(model="chaos-1", messages=MESSAGES, stream=True))


def test_sdk_silently_accepts_a_truncated_stream(server: ChaosServer) -> None:
    """Why sseguard exists: the official client ends a clean-EOF stream quietly, as if complete."""
    with openai.OpenAI(base_url=server.url, api_key="sk-test", max_retries=0,
                       default_headers={"x-sseguard-inject": "truncated"}) as c:
        chunks = list(c.chat.completions.create(model="chaos-1", messages=MESSAGES, stream=True))
    assert chunks and all(ch.choices[0].finish_reason is None for ch in chunks)


async def test_async_sdk_streams_against_the_in_loop_server() -> None:
    config = ChaosConfig(pacing=Pacing(tokens=5, inter_token_ms=2))
    async with run_chaos(config) as server, openai.AsyncOpenAI(base_url=server.url, api_key="sk-test",
                                  max_retries=0) as c:
        stream = await c.chat.completions.create(model="chaos-1", messages=MESSAGES,
                                                 stream=True, n=2)
        by_choice: dict[int, list[str]] = {0: [], 1: []}
        finishes: dict[int, str | None] = {}
        async for chunk in stream:
            for ch in chunk.choices:
                by_choice[ch.index].append(ch.delta.content or "")
                if ch.finish_reason:
                    finishes[ch.index] = ch.finish_reason
    assert finishes == {0: "stop", 1: "stop"}
    assert all(len("".join(parts).split()) == 5 for parts in by_choice.values())
