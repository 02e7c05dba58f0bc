"""StrictTransport / AsyncStrictTransport on the Responses and Messages protocols, with the real openai
and anthropic SDKs, sync and async: healthy streams arrive whole and byte-identical, every bad ending
raises (and says how it ended), other requests pass untouched.

Which exception each SDK raises was verified here: the openai SDK wraps ``StreamEndedBadly`` in
``openai.APIConnectionError`` (``__cause__``); the anthropic SDK lets ``StreamEndedBadly`` itself through
while a stream is read.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from _client_support import WORDS, body, sse_server
from sseguard.client import AsyncStrictTransport, StreamEndedBadly, StrictTransport, ended_badly
from sseguard.core.policy import Policy
from sseguard.core.verdict import Ending

TEXT = "".join(WORDS)
MESSAGES: list[Any] = [{"role": "user", "content": "How is the weather?"}]

RESPONSES_HEALTHY = ["complete", "incomplete", "done_trailer"]
#: Responses bodies strict fails, and the ending the exception must carry.
RESPONSES_BAD: dict[str, Ending] = {
    "truncated": Ending.TRUNCATED, "no_finish": Ending.NO_FINISH,
    "cut_mid_frame": Ending.CUT_MID_FRAME, "empty": Ending.EMPTY,
    "error_flat": Ending.ERROR_EVENT, "error_nested": Ending.ERROR_EVENT,
    "failed": Ending.ERROR_EVENT, "reset": Ending.TRANSPORT_ERROR,
}
MESSAGES_BAD: dict[str, Ending] = {
    "truncated": Ending.TRUNCATED, "no_finish": Ending.NO_FINISH, "no_done": Ending.NO_DONE,
    "cut_mid_frame": Ending.CUT_MID_FRAME, "empty": Ending.EMPTY,
    "error_event": Ending.ERROR_EVENT, "reset": Ending.TRANSPORT_ERROR,
}


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with sse_server() as url:
        yield url


# ── clients ──────────────────────────────────────────────────────────────────────────────────────


def _openai(server: str, name: str, transport: httpx2.BaseTransport | None) -> openai.OpenAI:
    http = httpx2.Client(transport=transport) if transport is not None else httpx2.Client()
    return openai.OpenAI(base_url=f"{server}/frames/{name}/v1", api_key="sk-test", max_retries=0,
                         timeout=10, http_client=http)


def _aopenai(server: str, name: str,
             transport: httpx2.AsyncBaseTransport | None) -> openai.AsyncOpenAI:
    http = httpx2.AsyncClient(transport=transport) if transport is not None else httpx2.AsyncClient()
    return openai.AsyncOpenAI(base_url=f"{server}/frames/{name}/v1", api_key="sk-test",
                              max_retries=0, timeout=10, http_client=http)


def _anthropic(server: str, name: str, transport: httpx2.BaseTransport | None) -> anthropic.Anthropic:
    http = httpx2.Client(transport=transport) if transport is not None else httpx2.Client()
    return anthropic.Anthropic(base_url=f"{server}/frames/{name}", api_key="sk-test", max_retries=0,
                               timeout=10, http_client=http)


def _aanthropic(server: str, name: str,
                transport: httpx2.AsyncBaseTransport | None) -> anthropic.AsyncAnthropic:
    http = httpx2.AsyncClient(transport=transport) if transport is not None else httpx2.AsyncClient()
    return anthropic.AsyncAnthropic(base_url=f"{server}/frames/{name}", api_key="sk-test",
                                    max_retries=0, timeout=10, http_client=http)


def _dumps(events: list[Any]) -> list[dict[str, Any]]:
    return [e.model_dump() for e in events]


# The four ways through each SDK: create(stream=True) and the stream helper, each sync and async.

def responses_create(server: str, name: str, transport: Any) -> list[dict[str, Any]]:
    with _openai(server, name, transport) as client:
        return _dumps(list(client.responses.create(model="m", input="hi", stream=True)))


def responses_helper(server: str, name: str, transport: Any) -> str:
    with _openai(server, name, transport) as client, \
            client.responses.stream(model="m", input="hi") as stream:
        return stream.get_final_response().output_text


async def responses_create_async(server: str, name: str, transport: Any) -> list[dict[str, Any]]:
    async with _aopenai(server, name, transport) as client:
        return _dumps([e async for e in await client.responses.create(model="m", input="hi",
                                                                      stream=True)])


async def responses_helper_async(server: str, name: str, transport: Any) -> str:
    async with _aopenai(server, name, transport) as client, \
            client.responses.stream(model="m", input="hi") as stream:
        return (await stream.get_final_response()).output_text


def messages_create(server: str, name: str, transport: Any) -> list[dict[str, Any]]:
    with _anthropic(server, name, transport) as client:
        return _dumps(list(client.messages.create(model="m", max_tokens=64, messages=MESSAGES,
                                                  stream=True)))


def messages_helper(server: str, name: str, transport: Any) -> str:
    with _anthropic(server, name, transport) as client, \
            client.messages.stream(model="m", max_tokens=64, messages=MESSAGES) as stream:
        message = stream.get_final_message()
    return "".join(b.text for b in message.content if b.type == "text")


async def messages_create_async(server: str, name: str, transport: Any) -> list[dict[str, Any]]:
    async with _aanthropic(server, name, transport) as client:
        return _dumps([e async for e in await client.messages.create(
            model="m", max_tokens=64, messages=MESSAGES, stream=True)])


async def messages_helper_async(server: str, name: str, transport: Any) -> str:
    async with _aanthropic(server, name, transport) as client, \
            client.messages.stream(model="m", max_tokens=64, messages=MESSAGES) as stream:
        message = await stream.get_final_message()
    return "".join(b.text for b in message.content if b.type == "text")


# ── healthy ──────────────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("name", RESPONSES_HEALTHY)
def test_healthy_responses_streams_arrive_whole(server: str, name: str) -> None:
    plain = responses_create(server, name, None)
    assert responses_create(server, name, StrictTransport()) == plain and len(plain) >= 8
    if name != "incomplete":  # the helper itself insists on response.completed
        assert responses_helper(server, name, StrictTransport()) == TEXT


@pytest.mark.parametrize("name", RESPONSES_HEALTHY)
async def test_healthy_responses_streams_arrive_whole_async(server: str, name: str) -> None:
    plain = await responses_create_async(server, name, None)
    assert await responses_create_async(server, name, AsyncStrictTransport()) == plain
    if name != "incomplete":
        assert await responses_helper_async(server, name, AsyncStrictTransport()) == TEXT


def test_a_healthy_messages_stream_arrives_whole(server: str) -> None:
    plain = messages_create(server, "complete", None)
    assert messages_create(server, "complete", StrictTransport()) == plain and len(plain) >= 7
    assert messages_helper(server, "complete", StrictTransport()) == TEXT


async def test_a_healthy_messages_stream_arrives_whole_async(server: str) -> None:
    plain = await messages_create_async(server, "complete", None)
    assert await messages_create_async(server, "complete", AsyncStrictTransport()) == plain
    assert await messages_helper_async(server, "complete", AsyncStrictTransport()) == TEXT


@pytest.mark.parametrize("api", ["responses", "messages"])
def test_the_bytes_arrive_unchanged(server: str, api: str) -> None:
    with httpx2.Client(transport=StrictTransport()) as client:
        got = client.post(f"{server}/bytes/complete/v1/{api}", json={"stream": True}).content
    assert got == body("complete", api)


# ── bad endings ──────────────────────────────────────────────────────────────────────────────────


def _openai_cause(info: pytest.ExceptionInfo[openai.APIConnectionError]) -> StreamEndedBadly:
    cause = info.value.__cause__
    assert isinstance(cause, StreamEndedBadly), repr(cause)
    return cause


def _anthropic_cause(info: pytest.ExceptionInfo[anthropic.APIConnectionError]) -> StreamEndedBadly:
    """anthropic ≥ 2.17 wraps an error of the body's read as openai does (before, it let it out)."""
    cause = info.value.__cause__
    assert isinstance(cause, StreamEndedBadly), repr(cause)
    return cause


