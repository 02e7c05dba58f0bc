"""The way to a stream's first chunk: the client's headers and first frame leave in one write, and
what the proxy keeps per app (routes, upstream URLs, per-key redactors) answers every request as
building it afresh would."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterable
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from hypothesis import given
from hypothesis import strategies as st
from multidict import CIMultiDict, CIMultiDictProxy

from sseguard._serve import serve_app
from sseguard.proxy.driver.app import STATE, make_proxy_app
from sseguard.proxy.driver.forward import request_headers, response_headers
from sseguard.proxy.driver.state import REDACTORS_KEPT, ProxyState
from support.proxy import KEY, Script, chat, proxy_config, scripted

CHAT_FIRST = b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'
CHAT_REST = [b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\n',
             b"data: [DONE]\n\n"]
MESSAGES_FIRST = (b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1",'
                  b'"type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,'
                  b'"usage":{"input_tokens":1,"output_tokens":0}}}\n\n')
MESSAGES_REST = [
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    b'"content_block":{"type":"text","text":""}}\n\n',
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"hi"}}\n\n',
    b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n',
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},'
    b'"usage":{"output_tokens":1}}\n\n',
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n',
]
MESSAGES_REQUEST = {"model": "m", "stream": True, "max_tokens": 16,
                    "messages": [{"role": "user", "content": "hi"}]}


@contextlib.asynccontextmanager
async def _proxy_with_spy(upstream: str, writes: list[bytes]) -> AsyncIterator[str]:
    """The proxy app, every byte it writes to a client's socket recorded write by write."""
    app = make_proxy_app(proxy_config(upstream))

    @web.middleware
    async def spy(request: web.Request, handler: Any) -> web.StreamResponse:
        transport: Any = request.transport
        write, writelines = transport.write, transport.writelines

        def one(data: bytes) -> None:
            writes.append(bytes(data))
            write(data)

        def many(chunks: Iterable[bytes]) -> None:
            parts = [bytes(c) for c in chunks]
            writes.append(b"".join(parts))
            writelines(parts)

        transport.write, transport.writelines = one, many
        resp: web.StreamResponse = await handler(request)
        return resp

    app.middlewares.append(spy)
    async with serve_app(app, "127.0.0.1", 0) as port:
        yield f"http://127.0.0.1:{port}/v1"


@pytest.mark.parametrize(("path", "request_body", "first", "rest"), [
    ("chat/completions", chat(), CHAT_FIRST, CHAT_REST),
    ("messages", MESSAGES_REQUEST, MESSAGES_FIRST, MESSAGES_REST),
])
async def test_headers_and_first_frame_leave_in_one_write(
        path: str, request_body: dict[str, Any], first: bytes, rest: list[bytes]) -> None:
    # The upstream holds everything after its first frame until the client has that frame: what
    # the proxy wrote by then it wrote for the first event alone.
    writes: list[bytes] = []
    release = asyncio.Event()
    async with scripted(Script(chunks=[first, release, *rest])) as up, \
            _proxy_with_spy(up.url, writes) as url, aiohttp.ClientSession() as session, \
            session.post(f"{url}/{path}", json=request_body,
                         headers={"Authorization": f"Bearer {KEY}"}) as resp:
        assert resp.status == 200
        got = await resp.content.readuntil(b"\n\n")
        while not got.endswith(first):
            got += await resp.content.readuntil(b"\n\n")
        release.set()
        body = got + await resp.content.read()
    assert body == first + b"".join(rest)
    # One socket write carried the status line, the headers and the first frame (chunked).
    assert writes[0].startswith(b"HTTP/1.1 200 OK\r\n")
    head, _, framed = writes[0].partition(b"\r\n\r\n")
    assert b"Transfer-Encoding: chunked" in head
    assert framed == f"{len(first):x}\r\n".encode() + first + b"\r\n"


