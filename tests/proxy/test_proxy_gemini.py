"""Gemini through the proxy: ``:streamGenerateContent`` is a stream by its path (no ``stream`` field),
served under ``/v1beta`` as well as ``/v1``, and guarded in both framings. The real google-genai SDK,
sync and async, pointed at the proxy with nothing else: a healthy stream reads, every bad ending raises
(it ends silently on some of them directly: ``tests/chaos/test_chaos_gemini.py``). ``retry=0``: the guard
alone, one upstream request per client request."""

from __future__ import annotations

import codecs
import json
import re

import httpx2
import pytest

from sseguard.chaos import ChaosConfig, FaultOptions, Pacing, run_chaos
from sseguard.core.contract import checker_for
from sseguard.core.contract.gemini import GEMINI, GeminiFrames
from sseguard.proxy import run_proxy
from support.gemini import both_ways, sdk_client
from support.proxy import proxy_config

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


#: How the strict transport's error names the guard's (or the upstream's) message.
STRICT_MESSAGE = {"truncated": "truncated: the upstream stopped after content without a finishReason",
                  "cut_mid_frame": "cut_mid_frame: the upstream body stopped in the middle of a record",
                  "error_event": "An internal error has occurred. Please retry.",
                  "empty": "empty: the upstream sent no record at all",
                  "transport_error": "transport_error: the upstream connection failed mid-stream"}


@pytest.mark.parametrize("fault", list(THROUGH_PROXY))
async def test_the_strict_transport_reads_the_guard_frame_as_the_error_it_is(fault: str) -> None:
    """google-genai with sseguard's strict transports, through the proxy: the guard frame (the error
    record, then its bare copy) is an ``error_event`` to the transport's own checker."""
    from sseguard.client import AsyncStrictTransport, StrictTransport

    options = {"http_options": {"headers": {"x-sseguard-inject": fault}}}
    async with run_chaos(ChaosConfig(pacing=FAST)) as upstream, \
            run_proxy(proxy_config(upstream.url, retry=0)) as px:
        sdk = sdk_client(px.url.rsplit("/v1", 1)[0], client_args={"transport": StrictTransport()},
                         async_client_args={"transport": AsyncStrictTransport()})
        outcomes = await both_ways(sdk, options)
    want = "silent" if fault == "none" else "StreamEndedBadly"
    assert [kind for kind, _ in outcomes] == [want] * 2
    for _, text in outcomes:
        assert text if fault == "none" else text.startswith(
            f"stream ended badly: error_event ({STRICT_MESSAGE[fault]}"), text


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
        upstream_error = await _post(url, "error_event")
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
    # The upstream's own error element is forwarded as it came, and the array closed after it.
    assert json.loads(upstream_error[2])[-1] == {"error": {
        "code": 500, "message": "An internal error has occurred. Please retry.", "status": "INTERNAL"}}


async def test_a_non_streamed_generate_content_is_relayed_as_is() -> None:
    async with run_chaos(ChaosConfig(pacing=FAST)) as upstream, \
            run_proxy(proxy_config(upstream.url, retry=0)) as px:
        root = px.url.rsplit("/v1", 1)[0]
        status, media, body = await _post(f"{root}/v1beta/models/chaos-1:generateContent", "none")
    assert (status, media.split(";")[0]) == (200, "application/json")
    assert json.loads(body)["candidates"][0]["finishReason"] == "STOP"


# ── the guard frame as the JS SDK in Gemini CLI reads it ────────────────────────────────────────────

SSE_REQUEST = "/v1beta/models/chaos-1:streamGenerateContent?alt=sse"
TRUNCATED_ERROR = (b'{"error": {"code": 502, "message": "truncated: the upstream stopped after content '
                   b'without a finishReason; the answer is incomplete", "status": "UNAVAILABLE"}}')
#: How the proxy's SSE body ends, literally: the error record, then the same object bare. An upstream
#: error record is forwarded as it came (its own code), then the same object bare.
SSE_ENDS = {
    "truncated": b"data: " + TRUNCATED_ERROR + b"\r\n\r\n" + TRUNCATED_ERROR + b"\r\n\r\n",
    "error_event": b'data: {"error":{"code":500,"message":"An internal error has occurred. Please '
                   b'retry.","status":"INTERNAL"}}\r\n\r\n{"error": {"code": 500, "message": "An '
                   b'internal error has occurred. Please retry.", "status": "INTERNAL"}}\r\n\r\n',
    "empty": b'data: {"error": {"code": 502, "message": "empty: the upstream sent no record at all", '
             b'"status": "UNAVAILABLE"}}\r\n\r\n{"error": {"code": 502, "message": "empty: the '
             b'upstream sent no record at all", "status": "UNAVAILABLE"}}\r\n\r\n',
}
_RECORD = re.compile(r"^\s*data: ([^\n\r\u2028\u2029]*)(?:\n\n|\r\r|\r\n\r\n)")


