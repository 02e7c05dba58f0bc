"""Unknown is not broken, through the proxy: a stream carrying kinds no table knows is relayed byte for
byte, passes, and is counted by protocol and kind in ``/metrics``; a finish reason no table names is
loud (the client gets the guard's error frame instead of the clean end)."""

from __future__ import annotations

import aiohttp

from sseguard.core.verdict import Ending, Verdict
from sseguard.proxy import run_proxy
from sseguard.proxy.driver.metrics import ProxyMetrics
from support.proxy import Script, proxy_config, raw_post, scripted

REQUEST = {"model": "m", "stream": True, "max_tokens": 64,
           "messages": [{"role": "user", "content": "Hi"}]}


def body(stop: str) -> bytes:
    return (
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":'
        b'"message","role":"assistant","model":"m","content":[],"stop_reason":null,'
        b'"usage":{"input_tokens":3,"output_tokens":1}}}\n\n'
        b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
        b'"content_block":{"type":"hologram","frames":3}}\n\n'
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"hologram_delta","frame":"AAAA"}}\n\n'
        b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
        b'event: telepathy\ndata: {"type":"telepathy"}\n\n'
        b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"'
        + stop.encode() + b'"},"usage":{"output_tokens":5}}\n\n'
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n')


async def test_unknown_kinds_pass_byte_for_byte_and_are_counted_by_protocol_and_kind() -> None:
    async with scripted(Script([body("end_turn")])) as up, \
            run_proxy(proxy_config(up.url, retry=0)) as px:
        for _ in range(2):
            got = await raw_post(f"{px.url}/messages", REQUEST)
            assert (got.status, got.error, got.body) == (200, None, body("end_turn"))
        async with aiohttp.ClientSession() as session, \
                session.get(f"{px.root}/metrics") as resp:
            text = await resp.text()
    assert 'sseguard_proxy_streams_total{api="messages",ending="complete"} 2.0' in text
    for kind in ("block:hologram", "delta:hologram_delta", "telepathy"):
        assert f'sseguard_proxy_unknown_kinds_total{{api="messages",kind="{kind}"}} 2.0' in text
    assert "sseguard_proxy_findings_total{" not in text


async def test_a_stop_reason_no_table_names_is_loud_not_a_finished_answer() -> None:
    async with scripted(Script([body("a_reason_from_tomorrow")])) as up, \
            run_proxy(proxy_config(up.url, retry=0)) as px:
        got = await raw_post(f"{px.url}/messages", REQUEST)
    assert got.body != body("a_reason_from_tomorrow")
    assert b'event: message_stop' not in got.body
    assert b"event: error" in got.body and b"a_reason_from_tomorrow" in got.body


CHAT_REQUEST = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "Hi"}]}
CHAT_BODY = (
    b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m",'
    b'"choices":[{"index":0,"delta":{"role":"assistant","content":"Hi","foo":{"bar":[1,2]}},'
    b'"logprobs":null,"finish_reason":null}],"x_vendor":"v"}\n\n'
    b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m",'
    b'"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n")


async def test_a_chat_delta_field_no_table_knows_passes_byte_for_byte_and_is_counted() -> None:
    async with scripted(Script([CHAT_BODY])) as up, run_proxy(proxy_config(up.url, retry=0)) as px:
        got = await raw_post(f"{px.url}/chat/completions", CHAT_REQUEST)
        assert (got.status, got.error, got.body) == (200, None, CHAT_BODY)
        async with aiohttp.ClientSession() as session, \
                session.get(f"{px.root}/metrics") as resp:
            text = await resp.text()
    assert 'sseguard_proxy_streams_total{api="chat",ending="complete"} 1.0' in text
    for kind in ("delta.foo", "chunk.x_vendor"):
        assert f'sseguard_proxy_unknown_kinds_total{{api="chat",kind="{kind}"}} 1.0' in text
    assert "sseguard_proxy_findings_total{" not in text


def test_unknown_kinds_in_metrics_stay_bounded_per_protocol() -> None:
    """A misbehaving upstream's endless new names reach /metrics as at most 64 series a protocol
    (and none longer than 120 characters); the rest count under "other"."""
    metrics = ProxyMetrics()
    for i in range(100):
        metrics.stream_ended(Verdict(Ending.COMPLETE, api="chat", unknown_kinds=(f"delta.x{i}",)),
                             client_gone=False, ttft_s=None, duration_s=0.1)
    metrics.stream_ended(Verdict(Ending.COMPLETE, api="messages", unknown_kinds=("block:" + "y" * 121,)),
                         client_gone=False, ttft_s=None, duration_s=0.1)
    metrics.stream_ended(Verdict(Ending.COMPLETE, api="chat", unknown_kinds=("delta.x3",)),
                         client_gone=False, ttft_s=None, duration_s=0.1)
    text = metrics.render().decode()
    lines = [line for line in text.splitlines() if line.startswith("sseguard_proxy_unknown_kinds_total{")]
    chat = [line for line in lines if 'api="chat"' in line]
    assert len(chat) == 65  # delta.x0 … delta.x63, then "other"
    assert 'sseguard_proxy_unknown_kinds_total{api="chat",kind="other"} 36.0' in lines
    assert 'sseguard_proxy_unknown_kinds_total{api="chat",kind="delta.x3"} 2.0' in lines
    assert 'sseguard_proxy_unknown_kinds_total{api="chat",kind="delta.x64"} 1.0' not in lines
    assert lines.count('sseguard_proxy_unknown_kinds_total{api="messages",kind="other"} 1.0') == 1
