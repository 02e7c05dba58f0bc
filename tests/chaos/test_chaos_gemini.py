"""The chaos upstream's Gemini routes over real loopback sockets: every fault it injects gives exactly
its verdict from the Gemini checker, whole and byte by byte; the v1, v1beta and Vertex paths, streamed
and not; validation and errors in Google's shape; and the real google-genai SDK against it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest

from _chaos_support import fetch, recheck_byte_by_byte
from sseguard.chaos import ChaosConfig, Fault, FaultOptions, Pacing, run_chaos
from sseguard.core.contract import detect_api
from sseguard.core.verdict import Ending, FindingKind
from support.gemini import both_ways, sdk_client

API = "gemini"
FAST = Pacing(tokens=6, reasoning_tokens=3)
OPTIONS = FaultOptions(stall_then="hang", hang_max_s=30)
STALL_READ_TIMEOUT = 2.0
KEY = {"x-goog-api-key": "AIza-test"}
WEATHER: dict[str, Any] = {"name": "get_weather", "description": "Weather.", "parameters": {
    "type": "OBJECT", "properties": {"location": {"type": "STRING"}, "days": {"type": "INTEGER"}},
    "required": ["location"]}}
VERTEX = "/v1/projects/p1/locations/us-central1/publishers/google/models/chaos-1"

E, F = Ending, FindingKind
#: What a strict Gemini checker must report for each fault the server carries on this protocol —
#: written here, not taken from the chaos package's own fault table.
TABLE: dict[Fault, tuple[Ending, frozenset[FindingKind]]] = {
    Fault.TRUNCATED: (E.TRUNCATED, frozenset()),
    Fault.CUT_MID_FRAME: (E.CUT_MID_FRAME, frozenset()),
    Fault.TRANSPORT_ERROR: (E.TRANSPORT_ERROR, frozenset()),
    Fault.ERROR_EVENT: (E.ERROR_EVENT, frozenset()),
    Fault.HTTP_ERROR: (E.HTTP_ERROR, frozenset()),
    Fault.STALLED: (E.STALLED, frozenset()),
    Fault.EMPTY: (E.EMPTY, frozenset()),
    Fault.MARKUP_LEAK: (E.COMPLETE, frozenset({F.MARKUP_LEAK})),
    Fault.TOOL_UNDEFINED_FUNCTION: (E.COMPLETE, frozenset({F.TOOL_UNDEFINED_FUNCTION})),
    Fault.TOOL_ARGS_SCHEMA_MISMATCH: (E.COMPLETE, frozenset({F.TOOL_ARGS_SCHEMA_MISMATCH})),
    Fault.MALFORMED_CLOSING_TAG: (E.COMPLETE, frozenset({F.MARKUP_LEAK})),
    Fault.BAD_CHUNK_JSON: (E.COMPLETE, frozenset({F.BAD_CHUNK_JSON})),
    Fault.CHUNK_SCHEMA: (E.COMPLETE, frozenset({F.CHUNK_SCHEMA})),
    Fault.MISSING_USAGE: (E.COMPLETE, frozenset({F.MISSING_USAGE})),
    Fault.ID_CHANGED: (E.COMPLETE, frozenset({F.ID_CHANGED})),
    Fault.EVENT_ORDER: (E.COMPLETE, frozenset({F.EVENT_ORDER})),
    Fault.GARBLED: (E.COMPLETE, frozenset()),  # corrupted text in a perfect stream
}
#: Faults a Gemini stream cannot carry: calls arrive whole with their arguments as an object, there
#: is no sentinel, no chat finish_reason, no sequence numbers, items or *.done events.
SKIPPED = [Fault.TOOL_ARGS_INVALID_JSON, Fault.TOOL_CALL_UNTERMINATED, Fault.NO_DONE,
           Fault.NO_FINISH, Fault.FINISH_REASON_MISMATCH, Fault.FRAME_AFTER_DONE,
           Fault.SEQUENCE_GAP, Fault.BLOCK_UNTERMINATED, Fault.DONE_MISMATCH]
NEEDS_TOOLS = {Fault.TOOL_UNDEFINED_FUNCTION, Fault.TOOL_ARGS_SCHEMA_MISMATCH}


def gemini_request(*, tools: bool = False, thoughts: bool = False,
                   text: str = "Say something.") -> dict[str, Any]:
    req: dict[str, Any] = {"contents": [{"role": "user", "parts": [{"text": text}]}]}
    if tools:
        req["tools"] = [{"functionDeclarations": [WEATHER]}]
    if thoughts:
        req["generationConfig"] = {"thinkingConfig": {"thinkingBudget": 1024,
                                                      "includeThoughts": True}}
    return req


def stream_url(base: str, mount: str = "/v1beta", *, sse: bool = True) -> str:
    query = "?alt=sse" if sse else ""
    return f"{base}{mount}/models/chaos-1:streamGenerateContent{query}"


#: How each framing's body begins, and its Content-Type (literal: what Google's server sends).
FRAMINGS = {"sse": (True, b"data: {", "text/event-stream"),
            "array": (False, b"[{", "application/json")}


@pytest.fixture
async def client() -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient(headers=KEY) as c:
        yield c


def root(url: str) -> str:
    return url.rsplit("/v1", 1)[0]


def test_the_table_covers_every_fault() -> None:
    assert set(TABLE) | set(SKIPPED) == set(Fault)


@pytest.mark.parametrize("framing", list(FRAMINGS))
@pytest.mark.parametrize("fault", list(TABLE))
async def test_each_fault_gives_exactly_its_verdict_whole_and_byte_by_byte(
        fault: Fault, framing: str, client: httpx2.AsyncClient) -> None:
    sse, head, media = FRAMINGS[framing]
    config = ChaosConfig(seed=11, pacing=FAST, options=OPTIONS, faults={fault: 1.0})
    request = gemini_request(tools=fault in NEEDS_TOOLS, thoughts=True)
    async with run_chaos(config) as server:
        out = await fetch(client, stream_url(root(server.url), sse=sse), request, api=API,
                          read_timeout=STALL_READ_TIMEOUT)
        assert out.headers["x-sseguard-fault"] == str(fault)
        assert server.stats.injected(fault) == 1 and server.stats.apis == {"gemini": 1}
    ending, findings = TABLE[fault]
    for verdict in (out.verdict, recheck_byte_by_byte(API, request, out)):
        assert verdict.api == API
        assert verdict.ending is ending, out.body[-600:]
        assert verdict.finding_kinds == findings, verdict.findings
    if out.body and fault is not Fault.HTTP_ERROR:
        assert out.body.startswith(head)
        assert out.headers["content-type"].startswith(media)


async def test_a_healthy_array_body_is_one_json_array_of_records(client: httpx2.AsyncClient) -> None:
    async with run_chaos(ChaosConfig(seed=3, pacing=FAST)) as server:
        out = await fetch(client, stream_url(root(server.url), sse=False), gemini_request(), api=API)
    records = json.loads(out.body)
    assert out.body.endswith(b"\r\n]") and out.verdict.ending is Ending.COMPLETE
    assert [r["candidates"][0].get("finishReason") for r in records][-1] == "STOP"
    assert all(r["candidates"][0].get("finishReason") is None for r in records[:-1])
    assert {r["responseId"] for r in records} == {records[0]["responseId"]}


@pytest.mark.parametrize("fault", SKIPPED)
async def test_faults_a_gemini_stream_cannot_carry_are_skipped(
        fault: Fault, client: httpx2.AsyncClient) -> None:
    async with run_chaos(ChaosConfig(pacing=FAST, faults={fault: 1.0})) as server:
        out = await fetch(client, stream_url(root(server.url)), gemini_request(), api=API)
        assert server.stats.skipped[str(fault)] == 1
    assert out.headers["x-sseguard-fault"] == "none"
    assert out.verdict.ending is Ending.COMPLETE and out.verdict.findings == ()


async def test_every_mount_and_the_vertex_path_serve_streams_and_whole_answers(
        client: httpx2.AsyncClient) -> None:
    async with run_chaos(ChaosConfig(pacing=FAST)) as server:
        base = root(server.url)
        for url in (stream_url(base, "/v1"), stream_url(base, "/v1beta"),
                    f"{base}{VERTEX}:streamGenerateContent?alt=sse"):
            out = await fetch(client, url, gemini_request(tools=True, thoughts=True), api=API)
            assert out.headers["content-type"].startswith("text/event-stream")
            assert (out.verdict.ending, out.verdict.findings) == (Ending.COMPLETE, ())
            assert detect_api(out.body) == "gemini" and b"\r\n\r\n" in out.body
            assert b'"thought":true' in out.body and b'"functionCall"' in out.body
            assert out.verdict.message["modelVersion"] == "chaos-1"
        for url in (f"{base}/v1beta/models/chaos-1:generateContent",
                    f"{base}{VERTEX}:generateContent"):
            resp = await client.post(url, json=gemini_request())
            body = resp.json()
            assert resp.status_code == 200 and resp.headers["content-type"].startswith(
                "application/json")
            assert body["candidates"][0]["finishReason"] == "STOP"
            assert body["candidates"][0]["content"]["parts"][0]["text"]
            assert body["usageMetadata"]["candidatesTokenCount"] > 0


async def test_error_event_is_an_error_record_in_googles_shape(client: httpx2.AsyncClient) -> None:
    async with run_chaos(ChaosConfig(pacing=FAST)) as server:
        out = await fetch(client, stream_url(root(server.url)), gemini_request(), api=API,
                          inject="error_event")
    last = out.body.rstrip(b"\r\n").rsplit(b"\r\n\r\n", 1)[-1]
    assert json.loads(last.removeprefix(b"data: ")) == {"error": {
        "code": 500, "message": "An internal error has occurred. Please retry.",
        "status": "INTERNAL"}}
    assert out.verdict.ending is Ending.ERROR_EVENT


@pytest.mark.parametrize(("status", "name"), [(429, "RESOURCE_EXHAUSTED"), (500, "INTERNAL"),
                                              (503, "UNAVAILABLE")])
async def test_http_error_has_googles_error_shape(status: int, name: str,
                                                  client: httpx2.AsyncClient) -> None:
    config = ChaosConfig(pacing=FAST, options=FaultOptions(http_statuses=(status,)))
    async with run_chaos(config) as server:
        resp = await client.post(stream_url(root(server.url)), json=gemini_request(),
                                 headers={"x-sseguard-inject": "http_error"})
    assert resp.status_code == status
    error = resp.json()["error"]
    assert (error["code"], error["status"]) == (status, name) and error["message"]


@pytest.mark.parametrize(("body", "message"), [
    ({}, "* GenerateContentRequest.contents: contents is not specified"),
    ({"contents": [{"role": "user"}]}, "* GenerateContentRequest.contents[0].parts: must be a list"),
    ({"contents": [{"role": "system", "parts": [{"text": "hi"}]}]},
     "* GenerateContentRequest.contents[0].role: Please use a valid role: user, model."),
    ({"contents": [{"parts": [{"text": "hi"}]}], "generationConfig": {"maxOutputTokens": 0}},
     "maxOutputTokens must be an integer of at least 1"),
    ({"contents": [{"parts": [{"text": "hi"}]}], "tools": [{"functionDeclarations": [{}]}]},
     "* GenerateContentRequest.tools[0].function_declarations: name is required"),
])
async def test_bad_requests_get_400_in_googles_shape(body: dict[str, Any], message: str,
                                                     client: httpx2.AsyncClient) -> None:
    async with run_chaos(ChaosConfig(pacing=FAST)) as server:
        resp = await client.post(stream_url(root(server.url)), json=body)
        assert server.stats.bad_requests == 1
    assert resp.status_code == 400
    assert resp.json() == {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}


# ── the real google-genai SDK ───────────────────────────────────────────────────────────────────

#: What google-genai 3.6 does on each ending served over ``?alt=sse``, measured (sync and async agree):
#: the exception's class name, or "silent" when the loop ends without one.
SDK_TABLE = {
    "none": "silent",
    "truncated": "silent",
    "cut_mid_frame": "UnknownApiResponseError",
    "error_event": "ServerError",
    "http_error": "ServerError",
    "empty": "silent",
}


@pytest.mark.parametrize("fault", list(SDK_TABLE))
async def test_what_the_google_genai_sdk_does_on_each_ending(fault: str) -> None:
    config = ChaosConfig(pacing=FAST, options=FaultOptions(http_statuses=(503,)))
    options = {"http_options": {"headers": {"x-sseguard-inject": fault}}}
    async with run_chaos(config) as server:
        outcomes = await both_ways(sdk_client(root(server.url)), options)
    assert [kind for kind, _ in outcomes] == [SDK_TABLE[fault]] * 2
    assert fault != "none" or all(text for _, text in outcomes)


#: With sseguard's strict transports passed in ``HttpOptions`` every bad ending raises (an HTTP error
#: stays the SDK's own ``ServerError``), and a healthy stream does not.
STRICT_TABLE = {
    "none": "silent",
    "truncated": "StreamEndedBadly",
    "cut_mid_frame": "StreamEndedBadly",
    "error_event": "StreamEndedBadly",
    "http_error": "ServerError",
    "empty": "StreamEndedBadly",
    "transport_error": "StreamEndedBadly",
    "markup_leak": "StreamEndedBadly",
}


@pytest.mark.parametrize("fault", list(STRICT_TABLE))
async def test_the_strict_transports_make_google_genai_raise_on_every_bad_ending(fault: str) -> None:
    from sseguard.client import AsyncStrictTransport, StrictTransport

    config = ChaosConfig(pacing=FAST, options=FaultOptions(http_statuses=(503,)))
    options = {"http_options": {"headers": {"x-sseguard-inject": fault}}}
    async with run_chaos(config) as server:
        sdk = sdk_client(root(server.url), client_args={"transport": StrictTransport()},
                         async_client_args={"transport": AsyncStrictTransport()})
        outcomes = await both_ways(sdk, options)
    assert [kind for kind, _ in outcomes] == [STRICT_TABLE[fault]] * 2


#: Gemini CLI 0.61.0's model-router request, as it sends it: a non-streamed generateContent in JSON
#: mode, its schema's types in Gemini's capitals. Given prose, the CLI retries it for minutes.
ROUTER_SCHEMA: dict[str, Any] = {
    "type": "OBJECT", "required": ["complexity_reasoning", "complexity_score"],
    "properties": {"complexity_reasoning": {"type": "STRING"},
                   "complexity_score": {"type": "INTEGER"}}}


def json_mode_request(schema_field: str | None = "responseJsonSchema") -> dict[str, Any]:
    config: dict[str, Any] = {"responseMimeType": "application/json",
                              "thinkingConfig": {"includeThoughts": True}}
    if schema_field is not None:
        config[schema_field] = ROUTER_SCHEMA
    return {"contents": [{"role": "user", "parts": [{"text": "Say hello"}]}],
            "systemInstruction": {"parts": [{"text": "Score the task."}]},
            "generationConfig": config}


def answer_text(body: dict[str, Any]) -> str:
    parts = body["candidates"][0]["content"]["parts"]
    return "".join(p["text"] for p in parts if "text" in p and not p.get("thought"))


@pytest.mark.parametrize("schema_field", ["responseJsonSchema", "responseSchema"])
async def test_json_mode_answers_one_value_of_the_schema(schema_field: str,
                                                         client: httpx2.AsyncClient) -> None:
    async with run_chaos(ChaosConfig(seed=5, pacing=FAST)) as server:
        url = f"{root(server.url)}/v1beta/models/chaos-lite:generateContent"
        first = await client.post(url, json=json_mode_request(schema_field))
        again = await client.post(url, json=json_mode_request(schema_field))
    value = json.loads(answer_text(first.json()))
    assert sorted(value) == ["complexity_reasoning", "complexity_score"]
    assert isinstance(value["complexity_reasoning"], str) and value["complexity_reasoning"]
    assert type(value["complexity_score"]) is int
    assert not any("functionCall" in p for p in first.json()["candidates"][0]["content"]["parts"])
    assert answer_text(again.json()) == answer_text(first.json())


async def test_json_mode_without_a_schema_is_still_one_json_value(
        client: httpx2.AsyncClient) -> None:
    async with run_chaos(ChaosConfig(seed=5, pacing=FAST)) as server:
        url = f"{root(server.url)}/v1beta/models/chaos-lite:generateContent"
        resp = await client.post(url, json=json_mode_request(None))
    value = json.loads(answer_text(resp.json()))
    assert list(value) == ["text"] and isinstance(value["text"], str)


async def test_a_streamed_json_answer_is_whole_when_healthy_and_cut_when_truncated(
        client: httpx2.AsyncClient) -> None:
    texts = {}
    for fault in (None, Fault.TRUNCATED):
        faults = {fault: 1.0} if fault is not None else {}
        async with run_chaos(ChaosConfig(seed=5, pacing=FAST, faults=faults)) as server:
            out = await fetch(client, stream_url(root(server.url)), json_mode_request(), api=API)
        records = [json.loads(line[len(b"data: "):]) for line in out.body.split(b"\r\n\r\n")
                   if line.startswith(b"data: ")]
        texts[fault] = "".join(answer_text(r) for r in records if "content" in r["candidates"][0])
        assert out.verdict.ending is (Ending.TRUNCATED if fault else Ending.COMPLETE)
    assert sorted(json.loads(texts[None])) == ["complexity_reasoning", "complexity_score"]
    assert texts[None].startswith(texts[Fault.TRUNCATED]) and texts[Fault.TRUNCATED] != texts[None]
    with pytest.raises(json.JSONDecodeError):
        json.loads(texts[Fault.TRUNCATED])