@pytest.mark.parametrize("name", sorted(RESPONSES_BAD))
def test_every_bad_responses_ending_raises(server: str, name: str) -> None:
    with pytest.raises(openai.APIConnectionError) as info:
        responses_create(server, name, StrictTransport())
    assert _openai_cause(info).verdict.ending is RESPONSES_BAD[name]
    assert _openai_cause(info).verdict.api == "responses"
    with pytest.raises(openai.APIConnectionError) as info:
        responses_helper(server, name, StrictTransport())
    assert _openai_cause(info).verdict.ending is RESPONSES_BAD[name]


@pytest.mark.parametrize("name", sorted(RESPONSES_BAD))
async def test_every_bad_responses_ending_raises_async(server: str, name: str) -> None:
    with pytest.raises(openai.APIConnectionError) as info:
        await responses_create_async(server, name, AsyncStrictTransport())
    assert _openai_cause(info).verdict.ending is RESPONSES_BAD[name]
    with pytest.raises(openai.APIConnectionError) as info:
        await responses_helper_async(server, name, AsyncStrictTransport())
    assert _openai_cause(info).verdict.ending is RESPONSES_BAD[name]


@pytest.mark.parametrize("name", sorted(MESSAGES_BAD))
def test_every_bad_messages_ending_raises(server: str, name: str) -> None:
    with pytest.raises(anthropic.APIConnectionError) as info:
        messages_create(server, name, StrictTransport(policy="strict"))
    cause = _anthropic_cause(info)
    assert cause.verdict.ending is MESSAGES_BAD[name] and cause.verdict.api == "messages"
    with pytest.raises(anthropic.APIConnectionError) as info:
        messages_helper(server, name, StrictTransport(policy="strict"))
    assert _anthropic_cause(info).verdict.ending is MESSAGES_BAD[name]


