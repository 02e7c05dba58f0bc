"""The proxy's own answers (400, 413, 502, 504), the pass-through of other /v1 paths, header rules, and
that it cannot be used as an open relay."""

from __future__ import annotations

import asyncio
import socket
import time

import aiohttp
import pytest

from sseguard.core.errors import ConfigError
from sseguard.proxy import ProxyConfig, run_proxy
from support.proxy import KEY, Script, chaos_proxy, chat, proxy_config, raw_post, scripted


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _openai_error(obj: dict[str, object], code: str) -> None:
    error = obj["error"]
    assert isinstance(error, dict)
    assert error["code"] == code and isinstance(error["message"], str) and error["message"]
    assert set(error) == {"message", "type", "param", "code"}


async def test_invalid_json_is_a_400_with_an_openai_error_body() -> None:
    async with chaos_proxy() as (srv, px), aiohttp.ClientSession() as session:
        for payload in (b"{not json", b"[1, 2]"):
            async with session.post(f"{px.url}/chat/completions", data=payload,
                                    headers={"Content-Type": "application/json"}) as resp:
                assert resp.status == 400
                _openai_error(await resp.json(), "invalid_json")
    assert srv.stats.requests == 0  # nothing reached the upstream


async def test_a_body_over_max_body_is_a_413_declared_or_chunked() -> None:
    async def chunked() -> object:
        for _ in range(10):
            yield b"x" * 1000

    async with chaos_proxy(max_body="4KiB") as (srv, px), aiohttp.ClientSession() as session:
        async with session.post(f"{px.url}/chat/completions", data=b"{" + b" " * 5000 + b"}") as resp:
            assert resp.status == 413
            _openai_error(await resp.json(), "request_too_large")
        async with session.post(f"{px.url}/chat/completions", data=chunked()) as resp:
            assert resp.status == 413
    assert srv.stats.requests == 0


async def test_an_unreachable_upstream_is_a_502_that_says_so() -> None:
    port = _free_port()  # nothing listens there
    # One attempt each (retries of an unreachable upstream: test_proxy_heal_retry).
    config = proxy_config(f"http://127.0.0.1:{port}/v1", retry=0)
    async with run_proxy(config) as px:
        for body in (chat(), chat(stream=False)):
            got = await raw_post(f"{px.url}/chat/completions", body)
            assert got.status == 502
            message = got.body.decode()
            assert f"127.0.0.1:{port}" in message and "unreachable" in message
        text = px.state.metrics.render().decode()
    assert 'sseguard_proxy_upstream_errors_total{kind="connect"} 2.0' in text


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "non_stream"])
async def test_an_upstream_that_sends_no_headers_in_time_is_a_504(stream: bool) -> None:
    async with scripted(Script([b"data: [DONE]\n\n"], before_headers=30.0)) as up, \
            run_proxy(proxy_config(up.url, timeout=1.0)) as px:
        start = time.monotonic()
        got = await raw_post(f"{px.url}/chat/completions", chat(stream=stream))
        took = time.monotonic() - start
    assert got.status == 504 and b"upstream_timeout" in got.body
    assert took < 20  # the proxy's 1 s, not the upstream's 30 s


async def test_an_upstream_http_error_reaches_the_client_unchanged() -> None:
    body = b'{"error": {"message": "slow down", "type": "rate_limit_error", "code": "rate"}}'
    script = Script([body], status=429, headers={"Content-Type": "application/json",
                                                 "Retry-After": "3"})
    waits: list[float] = []

    async def sleep(seconds: float) -> None:  # the proxy's retries wait on this, not on a clock
        waits.append(seconds)

    async with scripted(script) as up, run_proxy(proxy_config(up.url)) as px:
        px.state.sleep = sleep
        got = await raw_post(f"{px.url}/chat/completions", chat())
        text = px.state.metrics.render().decode()
    assert waits == [3.0, 3.0]  # --retry 2, each after the upstream's Retry-After
    assert got.status == 429 and got.body == body and got.headers["Retry-After"] == "3"
    assert 'sseguard_proxy_streams_total{api="chat",ending="http_error"} 1.0' in text


async def test_models_and_non_stream_completions_pass_through() -> None:
    async with chaos_proxy() as (_, px), aiohttp.ClientSession() as session:
        async with session.get(f"{px.url}/models", headers={"Authorization": f"Bearer {KEY}"}) as r:
            assert r.status == 200
            models = await r.json()
        async with session.post(f"{px.url}/chat/completions", json=chat(stream=False)) as r:
            assert r.status == 200 and r.headers["x-sseguard-fault"] == "none"
            completion = await r.json()
    assert models["data"][0]["id"] == "chaos-1"
    assert completion["object"] == "chat.completion" and completion["choices"][0]["message"]


