"""The proxy's front door under hostile requests (issue 50): whatever head and body a client sends —
nested 200,000 deep, too large, in another encoding, with duplicate keys, lone surrogates or numbers
out of any float's range —, on a guarded or a pass-through route, the answer is well formed: never a
5xx, never a traceback in the log, and a refusal of the proxy's own is a 400 (413 for size) in the
protocol's own error shape. Real proxy, real chaos upstream, loopback only."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import logging
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sseguard.chaos import ChaosConfig
from sseguard.chaos.server import run_chaos_in_thread
from sseguard.proxy import run_proxy
from support.proxy import KEY, Script, in_thread, proxy_config, scripted

MAX_BODY = 1024 * 1024  # the proxy's --max-body here: a body above it is refused, 413

#: (method, path under the server, protocol): the guarded streaming endpoints of every protocol,
#: the same endpoints asked for no stream (relayed after the body is read), and paths relayed as is.
ROUTES = [
    ("POST", "/v1/chat/completions", "chat"),
    ("POST", "/v1/responses", "responses"),
    ("POST", "/v1/messages", "messages"),
    ("POST", "/v1beta/models/chaos-1:streamGenerateContent?alt=sse", "gemini"),
    ("POST", "/v1/embeddings", "passthrough"),
    ("GET", "/v1/models", "passthrough"),
]

#: Keys a request body of some protocol holds, drawn with replacement so that objects repeat them.
KEYS = ["model", "stream", "messages", "input", "contents", "tools", "max_tokens", "role",
        "content", "text", "parts", "metadata", "a"]
#: Numbers JSON can write that no float or 64-bit integer holds, or that decoders disagree on.
NUMBERS = ["0", "-0", "1", "1e999", "-1e999", "1e-999", "1" + "0" * 400, "-" + "9" * 400, "0.1e309",
           "123456789012345678901234567890", "1.5"]
#: Strings with lone surrogates, NUL, escapes, markup.
STRINGS = ['""', '"x"', '"\\ud800"', '"\\udfff\\ud800"', '"\\u0000"', '"caf\\u00e9"', '"a\\nb"',
           '"' + "é" * 50 + '"', '"<tool_call>{"']
#: What JSON cannot write (a decoder's mistake to accept): drawn rarely, most bodies stay JSON.
NOT_JSON = ["NaN", "Infinity", "-Infinity", "01", "1.", '"\\x"', '"unterminated', "'single'"]
DEPTHS = [0, 0, 0, 0, 0, 1, 50, 500, 999, 1000, 1001, 5000, 200_000]


def _nested(depth: int, inner: str, kind: str) -> str:
    if kind == "array":
        return "[" * depth + inner + "]" * depth
    return '{"a":' * depth + inner + "}" * depth


json_text = st.recursive(
    st.sampled_from((NUMBERS + STRINGS + ["true", "false", "null", "{}", "[]"]) * 3 + NOT_JSON),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda xs: "[" + ",".join(xs) + "]"),
        st.lists(st.tuples(st.sampled_from(KEYS), inner), max_size=5).map(
            lambda kv: "{" + ",".join(f'"{k}":{v}' for k, v in kv) + "}")),
    max_leaves=12)


#: Where the hostile value goes in an otherwise plausible request: a field the endpoint reads, one
#: it passes on unread, or the text of the user's message.
FIELDS = ["messages", "input", "contents", "tools", "max_tokens", "model", "metadata", "x_extra",
          "content"]


@st.composite
def bodies(draw: Any) -> bytes:
    """A request body: mostly a plausible request with one hostile part, else anything JSON can
    write; nested to a drawn depth, sometimes padded past the limit, re-encoded, cut or trailed."""
    value = _nested(draw(st.sampled_from(DEPTHS)), draw(json_text),
                    draw(st.sampled_from(["array", "object"])))
    if draw(st.integers(0, 3)):
        field = draw(st.sampled_from(FIELDS))
        stream = draw(st.sampled_from(["true", "true", "false", '"yes"', 'true,"stream":false']))
        content = value if field == "content" else '"hi"'
        text = (f'{{"model":"chaos-1","stream":{stream},"max_tokens":16,"messages":[{{"role":'
                f'"user","content":{content}}}],"input":"hi","contents":[{{"parts":[{{"text":'
                f'"hi"}}]}}]' + ("" if field == "content" else f',"{field}":{value}') + "}")
    else:
        text = value
    pad = draw(st.sampled_from([0] * 8 + [100_000, MAX_BODY + 1]))
    if pad:
        text = text[:-1] + ',"pad":"' + "x" * pad + '"}' if text.endswith("}") else text + " " * pad
    encoding = draw(st.sampled_from(["utf-8"] * 6 + ["utf-8-sig", "utf-16", "utf-32", "latin-1"]))
    raw = text.encode(encoding, errors="surrogatepass" if encoding.startswith("utf-") else
                      "replace")
    cut = draw(st.sampled_from([None] * 8 + [0, 1, 7]))
    if cut is not None:
        raw = raw[: len(raw) // 2 + cut]
    if not draw(st.integers(0, 7)):
        raw += draw(st.binary(min_size=1, max_size=8))
    return raw


heads = st.fixed_dictionaries({}, optional={
    "Content-Type": st.sampled_from(["application/json", "text/plain", "application/x-www-form-urlencoded",
                                     "application/json; charset=utf-16", "multipart/form-data; boundary=z",
                                     ""]),
    "Content-Encoding": st.sampled_from(["gzip", "br", "deflate", "identity", "x-unknown"]),
    "Upgrade": st.just("h2c"),
    "HTTP2-Settings": st.just("AAMAAABkAARAAAAAAAIAAAAA"),
    "Connection": st.sampled_from(["Upgrade, HTTP2-Settings", "keep-alive", "close, x-foo"]),
    "Expect": st.just("100-continue"),
    "anthropic-version": st.sampled_from(["2023-06-01", "0000-00-00", ""]),
    "x-goog-api-key": st.just(KEY),
    "Accept-Encoding": st.sampled_from(["gzip", "br, zstd", "identity;q=0"]),
})


class _Errors(logging.Handler):
    """Every record at ERROR or above, from any logger, logged on the proxy's thread (the upstream
    serves from a thread of its own): a traceback in the proxy's log is one of them."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []
        self.thread: int | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread:
            self.records.append(record)


