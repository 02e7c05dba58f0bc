"""Gemini through the proxy: ``:streamGenerateContent`` is a stream by its path (no ``stream`` field),
served under ``/v1beta`` as well as ``/v1``, and guarded in both framings. The real google-genai SDK,
sync and async, pointed at the proxy with nothing else: a healthy stream reads, every bad ending raises
(it ends silently on some of them directly: ``tests/test_chaos_gemini.py``). ``retry=0``: the guard
alone, one upstream request per client request."""

from __future__ import annotations

import json

import httpx2
import pytest

from _gemini_support import both_ways, sdk_client
from _proxy_support import proxy_config
from sseguard.chaos import ChaosConfig, FaultOptions, Pacing, run_chaos
from sseguard.contract import checker_for
from sseguard.proxy import run_proxy

FAST = Pacing(tokens=6, reasoning_tokens=3)
REQUEST = {"contents": [{"role": "user", "parts": [{"text": "Say something."}]}]}
#: What the SDK raises through the proxy on each ending (literal; "silent" is a read answer).
THROUGH_PROXY = {
    "none": "silent",
    "truncated": "ServerError",
    "cut_mid_frame": "ServerError",
    "error_event": "ServerError",
    "empty": "ServerError",
    "transport_error": "ServerError",
}

#: How the exception's text begins: the guard frame's code and status, or the upstream's own.
FRAME = {"truncated": "502 UNAVAILABLE", "cut_mid_frame": "502 UNAVAILABLE",
         "error_event": "500 INTERNAL", "empty": "502 UNAVAILABLE",
         "transport_error": "502 UNAVAILABLE"}


@pytest.mark.parametrize("fault", list(THROUGH_PROXY))
async def test_google_genai_through_the_proxy_raises_on_every_bad_ending(fault: str) -> None:
    options = {"http_options": {"headers": {"x-sseguard-inject": fault}}}
    async with run_chaos(ChaosConfig(pacing=FAST)) as upstream, \
            run_proxy(proxy_config(upstream.url, retry=0)) as px:
        outcomes = await both_ways(sdk_client(px.url.rsplit("/v1", 1)[0]), options)
        assert upstream.stats.apis == {"gemini": 2}
    assert [kind for kind, _ in outcomes] == [THROUGH_PROXY[fault]] * 2
    for _, text in outcomes:
        # The guard's own frame; an upstream error record is forwarded as it came.
        assert text if fault == "none" else text.startswith(FRAME[fault]), text


async def _post(url: str, inject: str) -> tuple[int, str, bytes]:
    async with httpx2.AsyncClient() as client, client.stream(
            "POST", url, json=REQUEST, timeout=10,
            headers={"x-goog-api-key": "AIza-test", "x-sseguard-inject": inject}) as resp:
        return resp.status_code, resp.headers["content-type"], await resp.aread()


@pytest.mark.parametrize("mount", ["/v1", "/v1beta"])
async def test_the_array_framing_is_guarded_with_an_error_element_and_a_closing_bracket(
        mount: str) -> None:
    config = ChaosConfig(pacing=FAST, options=FaultOptions(stall_then="hang"))
    async with run_chaos(config) as upstream, run_proxy(proxy_config(upstream.url, retry=0)) as px:
        root = px.url.rsplit("/v1", 1)[0]
        url = f"{root}{mount}/models/chaos-1:streamGenerateContent"
        healthy = await _post(url, "none")
        truncated = await _post(url, "truncated")
        cut = await _post(url, "cut_mid_frame")
    status, media, body = healthy
    assert (status, media.split(";")[0]) == (200, "application/json")
    records = json.loads(body)  # forwarded whole: still one JSON array, finishReason last
    assert records[-1]["candidates"][0]["finishReason"] == "STOP"
    for _, _, bad in (truncated, cut):
        elements = json.loads(bad)  # the guard closed the array the upstream left unfinished
        error = elements[-1]["error"]
        assert (error["code"], error["status"]) == (502, "UNAVAILABLE")
        checker = checker_for("gemini", REQUEST)
        checker.feed(bad)
        assert str(checker.close().ending) == "error_event"
    assert json.loads(truncated[2])[-1]["error"]["message"].startswith("truncated")
    assert json.loads(cut[2])[-1]["error"]["message"].startswith("cut_mid_frame")


async def test_a_non_streamed_generate_content_is_relayed_as_is() -> None:
    async with run_chaos(ChaosConfig(pacing=FAST)) as upstream, \
            run_proxy(proxy_config(upstream.url, retry=0)) as px:
        root = px.url.rsplit("/v1", 1)[0]
        status, media, body = await _post(f"{root}/v1beta/models/chaos-1:generateContent", "none")
    assert (status, media.split(";")[0]) == (200, "application/json")
    assert json.loads(body)["candidates"][0]["finishReason"] == "STOP"
