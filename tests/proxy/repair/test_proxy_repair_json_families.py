"""``proxy --repair-markup`` for the families of docs/design/markup.md classes A, A′, B and B′: markup a
server left in ``content`` (chat), a Messages text block, Responses output text or Gemini text parts reaches
the client as the same tool calls under any split of the deltas, named by
the family, by an engine's alias or found by ``auto``; and end to end through the proxy to the openai
SDK. The expected calls are the ones the test rendered, written out in the test."""

from __future__ import annotations

import json

import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_proxy_repair import (
    _assemble,
    _message,
    _messages_events,
    _response,
    _responses_events,
    _run,
    _run_messages,
    _run_responses,
    _split,
    _stream,
)
from test_proxy_repair_gemini import FRAMINGS, _parts, _records, _relay, _texts, _verdict

from sseguard.chaos import ChaosConfig, Pacing
from sseguard.chaos.generate import GeneratedCall as Call  # renamed (issue 46)
from sseguard.chaos.generate import render_markup
from sseguard.proxy.repair import (
    GeminiRepairFrames,
    MessagesRepairFrames,
    RepairFrames,
    ResponsesRepairFrames,
)
from support.proxy import KEY, WEATHER_TOOL, chaos_proxy

FAMILIES = ["llama3-json", "granite", "granite-20b-fc", "internlm", "jamba", "hunyuan-a13b",
            "minimax-m1", "phi4-mini", "apertus", "cohere-command", "gigachat3", "longcat",
            "ernie45", "inkling", "xlam"]
#: the name an engine registers, for families that have another one
ENGINE_NAME = {"llama3-json": "llama4_json", "internlm": "interns1", "hunyuan-a13b": "hunyuan_a13b",
               "minimax-m1": "minimax", "phi4-mini": "phi4_mini_json", "apertus": "apertus2509",
               "cohere-command": "cohere_command4"}
#: auto never claims xLAM (its markers are Granite's and Mistral's); it reads the rest
AUTO = [f for f in FAMILIES if f != "xlam"]
NEVER = ("<|", "<tool_call", "<tool_calls", "functools[", "<function_call", "<longcat", "[TOOL_CALLS]")
_values = st.dictionaries(st.sampled_from(["path", "query", "note"]),
                          st.text(st.sampled_from("ab é1<>.\n\"\\[]{}"), max_size=12), max_size=3)


@settings(max_examples=150, deadline=None)
@given(family=st.sampled_from(FAMILIES), how=st.sampled_from(["family", "alias", "auto"]),
       prefix=st.text(st.sampled_from("ab <>.é"), max_size=10).filter(lambda s: s.strip()),
       calls=st.lists(st.tuples(st.sampled_from(["read", "fs.search"]), _values), min_size=1,
                      max_size=3),
       cuts=st.sets(st.integers(1, 500), max_size=30))
def test_markup3_json_calls_in_content_become_the_same_tool_calls_under_any_split(
        family: str, how: str, prefix: str, calls: list[tuple[str, dict[str, str]]],
        cuts: set[int]) -> None:
    if how == "auto" and family not in AUTO:
        how = "family"
    rendered = render_markup(family, [Call(f"c{i}", name, values, json.dumps(values))
                                      for i, (name, values) in enumerate(calls)])
    name = {"family": family, "auto": "auto", "alias": ENGINE_NAME.get(family, family)}[how]
    frames = RepairFrames(name, None)
    body, _ = _run(frames, _stream(_split(prefix + rendered, cuts)))
    choice = _assemble(body)
    message = choice["message"]
    assert choice["finish_reason"] == "tool_calls"
    assert (message["content"] or "") == prefix
    got = [(c["function"]["name"], json.loads(c["function"]["arguments"]))
           for c in message["tool_calls"]]
    assert got == [(n, v) for n, v in calls]
    ids = [c["id"] for c in message["tool_calls"]]
    if family == "cohere-command":  # the model's own tool_call_id is the call's id
        assert ids == [str(i) for i in range(len(calls))]
    assert frames.failure is None and frames.findings() == [] and frames.calls == len(calls)


ASK = [{"role": "user", "content": "Weather in Paris, and the time?"}]


@pytest.mark.parametrize("family", ["llama3-json", "jamba", "cohere-command", "internlm",
                                    "gigachat3"])