async def test_headers_authorization_goes_upstream_and_hop_by_hop_headers_stay_behind() -> None:
    script = Script([b'{"ok": true}'], headers={"Content-Type": "application/json",
                                                "Keep-Alive": "timeout=5", "X-Custom": "kept",
                                                "Connection": "X-Secret-Hop",
                                                "X-Secret-Hop": "dropped"})
    async with scripted(script) as up, run_proxy(proxy_config(up.url)) as px, \
            aiohttp.ClientSession() as session, \
            session.get(f"{px.url}/embeddings?x=1%202", headers={
                "Authorization": f"Bearer {KEY}", "X-Trace": "t1", "Proxy-Authorization": "Basic zz",
                "Connection": "X-Drop-Me", "X-Drop-Me": "1", "TE": "trailers",
                "User-Agent": "agent/1"}) as resp:
        seen = up.requests[0]
        assert resp.status == 200 and resp.headers["X-Custom"] == "kept"
        assert "Keep-Alive" not in resp.headers and "X-Secret-Hop" not in resp.headers
    headers = {k.lower(): v for k, v in seen["headers"].items()}
    assert headers["authorization"] == f"Bearer {KEY}" and headers["x-trace"] == "t1"
    for hop in ("proxy-authorization", "x-drop-me", "te"):
        assert hop not in headers
    assert seen["path"] == "/v1/embeddings?x=1%202"
    assert headers["user-agent"] == "agent/1"  # the client's own, not the proxy's HTTP library


async def test_the_proxy_is_never_an_open_relay() -> None:
    script = Script([b'{"ok": true}'], headers={"Content-Type": "application/json"})
    async with scripted(script) as up, run_proxy(proxy_config(up.url)) as px:
        port = px.port
        statuses = {}
        for target in ("http://example.com/v1/models", "/v1/../admin", "/v1/%2e%2e/admin",
                       "/v1/a%2fb", "/v1//etc", "/admin", "/v1/%2E%2E%2fsecret", "/v1/a%5c..%5cb"):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(f"GET {target} HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n"
                         .encode())
            await writer.drain()
            head = await reader.read(200)
            writer.close()
            statuses[target] = int(head.split(b" ")[1])
    paths = [r["path"] for r in up.requests]
    # Only the absolute-form request reached the upstream, as the configured upstream's /v1/models.
    assert paths == ["/v1/models"] and up.requests[0]["host"] == up.url.split("/")[2]
    assert statuses.pop("http://example.com/v1/models") == 200
    assert all(status in (400, 404) for status in statuses.values()), statuses


@pytest.mark.parametrize("options, message", [
    ({"upstream": "ftp://x/v1"}, "--upstream"),
    ({"upstream": "http://u:p@h/v1"}, "credentials"),
    ({"listen": "nowhere"}, "--listen"),
    ({"listen": "127.0.0.1:99999"}, "port"),
    ({"on_bad_end": "explode"}, "--on-bad-end"),
    ({"repair_markup": "klingon"}, "--repair-markup"),
    ({"policy": "loose"}, "unknown policy"),
    ({"tolerate": "sometimes"}, "unknown ending"),
    ({"max_body": "lots"}, "--max-body"),
    ({"stall_timeout": 0}, "--stall-timeout"),
])
def test_unusable_options_are_config_errors_naming_the_flag(options: dict[str, object],
                                                            message: str) -> None:
    kwargs: dict[str, object] = {"upstream": "http://127.0.0.1:1/v1", **options}
    with pytest.raises(ConfigError, match=message.replace("-", r"\-")):
        ProxyConfig.from_options(**kwargs)  # type: ignore[arg-type]


def test_option_parsing_of_sizes_listen_addresses_and_upstreams() -> None:
    config = ProxyConfig.from_options(upstream="http://h:8000/", listen="9001", max_body="2MiB")
    assert str(config.upstream) == "http://h:8000/v1" and config.host == "127.0.0.1"
    assert config.port == 9001 and config.max_body == 2 * 1024 * 1024
    gemini = ProxyConfig.from_options(upstream="https://g.example/v1beta/openai/", listen="[::1]:0")
    assert str(gemini.upstream) == "https://g.example/v1beta/openai" and gemini.host == "::1"
    assert ProxyConfig.from_options(upstream="http://h/v1", store="none").store is None
