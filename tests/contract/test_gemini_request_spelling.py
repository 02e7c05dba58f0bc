"""A Gemini request is read in either spelling of its fields, as Google's API reads it: google-genai 3.6
writes ``parameters_json_schema``, ``thinking_config.include_thoughts`` and a ``Schema``'s
``max_length`` in snake case. The checker, chaos and the markup repair read through one normaliser
(``normal_request``), which renames only the API's own fields: keys inside user data (a schema's
property names, ``args``, ``response``, a JSON Schema given as it is) stay byte for byte."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sseguard.chaos import ChaosConfig, Pacing, run_chaos
from sseguard.core.contract.gemini import GeminiChecker
from sseguard.core.contract.gemini.request import normal_request
from sseguard.core.verdict import FindingKind
from support.gemini import sdk_client
from support.proxy import chaos_proxy

#: Property names with underscores: user data, never renamed.
SCHEMA = {"type": "object", "properties": {"city_name": {"type": "string"},
                                           "days_ahead": {"type": "integer"}},
          "required": ["city_name", "days_ahead"]}


def request(spelling: str) -> dict[str, Any]:
    """One request, its fields spelt all in camelCase or all in snake case (user data alike)."""
    if spelling == "camel":
        return {
            "contents": [
                {"role": "user", "parts": [{"text": "Call get_weather."}]},
                {"role": "model", "parts": [{"functionCall": {"name": "get_weather",
                                                              "args": {"city_name": "Oslo"}}}]},
                {"role": "user", "parts": [{"functionResponse": {
                    "name": "get_weather", "response": {"temp_c": 3, "feels_like": {"wind_chill": 1}}}}]},
                {"role": "user", "parts": [{"text": "And again."}]}],
            "systemInstruction": {"parts": [{"text": "Be brief."}]},
            "tools": [{"functionDeclarations": [
                {"name": "get_weather", "description": "w", "parametersJsonSchema": SCHEMA},
                {"name": "get_time", "description": "t", "parameters": {
                    "type": "OBJECT", "properties": {"tz_name": {"type": "STRING", "maxLength": 5}},
                    "required": ["tz_name"]}}]}],
            "toolConfig": {"functionCallingConfig": {"mode": "ANY",
                                                     "allowedFunctionNames": ["get_weather"]}},
            "generationConfig": {"maxOutputTokens": 400,
                                 "thinkingConfig": {"includeThoughts": True, "thinkingBudget": 1024}},
        }
    return {
        "contents": [
            {"role": "user", "parts": [{"text": "Call get_weather."}]},
            {"role": "model", "parts": [{"function_call": {"name": "get_weather",
                                                           "args": {"city_name": "Oslo"}}}]},
            {"role": "user", "parts": [{"function_response": {
                "name": "get_weather", "response": {"temp_c": 3, "feels_like": {"wind_chill": 1}}}}]},
            {"role": "user", "parts": [{"text": "And again."}]}],
        "system_instruction": {"parts": [{"text": "Be brief."}]},
        "tools": [{"function_declarations": [
            {"name": "get_weather", "description": "w", "parameters_json_schema": SCHEMA},
            {"name": "get_time", "description": "t", "parameters": {
                "type": "OBJECT", "properties": {"tz_name": {"type": "STRING", "max_length": 5}},
                "required": ["tz_name"]}}]}],
        "tool_config": {"function_calling_config": {"mode": "ANY",
                                                    "allowed_function_names": ["get_weather"]}},
        "generation_config": {"max_output_tokens": 400,
                              "thinking_config": {"include_thoughts": True, "thinking_budget": 1024}},
    }


# ── the normaliser ──────────────────────────────────────────────────────────────────────────────

def test_snake_case_fields_read_as_camel_case_and_user_data_stays_as_it_came() -> None:
    assert normal_request(request("snake")) == request("camel")
    assert normal_request(request("camel")) == request("camel")


def test_only_the_apis_fields_are_renamed_and_camel_case_wins_when_both_come() -> None:
    body = {"contents": [], "unknown_field": {"some_key": 1}, "labels": {"team_name": "x"},
            "generationConfig": {"thinking_config": {"include_thoughts": False},
                                 "thinkingConfig": {"includeThoughts": True},
                                 "response_json_schema": {"properties": {"a_b": {"max_length": 1}}}}}
    assert normal_request(body) == {
        "contents": [], "unknown_field": {"some_key": 1}, "labels": {"team_name": "x"},
        "generationConfig": {"thinkingConfig": {"includeThoughts": True},
                             "responseJsonSchema": {"properties": {"a_b": {"max_length": 1}}}}}


_keys = st.text(alphabet="abcdefgh_XYZ", min_size=1, max_size=12)
_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner,
                                                                                 max_size=4),
                     max_leaves=12)


@settings(max_examples=150, deadline=None)
@given(args=st.dictionaries(_keys, _json, max_size=4),
       response=st.dictionaries(_keys, _json, max_size=4),
       json_schema=st.dictionaries(_keys, _json, max_size=4),
       properties=st.dictionaries(_keys, st.just({"type": "STRING"}), max_size=4),
       labels=st.dictionaries(_keys, st.text(max_size=5), max_size=3))
def test_user_data_is_never_renamed_in_either_spelling(
        args: dict[str, Any], response: dict[str, Any], json_schema: dict[str, Any],
        properties: dict[str, Any], labels: dict[str, Any]) -> None:
    for call, result, decls in (("functionCall", "functionResponse", "functionDeclarations"),
                                ("function_call", "function_response", "function_declarations")):
        body = {"contents": [{"parts": [{call: {"name": "f", "args": args}},
                                        {result: {"name": "f", "response": response}}]}],
                "tools": [{decls: [{"name": "f", "parametersJsonSchema": json_schema},
                                   {"name": "g", "parameters": {"properties": properties}}]}],
                "labels": labels}
        before = json.dumps(body)
        out = normal_request(body)
        assert json.dumps(body) == before  # the request itself is not changed
        parts = out["contents"][0]["parts"]
        assert json.dumps(parts[0]["functionCall"]["args"]) == json.dumps(args)
        assert json.dumps(parts[1]["functionResponse"]["response"]) == json.dumps(response)
        declared = out["tools"][0]["functionDeclarations"]
        assert json.dumps(declared[0]["parametersJsonSchema"]) == json.dumps(json_schema)
        assert list(declared[1]["parameters"]["properties"]) == list(properties)
        assert json.dumps(out["labels"]) == json.dumps(labels)
        assert normal_request(out) == out


# ── the checker ─────────────────────────────────────────────────────────────────────────────────

def _findings(spelling: str, name: str, args: dict[str, Any]) -> list[tuple[FindingKind, str]]:
    record = {"candidates": [{"content": {"role": "model", "parts": [
        {"functionCall": {"name": name, "args": args}}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 3, "totalTokenCount": 12},
        "responseId": "r1"}
    checker = GeminiChecker(request(spelling))
    checker.feed(b"data: " + json.dumps(record).encode() + b"\r\n\r\n")
    return [(f.kind, f.detail) for f in checker.close().findings]


@pytest.mark.parametrize("spelling", ["camel", "snake"])
def test_the_checker_checks_calls_against_either_spelling_of_the_declarations(spelling: str) -> None:
    assert _findings(spelling, "get_weather", {"city_name": "Oslo", "days_ahead": 2}) == []
    assert _findings(spelling, "get_weather", {"city_name": "Oslo"}) == [
        (FindingKind.TOOL_ARGS_SCHEMA_MISMATCH,
         "candidate 0 function call 'get_weather': 'days_ahead' is a required property")]
    assert _findings(spelling, "get_time", {"tz_name": "Europe/Oslo"}) == [
        (FindingKind.TOOL_ARGS_SCHEMA_MISMATCH,
         "candidate 0 function call 'get_time': 'Europe/Oslo' is too long")]
    assert _findings(spelling, "get_date", {}) == [
        (FindingKind.TOOL_UNDEFINED_FUNCTION,
         "candidate 0 function call 'get_date': not among the 2 offered tools")]


# ── chaos ───────────────────────────────────────────────────────────────────────────────────────

def _answer(body: bytes) -> tuple[list[dict[str, Any]], str]:
    """The function calls and the thoughts of an ``?alt=sse`` body."""
    calls, thoughts = [], []
    for frame in body.split(b"\r\n\r\n")[:-1]:
        for cand in json.loads(frame.removeprefix(b"data: "))["candidates"]:
            for part in cand.get("content", {}).get("parts", []):
                if "functionCall" in part:
                    calls.append(part["functionCall"])
                elif part.get("thought") is True:
                    thoughts.append(part["text"])
    return calls, "".join(thoughts)


async def test_chaos_answers_either_spelling_alike_honouring_the_schema_and_the_thoughts() -> None:
    async with run_chaos(ChaosConfig(seed=5, pacing=Pacing(tokens=4))) as server, \
            httpx2.AsyncClient(headers={"x-goog-api-key": "AIza-test"}) as client:
        url = server.url.rsplit("/v1", 1)[0] + "/v1beta/models/chaos-1:streamGenerateContent?alt=sse"
        answers = {}
        for spelling in ("camel", "snake"):
            resp = await client.post(url, json=request(spelling), timeout=30)
            assert resp.status_code == 200
            answers[spelling] = _answer(resp.content)
    assert answers["snake"] == answers["camel"]
    calls, thoughts = answers["snake"]
    # toolConfig's ANY with one allowed name: exactly that call, its arguments of the schema's keys
    # and types, spelt as declared; includeThoughts: thoughts came.
    assert [c["name"] for c in calls] == ["get_weather"]
    args = calls[0]["args"]
    assert sorted(args) == ["city_name", "days_ahead"]
    assert isinstance(args["city_name"], str) and isinstance(args["days_ahead"], int)
    assert thoughts


# ── the real google-genai SDK, through the proxy's markup repair ───────────────────────────────

def _sdk_config() -> Any:
    types = pytest.importorskip("google.genai.types")
    return types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=[types.FunctionDeclaration(
            name="get_weather", description="w", parameters_json_schema=SCHEMA)])],
        thinking_config=types.ThinkingConfig(include_thoughts=True, thinking_budget=1024))


def _read(chunks: list[Any]) -> tuple[list[tuple[str, dict[str, Any]]], str, list[str]]:
    calls, thoughts, finishes = [], [], []
    for chunk in chunks:
        for cand in chunk.candidates or []:
            if cand.finish_reason is not None:
                finishes.append(cand.finish_reason.value)
            for part in (cand.content.parts or []) if cand.content else []:
                if part.function_call is not None:
                    calls.append((part.function_call.name, dict(part.function_call.args or {})))
                elif part.thought and part.text:
                    thoughts.append(part.text)
    return calls, "".join(thoughts), finishes


async def test_google_genai_snake_case_schema_and_thoughts_are_honoured_through_the_repair() -> None:
    """google-genai sends ``parameters_json_schema`` and ``thinking_config.include_thoughts``: chaos
    (its calls left as hermes markup) generates arguments of that schema and thoughts, and the
    proxy's repair turns the markup into ``functionCall`` parts, sync and async alike."""
    config = _sdk_config()
    chaos = ChaosConfig(seed=21, raw_markup="hermes", pacing=Pacing(tokens=6))
    async with chaos_proxy(chaos, repair_markup="auto") as (upstream, px):
        sdk = sdk_client(px.url.rsplit("/v1", 1)[0])

        def sync_chunks() -> list[Any]:
            return list(sdk.models.generate_content_stream(
                model="chaos-1", contents="Call get_weather.", config=config))

        stream = await sdk.aio.models.generate_content_stream(
            model="chaos-1", contents="Call get_weather.", config=config)
        ways = [await asyncio.to_thread(sync_chunks), [chunk async for chunk in stream]]
        assert upstream.stats.apis == {"gemini": 2}
    for chunks in ways:
        calls, thoughts, finishes = _read(chunks)
        assert [(name, sorted(args)) for name, args in calls] == [
            ("get_weather", ["city_name", "days_ahead"])]
        args = calls[0][1]
        assert isinstance(args["city_name"], str) and isinstance(args["days_ahead"], int)
        assert thoughts and finishes == ["STOP"]
