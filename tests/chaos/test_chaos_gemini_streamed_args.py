"""Gemini function calls whose arguments stream (``partialArgs`` by ``jsonPath``, ``willContinue``,
pieces without a name after the first, the empty closing piece): chaos streams them when the request
asks (``streamFunctionCallArguments``), the checker assembles one call and checks it once it is whole,
and a stream cut inside such a call is a bad ending — also end to end, google-genai through the proxy."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2
import pytest

from _chaos_support import fetch, recheck_byte_by_byte
from sseguard.chaos import ChaosConfig, Fault, Pacing, run_chaos
from sseguard.core.verdict import Ending, FindingKind
from support.gemini import sdk_client
from support.proxy import chaos_proxy

API = "gemini"
FAST = Pacing(tokens=4)
KEY = {"x-goog-api-key": "AIza-test"}
TRIP: dict[str, Any] = {"name": "plan_trip", "description": "Plan a trip.", "parameters": {
    "type": "OBJECT", "properties": {
        "city": {"type": "STRING"}, "days": {"type": "INTEGER"}, "by_train": {"type": "BOOLEAN"},
        "stops": {"type": "ARRAY", "items": {"type": "OBJECT", "properties": {
            "name": {"type": "STRING"}}, "required": ["name"]}}},
    "required": ["city", "days", "by_train", "stops"]}}
STREAM_ARGS = {"functionCallingConfig": {"mode": "ANY", "streamFunctionCallArguments": True}}
WHOLE = {"functionCallingConfig": {"mode": "ANY"}}


def request(tool_config: dict[str, Any]) -> dict[str, Any]:
    return {"contents": [{"role": "user", "parts": [{"text": "Plan a trip to Lyon."}]}],
            "tools": [{"functionDeclarations": [TRIP]}], "toolConfig": tool_config}


def url(base: str) -> str:
    return f"{base.rsplit('/v1', 1)[0]}/v1beta/models/chaos-1:streamGenerateContent?alt=sse"


def calls_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [p["functionCall"] for p in message["candidates"][0]["content"]["parts"]
            if "functionCall" in p]


async def stream(fault: Fault | None, tool_config: dict[str, Any]) -> Any:
    faults = {fault: 1.0} if fault is not None else {}
    async with run_chaos(ChaosConfig(seed=5, pacing=FAST, faults=faults)) as server, \
            httpx2.AsyncClient(headers=KEY) as client:
        return await fetch(client, url(server.url), request(tool_config), api=API)


async def test_a_streamed_call_is_one_call_equal_to_the_same_call_sent_whole() -> None:
    whole = await stream(None, WHOLE)
    streamed = await stream(None, STREAM_ARGS)
    assert b'"partialArgs"' in streamed.body and b'"willContinue":true' in streamed.body
    assert b'"partialArgs"' not in whole.body
    for out in (whole, streamed):
        for verdict in (out.verdict, recheck_byte_by_byte(API, request(STREAM_ARGS), out)):
            assert (verdict.ending, verdict.findings, verdict.unknown_kinds) == (
                Ending.COMPLETE, (), ())
    [declared] = calls_of(whole.verdict.message)
    assert calls_of(streamed.verdict.message) == [declared]
    assert declared["name"] == "plan_trip" and set(declared["args"]) == {
        "city", "days", "by_train", "stops"}


async def test_a_stream_cut_inside_a_streamed_call_is_a_call_cut_off() -> None:
    out = await stream(Fault.TOOL_CALL_UNTERMINATED, STREAM_ARGS)
    assert out.headers["x-sseguard-fault"] == "tool_call_unterminated"
    assert b'"willContinue":true' in out.body.rsplit(b"data: ", 1)[-1]
    for verdict in (out.verdict, recheck_byte_by_byte(API, request(STREAM_ARGS), out)):
        assert verdict.ending is Ending.TRUNCATED
        assert verdict.finding_kinds == frozenset({FindingKind.TOOL_CALL_UNTERMINATED})


async def test_without_streamed_arguments_a_call_cannot_be_cut_inside_them() -> None:
    out = await stream(Fault.TOOL_CALL_UNTERMINATED, WHOLE)
    assert out.headers["x-sseguard-fault"] == "none"
    assert out.verdict.ending is Ending.COMPLETE


# ── end to end: google-genai through the proxy ──────────────────────────────────────────────────


def _sdk_calls(base: str, inject: str, tool_config: dict[str, Any]) -> list[dict[str, Any]]:
    """google-genai's own parsed pieces, joined as a caller joins them: the first piece's name, each
    ``partial_args`` value set at its ``json_path`` (a string continued while ``will_continue``)."""
    from google.genai import types

    # The SDK's Gemini-API mode refuses ``stream_function_call_arguments`` in its config (only
    # Vertex takes it): the flag goes in the body as the API reads it.
    sdk = sdk_client(base, headers={"x-sseguard-inject": inject},
                     extra_body={"toolConfig": tool_config})
    calls: list[dict[str, Any]] = []
    open_call: dict[str, Any] | None = None
    continuing: set[str] = set()
    config = types.GenerateContentConfig(tools=[types.Tool(function_declarations=[
        types.FunctionDeclaration(**TRIP)])])
    for chunk in sdk.models.generate_content_stream(model="chaos-1", contents="Plan a trip.",
                                                    config=config):
        for part in chunk.candidates[0].content.parts if chunk.candidates[0].content else []:
            call = part.function_call
            if call is None:
                continue
            if open_call is None:
                open_call = {"name": call.name, "args": dict(call.args or {})}
            for piece in call.partial_args or []:
                value: Any = piece.string_value
                if value is None:
                    value = piece.number_value if piece.number_value is not None else piece.bool_value
                _set(open_call["args"], piece.json_path, value, piece.json_path in continuing)
                if piece.will_continue:
                    continuing.add(piece.json_path)
                else:
                    continuing.discard(piece.json_path)
            if not call.will_continue:
                calls.append(open_call)
                open_call = None
    return calls


def _set(args: dict[str, Any], path: str, value: Any, append: bool) -> None:
    """``$.a``, ``$.a[0].b``: the paths chaos writes (names and indexes)."""
    steps: list[Any] = []
    for name in path[2:].split("."):
        key, _, rest = name.partition("[")
        steps.append(key)
        if rest:
            steps.append(int(rest.rstrip("]")))
    node: Any = args
    for step, after in zip(steps, [*steps[1:], None], strict=True):
        if after is None:
            if isinstance(node, list):
                node.extend([None] * (step + 1 - len(node)))
            node[step] = node[step] + value if append else value
            return
        if isinstance(node, list):
            node.extend([None] * (step + 1 - len(node)))
            if node[step] is None:
                node[step] = [] if isinstance(after, int) else {}
        else:
            node.setdefault(step, [] if isinstance(after, int) else {})
        node = node[step]


async def test_google_genai_through_the_proxy_assembles_the_declared_call() -> None:
    got = []
    for tool_config in (WHOLE, STREAM_ARGS):  # the same request and seed: the same call
        async with chaos_proxy(ChaosConfig(seed=5, pacing=FAST)) as (srv, px):
            got.append(await asyncio.to_thread(_sdk_calls, px.url.rsplit("/v1", 1)[0], "none",
                                               tool_config))
            assert srv.stats.apis == {"gemini": 1}
    declared, assembled = got
    assert len(declared) == 1 and declared[0]["name"] == "plan_trip"
    assert assembled == declared


async def test_google_genai_through_the_proxy_raises_on_a_stream_cut_inside_a_call() -> None:
    async with chaos_proxy(ChaosConfig(seed=5, pacing=FAST)) as (_, px):
        with pytest.raises(Exception) as caught:
            await asyncio.to_thread(_sdk_calls, px.url.rsplit("/v1", 1)[0],
                                    "tool_call_unterminated", STREAM_ARGS)
    assert type(caught.value).__name__ == "ServerError"
    assert "truncated" in str(caught.value)
