"""Responses background mode in the chaos upstream: a streamed ``background: true`` response is kept,
and ``GET /v1/responses/{id}?stream=true&starting_after=N`` streams it again from the event after N —
read here with the openai SDK's own ``responses.retrieve(id, stream=True, starting_after=N)``, the
oracle of what a client gets when it resumes a broken stream."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from sseguard.chaos import ChaosConfig, Fault, Pacing, run_chaos

FAST = Pacing(tokens=12, reasoning_tokens=0)
INPUT = "Tell me about the weather in Lisbon, at some length."
INJECT = "x-sseguard-inject"


def _client(url: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=url, api_key="sk-test", max_retries=0)


def _text(events: list[Any]) -> str:
    return "".join(e.delta for e in events if e.type == "response.output_text.delta")


async def _stream(client: openai.AsyncOpenAI, *, inject: str = "none",
                  **extra: Any) -> tuple[list[Any], BaseException | None]:
    """Every event the SDK yields for one streamed request, and the error that ended it early."""
    events: list[Any] = []
    try:
        stream = await client.responses.create(model="m", input=INPUT, stream=True,
                                               extra_headers={INJECT: inject}, **extra)
        async for event in stream:
            events.append(event)
    except (openai.APIError, ValueError) as exc:  # a reset or a cut frame raises out of the loop
        return events, exc
    return events, None


async def _retrieve(client: openai.AsyncOpenAI, response_id: str, after: int) -> list[Any]:
    stream = await client.responses.retrieve(response_id, stream=True, starting_after=after)
    return [event async for event in stream]


async def test_a_background_stream_read_again_continues_after_the_given_sequence_number() -> None:
    async with run_chaos(ChaosConfig(seed=3, pacing=FAST)) as server:
        client = _client(server.url)
        whole, error = await _stream(client, background=True, store=True)
        assert error is None
        numbers = [e.sequence_number for e in whole]
        assert numbers == list(range(len(whole)))
        assert whole[0].type == "response.created" and whole[0].response.background is True
        assert whole[0].response.status == "queued" and whole[-1].type == "response.completed"
        after = numbers[len(numbers) // 2]
        rest = await _retrieve(client, whole[0].response.id, after)
        assert [e.sequence_number for e in rest] == numbers[after + 1:]
        assert [e.model_dump() for e in rest] == [e.model_dump() for e in whole[after + 1:]]
        assert server.stats.retrievals == 1


async def test_a_cut_background_stream_is_finished_by_reading_it_again_from_where_it_broke() -> None:
    async with run_chaos(ChaosConfig(seed=5, pacing=FAST)) as server:
        client = _client(server.url)
        plain, error = await _stream(client)  # the same request, not kept: the whole answer
        assert error is None
        cut, error = await _stream(client, inject=str(Fault.TRUNCATED), background=True, store=True)
        assert error is None and cut[-1].type != "response.completed"  # a clean EOF mid-answer
        last = cut[-1].sequence_number
        rest = await _retrieve(client, cut[0].response.id, last)
        assert [e.sequence_number for e in rest] == list(range(last + 1, last + 1 + len(rest)))
        assert rest[-1].type == "response.completed"
        assert _text(cut) + _text(rest) == _text(plain) != ""
        assert rest[-1].response.output_text == _text(plain)


async def test_a_reset_background_stream_is_finished_by_reading_it_again() -> None:
    async with run_chaos(ChaosConfig(seed=9, pacing=FAST)) as server:
        client = _client(server.url)
        plain, _ = await _stream(client)
        broken, error = await _stream(client, inject=str(Fault.TRANSPORT_ERROR), background=True,
                                      store=True)
        assert error is not None
        last = broken[-1].sequence_number
        rest = await _retrieve(client, broken[0].response.id, last)
        assert _text(broken) + _text(rest) == _text(plain)


async def test_background_without_store_is_refused_in_openai_shape() -> None:
    async with run_chaos(ChaosConfig(seed=1, pacing=FAST)) as server:
        with pytest.raises(openai.BadRequestError) as caught:
            await _client(server.url).responses.create(model="m", input=INPUT, stream=True,
                                                       background=True, store=False)
        assert caught.value.param == "store"


async def test_an_unknown_response_id_is_not_found() -> None:
    async with run_chaos(ChaosConfig(seed=1, pacing=FAST)) as server:
        with pytest.raises(openai.NotFoundError):
            await _retrieve(_client(server.url), "resp_nowhere", 3)


async def test_a_stream_not_in_background_is_not_kept() -> None:
    async with run_chaos(ChaosConfig(seed=2, pacing=FAST)) as server:
        client = _client(server.url)
        events, _ = await _stream(client)
        assert events[0].response.background is False
        with pytest.raises(openai.NotFoundError):
            await _retrieve(client, events[0].response.id, 0)


async def test_a_cancelled_background_response_says_cancelled_and_is_counted_once() -> None:
    async with run_chaos(ChaosConfig(seed=3, pacing=FAST)) as server:
        client = _client(server.url)
        whole, error = await _stream(client, background=True, store=True)
        assert error is None
        rid = whole[0].response.id
        first = await client.responses.cancel(rid)
        again = await client.responses.cancel(rid)
        stored = await client.responses.retrieve(rid)
        with pytest.raises(openai.NotFoundError):
            await client.responses.cancel("resp_unknown")
        await client.close()
    assert first.status == again.status == stored.status == "cancelled"
    assert first.id == rid
    assert server.stats.cancels == 1