async def test_each_query_reaches_the_upstream_on_the_same_path() -> None:
    # The upstream URL is kept per path and query: a second query on a path already seen is its own.
    async with scripted(Script(chunks=[b"data: {}\n\n"])) as up:
        app = make_proxy_app(proxy_config(up.url, retry=0))
        async with serve_app(app, "127.0.0.1", 0) as port, aiohttp.ClientSession() as session:
            base = f"http://127.0.0.1:{port}/v1beta/models/m:streamGenerateContent"
            for query in ("?alt=sse", "?alt=sse&x=1", "?alt=sse", ""):
                async with session.post(f"{base}{query}", json={"contents": []}) as resp:
                    await resp.read()
    assert [r["path"] for r in up.requests] == [
        "/v1beta/models/m:streamGenerateContent?alt=sse",
        "/v1beta/models/m:streamGenerateContent?alt=sse&x=1",
        "/v1beta/models/m:streamGenerateContent?alt=sse",
        "/v1beta/models/m:streamGenerateContent",
    ]


async def test_a_rejected_path_is_rejected_every_time() -> None:
    # Checks are kept per path; a path that fails them is not, and fails them again.
    answers = []
    async with scripted(Script()) as up:
        app = make_proxy_app(proxy_config(up.url))
        async with serve_app(app, "127.0.0.1", 0) as port:
            for _ in range(3):
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(b"POST /v1/%2e%2e/chat/completions HTTP/1.1\r\nHost: x\r\n"
                             b"Content-Length: 2\r\nConnection: close\r\n\r\n{}")
                answers.append(await reader.read())
                writer.close()
    assert up.requests == []
    for answer in answers:
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400 ")
        assert json.loads(body)["error"]["code"] == "invalid_path"


async def test_a_chunked_request_body_is_read_whole() -> None:
    # No Content-Length: the body arrives in pieces and is read to its end, not taken at once.
    async def pieces() -> AsyncIterator[bytes]:
        yield b'{"model": "chaos-1", "stream": true, '
        yield b'"messages": [{"role": "user", "content": "hi"}]}'

    async with scripted(Script(chunks=[CHAT_FIRST, *CHAT_REST])) as up:
        app = make_proxy_app(proxy_config(up.url))
        async with serve_app(app, "127.0.0.1", 0) as port, aiohttp.ClientSession() as session, \
                session.post(f"http://127.0.0.1:{port}/v1/chat/completions", data=pieces(),
                             headers={"Content-Type": "application/json"}) as resp:
            assert resp.status == 200
            assert await resp.read() == CHAT_FIRST + b"".join(CHAT_REST)
    assert up.requests[0]["body"] == (b'{"model": "chaos-1", "stream": true, '
                                      b'"messages": [{"role": "user", "content": "hi"}]}')


def _request(app: web.Application, authorization: str) -> web.Request:
    return make_mocked_request("POST", "/v1/chat/completions", app=app,
                               headers={"Authorization": authorization})


def test_a_clients_redactor_is_kept_per_key_and_removes_that_key() -> None:
    app = make_proxy_app(proxy_config("http://127.0.0.1:9/v1"))
    state: ProxyState = app[STATE]
    first = state.request_redactor(_request(app, "Bearer sk-client-one-0123456789"))
    again = state.request_redactor(_request(app, "Bearer sk-client-one-0123456789"))
    other = state.request_redactor(_request(app, "Bearer sk-client-two-0123456789"))
    assert again is first
    assert other is not first
    assert "sk-client-one-0123456789" not in first.text("key sk-client-one-0123456789 here")
    assert "sk-client-two-0123456789" not in other.text("key sk-client-two-0123456789 here")


def test_the_kept_redactors_are_bounded() -> None:
    app = make_proxy_app(proxy_config("http://127.0.0.1:9/v1"))
    state: ProxyState = app[STATE]
    for i in range(REDACTORS_KEPT + 10):
        state.request_redactor(_request(app, f"Bearer tok-{i:04d}-abcdefgh"))
    assert len(state._redactors) == REDACTORS_KEPT
    # The newest keys are the ones kept.
    assert ("Bearer tok-0000-abcdefgh", "tok-0000-abcdefgh") not in state._redactors
    last = REDACTORS_KEPT + 9
    assert (f"Bearer tok-{last:04d}-abcdefgh", f"tok-{last:04d}-abcdefgh") in state._redactors


