"""Issue 38's must-show: what the agents send, healed through the proxy against a chaos upstream that
breaks streams before and after their first byte and breaks the continuations too.

- The anthropic SDK with Claude Code's ``thinking: {"type": "adaptive", "display": "omitted"}``
  through ``--retry 2 --resume anthropic``: every stream's text is the fault-free answer, in one text
  block.
- The openai SDK's Responses through ``--resume openai-background``: every stream's events are the
  fault-free answer's, sequence numbers strictly increasing by one.

Faults ``truncated=0.2,cut_mid_frame=0.1,transport_error=0.05,stalled=0.05`` on every request,
readings of a stored response included. ``--resume-max 20``: at 40 % faulty requests, two
continuations would leave about one stream in sixteen unhealed (0.4³); ten left one of 300 streams
unhealed in one CI run in about a hundred (0.4¹¹ per stream, more when a loaded machine stalls a
healthy stream), twenty leave none (0.4²¹).
``--retry-budget 100%``: the default 20 % budget exists to stop retry storms, and at 40 % faults it
would (rightly) refuse some retries. A stall is chaos going silent for 10 s against a 3 s
``--stall-timeout``: long enough that a busy machine's pauses are not taken for stalls.
"""

from __future__ import annotations

import asyncio
from typing import Any

import anthropic
import openai

from sseguard.chaos import ChaosConfig, Fault, FaultOptions, Pacing, run_chaos
from sseguard.proxy import run_proxy
from support.proxy import KEY, proxy_config

#: Streams per SDK, as the issue asks: each test took 43–46 s on the shared 2-core machine (load 9–11).
STREAMS = 300
FAULTS = {Fault.TRUNCATED: 0.2, Fault.CUT_MID_FRAME: 0.1, Fault.TRANSPORT_ERROR: 0.05,
          Fault.STALLED: 0.05}
PACING = Pacing(ttft_ms=0, inter_token_ms=0, tokens=24, reasoning_tokens=8)
OPTIONS = FaultOptions(stall_ms=10_000)
#: The flags, as ``sseguard proxy`` takes them.
FLAGS: dict[str, Any] = {"retry": 2, "resume_max": 20, "retry_budget": "100%",
                         "stall_timeout": 3.0}
CONCURRENCY = 50


async def _gather(calls: list[Any]) -> list[Any]:
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(call: Any) -> Any:
        async with gate:
            return await call

    return await asyncio.gather(*(one(c) for c in calls))


async def test_claude_code_requests_with_thinking_omitted_heal_into_one_exact_text_block() -> None:
    async def answer(base: str, i: int) -> tuple[str, int, str | None]:
        client = anthropic.AsyncAnthropic(base_url=base, api_key=KEY, max_retries=0, timeout=60)
        async with client, client.messages.stream(
                model="chaos-1", max_tokens=400,
                messages=[{"role": "user", "content": f"what is the weather in city {i}?"}],
                thinking={"type": "adaptive", "display": "omitted"},  # type: ignore[typeddict-item]
        ) as stream:
            message = await stream.get_final_message()
        texts = [b.text for b in message.content if b.type == "text"]
        return "".join(texts), len(texts), message.stop_reason

    async with run_chaos(ChaosConfig(seed=11, pacing=PACING, faults=FAULTS,
                                     options=OPTIONS)) as bad, \
            run_chaos(ChaosConfig(seed=11, pacing=PACING)) as good, \
            run_proxy(proxy_config(bad.url, resume="anthropic", **FLAGS)) as px:
        got = await _gather([answer(px.url.removesuffix("/v1"), i) for i in range(STREAMS)])
        want = await _gather([answer(good.url.removesuffix("/v1"), i) for i in range(STREAMS)])
        requests, faults = bad.stats.requests, sum(
            n for k, n in bad.stats.faults.items() if k != "none")
        resumed = _healed(px, "messages", "anthropic")
    assert got == want
    assert all(blocks == 1 and text for text, blocks, _ in want)
    assert requests > STREAMS and faults > STREAMS // 4
    assert resumed > STREAMS // 10  # continued without thinking (chaos refuses a prefill with it)


async def test_codex_responses_heal_by_reading_the_stored_response_again() -> None:
    async def answer(base: str, i: int) -> tuple[str, list[int], str, str]:
        client = openai.AsyncOpenAI(base_url=base, api_key=KEY, max_retries=0, timeout=60)
        async with client:
            stream = await client.responses.create(
                model="chaos-1", input=f"what is the weather in city {i}?", stream=True)
            events = [event async for event in stream]
        text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        final = events[-1]
        return text, [e.sequence_number for e in events], final.type, \
            final.response.output_text if final.type == "response.completed" else ""

    async with run_chaos(ChaosConfig(seed=11, pacing=PACING, faults=FAULTS,
                                     options=OPTIONS)) as bad, \
            run_chaos(ChaosConfig(seed=11, pacing=PACING)) as good, \
            run_proxy(proxy_config(bad.url, resume="openai-background", **FLAGS)) as px:
        got = await _gather([answer(px.url, i) for i in range(STREAMS)])
        want = await _gather([answer(good.url, i) for i in range(STREAMS)])
        retrievals = bad.stats.retrievals
        resumed = _healed(px, "responses", "openai-background")
    assert [(t, end, out) for t, _, end, out in got] == [(t, end, out) for t, _, end, out in want]
    assert all(numbers == list(range(len(numbers))) for _, numbers, _, _ in got)
    assert all(end == "response.completed" and text for text, _, end, _ in want)
    assert retrievals > STREAMS // 4 and resumed > STREAMS // 10


def _healed(px: Any, api: str, dialect: str) -> float:
    """Client streams the proxy's /metrics count as healed by ``dialect`` and then passing."""
    value = px.state.metrics.registry.get_sample_value(
        "sseguard_proxy_healed_streams_total",
        {"api": api, "how": "resume", "dialect": dialect, "result": "passed"})
    return float(value or 0.0)