@pytest.mark.parametrize("name", sorted(MESSAGES_BAD))
async def test_every_bad_messages_ending_raises_async(server: str, name: str) -> None:
    with pytest.raises(anthropic.APIConnectionError) as info:
        await messages_create_async(server, name, AsyncStrictTransport(policy="strict"))
    assert _anthropic_cause(info).verdict.ending is MESSAGES_BAD[name]
    with pytest.raises(anthropic.APIConnectionError) as info:
        await messages_helper_async(server, name, AsyncStrictTransport(policy="strict"))
    assert _anthropic_cause(info).verdict.ending is MESSAGES_BAD[name]


def test_without_the_transport_the_sdks_end_these_quietly(server: str) -> None:
    """Why the transport exists (if this fails, the SDKs changed)."""
    for name in ("truncated", "no_finish", "cut_mid_frame", "error_flat", "failed"):
        assert responses_create(server, name, None)  # events, then a normal end
    for name in ("truncated", "no_finish", "no_done", "cut_mid_frame"):
        assert messages_create(server, name, None)
        assert messages_helper(server, name, None) == TEXT


def test_by_default_a_missing_message_stop_after_a_stop_reason_does_not_raise(server: str) -> None:
    assert messages_helper(server, "no_done", StrictTransport()) == TEXT
    with pytest.raises(anthropic.APIConnectionError) as info:
        messages_helper(server, "no_done", StrictTransport(policy="strict"))
    assert _anthropic_cause(info).verdict.ending is Ending.NO_DONE


async def test_by_default_a_missing_message_stop_does_not_raise_async(server: str) -> None:
    events = await messages_create_async(server, "no_done", AsyncStrictTransport())
    assert events == await messages_create_async(server, "no_done", None)


@pytest.mark.parametrize("policy", ["no-done-ok", Policy.from_spec("strict", "no_done")])
def test_a_missing_message_stop_passes_under_no_done_ok(server: str, policy: Policy | str) -> None:
    assert messages_helper(server, "no_done", StrictTransport(policy=policy)) == TEXT


async def test_a_missing_message_stop_passes_under_no_done_ok_async(server: str) -> None:
    events = await messages_create_async(server, "no_done", AsyncStrictTransport(policy="no-done-ok"))
    assert events == await messages_create_async(server, "no_done", None)


def test_a_stalled_messages_stream_raises_as_stalled(server: str) -> None:
    with pytest.raises(anthropic.APIConnectionError) as info:
        messages_create(server, "stall", StrictTransport(stall_timeout=1.0))
    assert _anthropic_cause(info).verdict.ending is Ending.STALLED


