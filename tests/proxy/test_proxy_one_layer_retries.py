"""One layer retries, end to end: the real openai and anthropic SDKs (their default ``max_retries``)
through the proxy (its defaults) against a loopback upstream that always fails, fails once, or works;
and the retry budget under 200 clients during a 10 s outage, on an injected clock.

An SDK honours ``x-should-retry``: told ``false`` it raises after one request instead of retrying the
proxy's 502 twice more (each of which the proxy would have retried twice: 9 upstream requests).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import anthropic
import openai
import pytest
from aiohttp import web

from sseguard.proxy import RunningProxy, run_proxy
from support.proxy import KEY, proxy_config


def _chat_sse(text: str) -> bytes:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        obj = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return b"data: " + json.dumps(obj).encode() + b"\n\n"
    return (chunk({"role": "assistant", "content": ""}) + chunk({"content": text})
            + chunk({}, "stop") + b"data: [DONE]\n\n")


def _messages_sse(text: str) -> bytes:
    def ev(obj: dict[str, Any]) -> bytes:
        return f"event: {obj['type']}\ndata: {json.dumps(obj)}\n\n".encode()
    return (ev({"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 3, "output_tokens": 1}}})
        + ev({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
        + ev({"type": "content_block_delta", "index": 0,
              "delta": {"type": "text_delta", "text": text}})
        + ev({"type": "content_block_stop", "index": 0})
        + ev({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
              "usage": {"output_tokens": 2}})
        + ev({"type": "message_stop"}))


CHAT_WHOLE = {"id": "c1", "object": "chat.completion", "created": 1, "model": "m",
              "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello"},
                           "finish_reason": "stop"}],
              "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
MESSAGES_WHOLE = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
                  "content": [{"type": "text", "text": "Hello"}], "stop_reason": "end_turn",
                  "stop_sequence": None, "usage": {"input_tokens": 3, "output_tokens": 1}}


@dataclass
class Upstream:
    """``mode``: ``fail`` (a stream is reset after its first event, a plain call at once), ``once``
    (the first request of each kind fails so, then it works), ``ok``, or ``503`` (an overload)."""

    mode: str
    url: str = ""
    requests: int = 0
    seen: dict[bool, int] = field(default_factory=dict)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        obj = json.loads(await request.read())
        stream = bool(obj.get("stream"))
        self.requests += 1
        self.seen[stream] = self.seen.get(stream, 0) + 1
        messages = request.path.endswith("/messages")
        failing = self.mode == "fail" or (self.mode == "once" and self.seen[stream] == 1)
        assert request.transport is not None
        if self.mode == "503":
            return web.json_response({"error": {"message": "overloaded", "type": "server_error"}},
                                     status=503)
        if failing and not stream:
            request.transport.abort()
            return web.Response()
        if not stream:
            return web.json_response(MESSAGES_WHOLE if messages else CHAT_WHOLE)
        body = _messages_sse("Hello") if messages else _chat_sse("Hello")
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        if failing:
            await resp.write(body[:body.index(b"\n\n") + 2])
            request.transport.abort()
            return resp
        await resp.write(body)
        await resp.write_eof()
        return resp


@contextlib.asynccontextmanager
async def behind_proxy(mode: str, **options: Any) -> AsyncIterator[
        tuple[Upstream, RunningProxy, list[float]]]:
    up = Upstream(mode)
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", up.handle)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    up.url = f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
    now = [0.0]

    async def sleep(seconds: float) -> None:  # the proxy's backoffs: no real waits
        return None

    try:
        async with run_proxy(proxy_config(up.url, **options)) as px:
            px.state.sleep = sleep
            px.state.clock = lambda: now[0]
            yield up, px, now
    finally:
        await runner.cleanup()


async def _openai_call(url: str, stream: bool) -> str:
    client = openai.AsyncOpenAI(base_url=url, api_key=KEY, timeout=20)  # default max_retries
    try:
        if stream:
            got = await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], stream=True)
            return "".join([c.choices[0].delta.content or "" async for c in got if c.choices])
        answer = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}])
        return answer.choices[0].message.content or ""
    finally:
        await client.close()


async def _anthropic_call(url: str, stream: bool) -> str:
    client = anthropic.AsyncAnthropic(base_url=url.removesuffix("/v1"), api_key=KEY, timeout=20)
    try:
        if stream:
            async with client.messages.stream(
                    model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]) as got:
                return "".join([text async for text in got.text_stream])
        answer = await client.messages.create(model="m", max_tokens=10,
                                              messages=[{"role": "user", "content": "hi"}])
        return "".join(b.text for b in answer.content if b.type == "text")
    finally:
        await client.close()


CALLS = {"openai": (_openai_call, openai.APIError), "anthropic": (_anthropic_call, anthropic.APIError)}


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("sdk", list(CALLS))
async def test_an_always_failing_upstream_costs_at_most_three_requests_per_sdk_call(
        sdk: str, stream: bool) -> None:
    call, error = CALLS[sdk]
    async with behind_proxy("fail") as (up, px, _):
        with pytest.raises(error):
            await call(px.url, stream)
        text = px.state.metrics.render().decode()
    assert 1 <= up.requests <= 3, up.requests
    if not stream:  # the proxy retried twice, then told the SDK not to: 3, not 9
        assert up.requests == 3
        assert "sseguard_proxy_dont_retry_answers_total" in text


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("sdk", list(CALLS))
async def test_a_healthy_upstream_still_answers_whole(sdk: str, stream: bool) -> None:
    call, _ = CALLS[sdk]
    async with behind_proxy("ok") as (up, px, _):
        assert await call(px.url, stream) == "Hello"
    assert up.requests == 1


@pytest.mark.parametrize("sdk", list(CALLS))
async def test_a_transient_failure_is_healed_by_the_proxys_own_retry(sdk: str) -> None:
    call, _ = CALLS[sdk]
    async with behind_proxy("once") as (up, px, _):
        assert await call(px.url, False) == "Hello"
        text = px.state.metrics.render().decode()
    assert up.requests == 2  # one failure, one retry by the proxy, none by the SDK
    assert 'sseguard_proxy_retries_total{api="' in text


async def test_the_proxys_502_says_do_not_retry_after_its_own_retries_and_retry_with_retry_0() -> None:
    payload = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    async with behind_proxy("fail") as (_, px, _), aiohttp.ClientSession() as session, \
            session.post(f"{px.url}/chat/completions", json=payload) as resp:
        assert resp.status == 502 and resp.headers["x-should-retry"] == "false"
        assert "retry-after" not in resp.headers  # never invented
    async with behind_proxy("fail", retry=0) as (up, px, _), aiohttp.ClientSession() as session, \
            session.post(f"{px.url}/chat/completions", json=payload) as resp:
        assert resp.status == 502 and resp.headers["x-should-retry"] == "true"
    assert up.requests == 1


async def test_under_a_10_s_outage_200_clients_cost_at_most_1_2_upstream_requests_each() -> None:
    """200 concurrent clients (20 a second on the injected clock) while the upstream answers every
    request with a 503 for 10 s, then recovers: the retries stay within the 20 % budget, and every
    request after the recovery succeeds."""
    stream = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    async with behind_proxy("503") as (up, px, now), \
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def ask() -> tuple[int, bytes, str | None]:
            async with session.post(f"{px.url}/chat/completions", json=stream) as resp:
                return resp.status, await resp.read(), resp.headers.get("x-should-retry")

        outage = []
        for second in range(10):
            now[0] = float(second)
            outage += await asyncio.gather(*(ask() for _ in range(20)))
        during = up.requests
        text = px.state.metrics.render().decode()
        up.mode = "ok"
        now[0] = 20.0
        after = await asyncio.gather(*(ask() for _ in range(200)))
    assert len(outage) == 200 and all(status == 503 for status, _, _ in outage)
    assert all(header == "false" for _, _, header in outage)
    assert during <= 1.2 * 200, during
    assert 'sseguard_proxy_retries_refused_total{api="chat",reason="http_503"}' in text
    assert all(status == 200 and body.endswith(b"data: [DONE]\n\n") for status, body, _ in after)
