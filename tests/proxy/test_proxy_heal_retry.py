"""``--retry``: a failure before the client got one body byte is asked again; after one, never.

A tiny upstream answers each request by its number in a list of behaviours (fail the first way, then
serve a good stream), so each case shows the client one healthy stream and the upstream two requests.
Waits go through an injected sleep: no test waits a real ``Retry-After``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket

import aiohttp
import openai
import pytest

from _virtual_time import VirtualTimers
from sseguard.proxy import run_proxy
from support.proxy import KEY, chat, proxy_config, raw_post
from support.proxy_heal import ERROR_FIRST, FIRST, GOOD, Records, Step, _settled, heal_proxy


async def test_a_429_with_retry_after_is_waited_out_and_healed_for_the_openai_sdk() -> None:
    steps = [Step(b'{"error":{"message":"slow down","type":"rate_limit"}}', 429,
                  {"Retry-After": "1"}), Step()]
    async with heal_proxy(steps) as (up, px, waits, records):
        client = openai.AsyncOpenAI(base_url=px.url, api_key=KEY, max_retries=0, timeout=20)
        async with client:
            stream = await client.chat.completions.create(model="m", messages=[
                {"role": "user", "content": "hi"}], stream=True)
            text = "".join([c.choices[0].delta.content or "" async for c in stream])
        await _settled(records, 2)
        metrics = px.state.metrics.render().decode()
    assert text == "Hello"
    assert up.paths == ["/v1/chat/completions", "/v1/chat/completions"]
    assert waits == [1.0]
    attempt, stream_record = sorted(records.items, key=lambda r: r.heal_of is None)
    assert attempt.heal_of == stream_record.index and attempt.status == 429
    assert attempt.ending == "http_error" and attempt.healed is None
    assert stream_record.ending == "complete" and stream_record.healed == "retry"
    assert stream_record.heal_attempts == 1 and stream_record.heal_of is None
    assert ('sseguard_proxy_healed_streams_total{api="chat",dialect="",how="retry",'
            'result="passed"} 1.0') in metrics
    assert 'sseguard_proxy_streams_total{api="chat",ending="complete"} 1.0' in metrics
    assert 'sseguard_proxy_heal_attempts_total{api="chat",ending="http_error"} 1.0' in metrics


@pytest.mark.parametrize("failure", [
    Step(b'{"error":{"message":"unavailable"}}', 503),
    Step(b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}', 529),
    Step(reset_at_once=True),
    Step(b""),
    Step(ERROR_FIRST),
    Step(b"", end="reset"),
], ids=["503", "529-overloaded", "reset-before-headers", "empty-200", "error-first-event",
        "reset-after-headers"])
async def test_a_failure_before_the_first_byte_is_retried_and_the_client_sees_one_good_stream(
        failure: Step) -> None:
    async with heal_proxy([failure, Step()]) as (up, px, waits, records):
        got = await raw_post(f"{px.url}/chat/completions", chat())
        await _settled(records, 2)
    assert got.status == 200 and got.body == GOOD and got.error is None
    assert len(up.paths) == 2 and len(waits) == 1 and 0 < waits[0] <= 10
    client = next(r for r in records.items if r.heal_of is None)
    assert client.healed == "retry" and client.heal_attempts == 1 and client.passed


async def test_a_stall_before_the_first_event_is_retried() -> None:
    timers = VirtualTimers()  # the stall comes when the test says, not after a real second
    async with heal_proxy([Step(b"", end="hang"), Step()], stall_timeout=1.0) as (
            up, px, _, records):
        px.state.timers = timers
        client = asyncio.create_task(raw_post(f"{px.url}/chat/completions", chat()))
        await asyncio.wait_for(up.hanging.wait(), 10)
        await timers.stall(1.0)
        got = await asyncio.wait_for(client, 10)
        await _settled(records, 2)
    assert got.body == GOOD and len(up.paths) == 2
    assert sorted(r.ending for r in records.items) == ["complete", "stalled"]


async def test_after_n_retries_the_client_gets_the_last_failure_as_it_was() -> None:
    failure = Step(b'{"error":{"message":"unavailable"}}', 503)
    async with heal_proxy([failure], retry=2) as (up, px, waits, records):
        got = await raw_post(f"{px.url}/chat/completions", chat())
        await _settled(records, 3)
    assert got.status == 503 and got.body == b'{"error":{"message":"unavailable"}}'
    assert len(up.paths) == 3 and len(waits) == 2
    client = next(r for r in records.items if r.heal_of is None)
    assert client.healed == "retry" and client.heal_attempts == 2 and not client.passed
    assert [r.heal_of for r in records.items].count(client.index) == 2


async def test_a_retry_after_beyond_the_cap_goes_to_the_client_at_once() -> None:
    steps = [Step(b'{"error":{"message":"quota"}}', 429, {"Retry-After": "60"}), Step()]
    async with heal_proxy(steps, retry_max_wait=10.0) as (up, px, waits, records):
        got = await raw_post(f"{px.url}/chat/completions", chat())
        await _settled(records, 1)
    assert got.status == 429 and got.headers["Retry-After"] == "60"
    # The proxy did not wait: the client may, as long as the upstream asked (its own Retry-After).
    assert got.headers["x-should-retry"] == "true"
    assert got.body == b'{"error":{"message":"quota"}}'
    assert len(up.paths) == 1 and waits == []
    assert [(r.heal_of, r.status) for r in records.items] == [(None, 429)]


async def test_a_failure_after_a_forwarded_byte_is_not_retried() -> None:
    async with heal_proxy([Step(FIRST, end="reset"), Step()]) as (up, px, waits, records):
        got = await raw_post(f"{px.url}/chat/completions", chat())
        await _settled(records, 1)
    assert len(up.paths) == 1 and waits == []
    assert got.body.startswith(FIRST)
    last = got.body[len(FIRST):]
    assert json.loads(last[len(b"data: "):])["error"]["code"] == "transport_error"
    assert [(r.ending, r.healed, r.heal_attempts) for r in records.items] == [
        ("transport_error", "none", 0)]


async def test_pass_through_paths_are_never_retried() -> None:
    steps = [Step(b'{"error":{"message":"unavailable"}}', 503), Step(b'{"data":[]}')]
    async with heal_proxy(steps) as (up, px, waits, _), aiohttp.ClientSession() as session, \
            session.get(f"{px.url}/models") as resp:
        body = await resp.read()
    assert resp.status == 503 and body == b'{"error":{"message":"unavailable"}}'
    assert up.paths == ["/v1/models"] and waits == []


async def test_a_non_streaming_call_to_a_guarded_endpoint_is_retried() -> None:
    answer = b'{"id":"c1","object":"chat.completion","choices":[]}'
    steps = [Step(b'{"error":{"message":"unavailable"}}', 502), Step(answer)]
    async with heal_proxy(steps) as (up, px, waits, _):
        got = await raw_post(f"{px.url}/chat/completions", chat(stream=False))
    assert got.status == 200 and got.body == answer and len(up.paths) == 2 and len(waits) == 1


async def test_retry_zero_relays_the_first_failure() -> None:
    async with heal_proxy([Step(b""), Step()], retry=0) as (up, px, waits, records):
        got = await raw_post(f"{px.url}/chat/completions", chat())
        await _settled(records, 1)
    assert len(up.paths) == 1 and waits == [] and got.status == 200
    assert b'"code": "empty"' in got.body or b'"code":"empty"' in got.body
    assert [(r.ending, r.healed) for r in records.items] == [("empty", None)]


async def test_an_unreachable_upstream_is_asked_n_plus_one_times_then_a_502() -> None:
    with socket.socket() as sock:  # a port where nothing listens
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    records = Records()
    async with run_proxy(proxy_config(f"http://127.0.0.1:{port}/v1", retry=2)) as px:
        px.state.sleep, px.state.writer = sleep, records
        for body in (chat(), chat(stream=False)):
            got = await raw_post(f"{px.url}/chat/completions", body)
            assert got.status == 502 and b"unreachable" in got.body
        await _settled(records, 3)
        text = px.state.metrics.render().decode()
    assert len(waits) == 4  # two per request
    assert 'sseguard_proxy_upstream_errors_total{kind="connect"} 6.0' in text
    client = next(r for r in records.items if r.heal_of is None)
    assert client.ending == "transport_error" and client.heal_attempts == 2


async def test_an_overloaded_error_as_the_first_messages_event_is_retried() -> None:
    overloaded = (b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
                  b'"message":"Overloaded"}}\n\n')
    good = (b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":'
            b'"message","role":"assistant","model":"m","content":[],"stop_reason":null,'
            b'"usage":{"input_tokens":1,"output_tokens":0}}}\n\n'
            b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
            b'"content_block":{"type":"text","text":""}}\n\n'
            b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
            b'"delta":{"type":"text_delta","text":"Hi"}}\n\n'
            b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
            b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":'
            b'"end_turn"},"usage":{"output_tokens":1}}\n\n'
            b'event: message_stop\ndata: {"type":"message_stop"}\n\n')
    request = {"model": "m", "max_tokens": 10, "stream": True,
               "messages": [{"role": "user", "content": "hi"}]}
    async with heal_proxy([Step(overloaded), Step(good)]) as (up, px, _, records):
        got = await raw_post(f"{px.url}/messages", request,
                             headers={"anthropic-version": "2023-06-01"})
        await _settled(records, 2)
    assert got.status == 200 and got.body == good and len(up.paths) == 2
    assert sorted(r.ending for r in records.items) == ["complete", "error_event"]


async def test_a_client_that_leaves_while_its_headers_wait_cancels_the_upstream_request() -> None:
    async with heal_proxy([Step(b"", end="hang")], stall_timeout=30.0) as (up, px, _, records):
        task = asyncio.create_task(raw_post(f"{px.url}/chat/completions", chat()))
        # The upstream has sent its headers and nothing else. Whether the proxy has read them yet
        # or not, the client leaving ends the upstream request and is recorded the same way.
        await up.hanging.wait()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await asyncio.wait_for(up.hung_up.wait(), 10)
        await _settled(records, 1)
        text = px.state.metrics.render().decode()
    assert len(up.paths) == 1
    assert [(r.extra.get("client_disconnected"), r.heal_of) for r in records.items] == [(True, None)]
    assert 'sseguard_proxy_streams_total{api="chat",ending="client_disconnect"} 1.0' in text