async def test_the_active_streams_gauge_counts_streams_in_flight() -> None:
    # One process: the gauge reads the streams in flight when scraped (no inc/dec per stream).
    release = asyncio.Event()

    async def active(session: aiohttp.ClientSession, root: str) -> str:
        async with session.get(f"{root}/metrics") as resp:
            text = await resp.text()
        return next(line for line in text.splitlines()
                    if line.startswith("sseguard_proxy_active_streams "))

    async with scripted(Script(chunks=[CHAT_FIRST, release, *CHAT_REST])) as up:
        app = make_proxy_app(proxy_config(up.url))
        async with serve_app(app, "127.0.0.1", 0) as port, aiohttp.ClientSession() as session:
            root = f"http://127.0.0.1:{port}"
            assert await active(session, root) == "sseguard_proxy_active_streams 0.0"
            async with session.post(f"{root}/v1/chat/completions", json=chat()) as resp:
                assert await resp.content.readuntil(b"\n\n") == CHAT_FIRST
                assert await active(session, root) == "sseguard_proxy_active_streams 1.0"
                release.set()
                await resp.read()
            assert await active(session, root) == "sseguard_proxy_active_streams 0.0"


# ── the header filters (copy, then drop) keep exactly what a header-by-header filter keeps ────────

_REQUEST_DROPPED = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
                    "proxy-connection", "te", "trailer", "trailers", "transfer-encoding", "upgrade",
                    "host", "content-length", "expect"}
_RESPONSE_DROPPED = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
                     "proxy-connection", "te", "trailer", "trailers", "transfer-encoding", "upgrade",
                     "content-length", "content-encoding"}
_NAMES = st.sampled_from(["Content-Type", "content-type", "Authorization", "X-Trace", "x-trace",
                          "Connection", "connection", "Keep-Alive", "TE", "Host", "Content-Length",
                          "Content-Encoding", "Transfer-Encoding", "Upgrade", "Expect", "X-Custom",
                          "Proxy-Authorization", "Trailer", "Accept-Encoding"])
_VALUES = st.sampled_from(["a", "b", "close", "keep-alive", "X-Custom", "x-trace, Upgrade", " "])


def _kept(items: list[tuple[str, str]], dropped: set[str]) -> list[tuple[str, str]]:
    tokens = {t.strip().lower() for name, value in items if name.lower() == "connection"
              for t in value.split(",") if t.strip()}
    return [(n, v) for n, v in items if n.lower() not in dropped | tokens]


@given(st.lists(st.tuples(_NAMES, _VALUES), max_size=12))
def test_request_headers_keep_every_end_to_end_header_in_order(items: list[tuple[str, str]]) -> None:
    out = request_headers(CIMultiDictProxy(CIMultiDict(items)), identity=False)
    assert list(out.items()) == _kept(items, _REQUEST_DROPPED)


@given(st.lists(st.tuples(_NAMES, _VALUES), max_size=12))
def test_response_headers_keep_every_end_to_end_header_in_order(items: list[tuple[str, str]]) -> None:
    upstream = CIMultiDictProxy(CIMultiDict(items))
    assert list(response_headers(upstream, keep_framing=False).items()) == _kept(
        items, _RESPONSE_DROPPED)
    into: CIMultiDict[str] = CIMultiDict([("Server", "s")])
    response_headers(upstream, keep_framing=False, into=into)
    assert list(into.items()) == [("Server", "s"), *_kept(items, _RESPONSE_DROPPED)]
    framed = _RESPONSE_DROPPED - {"content-length", "content-encoding"}
    assert list(response_headers(upstream, keep_framing=True).items()) == _kept(items, framed)


def test_request_headers_ask_for_an_uncompressed_body() -> None:
    out = request_headers(CIMultiDictProxy(CIMultiDict([("Accept-Encoding", "gzip"), ("A", "1")])),
                          identity=True)
    assert list(out.items()) == [("Accept-Encoding", "identity"), ("A", "1")]
