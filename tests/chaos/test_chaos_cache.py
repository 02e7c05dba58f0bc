"""Chaos's prefix cache and the incident's pattern: corruption only on a cache hit, only under load."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator

import httpx2
import pytest

from _chaos_support import fetch
from sseguard.chaos import ChaosConfig, Fault, Pacing, run_chaos
from sseguard.chaos.config import CachePattern, parse_pattern
from sseguard.chaos.decide import decide
from sseguard.core.policy import STRICT
from sseguard.core.record import record_from_verdict
from sseguard.core.verdict import Api, Ending
from sseguard.probe import consistency
from sseguard.probe.config import WorkloadSpec
from sseguard.probe.formats import format_for
from sseguard.probe.workloads import Workload

FAST = Pacing(ttft_ms=1.0, inter_token_ms=0.0, tokens=12)


@pytest.fixture
async def client() -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient() as c:
        yield c


def test_the_cache_pattern_fires_only_on_a_hit_above_its_level() -> None:
    config = ChaosConfig(patterns=(CachePattern(Fault.GARBLED, above=8, probability=1.0),))
    assert decide(config, 1, inflight=60, cached=True).fault is Fault.GARBLED
    assert decide(config, 1, inflight=8, cached=True).fault is None
    assert decide(config, 1, inflight=60, cached=False).fault is None
    pattern = parse_pattern({"type": "cache", "fault": "markup_leak", "above": 30, "probability": 0.2})
    assert pattern == CachePattern(Fault.MARKUP_LEAK, 30, 0.2)


@pytest.mark.parametrize("api", [Api.CHAT, Api.RESPONSES, Api.MESSAGES, Api.GEMINI])
async def test_a_repeated_prefix_is_reported_as_cached_tokens_in_every_protocol(
        client: httpx2.AsyncClient, api: Api) -> None:
    workload = Workload(WorkloadSpec(name="consistency"))
    fmt_bodies = [workload.finish(consistency.prompt_body(format_for(api), i), model="chaos-1", api=api)
                  for i in (0, 2, 1)]  # two prompts of the shared prefix, then a short one
    async with run_chaos(ChaosConfig(seed=1, pacing=FAST)) as server:
        url = server.url_for(api) + ("?alt=sse" if api is Api.GEMINI else "")
        records = []
        for body in fmt_bodies:
            out = await fetch(client, url, body, api=str(api))
            assert out.verdict.ending is Ending.COMPLETE
            records.append(record_from_verdict(out.verdict, policy=STRICT))
    first, second, short = records
    assert first.cache == "none" and first.cached_tokens == 0  # the miss writes the prefix
    assert second.cache == "most" and (second.cached_tokens or 0) > 50
    assert short.cache == "none"


async def test_garbling_strikes_only_cached_requests_under_load(client: httpx2.AsyncClient) -> None:
    config = ChaosConfig(seed=2, pacing=Pacing(ttft_ms=30.0, inter_token_ms=2.0, tokens=12),
                         patterns=(CachePattern(Fault.GARBLED, above=4, probability=1.0),))
    workload = Workload(WorkloadSpec(name="consistency"))
    bodies = [workload.finish(consistency.prompt_body(format_for(Api.CHAT), i), model="chaos-1")
              for i in range(consistency.PROMPTS)]
    async with run_chaos(config) as server:
        await fetch(client, server.chat_url, bodies[0])  # writes the prefix
        alone = [await fetch(client, server.chat_url, b) for b in bodies]
        crowd = await asyncio.gather(*(fetch(client, server.chat_url, b) for b in bodies * 2))
    assert Counter(o.headers["x-sseguard-fault"] for o in alone) == Counter(none=16)
    hit = Counter(o.headers["x-sseguard-fault"] for i, o in enumerate(crowd) if i % 2 == 0)
    missed = Counter(o.headers["x-sseguard-fault"] for i, o in enumerate(crowd) if i % 2 == 1)
    assert missed == Counter(none=16)  # short prompts: never from cache
    assert hit["garbled"] >= 8
    # The stream itself is perfect: nothing a checker sees.
    assert all(o.verdict.ending is Ending.COMPLETE and not o.verdict.findings for o in crowd)
