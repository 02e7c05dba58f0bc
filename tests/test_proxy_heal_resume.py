"""``--resume vllm``: a chat stream that broke after content is continued and spliced into the same
client stream; what cannot be continued exactly still fails explicitly."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import openai
import pytest

from _proxy_support import KEY, chat, raw_post
from sseguard.chaos import ChaosConfig, Fault, Pacing, run_chaos
from sseguard.proxy import run_proxy
from test_proxy_heal_retry import Step, heal_proxy, proxy_config

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
    async with heal_proxy([Step(PART, end="reset"), Step(repeat)], resume="vllm") as (up, px, _, _r):
        got = await raw_post(f"{px.url}/chat/completions", chat())
    assert _texts(got.body) == ("Hello", [None, "stop"])


async def test_a_cut_inside_a_tool_call_is_not_continued_and_fails_as_before() -> None:
    async with heal_proxy([Step(PART + TOOL, end="reset"), Step(REST)], resume="vllm") as (
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


async def test_chaos_streams_with_faults_heal_to_the_fault_free_answer_for_the_openai_sdk() -> None:
    pacing = Pacing(ttft_ms=0, inter_token_ms=0, tokens=24)
    faulty = ChaosConfig(seed=7, pacing=pacing, faults={
        Fault.TRUNCATED: 0.25, Fault.CUT_MID_FRAME: 0.1, Fault.TRANSPORT_ERROR: 0.1})
    clean = ChaosConfig(seed=7, pacing=pacing)
    prompts = [[{"role": "user", "content": f"question number {i}"}] for i in range(60)]
    async with run_chaos(faulty) as bad, run_chaos(clean) as good, \
            run_proxy(proxy_config(bad.url, resume="vllm", resume_max=8, retry=3)) as px:
        px.state.sleep = _no_wait
        healed = openai.AsyncOpenAI(base_url=px.url, api_key=KEY, max_retries=0, timeout=30)
        direct = openai.AsyncOpenAI(base_url=good.url, api_key=KEY, max_retries=0, timeout=30)

        async def text(client: openai.AsyncOpenAI, messages: list[dict[str, str]]) -> str:
            stream = await client.chat.completions.create(model="chaos-1", messages=messages,
                                                          stream=True)  # type: ignore[arg-type]
            out, finish = "", None
            async for chunk in stream:
                if chunk.choices:
                    out += chunk.choices[0].delta.content or ""
                    finish = chunk.choices[0].finish_reason or finish
            assert finish == "stop"
            return out

        async with healed, direct:
            got = await asyncio.gather(*(text(healed, p) for p in prompts))
            want = await asyncio.gather(*(text(direct, p) for p in prompts))
        injected = bad.stats.requests
    assert got == want
    assert injected > len(prompts)  # faults did happen and were healed


async def _no_wait(seconds: float) -> None:
    return None