def test_event_streams_of_other_paths_pass_untouched(server: str) -> None:
    """Only the three streaming endpoints are checked: a truncated stream elsewhere is not ours."""
    with httpx2.Client(transport=StrictTransport()) as client:
        got = client.post(f"{server}/frames/truncated/v1/events", json={"stream": True})
    assert got.status_code == 200 and got.content == body("truncated")
    assert got.headers["content-type"].startswith("text/event-stream")


# ── against the chaos upstream ───────────────────────────────────────────────────────────────────

CHAOS_RESPONSES_BAD = {"truncated": Ending.TRUNCATED, "no_finish": Ending.NO_FINISH,
                       "cut_mid_frame": Ending.CUT_MID_FRAME, "transport_error":
                       Ending.TRANSPORT_ERROR, "error_event": Ending.ERROR_EVENT,
                       "stalled": Ending.STALLED, "empty": Ending.EMPTY}
CHAOS_MESSAGES_BAD = {**CHAOS_RESPONSES_BAD, "no_done": Ending.NO_DONE}


@pytest.fixture(scope="module")
def chaos() -> Iterator[Any]:
    from sseguard.chaos import ChaosConfig, FaultOptions, Pacing, run_chaos_in_thread

    config = ChaosConfig(seed=7, pacing=Pacing(tokens=8), options=FaultOptions(stall_ms=6000))
    with run_chaos_in_thread(config) as server:
        yield server


def _inject(fault: str) -> Any:
    return {"x-sseguard-inject": fault}


@pytest.mark.parametrize("fault", sorted(CHAOS_RESPONSES_BAD))
def test_every_chaos_responses_ending_raises_through_the_transport(chaos: Any, fault: str) -> None:
    transport = StrictTransport(stall_timeout=1.0)
    with openai.OpenAI(base_url=chaos.url, api_key="sk-test", max_retries=0, timeout=20,
                       http_client=httpx2.Client(transport=transport)) as client:
        assert list(client.responses.create(model="chaos-1", input="hi", stream=True,
                                            extra_headers=_inject("none")))
        with pytest.raises(openai.APIConnectionError) as info:
            list(client.responses.create(model="chaos-1", input="hi", stream=True,
                                         extra_headers=_inject(fault)))
    assert _openai_cause(info).verdict.ending is CHAOS_RESPONSES_BAD[fault]


@pytest.mark.parametrize("fault", sorted(CHAOS_MESSAGES_BAD))
async def test_every_chaos_messages_ending_raises_through_the_async_transport(chaos: Any,
                                                                            fault: str) -> None:
    transport = AsyncStrictTransport(stall_timeout=1.0, policy="strict")
    async with anthropic.AsyncAnthropic(base_url=chaos.url.removesuffix("/v1"), api_key="sk-test",
                                        max_retries=0, timeout=20,
                                        http_client=httpx2.AsyncClient(transport=transport)) as client:
        healthy = client.messages.stream(model="chaos-1", max_tokens=1024, messages=MESSAGES,
                                         extra_headers=_inject("none"))
        async with healthy as stream:
            assert (await stream.get_final_message()).stop_reason == "end_turn"
        with pytest.raises(anthropic.APIConnectionError) as info:
            async with client.messages.stream(model="chaos-1", max_tokens=1024, messages=MESSAGES,
                                              extra_headers=_inject(fault)) as stream:
                await stream.get_final_message()
    cause = _anthropic_cause(info)
    assert cause.verdict.ending is CHAOS_MESSAGES_BAD[fault]
    if fault == "transport_error":  # what broke the stream stays reachable
        assert isinstance(cause.__cause__, httpx2.TransportError)


def test_ended_badly_finds_the_verdict_behind_either_sdk_or_none(server: str) -> None:
    """One ``except`` for all SDKs: wrapped (openai, anthropic) or as it is, else None."""
    with pytest.raises(anthropic.APIConnectionError) as wrapped:
        messages_create(server, "truncated", StrictTransport())
    found = ended_badly(wrapped.value)
    assert found is not None and found.verdict.ending is Ending.TRUNCATED
    assert ended_badly(found) is found
    assert ended_badly(RuntimeError("not ours")) is None
    broken = anthropic.APIConnectionError(request=httpx2.Request("POST", "http://127.0.0.1/"))
    broken.__cause__ = httpx2.ReadError("peer closed")
    assert ended_badly(broken) is None
