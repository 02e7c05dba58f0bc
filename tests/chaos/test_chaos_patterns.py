"""Fault patterns: base rates, load-dependent, routed and time-windowed, measured over real requests.

Seeds are fixed, so each measured count is deterministic; the binomial band says the draw is the
configured rate, not a lucky constant.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator

import httpx2
import pytest

from _chaos_support import chat_request, fetch, within_binomial
from sseguard.chaos import (
    ApiPattern,
    ChaosConfig,
    Fault,
    LoadPattern,
    Pacing,
    RoutedPattern,
    WindowPattern,
    decide,
    run_chaos,
    slope_points,
)
from sseguard.chaos.config import parse_pattern
from sseguard.core.errors import ConfigError
from sseguard.core.record import id_prefix
from sseguard.core.verdict import Ending

FAST = Pacing(tokens=3)


@pytest.fixture
async def client() -> AsyncIterator[httpx2.AsyncClient]:
    limits = httpx2.Limits(max_connections=200, max_keepalive_connections=200)
    async with httpx2.AsyncClient(limits=limits) as c:
        yield c


def test_load_probability_interpolates_between_points_and_is_flat_outside() -> None:
    pattern = LoadPattern(Fault.TRUNCATED, ((1, 0.0), (60, 0.18)))
    assert pattern.probability(0) == 0.0 and pattern.probability(1) == 0.0
    assert pattern.probability(30) == pytest.approx(0.18 * 29 / 59)
    assert pattern.probability(60) == pytest.approx(0.18)
    assert pattern.probability(500) == pytest.approx(0.18)


def test_slope_form_is_capped_and_zero_for_a_single_stream() -> None:
    pattern = LoadPattern(Fault.TRUNCATED, slope_points(0.01, cap=0.25))
    assert pattern.probability(1) == 0.0
    assert pattern.probability(11) == pytest.approx(0.10)
    assert pattern.probability(26) == pytest.approx(0.25)
    assert pattern.probability(1000) == pytest.approx(0.25)
    parsed = parse_pattern({"type": "load", "fault": "truncated", "slope": 0.01, "cap": 0.25})
    assert parsed == pattern


def test_decision_is_a_pure_function_of_seed_and_request_number() -> None:
    config = ChaosConfig(seed=3, faults={Fault.TRUNCATED: 0.5},
                         patterns=(RoutedPattern(Fault.NO_DONE, 0.2),))
    first = [decide(config, i) for i in range(300)]
    assert first == [decide(config, i) for i in range(300)]
    assert first != [decide(ChaosConfig(seed=4, faults=config.faults,
                                        patterns=config.patterns), i) for i in range(300)]


def test_a_patterns_probability_does_not_reshuffle_the_route_draw() -> None:
    routed = RoutedPattern(Fault.NO_DONE, 0.3)
    low = ChaosConfig(seed=9, patterns=(routed, WindowPattern(Fault.EMPTY, 0, 10, 0.1)))
    high = ChaosConfig(seed=9, patterns=(routed, WindowPattern(Fault.EMPTY, 0, 10, 0.9)))
    assert [decide(low, i).route for i in range(200)] == [decide(high, i).route
                                                          for i in range(200)]


async def test_base_probabilities_are_met_over_many_requests(client: httpx2.AsyncClient) -> None:
    config = ChaosConfig(seed=21, pacing=FAST,
                         faults={Fault.TRUNCATED: 0.2, Fault.HTTP_ERROR: 0.1})
    async with run_chaos(config) as server:
        outs = await asyncio.gather(*(fetch(client, server.chat_url, chat_request())
                                      for _ in range(400)))
    endings = Counter(o.verdict.ending for o in outs)
    headers = Counter(o.headers["x-sseguard-fault"] for o in outs)
    assert within_binomial(headers["truncated"], 400, 0.2)
    assert within_binomial(headers["http_error"], 400, 0.1)
    assert endings[Ending.TRUNCATED] == headers["truncated"]
    assert endings[Ending.HTTP_ERROR] == headers["http_error"]
    assert endings[Ending.COMPLETE] == headers["none"]


async def test_load_pattern_fails_nothing_alone_and_grows_with_streams_in_flight(
        client: httpx2.AsyncClient) -> None:
    points = ((1.0, 0.0), (60.0, 0.6))
    config = ChaosConfig(seed=4, pacing=Pacing(tokens=3, ttft_ms=2000),
                         patterns=(LoadPattern(Fault.TRUNCATED, points),))
    async with run_chaos(config) as server:
        alone = [await fetch(client, server.chat_url, chat_request()) for _ in range(2)]
        # Waves of 60 concurrent streams: none ends before the last arrives (ttft 2 s, far longer
        # than 60 arrivals take even on a busy machine), so the
        # k-th arrival of a wave sees k in flight; the draw for it is fixed by the seed.
        waves = []
        for _ in range(3):
            waves += await asyncio.gather(*(fetch(client, server.chat_url, chat_request())
                                            for _ in range(60)))
    assert all(o.headers["x-sseguard-fault"] == "none" for o in alone)
    assert all(o.headers["x-sseguard-inflight"] == "1" for o in alone)
    pattern = config.patterns[0]
    assert isinstance(pattern, LoadPattern)
    low: list[tuple[int, bool]] = []
    high: list[tuple[int, bool]] = []
    for o in waves:
        level = int(o.headers["x-sseguard-inflight"])
        failed = o.headers["x-sseguard-fault"] == "truncated"
        assert failed is (o.verdict.ending is Ending.TRUNCATED)
        if level <= 15:
            low.append((level, failed))
        elif level >= 46:
            high.append((level, failed))
    assert len(high) >= 30  # the waves did overlap: most of them saw 46+ streams in flight
    for bucket in (low, high):
        # The rate each response was drawn at is known from its own in-flight header.
        p_mean = sum(pattern.probability(level) for level, _ in bucket) / len(bucket)
        assert within_binomial(sum(f for _, f in bucket), len(bucket), p_mean)
    assert sum(f for _, f in high) > 3 * max(1, sum(f for _, f in low))


async def test_routed_share_gets_its_prefix_and_only_it_fails(client: httpx2.AsyncClient) -> None:
    config = ChaosConfig(seed=8, pacing=FAST,
                         patterns=(RoutedPattern(Fault.TRUNCATED, share=0.3, prefix="gw-"),))
    async with run_chaos(config) as server:
        outs = await asyncio.gather(*(fetch(client, server.chat_url, chat_request())
                                      for _ in range(300)))
    routed = [o for o in outs if o.headers["x-sseguard-route"] == "gw"]
    default = [o for o in outs if o.headers["x-sseguard-route"] == "default"]
    assert len(routed) + len(default) == 300
    assert within_binomial(len(routed), 300, 0.3)
    assert all(id_prefix(o.verdict.first_id) == "gw" for o in routed)
    assert all(id_prefix(o.verdict.first_id) == "chatcmpl" for o in default)
    assert all(o.verdict.ending is Ending.TRUNCATED for o in routed)
    assert all(o.verdict.ending is Ending.COMPLETE for o in default)


async def test_routed_probability_below_one_fails_that_share_of_the_route(
        client: httpx2.AsyncClient) -> None:
    config = ChaosConfig(seed=12, pacing=FAST, id_prefix="",
                         patterns=(RoutedPattern(Fault.NO_DONE, 0.5, "gw-", probability=0.4),))
    async with run_chaos(config) as server:
        outs = await asyncio.gather(*(fetch(client, server.chat_url, chat_request())
                                      for _ in range(300)))
    routed = [o for o in outs if o.headers["x-sseguard-route"] == "gw"]
    failed = [o for o in routed if o.verdict.ending is Ending.NO_DONE]
    assert within_binomial(len(failed), len(routed), 0.4)
    assert all(id_prefix(o.verdict.first_id) == "numeric" for o in outs if o not in routed)
    assert not [o for o in outs if o not in routed and o.verdict.ending is not Ending.COMPLETE]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_window_faults_only_between_its_start_and_end(client: httpx2.AsyncClient) -> None:
    clock = FakeClock()
    config = ChaosConfig(seed=2, pacing=FAST,
                         patterns=(WindowPattern(Fault.HTTP_ERROR, 10.0, 20.0, 0.5),))
    counts: dict[float, Counter[str]] = {}
    async with run_chaos(config, clock=clock) as server:
        for t in (5.0, 15.0, 25.0):
            clock.now = 1000.0 + t
            outs = await asyncio.gather(*(fetch(client, server.chat_url, chat_request())
                                          for _ in range(150)))
            counts[t] = Counter(o.headers["x-sseguard-fault"] for o in outs)
    assert counts[5.0] == Counter(none=150)
    assert counts[25.0] == Counter(none=150)
    assert within_binomial(counts[15.0]["http_error"], 150, 0.5)


async def test_window_on_the_real_clock_is_measured_from_server_start(
        client: httpx2.AsyncClient) -> None:
    config = ChaosConfig(pacing=FAST, patterns=(WindowPattern(Fault.NO_DONE, 0.0, 600.0),
                                                 WindowPattern(Fault.EMPTY, 600.0, 1200.0)))
    async with run_chaos(config) as server:
        outs = [await fetch(client, server.chat_url, chat_request()) for _ in range(3)]
        assert server.stats.sources == Counter(window=3)
    assert [o.verdict.ending for o in outs] == [Ending.NO_DONE] * 3


async def test_patterns_come_before_base_faults(client: httpx2.AsyncClient) -> None:
    config = ChaosConfig(seed=1, pacing=FAST, faults={Fault.NO_DONE: 1.0},
                         patterns=(RoutedPattern(Fault.TRUNCATED, share=0.5),))
    async with run_chaos(config) as server:
        outs = await asyncio.gather(*(fetch(client, server.chat_url, chat_request())
                                      for _ in range(100)))
        sources = server.stats.sources
    for o in outs:
        expected = "truncated" if o.headers["x-sseguard-route"] == "gw" else "no_done"
        assert o.headers["x-sseguard-fault"] == expected
    assert sources["routed"] + sources["base"] == 100 and sources["routed"] > 20


def test_api_pattern_fires_only_for_its_protocol_and_reads_from_toml() -> None:
    config = ChaosConfig(seed=3, patterns=(ApiPattern(Fault.NO_FINISH, "messages", 0.5),))
    by_api = {api: Counter(str(decide(config, n, api=api).fault) for n in range(400))
              for api in ("chat", "responses", "messages")}
    assert by_api["chat"] == by_api["responses"] == Counter({"None": 400})
    assert within_binomial(by_api["messages"]["no_finish"], 400, 0.5)
    assert decide(config, 1, api="messages").source in ("api", "none")
    parsed = parse_pattern({"type": "api", "api": "messages", "fault": "no_finish",
                            "probability": 0.5})
    assert parsed == ApiPattern(Fault.NO_FINISH, "messages", 0.5)
    with pytest.raises(ConfigError, match=r"patterns\[0\]\.api must be one of chat, responses"):
        parse_pattern({"type": "api", "api": "grpc", "fault": "no_finish"})
    with pytest.raises(ConfigError, match="needs an api"):
        parse_pattern({"type": "api", "fault": "no_finish"})


async def test_api_pattern_breaks_only_the_messages_path_of_one_server(
        client: httpx2.AsyncClient) -> None:
    config = ChaosConfig(seed=4, pacing=FAST, patterns=(ApiPattern(Fault.TRUNCATED, "messages"),))
    chat = chat_request()
    messages = {"model": "chaos-1", "max_tokens": 64, "stream": True,
                "messages": [{"role": "user", "content": "hi"}]}
    async with run_chaos(config) as server:
        faults: dict[str, Counter[str]] = {}
        for url, body in ((server.chat_url, chat), (server.messages_url, messages)):
            outs = await asyncio.gather(*(client.post(url, json=body) for _ in range(20)))
            faults[url] = Counter(o.headers["x-sseguard-fault"] for o in outs)
        assert server.stats.sources == Counter(api=20, none=20)
    assert faults[server.chat_url] == Counter(none=20)
    assert faults[server.messages_url] == Counter(truncated=20)


async def test_a_load_signal_decides_the_load_pattern_and_the_header_keeps_the_measured_count(
        client: httpx2.AsyncClient) -> None:
    # issue 50: ``sseguard demo`` paces its patterns by the load its sweep asks for, not by how many
    # streams a busy machine holds in flight; one stream at a time here, a load of 200 said
    config = ChaosConfig(seed=4, pacing=FAST,
                         patterns=(LoadPattern(Fault.TRUNCATED, ((1.0, 0.0), (100.0, 1.0))),))
    async with run_chaos(config, load=lambda measured: 200) as loaded, \
            run_chaos(config) as measured:
        said = [await fetch(client, loaded.chat_url, chat_request()) for _ in range(5)]
        alone = [await fetch(client, measured.chat_url, chat_request()) for _ in range(5)]
    assert [o.headers["x-sseguard-fault"] for o in said] == ["truncated"] * 5
    assert [o.headers["x-sseguard-inflight"] for o in said] == ["1"] * 5
    assert [o.headers["x-sseguard-fault"] for o in alone] == ["none"] * 5
