"""End to end: the real openai SDK (async and sync) → ``proxy --retry --resume vllm`` → chaos with the
faults of issue 27, text and tool calls: every healed stream equals, byte for byte, the answer chaos
gives the same conversation with no faults (chaos is asked for that reference itself); with more
faults than the limits can heal, every stream that was not healed is an error the SDK raised."""

from __future__ import annotations

import asyncio
from typing import Any

import openai

from sseguard.chaos import ChaosConfig, Fault, Pacing, run_chaos
from sseguard.proxy import run_proxy
from support.proxy import KEY, WEATHER_TOOL, proxy_config

PACING = Pacing(ttft_ms=0, inter_token_ms=0, tokens=16)
Answer = tuple[str, list[tuple[str, str]], str]


def _cases(count: int) -> list[tuple[list[dict[str, str]], list[dict[str, Any]] | None]]:
    return [([{"role": "user", "content": f"what is the weather in city {i}?"}],
             [WEATHER_TOOL] if i % 2 else None) for i in range(count)]


def _fold(chunks: Any) -> Answer:
    text, calls, finish = "", {}, ""
    for chunk in chunks:
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for call in choice.delta.tool_calls or ():
                name, args = calls.get(call.index, ("", ""))
                fn = call.function
                if fn is not None:
                    name, args = name + (fn.name or ""), args + (fn.arguments or "")
                calls[call.index] = (name, args)
            finish = choice.finish_reason or finish
    return text, [calls[k] for k in sorted(calls)], finish


def _kwargs(messages: list[dict[str, str]], tools: list[dict[str, Any]] | None) -> dict[str, Any]:
    return {"model": "chaos-1", "messages": messages, "stream": True,
            **({"tools": tools} if tools else {})}


async def _async_answer(client: openai.AsyncOpenAI, messages: list[dict[str, str]],
                        tools: list[dict[str, Any]] | None) -> Answer:
    stream = await client.chat.completions.create(**_kwargs(messages, tools))
    return _fold([chunk async for chunk in stream])


def _sync_answer(client: openai.OpenAI, messages: list[dict[str, str]],
                 tools: list[dict[str, Any]] | None) -> Answer:
    return _fold(list(client.chat.completions.create(**_kwargs(messages, tools))))


async def _run_all(proxy_url: str, reference_url: str, count: int, *,
                   sync_share: int) -> tuple[list[Answer | BaseException], list[Answer]]:
    """Every case through the proxy (one in ``sync_share`` with the sync client, in a thread) and
    straight from the fault-free chaos."""
    gate = asyncio.Semaphore(48)
    healed = openai.AsyncOpenAI(base_url=proxy_url, api_key=KEY, max_retries=0, timeout=60)
    synced = openai.OpenAI(base_url=proxy_url, api_key=KEY, max_retries=0, timeout=60)
    direct = openai.AsyncOpenAI(base_url=reference_url, api_key=KEY, max_retries=0, timeout=60)

    async def through(i: int, messages: list[dict[str, str]],
                      tools: list[dict[str, Any]] | None) -> Answer:
        async with gate:
            if i % sync_share == 0:
                return await asyncio.to_thread(_sync_answer, synced, messages, tools)
            return await _async_answer(healed, messages, tools)

    async def reference(messages: list[dict[str, str]], tools: list[dict[str, Any]] | None) -> Answer:
        async with gate:
            return await _async_answer(direct, messages, tools)

    cases = _cases(count)
    with synced:
        async with healed, direct:
            got = await asyncio.gather(*(through(i, m, t) for i, (m, t) in enumerate(cases)),
                                       return_exceptions=True)
            want = await asyncio.gather(*(reference(m, t) for m, t in cases))
    return got, want


async def _no_wait(seconds: float) -> None:
    return None


async def test_500_faulty_streams_through_the_proxy_all_equal_the_fault_free_answers() -> None:
    faults = {Fault.TRUNCATED: 0.2, Fault.CUT_MID_FRAME: 0.1, Fault.TRANSPORT_ERROR: 0.05,
              Fault.STALLED: 0.05, Fault.HTTP_ERROR: 0.05}
    # Limits above the defaults: at 45 % faults per request (continuations included), two
    # continuations leave about one stream in eleven unhealed (0.45 ** 3), and even eight leave one
    # in 1,300 (0.45 ** 9: about one failed run in three over 500 streams). At the allowed maximum,
    # twenty, it is 0.45 ** 21, some 5e-8 a stream; the test is about what healing gives, exactly.
    options = {"retry": 20, "resume": "vllm", "resume_max": 20, "stall_timeout": 1.0}
    async with run_chaos(ChaosConfig(seed=11, pacing=PACING, faults=faults)) as bad, \
            run_chaos(ChaosConfig(seed=11, pacing=PACING)) as good, \
            run_proxy(proxy_config(bad.url, **options)) as px:
        px.state.sleep = _no_wait
        got, want = await _run_all(px.url, good.url, 500, sync_share=5)
        requests = bad.stats.requests
        metrics = px.state.metrics.render().decode()
    assert [g for g in got if isinstance(g, BaseException)] == []
    assert got == want
    assert all(finish in ("stop", "tool_calls") for _, _, finish in want)
    assert sum(1 for _, calls, _ in want if calls) > 100
    assert requests > 600  # faults happened, and were healed
    assert 'how="resume",result="passed"' in metrics and 'how="retry",result="passed"' in metrics


async def test_with_more_faults_than_can_be_healed_no_stream_ends_silently() -> None:
    faults = {Fault.TRUNCATED: 0.3, Fault.CUT_MID_FRAME: 0.15, Fault.TRANSPORT_ERROR: 0.15}
    options = {"retry": 1, "resume": "vllm", "resume_max": 1}
    async with run_chaos(ChaosConfig(seed=5, pacing=PACING, faults=faults)) as bad, \
            run_chaos(ChaosConfig(seed=5, pacing=PACING)) as good, \
            run_proxy(proxy_config(bad.url, **options)) as px:
        px.state.sleep = _no_wait
        got, want = await _run_all(px.url, good.url, 200, sync_share=4)
    failed = [g for g in got if isinstance(g, BaseException)]
    assert failed and all(isinstance(g, openai.APIError) for g in failed)
    assert all(g == w for g, w in zip(got, want, strict=True) if not isinstance(g, BaseException))
    assert len(failed) < len(got) // 2  # and healing still saved most of them