def js_sdk_reads(reads: list[bytes]) -> str:
    """What ``@google/genai`` (JS, as bundled in Gemini CLI 0.61: ``processStreamResponse``) does with
    a body arriving in these network reads, transcribed line by line so that CI, which has no node,
    keeps the property; ``interop/gemini_js_guard.mjs`` runs the real SDK. Per read: a read that is,
    whole, a JSON object with an ``error`` of code 400-599 throws ``ApiError``; ``data:`` records are
    cut off the buffer and yielded (an error record silently, as a response without candidates);
    whatever is left at the end throws."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    buffer = ""
    for read in reads:
        chunk = decoder.decode(read)
        try:
            obj = json.loads(chunk)
        except ValueError:
            obj = None
        if isinstance(obj, dict) and isinstance(obj.get("error"), dict):
            code = obj["error"].get("code")
            if isinstance(code, int) and 400 <= code < 600:
                return "ApiError"
        buffer += chunk
        while (match := _RECORD.match(buffer)) is not None:
            buffer = buffer[match.end():]
    return "Error: Incomplete JSON segment at the end" if buffer.strip() else "silent"


def _splits(body: bytes) -> dict[str, list[bytes]]:
    """The body in one read; the guard frame in a read of its own; its bare object in one of its own."""
    frame = body.rindex(b'data: {"error"')
    bare = body.index(b"\r\n\r\n", frame) + 4
    return {"one read": [body], "frame apart": [body[:frame], body[frame:]],
            "bare apart": [body[:bare], body[bare:]]}


async def test_the_sse_guard_frame_is_the_error_record_then_the_same_object_bare() -> None:
    async with run_chaos(ChaosConfig(pacing=FAST)) as upstream, \
            run_proxy(proxy_config(upstream.url, retry=0)) as px:
        url = px.url.rsplit("/v1", 1)[0] + SSE_REQUEST
        bodies = {fault: (await _post(url, fault))[2] for fault in ("none", *SSE_ENDS)}
    for fault, ending in SSE_ENDS.items():
        assert bodies[fault].endswith(ending), bodies[fault][-400:]
        # Our own checker (and the strict transport) reads the error record and ignores the bare line.
        checker = checker_for("gemini", REQUEST)
        checker.feed(bodies[fault])
        verdict = checker.close()
        assert (str(verdict.ending), verdict.findings) == ("error_event", ())
    # The JS SDK throws however the reads fall: the leftover bare object at the end, or, read alone,
    # the object itself; the record alone (the earlier guard frame) it passed on silently.
    for fault in SSE_ENDS:
        body = bodies[fault]
        assert {how: js_sdk_reads(reads) for how, reads in _splits(body).items()} == {
            "one read": "Error: Incomplete JSON segment at the end",
            "frame apart": "Error: Incomplete JSON segment at the end",
            "bare apart": "ApiError"}
        record_only = body[:body.index(b"\r\n\r\n", body.rindex(b'data: {"error"')) + 4]
        assert js_sdk_reads([record_only]) == "silent"
    healthy = bodies["none"]
    byte_by_byte = [healthy[i:i + 1] for i in range(len(healthy))]
    assert (js_sdk_reads([healthy]), js_sdk_reads(byte_by_byte)) == ("silent", "silent")


ERROR_429 = b'{"error": {"code": 429, "message": "Quota exceeded.", "status": "RESOURCE_EXHAUSTED"}}'


@pytest.mark.parametrize("raw,sent,out", [
    # SSE: the record as it came (a line before it included), then its bare copy.
    (b'data: {"error":{"code":429,"message":"Quota exceeded.","status":"RESOURCE_EXHAUSTED"}}\r\n\r\n',
     b'data: {"candidates": []}\r\n\r\n',
     b'data: {"error":{"code":429,"message":"Quota exceeded.","status":"RESOURCE_EXHAUSTED"}}\r\n\r\n'
     + ERROR_429 + b"\r\n\r\n"),
    (b'{"note": 1}\ndata: ' + ERROR_429 + b"\n\n", b"data: {}\n\n",
     b'{"note": 1}\ndata: ' + ERROR_429 + b"\n\n" + ERROR_429 + b"\r\n\r\n"),
    # The JSON array: the element as it came, then the ``]`` (first element, or a later one).
    (b"[" + ERROR_429, b"", b"[" + ERROR_429 + b"\n]"),
    (b",\r\n" + ERROR_429, b'[{"candidates": []}', b",\r\n" + ERROR_429 + b"\n]"),
])
def test_a_forwarded_upstream_error_is_followed_by_what_its_framing_needs(
        raw: bytes, sent: bytes, out: bytes) -> None:
    decoder = GeminiFrames()
    events = [e for e in decoder.feed(sent + raw) if b'"error"' in e.raw]
    assert len(events) == 1
    assert GEMINI.relay.forwarded(events[0], sent) == out