@pytest.fixture(scope="module")
def front_door() -> Iterator[tuple[str, _Errors]]:
    errors = _Errors()

    @contextlib.asynccontextmanager
    async def proxy(upstream: str) -> AsyncIterator[str]:
        errors.thread = threading.get_ident()
        async with run_proxy(proxy_config(upstream, max_body=MAX_BODY, retry=0)) as px:
            yield px.url.removesuffix("/v1")

    root = logging.getLogger()
    root.addHandler(errors)
    try:
        with run_chaos_in_thread(ChaosConfig()) as up, in_thread(lambda: proxy(up.url)) as base:
            yield base, errors
    finally:
        root.removeHandler(errors)


async def _send(url: str, method: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes,
                                                                                     dict[str, str]]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60),
                                     auto_decompress=False) as session, \
            session.request(method, url, data=body, headers=headers,
                            skip_auto_headers=["Content-Type"]) as resp:
        return resp.status, await resp.read(), dict(resp.headers)


def _is_error_shape(body: bytes, proto: str) -> bool:
    """A JSON error body in the protocol's own shape (docs/design/vocabulary.md)."""
    try:
        obj = json.loads(body)
    except ValueError:
        return False
    if not isinstance(obj, dict) or not isinstance(obj.get("error"), dict):
        return False
    if proto == "messages":
        return obj.get("type") == "error" and isinstance(obj["error"].get("message"), str)
    return isinstance(obj["error"].get("message"), str)


def _check(status: int, body: bytes, headers: dict[str, str], proto: str) -> None:
    assert status < 500, (status, body[:300])
    if headers.get("x-should-retry") == "false" and status in (400, 413):  # the proxy's own refusal
        assert _is_error_shape(body, "chat" if proto == "passthrough" else proto), body[:300]


