"""The real ``openai`` SDK (3.x), sync and async, through the proxy to the chaos upstream: a healthy
stream arrives intact, and every bad ending of docs/design/vocabulary.md reaches the SDK as an exception —
never as a normal end of iteration."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import openai
import pytest

from sseguard.chaos import ChaosConfig, FaultOptions, Pacing, run_chaos
from sseguard.proxy import run_proxy
from support.proxy import KEY, MESSAGES, WEATHER_TOOL, Script, in_thread, proxy_config, scripted

# `event: error` frames (the `data:` form is covered in test_proxy_stream).
CHAOS = ChaosConfig(seed=11, pacing=Pacing(tokens=10),
                    options=FaultOptions(stall_ms=4000, error_event_form="event"))

#: Every Ending but complete, and what the SDK raises for it through each --on-bad-end mode.
BAD_ENDINGS = ["truncated", "no_done", "no_finish", "cut_mid_frame", "transport_error", "error_event",
               "http_error", "stalled", "empty"]


@contextlib.asynccontextmanager
async def _servers() -> AsyncIterator[dict[str, str]]:
    async with run_chaos(CHAOS) as direct, run_chaos(CHAOS) as upstream, \
            run_proxy(proxy_config(upstream.url, stall_timeout=1.0, policy="strict")) as guarded, \
            run_proxy(proxy_config(upstream.url, stall_timeout=1.0, policy="strict",
                                   on_bad_end="abort")) as aborting, \
            run_proxy(proxy_config(upstream.url, stall_timeout=1.0)) as default:
        yield {"direct": direct.url, "error-event": guarded.url, "abort": aborting.url,
               "default": default.url}


@pytest.fixture(scope="module")
def urls() -> Iterator[dict[str, str]]:
    with in_thread(_servers) as value:
        yield value


def _sync(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key=KEY, max_retries=0, timeout=10)


def _async(url: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=url, api_key=KEY, max_retries=0, timeout=10)


def _create(fault: str, **extra: Any) -> dict[str, Any]:
    return {"model": "chaos-1", "messages": MESSAGES, "stream": True,
            "extra_headers": {"x-sseguard-inject": fault}, **extra}


def _comparable(chunks: list[Any]) -> list[dict[str, Any]]:
    return [{k: v for k, v in c.model_dump().items() if k != "created"} for c in chunks]


# ── healthy ──────────────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("extra", [{}, {"tools": [WEATHER_TOOL]},
                                   {"stream_options": {"include_usage": True}, "n": 2}],
                         ids=["text", "tools", "usage_n2"])
def test_sync_sdk_gets_the_same_chunks_through_the_proxy(urls: dict[str, str],
                                                         extra: dict[str, Any]) -> None:
    with _sync(urls["direct"]) as direct, _sync(urls["error-event"]) as guarded:
        want = list(direct.chat.completions.create(**_create("none", **extra)))
        got = list(guarded.chat.completions.create(**_create("none", **extra)))
    assert _comparable(got) == _comparable(want) and len(got) > 5


async def test_async_sdk_gets_the_same_chunks_through_the_proxy(urls: dict[str, str]) -> None:
    async with _async(urls["direct"]) as direct, _async(urls["error-event"]) as guarded:
        want = [c async for c in await direct.chat.completions.create(**_create("none"))]
        got = [c async for c in await guarded.chat.completions.create(**_create("none"))]
    assert _comparable(got) == _comparable(want)
    text = "".join(c.choices[0].delta.content or "" for c in got if c.choices)
    assert len(text.split()) == 10


def test_the_stream_helper_accumulates_tool_calls_through_the_proxy(urls: dict[str, str]) -> None:
    with _sync(urls["error-event"]) as client, client.chat.completions.stream(
            model="chaos-1", messages=MESSAGES, tools=[WEATHER_TOOL]) as stream:  # type: ignore[arg-type]
        final = stream.get_final_completion()
    calls = final.choices[0].message.tool_calls or []
    assert final.choices[0].finish_reason == "tool_calls" and calls[0].function.name == "get_weather"


# ── bad endings ──────────────────────────────────────────────────────────────────────────────────


def _expected(fault: str, mode: str) -> type[Exception]:
    if fault == "http_error":
        return openai.APIStatusError
    return openai.APIConnectionError if mode == "abort" else openai.APIError


@pytest.mark.parametrize("mode", ["error-event", "abort"])
@pytest.mark.parametrize("fault", BAD_ENDINGS)
def test_sync_sdk_raises_on_every_bad_ending(urls: dict[str, str], fault: str, mode: str) -> None:
    with _sync(urls[mode]) as client:
        stream = client.chat.completions.create(**_create(fault)) if fault != "http_error" else None
        with pytest.raises(_expected(fault, mode)):
            for _ in stream if stream is not None else client.chat.completions.create(
                    **_create(fault)):
                pass


@pytest.mark.parametrize("mode", ["error-event", "abort"])
@pytest.mark.parametrize("fault", BAD_ENDINGS)
async def test_async_sdk_raises_on_every_bad_ending(urls: dict[str, str], fault: str,
                                                    mode: str) -> None:
    async with _async(urls[mode]) as client:
        with pytest.raises(_expected(fault, mode)) as info:
            async for _ in await client.chat.completions.create(**_create(fault)):
                pass
    if mode == "error-event" and fault != "http_error":
        assert isinstance(info.value, openai.APIError) and info.value.code == fault


# ── the default policy (agents): a finished answer that only lacks [DONE] is whole ──────────────


@contextlib.asynccontextmanager
async def _fresh_pair() -> AsyncIterator[dict[str, str]]:
    """Two identical chaos servers that have served nothing yet (their request counter seeds what
    they send), one direct and one behind a proxy with the default policy."""
    async with run_chaos(CHAOS) as direct, run_chaos(CHAOS) as upstream, \
            run_proxy(proxy_config(upstream.url)) as default:
        yield {"direct": direct.url, "default": default.url}


def test_sync_sdk_gets_a_finished_answer_without_done_whole_by_default_and_raises_under_strict(
        urls: dict[str, str]) -> None:
    with in_thread(_fresh_pair) as fresh, _sync(fresh["direct"]) as direct, \
            _sync(fresh["default"]) as guarded:
        want = list(direct.chat.completions.create(**_create("no_done")))
        got = list(guarded.chat.completions.create(**_create("no_done")))
    assert _comparable(got) == _comparable(want)
    assert [c.choices[0].finish_reason for c in got if c.choices][-1] == "stop"
    with _sync(urls["error-event"]) as strict, pytest.raises(openai.APIError) as info:
        for _ in strict.chat.completions.create(**_create("no_done")):
            pass
    assert info.value.code == "no_done"


async def test_async_sdk_gets_a_finished_answer_without_done_whole_by_default_and_raises_under_strict(
        urls: dict[str, str]) -> None:
    async with _fresh_pair() as fresh, _async(fresh["direct"]) as direct, \
            _async(fresh["default"]) as guarded:
        want = [c async for c in await direct.chat.completions.create(**_create("no_done"))]
        got = [c async for c in await guarded.chat.completions.create(**_create("no_done"))]
    assert _comparable(got) == _comparable(want)
    assert [c.choices[0].finish_reason for c in got if c.choices][-1] == "stop"
    async with _async(urls["error-event"]) as strict:
        with pytest.raises(openai.APIError) as info:
            async for _ in await strict.chat.completions.create(**_create("no_done")):
                pass
    assert info.value.code == "no_done"


@pytest.mark.parametrize("fault", ["truncated", "no_finish", "cut_mid_frame", "empty"])
def test_by_default_the_sdk_still_raises_on_an_unfinished_answer(urls: dict[str, str],
                                                                  fault: str) -> None:
    with _sync(urls["default"]) as client, pytest.raises(openai.APIError) as info:
        for _ in client.chat.completions.create(**_create(fault)):
            pass
    assert info.value.code == fault


@pytest.mark.parametrize("fault", BAD_ENDINGS)
def test_without_the_proxy_the_sdk_ends_some_bad_streams_quietly(urls: dict[str, str],
                                                                 fault: str) -> None:
    """The reason the proxy exists: direct, the SDK accepts truncated, no_done, no_finish, empty,
    cut_mid_frame and stalled-then-finished streams as normal ends (this test documents the SDK's
    behaviour; if it fails, the SDK changed). openai 3.x does raise on an `event: error` whose data
    holds an ``error`` object; one without it is the next test."""
    quiet = {"truncated", "no_done", "no_finish", "empty", "cut_mid_frame", "stalled"}
    with _sync(urls["direct"]) as client:
        try:
            for _ in client.chat.completions.create(**_create(fault)):
                pass
            raised = False
        except openai.APIError:
            raised = True
    assert raised is (fault not in quiet)


def test_the_stream_helper_raises_instead_of_returning_half_an_answer(urls: dict[str, str]) -> None:
    with _sync(urls["error-event"]) as client, pytest.raises(openai.APIError, match="incomplete"), \
            client.chat.completions.stream(model="chaos-1", messages=MESSAGES,  # type: ignore[arg-type]
                                           extra_headers={"x-sseguard-inject": "truncated"}) as stream:
        stream.get_final_completion()


async def test_an_error_event_the_sdk_would_swallow_becomes_one_it_raises() -> None:
    content = (b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m",'
               b'"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}\n\n')
    script = Script([content, b'event: error\ndata: {"message": "engine crashed"}\n\n'])
    async with scripted(script) as up, run_proxy(proxy_config(up.url)) as px:
        async with _async(up.url) as direct:
            quietly = [c async for c in await direct.chat.completions.create(**_create("none"))]
        async with _async(px.url) as guarded:
            with pytest.raises(openai.APIError, match="engine crashed") as info:
                async for _ in await guarded.chat.completions.create(**_create("none")):
                    pass
    assert quietly[0].choices[0].delta.content == "Hi"  # and then a normal end, direct
    assert info.value.code == "error_event"
