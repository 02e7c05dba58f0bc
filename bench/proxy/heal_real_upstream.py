"""Healing a real engine's streams: the openai SDK -> ``proxy --resume vllm`` -> ``chaos --upstream``
(cuts after content) -> a real vLLM, each answer compared with the same request sent straight to it.

Not a speed measurement: it prints one JSON line per stream (what the client got through the chain,
what the engine answers unbroken) and the faults chaos injected; the figures in ``docs/chaos.md``
("Against a real engine") came from it against vLLM 0.32 (CPU) serving SmolLM2-135M:

    python -m bench.proxy.heal_real_upstream http://127.0.0.1:8000/v1 16 first
    python -m bench.proxy.heal_real_upstream http://127.0.0.1:8000/v1 24 random
"""
import asyncio
import json
import sys
import time

import openai

from sseguard.chaos import ChaosConfig, Pacing
from sseguard.chaos.upstream_server import run_upstream_chaos
from sseguard.proxy import run_proxy
from sseguard.proxy.config import ProxyConfig

VLLM = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000/v1"
N = int(sys.argv[2]) if len(sys.argv) > 2 else 24
QUESTIONS = ["Name three colours of the rainbow.", "What is the capital of France? Answer in a sentence.",
             "Write one sentence about the sea.", "Give two reasons to drink water.",
             "Describe a cat in one sentence.", "What is 2 plus 2? Explain briefly.",
             "Name a planet and say one thing about it.", "Write a short greeting for a friend."]

async def ask(client: openai.AsyncOpenAI, i: int, sem: asyncio.Semaphore) -> tuple[str, str | None]:
    async with sem:
        stream = await client.chat.completions.create(
            model="m", stream=True, temperature=0, max_tokens=32, seed=1,
            messages=[{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)] + f" (#{i})"}])
        text, finish = "", None
        async for chunk in stream:
            for c in chunk.choices:
                text += c.delta.content or ""
                finish = c.finish_reason or finish
        return text, finish


async def main() -> None:
    mode = sys.argv[3] if len(sys.argv) > 3 else "first"
    front = ChaosConfig(seed=5, pacing=Pacing(tokens=24))
    if mode == "first":
        front = front.with_overrides(first_answer="truncated")
    else:
        front = front.with_overrides(
            faults=["truncated=0.2", "cut_mid_frame=0.1", "transport_error=0.05"])
    async with run_upstream_chaos(front, VLLM) as chaos:
        cfg = ProxyConfig.from_options(upstream=chaos.url, resume="vllm", resume_max=8, retry=2,
                                       store=None, listen="127.0.0.1:0")
        async with run_proxy(cfg) as px:
            sem = asyncio.Semaphore(8)
            t0 = time.time()
            healed = openai.AsyncOpenAI(base_url=px.url, api_key="k", max_retries=0, timeout=600)
            direct = openai.AsyncOpenAI(base_url=VLLM, api_key="k", max_retries=0, timeout=600)

            async def both(i: int) -> None:
                got: object
                try:
                    got = await ask(healed, i, sem)
                except openai.APIError as exc:
                    got = repr(exc)
                want = await ask(direct, i, sem)
                print(json.dumps({"i": i, "got": got, "want": want, "t": time.time() - t0}),
                      flush=True)

            await asyncio.gather(*(both(i) for i in range(N)))
            print(json.dumps({"faults": chaos.stats.to_dict()["faults"],
                              "seconds": time.time() - t0}))


if __name__ == "__main__":
    asyncio.run(main())