async def test_the_openai_sdk_gets_tool_calls_from_raw_markup3_json_markup(family: str) -> None:
    chaos = ChaosConfig(seed=21, raw_markup=family, pacing=Pacing(tokens=6))
    async with chaos_proxy(chaos, repair_markup=ENGINE_NAME.get(family, family)) as (_, px), \
            openai.AsyncOpenAI(base_url=px.url, api_key=KEY, max_retries=0) as client:
        final = await client.chat.completions.create(
            model="chaos-1", messages=ASK, tools=[WEATHER_TOOL], stream=True)  # type: ignore[arg-type]
        content = ""
        names: dict[int, str] = {}
        args: dict[int, str] = {}
        finish = None
        async for chunk in final:
            if not chunk.choices:
                continue
            choice = chunk.choices[0]
            content += choice.delta.content or ""
            for call in choice.delta.tool_calls or []:
                if call.function and call.function.name:
                    names[call.index] = call.function.name
                if call.function and call.function.arguments:
                    args[call.index] = args.get(call.index, "") + call.function.arguments
            finish = choice.finish_reason or finish
    assert finish == "tool_calls"
    assert not any(piece in content for piece in NEVER), content
    assert names and all(isinstance(json.loads(a), dict) for a in args.values())
    assert set(names) == set(args)


_text = st.text(st.sampled_from("ab <>.é"), max_size=10).filter(lambda s: s.strip())
_calls = st.lists(st.tuples(st.sampled_from(["read", "fs.search"]), _values), min_size=1,
                  max_size=3)


def _rendered(family: str, calls: list[tuple[str, dict[str, str]]]) -> str:
    return render_markup(family, [Call(f"c{i}", name, values, json.dumps(values))
                                  for i, (name, values) in enumerate(calls)])


@settings(max_examples=80, deadline=None)
@given(family=st.sampled_from(FAMILIES), prefix=_text, suffix=_text, calls=_calls,
       cuts=st.sets(st.integers(1, 400), max_size=25))
def test_markup3_json_calls_in_a_messages_text_block_become_tool_use_blocks(
        family: str, prefix: str, suffix: str, calls: list[tuple[str, dict[str, str]]],
        cuts: set[int]) -> None:
    frames = MessagesRepairFrames(family, None)
    body, _ = _run_messages(frames, _messages_events(
        _split(prefix + _rendered(family, calls) + suffix, cuts), own_tool=False))
    message, verdict = _message(body)
    assert str(verdict.ending) == "complete" and verdict.findings == ()
    blocks = message["content"]
    assert "".join(b["text"] for b in blocks if b["type"] == "text") == prefix + suffix
    assert [(b["name"], b["input"]) for b in blocks if b["type"] == "tool_use"] == calls
    assert message["stop_reason"] == "tool_use" and frames.failure is None


@settings(max_examples=80, deadline=None)
@given(family=st.sampled_from(FAMILIES), prefix=_text, suffix=_text, calls=_calls,
       cuts=st.sets(st.integers(1, 400), max_size=25))
def test_markup3_json_calls_in_output_text_become_function_call_items(
        family: str, prefix: str, suffix: str, calls: list[tuple[str, dict[str, str]]],
        cuts: set[int]) -> None:
    frames = ResponsesRepairFrames(family, None)
    body = _run_responses(frames, _responses_events(
        _split(prefix + _rendered(family, calls) + suffix, cuts), own_item=False))
    response, verdict = _response(body)
    assert str(verdict.ending) == "complete" and verdict.findings == (), verdict.findings
    output = response["output"]
    texts = ["".join(c["text"] for c in item["content"]) for item in output
             if item["type"] == "message"]
    assert "".join(texts) == prefix + suffix
    assert [(i["name"], json.loads(i["arguments"])) for i in output
            if i["type"] == "function_call"] == calls
    assert frames.failure is None and frames.calls == len(calls)


@settings(max_examples=80, deadline=None)
@given(family=st.sampled_from(FAMILIES), framing=st.sampled_from(FRAMINGS), prefix=_text,
       suffix=_text, calls=_calls, cuts=st.sets(st.integers(1, 400), max_size=25),
       reads=st.sets(st.integers(1, 3000), max_size=40))
def test_markup3_json_calls_in_gemini_text_parts_become_function_calls(
        family: str, framing: str, prefix: str, suffix: str,
        calls: list[tuple[str, dict[str, str]]], cuts: set[int], reads: set[int]) -> None:
    texts = _split(prefix + _rendered(family, calls) + suffix, cuts)
    frames = GeminiRepairFrames(family, None)
    body = _relay(frames, _texts(texts, framing), reads)
    parts = _parts(_records(body, framing))
    assert "".join(p.get("text", "") for p in parts) == prefix + suffix
    ids = [{"id": str(i)} if family == "cohere-command" else {} for i in range(len(calls))]
    assert [p["functionCall"] for p in parts if "functionCall" in p] == [
        {**ident, "name": name, "args": values} for ident, (name, values) in zip(ids, calls, strict=True)]
    assert _verdict(body) == ("complete", [])
    assert frames.failure is None and frames.calls == len(calls)
