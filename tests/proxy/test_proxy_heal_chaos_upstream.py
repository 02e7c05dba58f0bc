"""Healing relayed streams: the openai SDK → ``proxy --resume vllm`` → ``chaos --upstream`` (cutting
the streams it relays after their content) → an upstream that continues like vLLM (the generated
chaos: ``continue_final_message``). Every stream the client reads equals, byte for byte, the answer
the upstream gives the same conversation unbroken, and ends with its ``finish_reason``."""

from __future__ import annotations

import asyncio
from typing import Any

import openai

from sseguard.chaos import ChaosConfig, Pacing, run_chaos
from sseguard.chaos.upstream_server import run_upstream_chaos
from sseguard.proxy import run_proxy
from support.proxy import KEY, WEATHER_TOOL, proxy_config

PACING = Pacing(tokens=16)
Answer = tuple[str, list[tuple[str, str]], str | None]


def _fold(chunks: list[Any]) -> Answer:
    text, calls, finish = "", {}, None
    for chunk in chunks:
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for call in choice.delta.tool_calls or ():
                name, args = calls.get(call.index, ("", ""))
                if call.function is not None:
                    name += call.function.name or ""
                    args += call.function.arguments or ""
                calls[call.index] = (name, args)
            finish = choice.finish_reason or finish
    return text, [calls[k] for k in sorted(calls)], finish


async def _answers(url: str, count: int, *, limited: bool = False) -> list[Answer | BaseException]:
    gate = asyncio.Semaphore(16)
    async with openai.AsyncOpenAI(base_url=url, api_key=KEY, max_retries=0, timeout=60) as client:
        async def one(i: int) -> Answer:
            kwargs: dict[str, Any] = {"model": "chaos-1", "stream": True, "messages": [
                {"role": "user", "content": f"what is the weather in city {i}?"}]}
            if i % 3 == 2:
                kwargs["tools"] = [WEATHER_TOOL]
            if limited and i % 3 == 1:
                # Cut by its limit: a continuation gets what is left of it (as vLLM counts it).
                kwargs["max_tokens"] = 10
            async with gate:
                stream = await client.chat.completions.create(**kwargs)
                return _fold([chunk async for chunk in stream])

        return await asyncio.gather(*(one(i) for i in range(count)), return_exceptions=True)


async def test_streams_cut_after_content_by_chaos_upstream_are_healed_whole() -> None:
    front = ChaosConfig(seed=21, pacing=PACING).with_overrides(
        faults=["truncated=0.3", "cut_mid_frame=0.15", "transport_error=0.1"])
    options = {"resume": "vllm", "resume_max": 12, "retry": 4}
    async with run_chaos(ChaosConfig(seed=3, pacing=PACING)) as engine, \
            run_upstream_chaos(front, engine.url) as chaos, \
            run_proxy(proxy_config(chaos.url, **options)) as px:
        got = await _answers(px.url, 60)
        want = await _answers(engine.url, 60)
        faults = chaos.stats.to_dict()["faults"]
        metrics = px.state.metrics.render().decode()
    assert [g for g in got if isinstance(g, BaseException)] == []
    assert got == want
    assert all(finish in ("stop", "tool_calls") for _, _, finish in want)  # type: ignore[misc]
    assert sum(1 for _, calls, _ in want if calls) == 20  # type: ignore[misc]
    cuts = faults.get("truncated", 0) + faults.get("cut_mid_frame", 0) \
        + faults.get("transport_error", 0)
    assert cuts >= 15  # about 55 % of 60 first attempts and of their continuations
    assert 'how="resume",result="passed"' in metrics


async def test_each_first_answer_cut_at_half_is_healed_within_its_token_budget() -> None:
    """``--first-answer truncated``: every conversation's first answer is cut at half its text, and
    the continuation asks for what is left of ``max_tokens``: the client gets the answer it would
    have got unbroken, ``length`` where the limit ended it."""
    front = ChaosConfig(seed=21, pacing=PACING).with_overrides(first_answer="truncated")
    async with run_chaos(ChaosConfig(seed=3, pacing=PACING)) as engine, \
            run_upstream_chaos(front, engine.url) as chaos, \
            run_proxy(proxy_config(chaos.url, resume="vllm")) as px:
        got = await _answers(px.url, 30, limited=True)
        want = await _answers(engine.url, 30, limited=True)
        faults = chaos.stats.to_dict()["faults"]
    assert [g for g in got if isinstance(g, BaseException)] == []
    assert got == want
    assert [finish for _, _, finish in want][:3] == ["stop", "length", "tool_calls"]  # type: ignore[misc]
    assert faults["truncated"] == 20  # the 20 text answers' first attempts; tool calls not cut