@settings(max_examples=400, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(route=st.sampled_from(ROUTES), body=bodies(), head=heads)
def test_any_head_and_body_gets_a_well_formed_answer_and_no_traceback(
        front_door: tuple[str, _Errors], route: tuple[str, str, str], body: bytes,
        head: dict[str, str]) -> None:
    base, errors = front_door
    method, path, proto = route
    headers = {"Authorization": f"Bearer {KEY}", "x-api-key": KEY, **head}
    before = len(errors.records)
    status, answer, got = asyncio.run(_send(base + path, method, body, headers))
    _check(status, answer, got, proto)
    logged = [errors.format(r) for r in errors.records[before:]]
    assert not logged, logged


DEEP = b'{"model":"chaos-1","stream":true,"messages":' + b"[" * 200_000 + b"]" * 200_000 + b"}"


@pytest.mark.parametrize("path,proto", [(p, proto) for m, p, proto in ROUTES if proto != "passthrough"])
def test_a_body_nested_200000_deep_is_a_400_in_the_protocols_own_shape(
        front_door: tuple[str, _Errors], path: str, proto: str) -> None:
    # issue 50: aiohttp's bare 500 and a RecursionError traceback before
    base, errors = front_door
    before = len(errors.records)
    status, answer, got = asyncio.run(_send(base + path, "POST", DEEP,
                                            {"Authorization": f"Bearer {KEY}", "x-api-key": KEY,
                                             "Content-Type": "application/json"}))
    assert status == 400 and got["x-should-retry"] == "false"
    assert _is_error_shape(answer, proto), answer
    assert b"nests arrays or objects too deeply" in answer
    assert errors.records[before:] == []


async def test_http2_settings_stays_behind_with_the_other_hop_by_hop_headers() -> None:
    # issue 50: HTTP2-Settings (sent with Upgrade: h2c, RFC 7540 §3.2.1) reached the upstream
    async with scripted(Script([b'{"ok": true}'], headers={"Content-Type": "application/json"})
                        ) as up, run_proxy(proxy_config(up.url)) as px, \
            aiohttp.ClientSession() as session:
        for connection in ("Upgrade, HTTP2-Settings", "Upgrade", None):
            headers = {"Authorization": f"Bearer {KEY}", "Upgrade": "h2c",
                       "HTTP2-Settings": "AAMAAABkAARAAAAAAAIAAAAA"}
            if connection is not None:
                headers["Connection"] = connection
            async with session.get(f"{px.url}/models", headers=headers) as resp:
                assert resp.status == 200
    assert len(up.requests) == 3
    for seen in up.requests:
        names = {k.lower() for k in seen["headers"]}
        assert "http2-settings" not in names and "upgrade" not in names, names


async def test_a_gzip_body_reaches_a_guarded_stream_decoded_and_a_relayed_path_as_sent() -> None:
    # The server used to decompress every body itself: the guarded request went on with its
    # Content-Encoding (no longer true), a relayed one with its Content-Length (no longer true).
    plain = json.dumps({"model": "m", "stream": True, "messages": [
        {"role": "user", "content": "hi"}]}).encode()
    packed = gzip.compress(plain)
    script = Script([b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
                     b'"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}'
                     b"\n\ndata: [DONE]\n\n"])
    async with scripted(script) as up, run_proxy(proxy_config(up.url)) as px:
        headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json",
                   "Content-Encoding": "gzip"}
        status, _, _ = await _send(f"{px.url}/chat/completions", "POST", packed, headers)
        assert status == 200
        status, _, _ = await _send(f"{px.url}/embeddings", "POST", packed, headers)
        assert status == 200
    guarded, relayed = up.requests
    assert json.loads(guarded["body"]) == json.loads(plain)
    assert "content-encoding" not in {k.lower() for k in guarded["headers"]}
    assert relayed["body"] == packed and relayed["headers"]["Content-Encoding"] == "gzip"
    assert relayed["headers"]["Content-Length"] == str(len(packed))


# mtime=0: gzip writes the time into its header, and a test id that differs between two xdist
# workers' collections stops the whole run.
@pytest.mark.parametrize("coding,body,status", [
    ("gzip", b"not gzip at all", 400), ("deflate", b"\x00\x01", 400), ("br", b"\x00", 415),
    ("gzip", gzip.compress(b"{" * 10, mtime=0)[:-4], 400),
    # a small body that inflates past --max-body: refused as too large, never held whole
    ("gzip", gzip.compress(b" " * (MAX_BODY + 10), mtime=0), 413),
], ids=["not-gzip", "bad-deflate", "br", "cut-gzip", "gzip-bomb"])
def test_a_body_its_content_encoding_does_not_describe_is_refused_in_the_protocols_shape(
        front_door: tuple[str, _Errors], coding: str, body: bytes, status: int) -> None:
    base, errors = front_door
    before = len(errors.records)
    got, answer, headers = asyncio.run(_send(
        base + "/v1/messages", "POST", body, {"x-api-key": KEY, "Content-Encoding": coding,
                                              "Content-Type": "application/json"}))
    assert got == status and headers["x-should-retry"] == "false"
    assert _is_error_shape(answer, "messages"), answer
    assert errors.records[before:] == []


HEADS = {
    "content-length-too-short": b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                                b"Content-Length: 3\r\n\r\n{}}}}}}",
    "content-length-not-a-number": b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                                   b"Content-Length: abc\r\n\r\n{}",
    "length-and-chunked": b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                          b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "broken-chunk-size": b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
    "broken-chunk-relayed": b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\n"
                            b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n",
    "header-without-colon": b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nBad\r\n\r\n",
    "header-too-long": b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-A: " + b"a" * 20_000 + b"\r\n\r\n",
    "unknown-version": b"POST /v1/chat/completions HTTP/9.9\r\nHost: x\r\n\r\n",
    "bare-newlines": b"POST /v1/chat/completions HTTP/1.1\nHost: x\nContent-Length: 2\n\n{}",
    "http2-preface": b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    "unknown-expectation": b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\n"
                           b"Content-Length: 2\r\n\r\n{}",
}


async def _raw(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        return await asyncio.wait_for(reader.read(200), 30)
    finally:
        writer.close()


@pytest.mark.parametrize("name", list(HEADS))
def test_a_head_that_does_not_parse_is_a_4xx_and_one_log_line_not_a_traceback(
        front_door: tuple[str, _Errors], name: str) -> None:
    base, errors = front_door
    before = len(errors.records)
    head = asyncio.run(_raw(int(base.rsplit(":", 1)[1]), HEADS[name]))
    status = int(head.split(b" ", 2)[1])
    assert 400 <= status < 500, head
    assert errors.records[before:] == []
