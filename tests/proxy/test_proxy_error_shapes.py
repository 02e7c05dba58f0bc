"""What the client is told when the upstream fails, in every shape it can read: a reset mid-stream is
a clean sentence (no aiohttp internals), Gemini's JSON-array framing stays one valid JSON array
whatever ends it, and a guarded endpoint's non-streamed answer is stall-timed like a stream (a ``504``
in the protocol's error shape, not a wait for ever)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from _virtual_time import VirtualTimers, until
from sseguard.chaos import ChaosConfig, FaultOptions, Pacing, run_chaos
from sseguard.proxy import run_proxy
from support.proxy import Script, chat, frames, proxy_config, raw_post, scripted
from support.proxy_bodies import messages_body

HELLO = (b'data: {"id":"c1","object":"chat.completion.chunk","created":0,"model":"m","choices":'
         b'[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}\n\n')
LO = (b'data: {"id":"c1","object":"chat.completion.chunk","created":0,"model":"m","choices":'
      b'[{"index":0,"delta":{"content":"lo"},"finish_reason":null}]}\n\n')
MESSAGES_REQUEST: dict[str, Any] = {"model": "m", "max_tokens": 64, "stream": True,
                                    "messages": [{"role": "user", "content": "Say hello"}]}
GEMINI_REQUEST = {"contents": [{"role": "user", "parts": [{"text": "Say something."}]}]}
#: Words of aiohttp's own exception text that must never reach a client.
INTERNALS = ("ClientPayloadError", "TransferEncodingError", "ServerDisconnected", "message=", "<",
             "Response payload")


# ── (a) a reset mid-stream ───────────────────────────────────────────────────────────────────────


async def test_a_chat_reset_mid_stream_is_told_as_a_clean_sentence_with_the_byte_count() -> None:
    async with scripted(Script([HELLO, LO], end="reset")) as up, \
            run_proxy(proxy_config(up.url, retry=0)) as px:
        got = await raw_post(f"{px.url}/chat/completions", chat())
    assert got.body.startswith(HELLO + LO)
    error = json.loads(frames(got.body)[-1][len(b"data: "):])["error"]
    assert error["code"] == "transport_error"
    assert error["message"] == ("the upstream connection failed mid-stream: upstream connection "
                                "reset after 312 bytes")


async def test_a_messages_reset_mid_stream_is_told_as_a_clean_sentence() -> None:
    body = messages_body(["Hel", "lo"], "truncated")
    async with scripted(Script([body], end="reset")) as up, \
            run_proxy(proxy_config(up.url, retry=0)) as px:
        got = await raw_post(f"{px.url}/messages", MESSAGES_REQUEST)
    last = frames(got.body)[-1]
    assert last.startswith(b"event: error\n")
    message = json.loads(last.split(b"data: ", 1)[1])["error"]["message"]
    assert message == ("transport_error: the upstream connection failed mid-stream: upstream "
                       f"connection reset after {len(body)} bytes")
    assert not any(word in message for word in INTERNALS)


async def test_the_record_keeps_what_aiohttp_said_for_the_operator(tmp_path: Any) -> None:
    from sseguard.store import open_store

    db = tmp_path / "r.db"
    async with scripted(Script([HELLO, LO], end="reset")) as up, \
            run_proxy(proxy_config(up.url, retry=0, store=str(db))) as px:
        await raw_post(f"{px.url}/chat/completions", chat())
    store = open_store(str(db))
    try:
        (record,) = list(store.read())
    finally:
        store.close()
    assert str(record.ending) == "transport_error"
    assert record.error is not None
    assert record.error.startswith("upstream connection reset after 312 bytes (")


# ── (b) Gemini's JSON-array framing stays one JSON array ───────────────────────────────────────────


async def _array_post(url: str, inject: str) -> Any:
    got = await raw_post(url, GEMINI_REQUEST, inject=inject,
                         headers={"x-goog-api-key": "AIza-test"})
    assert got.status == 200 and got.error is None
    return json.loads(got.body)  # fails unless the body is one whole JSON array


@pytest.mark.parametrize("inject", ["error_event", "empty"])
async def test_the_array_framing_ends_with_its_bracket_after_any_error_record(inject: str) -> None:
    async with run_chaos(ChaosConfig(pacing=Pacing(tokens=6, reasoning_tokens=3))) as upstream, \
            run_proxy(proxy_config(upstream.url, retry=0)) as px:
        root = px.url.rsplit("/v1", 1)[0]
        elements = await _array_post(f"{root}/v1beta/models/chaos-1:streamGenerateContent", inject)
    assert isinstance(elements, list) and "error" in elements[-1]
    assert all("error" not in e for e in elements[:-1])


async def test_a_forwarded_upstream_error_record_is_followed_by_the_closing_bracket() -> None:
    # The upstream's array breaks off right after its error element: the guard closes it.
    body = [b'[{"candidates": [{"content": {"parts": [{"text": "Hi"}], "role": "model"}, '
            b'"index": 0}]}', b',\r\n{"error": {"code": 500, "message": "engine crashed", '
                              b'"status": "INTERNAL"}}']
    script = Script(body, end="reset", headers={"Content-Type": "application/json"})
    async with scripted(script) as up, run_proxy(proxy_config(up.url, retry=0)) as px:
        got = await raw_post(f"{px.url}/models/m:streamGenerateContent", GEMINI_REQUEST)
    elements = json.loads(got.body)
    assert elements[-1] == {"error": {"code": 500, "message": "engine crashed", "status": "INTERNAL"}}
    assert elements[0]["candidates"][0]["content"]["parts"] == [{"text": "Hi"}]


async def test_an_array_that_broke_before_its_first_element_is_one_error_element() -> None:
    script = Script([b"["], end="reset", headers={"Content-Type": "application/json"})
    async with scripted(script) as up, run_proxy(proxy_config(up.url, retry=0)) as px:
        got = await raw_post(f"{px.url}/models/m:streamGenerateContent", GEMINI_REQUEST)
    (only,) = json.loads(got.body)
    assert (only["error"]["code"], only["error"]["status"]) == (502, "UNAVAILABLE")
    assert only["error"]["message"].startswith("transport_error: ")


# ── (c) non-streamed answers on the guarded endpoints are stall-timed ─────────────────────────────

HANG = ChaosConfig(options=FaultOptions(stall_then="hang"))


@pytest.mark.parametrize("api, path, body, expected", [
    ("chat", "/chat/completions", chat(stream=False),
     {"error": {"message": "the upstream sent nothing for 1 s (--stall-timeout); the answer was cut",
                "type": "server_error", "param": None, "code": 504}}),
    ("messages", "/messages", {**MESSAGES_REQUEST, "stream": False},
     {"type": "error", "error": {"type": "api_error", "message": "the upstream sent nothing for "
                                 "1 s (--stall-timeout); the answer was cut"}}),
    ("gemini", "/models/chaos-1:generateContent", GEMINI_REQUEST,
     {"error": {"code": 504, "message": "the upstream sent nothing for 1 s (--stall-timeout); the "
                "answer was cut", "status": "DEADLINE_EXCEEDED"}}),
])
async def test_a_stalled_non_streamed_answer_is_a_504_in_the_protocols_shape(
        api: str, path: str, body: dict[str, Any], expected: dict[str, Any]) -> None:
    timers = VirtualTimers()  # the upstream's silence lasts as long as the test says
    async with run_chaos(HANG) as upstream, \
            run_proxy(proxy_config(upstream.url, retry=0, stall_timeout=1.0)) as px:
        px.state.timers = timers
        client = asyncio.create_task(raw_post(
            f"{px.url}{path}", body, inject="stalled",
            headers={"anthropic-version": "2023-06-01"} if api == "messages" else None))
        await until(lambda: upstream.stats.requests == 1)
        await timers.stall(0.9)
        assert not client.done()  # short of the stall timeout
        await timers.stall(0.1)
        got = await asyncio.wait_for(client, 10)
        text = px.state.metrics.render().decode()
    assert got.status == 504
    assert json.loads(got.body) == expected
    assert 'sseguard_proxy_upstream_errors_total{kind="stalled"} 1.0' in text


async def test_a_non_streamed_answer_that_stalls_mid_body_is_a_504_not_a_cut_body() -> None:
    script = Script([b'{"id": "chatcmpl-1", "choices": '], end="hang",
                    headers={"Content-Type": "application/json"})
    timers = VirtualTimers()  # the silence lasts as long as the test says
    async with scripted(script) as up, \
            run_proxy(proxy_config(up.url, retry=0, stall_timeout=1.0)) as px:
        px.state.timers = timers
        client = asyncio.create_task(raw_post(f"{px.url}/chat/completions", chat(stream=False)))
        await asyncio.wait_for(up.hanging.wait(), 10)
        await timers.stall(1.0)
        got = await asyncio.wait_for(client, 10)
    assert got.status == 504 and got.error is None
    assert json.loads(got.body)["error"]["code"] == 504


async def test_a_non_streamed_answer_that_breaks_off_is_a_502_with_a_clean_sentence() -> None:
    script = Script([b'{"id": "chatcmpl-1", "choices": '], end="reset",
                    headers={"Content-Type": "application/json"})
    async with scripted(script) as up, run_proxy(proxy_config(up.url, retry=0)) as px:
        got = await raw_post(f"{px.url}/chat/completions", chat(stream=False))
    assert got.status == 502
    assert json.loads(got.body)["error"]["message"] == (
        "the upstream's answer broke off: upstream connection reset after 32 bytes")


async def test_a_healthy_non_streamed_answer_arrives_whole_with_its_length() -> None:
    async with run_chaos(ChaosConfig()) as upstream, \
            run_proxy(proxy_config(upstream.url, retry=0, stall_timeout=1.0)) as px:
        got = await raw_post(f"{px.url}/chat/completions", chat(stream=False))
    assert got.status == 200 and got.headers["Content-Length"] == str(len(got.body))
    assert json.loads(got.body)["object"] == "chat.completion"
