"""The proxy's own answers to a Gemini client take Google's error shape (the protocol's descriptor
decides, no per-vendor flag): the real google-genai SDK raises ``ClientError`` on its 4xx and
``ServerError`` on its 502, through a real loopback proxy."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import pytest

from sseguard.chaos import ChaosConfig, run_chaos
from sseguard.proxy import run_proxy
from support.gemini import sdk_client
from support.proxy import proxy_config, raw_post

errors = pytest.importorskip("google.genai.errors")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ask(sdk: Any) -> Any:
    return sdk.models.generate_content(model="chaos-1", contents="Say something.")


async def test_google_genai_gets_the_proxys_502_as_a_google_error_and_raises_server_error() -> None:
    config = proxy_config(f"http://127.0.0.1:{_free_port()}/v1", retry=0)  # nothing listens there
    async with run_proxy(config) as px:
        with pytest.raises(errors.ServerError) as caught:
            await asyncio.to_thread(_ask, sdk_client(px.url.rsplit("/v1", 1)[0]))
    assert caught.value.code == 502 and caught.value.status == "UNAVAILABLE"
    assert "unreachable" in (caught.value.message or "")


async def test_google_genai_gets_the_proxys_413_as_a_google_error_and_raises_client_error() -> None:
    async with run_chaos(ChaosConfig()) as upstream, \
            run_proxy(proxy_config(upstream.url, max_body="64B")) as px:
        with pytest.raises(errors.ClientError) as caught:
            await asyncio.to_thread(_ask, sdk_client(px.url.rsplit("/v1", 1)[0]))
        assert upstream.stats.requests == 0
    # Google answers an over-size request INVALID_ARGUMENT ("Request payload size exceeds the limit").
    assert caught.value.code == 413 and caught.value.status == "INVALID_ARGUMENT"
    assert "--max-body" in (caught.value.message or "")


async def test_the_proxys_400_to_a_gemini_path_is_googles_error_object() -> None:
    async with run_chaos(ChaosConfig()) as upstream, run_proxy(proxy_config(upstream.url)) as px:
        base = px.url.rsplit("/v1", 1)[0]
        got = await raw_post(f"{base}/v1beta/models/chaos-1:streamGenerateContent?alt=sse",
                             b"{not json", headers={"x-goog-api-key": "AIza-test"})
    assert got.status == 400
    body = json.loads(got.body)
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "status"}
    assert body["error"]["code"] == 400 and body["error"]["status"] == "INVALID_ARGUMENT"
    assert body["error"]["message"].startswith("the request body is not valid JSON")
