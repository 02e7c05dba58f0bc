"""The real ``openai`` and ``anthropic`` SDKs, sync and async, on the Responses and Messages protocols,
through the proxy to the chaos upstream: healthy streams arrive whole and byte-identical, every bad
ending reaches the SDK as an exception (never a normal end), ``no_done`` on Messages fails ``strict``,
passes ``no-done-ok`` and, by default (``agents``), reaches the SDK completed with its
``message_stop``. (Chat through the same proxy: ``test_proxy_openai``.)"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from sseguard.chaos import ChaosConfig, FaultOptions, Pacing, run_chaos
from sseguard.proxy import run_proxy
from support.proxy import KEY, in_thread, proxy_config, raw_post, same_second

CHAOS = ChaosConfig(seed=11, pacing=Pacing(tokens=10, reasoning_tokens=4),
                    options=FaultOptions(stall_ms=6000))
STALL = 1.0
USER: Any = [{"role": "user", "content": "Say something."}]
WEATHER = {"type": "object", "properties": {"location": {"type": "string"}},
           "required": ["location"]}
RESPONSES_TOOL: Any = {"type": "function", "name": "get_weather", "description": "Weather.",
                       "parameters": WEATHER}
MESSAGES_TOOL: Any = {"name": "get_weather", "description": "Weather.", "input_schema": WEATHER}

#: Every bad ending the chaos upstream injects on each protocol.
RESPONSES_BAD = ["truncated", "no_finish", "cut_mid_frame", "transport_error", "error_event",
                 "http_error", "stalled", "empty"]
MESSAGES_BAD = ["truncated", "no_done", "no_finish", "cut_mid_frame", "transport_error",
                "error_event", "http_error", "stalled", "empty"]


@contextlib.asynccontextmanager
async def _servers() -> AsyncIterator[dict[str, str]]:
    strict = {"policy": "strict", "stall_timeout": STALL}
    async with run_chaos(CHAOS) as upstream, \
            run_proxy(proxy_config(upstream.url, **strict)) as guarded, \
            run_proxy(proxy_config(upstream.url, on_bad_end="abort", **strict)) as abort, \
            run_proxy(proxy_config(upstream.url, policy="no-done-ok")) as lenient, \
            run_proxy(proxy_config(upstream.url, policy="strict", complete_done=True)) as completing, \
            run_proxy(proxy_config(upstream.url, stall_timeout=STALL)) as default:
        yield {"direct": upstream.url, "error-event": guarded.url, "abort": abort.url,
               "no-done-ok": lenient.url, "complete-done": completing.url, "default": default.url}


@pytest.fixture(scope="module")
def urls() -> Iterator[dict[str, str]]:
    with in_thread(_servers) as value:
        yield value


def _openai(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key=KEY, max_retries=0, timeout=20)


def _aopenai(url: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=url, api_key=KEY, max_retries=0, timeout=20)


def _anthropic(url: str) -> anthropic.Anthropic:
    # The anthropic SDK's base has no /v1: it appends /v1/messages itself.
    return anthropic.Anthropic(base_url=url.removesuffix("/v1"), api_key=KEY, max_retries=0,
                               timeout=20)


def _aanthropic(url: str) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=url.removesuffix("/v1"), api_key=KEY, max_retries=0,
                                    timeout=20)


def _inject(fault: str) -> dict[str, Any]:
    return {"extra_headers": {"x-sseguard-inject": fault}}


# ── the four ways to read each protocol, each returning what the application ends up with ────────


def responses_create(url: str, fault: str, **extra: Any) -> Any:
    with _openai(url) as client:
        return [e.type for e in client.responses.create(model="chaos-1", input="Say something.",
                                                        stream=True, **_inject(fault), **extra)]


def responses_stream(url: str, fault: str, **extra: Any) -> Any:
    with _openai(url) as client, client.responses.stream(
            model="chaos-1", input="Say something.", **_inject(fault), **extra) as stream:
        return stream.get_final_response().output_text


async def responses_create_async(url: str, fault: str, **extra: Any) -> Any:
    async with _aopenai(url) as client:
        stream = await client.responses.create(model="chaos-1", input="Say something.",
                                               stream=True, **_inject(fault), **extra)
        return [e.type async for e in stream]


async def responses_stream_async(url: str, fault: str, **extra: Any) -> Any:
    async with _aopenai(url) as client, client.responses.stream(
            model="chaos-1", input="Say something.", **_inject(fault), **extra) as stream:
        return (await stream.get_final_response()).output_text


def messages_create(url: str, fault: str, **extra: Any) -> Any:
    with _anthropic(url) as client:
        return [e.type for e in client.messages.create(model="chaos-1", max_tokens=4096,
                                                       messages=USER, stream=True,
                                                       **_inject(fault), **extra)]


def messages_stream(url: str, fault: str, **extra: Any) -> Any:
    with _anthropic(url) as client, client.messages.stream(
            model="chaos-1", max_tokens=4096, messages=USER, **_inject(fault), **extra) as stream:
        message = stream.get_final_message()
    return [b.model_dump(exclude={"id", "signature"}) for b in message.content], message.stop_reason


async def messages_create_async(url: str, fault: str, **extra: Any) -> Any:
    async with _aanthropic(url) as client:
        stream = await client.messages.create(model="chaos-1", max_tokens=4096, messages=USER,
                                              stream=True, **_inject(fault), **extra)
        return [e.type async for e in stream]


async def messages_stream_async(url: str, fault: str, **extra: Any) -> Any:
    async with _aanthropic(url) as client, client.messages.stream(
            model="chaos-1", max_tokens=4096, messages=USER, **_inject(fault), **extra) as stream:
        message = await stream.get_final_message()
    return [b.model_dump(exclude={"id", "signature"}) for b in message.content], message.stop_reason


SYNC: dict[str, Callable[..., Any]] = {
    "responses create": responses_create, "responses stream": responses_stream,
    "messages create": messages_create, "messages stream": messages_stream}
ASYNC: dict[str, Callable[..., Awaitable[Any]]] = {
    "responses create": responses_create_async, "responses stream": responses_stream_async,
    "messages create": messages_create_async, "messages stream": messages_stream_async}
EXTRAS: dict[str, dict[str, Any]] = {
    "responses text": {}, "responses tools": {"tools": [RESPONSES_TOOL]},
    "responses reasoning": {"reasoning": {"effort": "low"}},
    "messages text": {}, "messages tools": {"tools": [MESSAGES_TOOL]},
    "messages thinking": {"thinking": {"type": "enabled", "budget_tokens": 1024}},
}


# ── healthy ──────────────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("case", list(EXTRAS))
async def test_a_healthy_stream_arrives_byte_identical(case: str) -> None:
    api = case.split()[0]
    request: dict[str, Any] = ({"model": "chaos-1", "input": "Say something.", "stream": True}
                               if api == "responses" else
                               {"model": "chaos-1", "max_tokens": 4096, "messages": USER,
                                "stream": True})
    request.update(EXTRAS[case])
    async with run_chaos(CHAOS) as direct, run_chaos(CHAOS) as upstream, \
            run_proxy(proxy_config(upstream.url)) as px:
        want = await raw_post(f"{direct.url}/{api}", request)
        got = await raw_post(f"{px.url}/{api}", request)
    assert got.status == 200 and got.error is None
    assert same_second(got.body) == same_second(want.body) and len(want.body) > 1000


@pytest.mark.parametrize("way", list(SYNC))
@pytest.mark.parametrize("extra", ["text", "tools", "reasoning"])
def test_the_sync_sdks_get_the_same_answer_through_the_proxy(urls: dict[str, str], way: str,
                                                              extra: str) -> None:
    api = way.split()[0]
    options = EXTRAS[f"{api} {'thinking' if api == 'messages' and extra == 'reasoning' else extra}"]
    want = SYNC[way](urls["direct"], "none", **options)
    got = SYNC[way](urls["error-event"], "none", **options)
    assert got == want and got


@pytest.mark.parametrize("way", list(ASYNC))
async def test_the_async_sdks_get_the_same_answer_through_the_proxy(urls: dict[str, str],
                                                                    way: str) -> None:
    want = await ASYNC[way](urls["direct"], "none")
    got = await ASYNC[way](urls["error-event"], "none")
    assert got == want and got


# ── bad endings ──────────────────────────────────────────────────────────────────────────────────


def _cases(mode: str) -> list[tuple[str, str]]:
    return ([(way, f) for way in ("responses create", "responses stream") for f in RESPONSES_BAD]
            + [(way, f) for way in ("messages create", "messages stream") for f in MESSAGES_BAD])


def _check_raised(exc: BaseException, way: str, fault: str, mode: str) -> None:
    """What the SDK raised is its own error for a failed stream, naming the ending where it can."""
    if way.startswith("responses"):
        if fault == "http_error":
            assert isinstance(exc, openai.APIStatusError)
        elif mode == "abort":
            assert isinstance(exc, openai.APIConnectionError)
        else:
            assert isinstance(exc, openai.APIError) and exc.code == fault, repr(exc)
        return
    if mode == "abort" and fault not in ("http_error", "error_event"):
        # A body that broke off: anthropic ≥ 2.17 wraps httpx2's error as openai does. (The
        # upstream's own event: error is forwarded before the reset: the SDK raises on it first.)
        assert isinstance(exc, anthropic.APIConnectionError), repr(exc)
        assert isinstance(exc.__cause__, httpx2.TransportError), repr(exc.__cause__)
        return
    assert isinstance(exc, anthropic.APIStatusError), repr(exc)
    if fault not in ("http_error", "error_event"):
        assert isinstance(exc.body, dict) and exc.body["error"]["type"] == "api_error"
        assert exc.body["error"]["message"].startswith(f"{fault}: ")


@pytest.mark.parametrize("mode", ["error-event", "abort"])
@pytest.mark.parametrize("way, fault", _cases("sync"))
def test_the_sync_sdks_raise_on_every_bad_ending(urls: dict[str, str], way: str, fault: str,
                                                 mode: str) -> None:
    with pytest.raises(Exception) as info:  # which one: checked right below
        SYNC[way](urls[mode], fault)
    _check_raised(info.value, way, fault, mode)


@pytest.mark.parametrize("way, fault", _cases("async"))
async def test_the_async_sdks_raise_on_every_bad_ending(urls: dict[str, str], way: str,
                                                        fault: str) -> None:
    with pytest.raises(Exception) as info:  # which one: checked right below
        await ASYNC[way](urls["error-event"], fault)
    _check_raised(info.value, way, fault, "error-event")


def test_without_the_proxy_these_end_quietly(urls: dict[str, str]) -> None:
    """Why the proxy is there (docs/design/vocabulary.md; docs/protocols.md has the measured table)."""
    for fault in ("truncated", "no_finish", "cut_mid_frame", "empty"):
        responses_create(urls["direct"], fault)
    for fault in ("truncated", "no_done", "no_finish", "cut_mid_frame"):
        messages_create(urls["direct"], fault)
        messages_stream(urls["direct"], fault)


# ── messages without message_stop ────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("way", ["messages create", "messages stream"])
def test_no_done_fails_strict_and_passes_no_done_ok(urls: dict[str, str], way: str) -> None:
    with pytest.raises(anthropic.APIStatusError, match="no_done: "):
        SYNC[way](urls["error-event"], "no_done")
    assert SYNC[way](urls["no-done-ok"], "no_done") == SYNC[way](urls["direct"], "no_done")


async def test_no_done_passes_no_done_ok_async(urls: dict[str, str]) -> None:
    got = await messages_stream_async(urls["no-done-ok"], "no_done")
    assert got == await messages_stream_async(urls["direct"], "no_done") and got[1] == "end_turn"


@pytest.mark.parametrize("way", ["messages create", "messages stream"])
def test_by_default_a_finished_answer_without_message_stop_is_whole(urls: dict[str, str],
                                                                   way: str) -> None:
    got = SYNC[way](urls["default"], "no_done")
    if way == "messages create":
        assert got == [*messages_create(urls["direct"], "no_done"), "message_stop"]
    else:
        assert got == SYNC[way](urls["direct"], "no_done") and got[1] == "end_turn"


async def test_by_default_a_finished_answer_without_message_stop_is_whole_async(
        urls: dict[str, str]) -> None:
    got = await messages_stream_async(urls["default"], "no_done")
    assert got == await messages_stream_async(urls["direct"], "no_done") and got[1] == "end_turn"
    types = await messages_create_async(urls["default"], "no_done")
    assert types[-2:] == ["message_delta", "message_stop"]


@pytest.mark.parametrize("fault", ["truncated", "no_finish", "cut_mid_frame"])
def test_by_default_the_anthropic_sdk_still_raises_on_an_unfinished_answer(
        urls: dict[str, str], fault: str) -> None:
    with pytest.raises(anthropic.APIStatusError, match=f"{fault}: "):
        messages_stream(urls["default"], fault)


def test_complete_done_gives_the_sdk_its_message_stop(urls: dict[str, str]) -> None:
    types = messages_create(urls["complete-done"], "no_done")
    assert types[-2:] == ["message_delta", "message_stop"]
    assert "message_stop" not in messages_create(urls["direct"], "no_done")
