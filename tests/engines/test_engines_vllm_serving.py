"""sseguard's parsers inside vLLM's real chat server: every example of the tool-call tests, streamed
in 1-, 4- and 16-character deltas, reaches the client exactly as our parser reads it (text, calls,
finish reason); the non-streaming path, the ``-stream`` variant, reasoning and the adjusted request.

Only the engine's ``generate()`` is replaced (``support.engines_vllm``); vLLM's app, router, serving class,
renderer and parser managers are its own. Needs vLLM 0.33 (``.ci/engines``); skipped without it.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from sseguard.core.toolcalls import families, parser_for
from sseguard.engines._gate import ClientGate
from support.engines import Expected, Vector, engine, harvest, matches, reference, tools_for

engine("vllm")

from support.engines_model import build_model_dir  # noqa: E402
from support.engines_vllm import Server, chat  # noqa: E402

FAMILIES = list(families())
SIZES = (1, 4, 16)
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_model_dir(tmp_path_factory.mktemp("model"))


@pytest.fixture(scope="module")
def vectors(tmp_path_factory: pytest.TempPathFactory) -> list[Vector]:
    found = harvest(tmp_path_factory.mktemp("vectors") / "vectors.jsonl")
    assert {v.family for v in found} == set(FAMILIES), "every family has examples"
    return found


async def server_for(model_dir: Path, tool: str | None, reasoning: str | None = None) -> Server:
    server = Server(model_dir, tool, reasoning)
    await server.start()
    return server


def describe(got: dict[str, Any], want: Expected) -> str:
    return (f"got content={got['content']!r} reasoning={got['reasoning']!r} calls={got['calls']!r} "
            f"finish={got['finish']!r}; want {want!r}")


@pytest.mark.parametrize("family", FAMILIES)
async def test_every_example_streamed_gives_the_client_exactly_our_parsers_answer(
        family: str, model_dir: Path, vectors: list[Vector]) -> None:
    server = await server_for(model_dir, f"sseguard-{family}")
    mine = [v for v in vectors if v.family == family]
    failures = []
    for vector in mine:
        tools = tools_for(vector)
        want = reference(family, vector.text, tools)
        for size in SIZES:
            got = await chat(server, (vector.text, size, "stop"), tools)
            # a rejected call never reaches the client as a call: only ended calls are named
            named = sum(1 for c in got["chunks"] for ch in c["choices"]
                        for tc in (ch.get("delta") or {}).get("tool_calls") or []
                        if (tc.get("function") or {}).get("name"))
            if not matches(got, want) or named != len(want.calls):
                failures.append(f"{vector.label} in {size}-char deltas: {describe(got, want)}")
    assert not failures, f"{len(failures)} of {3 * len(mine)} requests differ:\n" + "\n".join(failures[:5])


@pytest.mark.parametrize("family", FAMILIES)
async def test_every_example_non_streamed_gives_our_parsers_text_and_calls(
        family: str, model_dir: Path, vectors: list[Vector]) -> None:
    server = await server_for(model_dir, f"sseguard-{family}")
    failures = []
    for vector in (v for v in vectors if v.family == family):
        tools = tools_for(vector)
        want = reference(family, vector.text, tools)
        got = await chat(server, (vector.text, 4, "stop"), tools, stream=False)
        # vLLM itself turns whitespace-only content next to calls into null (abstract_parser.py)
        content = "" if want.calls and not want.content.strip() else want.content
        # and ExtractedToolCallInformation has no reasoning field: Harmony's analysis is not returned
        got["reasoning"] = want.reasoning
        if not matches(got, Expected(content, want.reasoning, want.calls, want.finish)):
            failures.append(f"{vector.label}: {describe(got, want)}")
    assert not failures, "\n".join(failures[:5])


def streamed_reference(family: str, text: str, tools: list[dict[str, Any]]) -> Expected:
    """``-stream``: every call that started goes out, voided ones included (they cannot be taken
    back); their arguments are the fragments the parser gave."""
    counter = itertools.count()
    gate = ClientGate(parser_for(family, tools), stream=True, new_id=lambda: f"x{next(counter)}")
    steps = [gate.feed(text), gate.close()]
    calls: dict[int, list[str]] = {}
    for piece in (p for s in steps for p in s.calls):
        slot = calls.setdefault(piece.index, ["", ""])
        slot[0] = piece.name or slot[0]
        slot[1] += piece.arguments
    want = reference(family, text, tools)
    return Expected(want.content, want.reasoning, [(n, a, None) for n, a in calls.values()],
                    "tool_calls" if calls else "stop")


@pytest.mark.parametrize("family", FAMILIES)
async def test_the_stream_variant_streams_every_started_call(family: str, model_dir: Path,
                                                             vectors: list[Vector]) -> None:
    server = await server_for(model_dir, f"sseguard-{family}-stream")
    failures = []
    for vector in (v for v in vectors if v.family == family):
        tools = tools_for(vector)
        want = streamed_reference(family, vector.text, tools)
        got = await chat(server, (vector.text, 4, "stop"), tools)
        if not matches(got, want):
            failures.append(f"{vector.label}: {describe(got, want)}")
    assert not failures, "\n".join(failures[:5])


REASONED = [name for name, fam in families().items() if fam.reasoning_exits]


@pytest.mark.parametrize("family", REASONED)
async def test_reasoning_then_examples_split_as_our_think_splitter_does(
        family: str, model_dir: Path, vectors: list[Vector]) -> None:
    """``<think>…</think>`` before each example, and reasoning opened by the prompt (ended by
    ``</think>`` or implicitly by a call opener), through ``--reasoning-parser sseguard-<family>``."""
    server = await server_for(model_dir, f"sseguard-{family}", f"sseguard-{family}")
    failures = []
    for vector in [v for v in vectors if v.family == family][:12]:
        tools = tools_for(vector)
        for text, opened in ((f"<think>Let me see.</think>{vector.text}", False),
                             (f"Plan: call it.</think>{vector.text}", True),
                             (f"Plan: call it. {vector.text}", True)):
            want = reference(family, text, tools, think=True, starts_in_reasoning=opened)
            extra = {"chat_template_kwargs": {"thinking": True}} if opened else {}
            for size in (1, 16):
                got = await chat(server, (text, size, "stop"), tools, extra=extra)
                if not matches(got, want):
                    failures.append(f"{vector.label} opened={opened} size={size}: {describe(got, want)}")
    assert not failures, "\n".join(failures[:5])


async def test_a_cut_off_completion_keeps_finish_reason_length_and_sends_only_ended_calls(
        model_dir: Path) -> None:
    server = await server_for(model_dir, "sseguard-hermes")
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    tools = [{"type": "function", "function": {"name": "get_weather"}}]
    got = await chat(server, (f"Sure.\n{call}\n<tool_call>\n{{\"name\": \"get_weather\", \"argu", 4,
                              "length"), tools)
    assert (got["content"], got["finish"]) == ("Sure.", "length")
    assert [c[1:] for c in got["calls"]] == [["get_weather", '{"city": "Paris"}']]


async def test_no_valid_call_means_finish_reason_stop_and_the_broken_call_is_not_shown(
        model_dir: Path) -> None:
    server = await server_for(model_dir, "sseguard-hermes")
    broken = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Ro",}}\n</tool_call>'
    tools = [{"type": "function", "function": {"name": "get_weather"}}]
    got = await chat(server, (f"Sure.\n{broken} Done.", 4, "stop"), tools)
    assert (got["content"], got["calls"], got["finish"]) == ("Sure. Done.", [], "stop")


async def test_markers_that_are_special_tokens_are_not_skipped_by_the_detokenizer(
        model_dir: Path) -> None:
    server = await server_for(model_dir, "sseguard-kimi-k2")
    await chat(server, ("Hi.", 4, "stop"), [{"type": "function", "function": {"name": "f"}}])
    assert server.engine.seen[-1].skip_special_tokens is False


ANSWER = ('Sure.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
          '\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Ro",}}\n</tool_call>')


async def test_the_responses_api_gets_the_same_calls(model_dir: Path) -> None:
    server = await server_for(model_dir, "sseguard-hermes")
    server.engine.script = (ANSWER, 4, "stop")
    body = {"model": "m", "input": "hi", "tools": [
        {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]}
    async with server.client() as client:
        resp = await client.post("/v1/responses", json=body)
    assert resp.status_code == 200, resp.text
    items = resp.json()["output"]
    calls = [(i["name"], i["arguments"]) for i in items if i["type"] == "function_call"]
    texts = [c["text"] for i in items if i["type"] == "message" for c in i["content"]]
    assert calls == [("get_weather", '{"city": "Paris"}')] and texts == ["Sure."]


async def test_anthropic_messages_get_the_same_calls(model_dir: Path) -> None:
    server = await server_for(model_dir, "sseguard-hermes")
    server.engine.script = (ANSWER, 4, "stop")
    body = {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}]}
    async with server.client() as client:
        resp = await client.post("/v1/messages", json=body)
    assert resp.status_code == 200, resp.text
    blocks = resp.json()["content"]
    assert [(b["type"], b.get("text"), b.get("name"), b.get("input")) for b in blocks] == [
        ("text", "Sure.", None, None), ("tool_use", None, "get_weather", {"city": "Paris"})]
    assert resp.json()["stop_reason"] == "tool_use"
