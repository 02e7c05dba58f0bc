"""Healing real streams: the openai SDK -> ``sseguard proxy --resume vllm`` -> ``sseguard chaos
--upstream`` (every conversation's first answer cut after content) -> a real vLLM serving the real
SmolLM2-135M. The continuation is vLLM's own (``continue_final_message``), on real tokens.

What the client must get, for every stream: one answer that ends with a ``finish_reason``, equal to
the answer the same request gets from vLLM unbroken (temperature 0, float32, where this engine is
batch-invariant: docs/real-engines.md) — or, where a stream cannot be healed, an explicit error,
never a shorter answer that ends quietly. At least 95 % of the cuts must heal.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

STREAMS = 16
QUESTIONS = ("Name three colours of the rainbow.", "What is the capital of France? Answer in a sentence.",
             "Write one sentence about the sea.", "Give two reasons to drink water.")


async def _ask(client: Any, i: int) -> tuple[str, str | None]:
    stream = await client.chat.completions.create(
        model="m", stream=True, temperature=0, max_tokens=32, seed=1,
        messages=[{"role": "user", "content": f"{QUESTIONS[i % len(QUESTIONS)]} (#{i})"}])
    text, finish = "", None
    async for chunk in stream:
        for choice in chunk.choices:
            text += choice.delta.content or ""
            finish = choice.finish_reason or finish
    return text, finish


@pytest.mark.timeout(1500)
async def test_cuts_after_content_heal_into_the_unbroken_answer(text_server: Any) -> None:
    import openai

    from sseguard.chaos import ChaosConfig, Pacing
    from sseguard.chaos.upstream_server import run_upstream_chaos
    from sseguard.proxy import run_proxy
    from sseguard.proxy.config import ProxyConfig

    server = text_server
    front = ChaosConfig(seed=5, pacing=Pacing(tokens=24)).with_overrides(first_answer="truncated")
    direct = openai.AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0, timeout=600)
    unbroken = [await _ask(direct, i) for i in range(STREAMS)]

    async with run_upstream_chaos(front, server.base_url) as chaos:
        config = ProxyConfig.from_options(upstream=chaos.url, resume="vllm", resume_max=4, retry=0,
                                          store=None, listen="127.0.0.1:0")
        async with run_proxy(config) as proxy:
            healed_client = openai.AsyncOpenAI(base_url=proxy.url, api_key="k", max_retries=0,
                                               timeout=600)
            gate = asyncio.Semaphore(8)

            async def one(i: int) -> tuple[str, str | None] | str:
                async with gate:
                    try:
                        return await _ask(healed_client, i)
                    except openai.APIError as exc:  # explicit: allowed, counted as not healed
                        return f"error: {exc!r}"

            got = await asyncio.gather(*(one(i) for i in range(STREAMS)))
        faults = chaos.stats.to_dict()["faults"]

    assert faults.get("truncated", 0) == STREAMS, faults  # every first answer was cut
    healed = [g for g in got if not isinstance(g, str)]
    assert all(finish is not None for _, finish in healed), got  # never a quiet end
    assert len(healed) >= 0.95 * STREAMS, got
    equal = [i for i, g in enumerate(got) if g == unbroken[i]]
    assert len(equal) == len(healed), [(g, unbroken[i]) for i, g in enumerate(got) if g != unbroken[i]]
