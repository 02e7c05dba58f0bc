"""``--resume vllm``: a chat stream that broke after content is continued and spliced into the same
client stream; what cannot be continued exactly still fails explicitly."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import openai
import pytest

from sseguard.chaos import ChaosConfig, Fault, Pacing, run_chaos
from sseguard.proxy import run_proxy
from support.proxy import KEY, WEATHER_TOOL, chat, proxy_config, raw_post
from support.proxy_heal import Step, heal_proxy

PART = (b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":'
        b'{"role":"assistant","content":"Hel"},"finish_reason":null}]}\n\n')
REST = (b'data: {"id":"c9","object":"chat.completion.chunk","choices":[{"index":0,"delta":'
        b'{"role":"assistant","content":""},"finish_reason":null}]}\n\n'
        b'data: {"id":"c9","object":"chat.completion.chunk","choices":[{"index":0,"delta":'
        b'{"content":"lo"},"finish_reason":"stop"}]}\n\n'
        b"data: [DONE]\n\n")
SPLICED = (b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":'
           b'{"content":"lo"},"finish_reason":"stop"}]}\n\n'
           b"data: [DONE]\n\n")
TOOL = (b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":'
        b'{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f",'
        b'"arguments":"{\\"a\\""}}]},"finish_reason":null}]}\n\n')


def _texts(body: bytes) -> tuple[str, list[Any]]:
    text, finishes = "", []
    for frame in body.split(b"\n\n"):
        if frame.startswith(b"data: {"):
            obj = json.loads(frame[6:])
            for choice in obj.get("choices") or ():
                text += choice["delta"].get("content") or ""
                finishes.append(choice.get("finish_reason"))
    return text, finishes


@pytest.mark.parametrize("cut", [
    Step(PART, end="reset"),  # transport_error
    Step(PART),  # truncated: a clean EOF
    Step(PART + b'data: {"id":"c1","choi', end="eof"),  # cut_mid_frame
    Step(PART + b"data: [DONE]\n\n"),  # no_finish
], ids=["reset", "truncated", "cut_mid_frame", "no_finish"])
async def test_a_break_after_content_is_continued_in_the_same_client_stream(cut: Step) -> None:
    async with heal_proxy([cut, Step(REST)], resume="vllm") as (up, px, waits, records):
        got = await raw_post(f"{px.url}/chat/completions", chat())
        for _ in range(500):
            if len(records.items) >= 2:
                break
            await asyncio.sleep(0.01)
    assert got.body == PART + SPLICED and got.error is None
    assert len(up.paths) == 2 and waits == []
    sent = json.loads(up.bodies[1])
    assert sent["messages"][-1] == {"role": "assistant", "content": "Hel"}
    assert sent["continue_final_message"] is True and sent["add_generation_prompt"] is False
    assert sent["messages"][:-1] == chat()["messages"]
    client = next(r for r in records.items if r.heal_of is None)
    attempt = next(r for r in records.items if r.heal_of is not None)
    assert client.ending == "complete" and client.healed == "resume" and client.heal_attempts == 1
    assert attempt.heal_of == client.index and attempt.ending != "complete"


async def test_a_repeated_prefix_of_the_answer_so_far_is_removed() -> None:
    repeat = (b'data: {"id":"c9","choices":[{"index":0,"delta":{"content":"He"},'
              b'"finish_reason":null}]}\n\n'
              b'data: {"id":"c9","choices":[{"index":0,"delta":{"content":"llo"},'
              b'"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')
    async with heal_proxy([Step(PART, end="reset"), Step(repeat)], resume="vllm") as (_u, px, _, _r):
        got = await raw_post(f"{px.url}/chat/completions", chat())
    assert _texts(got.body) == ("Hello", [None, "stop"])


async def test_a_cut_inside_a_tool_call_forwarded_nothing_of_it_and_is_continued() -> None:
    calls = (b'data: {"id":"c9","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,'
             b'"id":"call_1","type":"function","function":{"name":"f","arguments":"{\\"a\\": 1}"}}]},'
             b'"finish_reason":null}]}\n\n'
             b'data: {"id":"c9","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\n'
             b"data: [DONE]\n\n")
    async with heal_proxy([Step(PART + TOOL, end="reset"), Step(calls)], resume="vllm") as (
            up, px, _, _r):
        got = await raw_post(f"{px.url}/chat/completions", chat())
    assert len(up.paths) == 2
    assert json.loads(up.bodies[1])["messages"][-1] == {"role": "assistant", "content": "Hel"}
    assert got.body.startswith(PART) and b'"arguments":"{\\"a\\""' not in got.body
    frames = [json.loads(f[6:]) for f in got.body.split(b"\n\n") if f.startswith(b"data: {")]
    assert [f["id"] for f in frames] == ["c1", "c1", "c1"]
    assert frames[1]["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"] == '{"a": 1}'
    assert frames[2]["choices"][0]["finish_reason"] == "tool_calls"
    assert got.body.endswith(b"data: [DONE]\n\n")


async def test_a_break_after_a_forwarded_tool_call_is_not_continued() -> None:
    whole = (b'data: {"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,'
             b'"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]},'
             b'"finish_reason":"tool_calls"}]}\n\n')
    async with heal_proxy([Step(PART + whole + PART, end="reset"), Step(REST)], resume="vllm") as (
            up, px, _, _r):
        got = await raw_post(f"{px.url}/chat/completions", chat())
    assert len(up.paths) == 1
    last = got.body.rstrip(b"\n").rsplit(b"\n\n", 1)[-1]
    assert json.loads(last[6:])["error"]["code"] == "transport_error"


async def test_continuations_are_bounded_by_resume_max_then_the_error_is_explicit() -> None:
    async with heal_proxy([Step(PART, end="reset")], resume="vllm", resume_max=1) as (
            up, px, _, _r):
        got = await raw_post(f"{px.url}/chat/completions", chat())
    assert len(up.paths) == 2
    last = got.body.rstrip(b"\n").rsplit(b"\n\n", 1)[-1]
    assert json.loads(last[6:])["error"]["code"] == "transport_error"


Answer = tuple[str, list[tuple[str, str]], str]


async def _answer(client: openai.AsyncOpenAI, messages: list[dict[str, Any]],
                  tools: list[dict[str, Any]] | None) -> Answer:
    extra: dict[str, Any] = {"tools": tools} if tools else {}
    stream = await client.chat.completions.create(model="chaos-1", messages=messages,  # type: ignore[call-overload]
                                                  stream=True, **extra)
    text, calls, finish = "", {}, ""
    async for chunk in stream:
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for call in choice.delta.tool_calls or ():
                name, args = calls.get(call.index, ("", ""))
                fn = call.function
                calls[call.index] = (name + (fn.name or "") if fn else name,
                                     args + (fn.arguments or "") if fn else args)
            finish = choice.finish_reason or finish
    return text, [calls[k] for k in sorted(calls)], finish


async def test_chaos_streams_with_faults_heal_to_the_fault_free_answer_for_the_openai_sdk() -> None:
    pacing = Pacing(ttft_ms=0, inter_token_ms=0, tokens=24)
    faults = {Fault.TRUNCATED: 0.2, Fault.CUT_MID_FRAME: 0.1, Fault.TRANSPORT_ERROR: 0.05,
              Fault.STALLED: 0.05, Fault.HTTP_ERROR: 0.05}
    faulty = ChaosConfig(seed=7, pacing=pacing, faults=faults)
    clean = ChaosConfig(seed=7, pacing=pacing)
    cases = [([{"role": "user", "content": f"what is the weather in city {i}?"}],
              [WEATHER_TOOL] if i % 2 else None) for i in range(80)]
    async with run_chaos(faulty) as bad, run_chaos(clean) as good, \
            run_proxy(proxy_config(bad.url, resume="vllm", resume_max=20, retry=20,
                                   stall_timeout=1.0)) as px:
        px.state.sleep = _no_wait
        healed = openai.AsyncOpenAI(base_url=px.url, api_key=KEY, max_retries=0, timeout=30)
        direct = openai.AsyncOpenAI(base_url=good.url, api_key=KEY, max_retries=0, timeout=30)
        async with healed, direct:
            got = await asyncio.gather(*(_answer(healed, m, t) for m, t in cases))
            want = await asyncio.gather(*(_answer(direct, m, t) for m, t in cases))
        requests = bad.stats.requests
        metrics = px.state.metrics.render().decode()
    assert got == want
    assert all(finish in ("stop", "tool_calls") for _, _, finish in got)
    assert any(calls for _, calls, _ in got) and any(not calls for _, calls, _ in got)
    assert requests > len(cases)  # faults did happen, and were healed
    assert 'how="resume",result="passed"' in metrics and 'how="retry",result="passed"' in metrics
async def _no_wait(seconds: float) -> None:
    return None
