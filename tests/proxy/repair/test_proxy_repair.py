"""``--repair-markup``: raw tool-call markup in content leaves the proxy as structured tool calls.

The frame transformers (chat choices, Messages text blocks) are tested directly under any split of the
content into deltas (hypothesis), and end to end: the real openai and anthropic SDKs, through the proxy,
against a chaos upstream that leaves DSML (V3.2, V4, V4.1) raw in content."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sseguard.chaos import ChaosConfig, Pacing, run_chaos
from sseguard.chaos.generate import GeneratedCall as Call  # renamed (issue 46)
from sseguard.chaos.generate import render_markup
from sseguard.core.contract import checker_for
from sseguard.core.contract.chat.assembler import ChatAssembler
from sseguard.core.sse import SSEDecoder, SSEEvent
from sseguard.core.verdict import Api, FindingKind
from sseguard.proxy.repair import (
    MessagesRepairFrames,
    RepairFrames,
    ResponsesRepairFrames,
    frames_for,
)
from sseguard.store import open_store
from support.proxy import KEY, MESSAGES, WEATHER_TOOL, chaos_proxy, chat, raw_post, same_second
from support.proxy_bodies import MESSAGE as MESSAGE_OBJ
from support.proxy_bodies import MESSAGE_STOP, Responses, event

DSML = ["dsml-v32", "dsml-v4", "dsml-v41"]
MARK = "｜DSML｜"


def _event(choice: dict[str, Any], **top: Any) -> SSEEvent:
    obj = {"id": "chatcmpl-r", "object": "chat.completion.chunk", "created": 1, "model": "m",
           "choices": [choice], **top}
    data = json.dumps(obj, ensure_ascii=False)
    return SSEEvent(data=data, raw=f"data: {data}\n\n".encode())


def _stream(deltas: list[str], finish: str = "stop") -> list[SSEEvent]:
    events = [_event({"index": 0, "delta": {"role": "assistant", "content": ""},
                      "finish_reason": None})]
    events += [_event({"index": 0, "delta": {"content": d}, "finish_reason": None}) for d in deltas]
    events.append(_event({"index": 0, "delta": {}, "finish_reason": finish}))
    return events


def _run(frames: RepairFrames, events: list[SSEEvent]) -> tuple[bytes, list[bytes]]:
    pieces = [frames.transform(e) for e in events]
    return b"".join(pieces) + frames.flush(), pieces


def _assemble(body: bytes) -> dict[str, Any]:
    asm = ChatAssembler()
    for ev in SSEDecoder().feed(body):
        assert not asm.add(json.loads(ev.data))
    return asm.to_openai()["choices"][0]


def _split(text: str, cuts: set[int]) -> list[str]:
    points = sorted(c for c in cuts if 0 < c < len(text))
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]


_values = st.dictionaries(st.sampled_from(["path", "query", "note"]),
                          st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
                          .filter(lambda s: "｜" not in s), min_size=0, max_size=3)
_prefix = st.text(st.sampled_from("ab <>\n.é"), max_size=12).filter(
    lambda s: not s.endswith("\n"))


@settings(max_examples=150, deadline=None)
@given(family=st.sampled_from(DSML), auto=st.booleans(), prefix=_prefix,
       calls=st.lists(st.tuples(st.sampled_from(["read", "ns::search"]), _values), min_size=1,
                      max_size=3),
       cuts=st.sets(st.integers(1, 400), max_size=25))
def test_dsml_in_content_becomes_the_same_tool_calls_under_any_split(
        family: str, auto: bool, prefix: str, calls: list[tuple[str, dict[str, str]]],
        cuts: set[int]) -> None:
    rendered = render_markup(family, [Call(f"c{i}", name, values, json.dumps(values))
                                      for i, (name, values) in enumerate(calls)])
    content = prefix + rendered
    frames = RepairFrames("auto" if auto else family, None)
    body, _ = _run(frames, _stream(_split(content, cuts)))
    choice = _assemble(body)
    message = choice["message"]
    assert choice["finish_reason"] == "tool_calls"
    assert (message["content"] or "") == prefix and MARK not in body.decode()
    got = [(c["function"]["name"], json.loads(c["function"]["arguments"]))
           for c in message["tool_calls"]]
    assert got == [(name, values) for name, values in calls]
    assert all(c["id"].startswith("call_") and len(c["id"]) == 29 for c in message["tool_calls"])
    assert len({c["id"] for c in message["tool_calls"]}) == len(calls)
    assert frames.failure is None and frames.findings() == [] and frames.calls == len(calls)


@settings(max_examples=100, deadline=None)
# no marker lead: "<", "｜", "]" (MiniMax-M3's token ]<]minimax[>[), "[" (Mistral's [TOOL_CALLS]) and
# "f" (Phi-4-mini's functools[, GigaChat 3's "function call"), which auto holds at a chunk end
@given(texts=st.lists(st.text(st.characters(blacklist_characters="<\n｜][f",
                                            blacklist_categories=("Cs",)), min_size=1),
                      min_size=1, max_size=6),
       family=st.sampled_from([*DSML, "auto"]))
def test_text_without_markup_passes_byte_identical(texts: list[str], family: str) -> None:
    # ``auto`` holds an answer that opens with whitespace only (a family's markup may follow it) or
    # with what may still become Harmony's ``to=R`` header lead (``t``, `` to``, ``to=x``): those holds
    # are stated by their own tests; here the first piece is already plain text.
    lead = texts[0].lstrip() if texts else "."
    assume(family != "auto" or (lead != "" and not "to=".startswith(lead[:3])))
    events = _stream(texts)
    frames = RepairFrames(family, None)
    body, pieces = _run(frames, events)
    assert pieces == [e.raw for e in events] and body == b"".join(e.raw for e in events)


def test_only_a_possible_marker_prefix_is_held_back_and_then_released() -> None:
    frames = RepairFrames("dsml-v32", None)
    events = _stream(["x <", "｜not a marker"])
    _, pieces = _run(frames, events)
    assert pieces[1] != events[1].raw  # "<" waits: it could start <｜DSML｜
    released = json.loads(pieces[2][6:])["choices"][0]["delta"]["content"]
    assert json.loads(pieces[1][6:])["choices"][0]["delta"]["content"] == "x "
    assert released == "<｜not a marker"


def test_unparseable_markup_stops_the_stream_naming_the_kind() -> None:
    call = Call("c0", "read", {"path": "a"}, "{}")
    content = render_markup("dsml-v4", [call], malformed=True)
    frames = RepairFrames("dsml-v4", None)
    body, _ = _run(frames, _stream([content]))
    assert frames.failure is not None and frames.failure[0] == "markup_malformed_tag"
    assert MARK not in body.decode()


def test_a_call_to_a_tool_not_offered_is_kept_and_reported() -> None:
    content = render_markup("dsml-v32", [Call("c0", "rm_rf", {"path": "/"}, "{}")])
    frames = RepairFrames("dsml-v32", [WEATHER_TOOL])
    body, _ = _run(frames, _stream([content]))
    assert _assemble(body)["message"]["tool_calls"][0]["function"]["name"] == "rm_rf"
    assert [f.kind for f in frames.findings()] == [FindingKind.TOOL_UNDEFINED_FUNCTION]


def test_repaired_calls_are_numbered_after_the_upstreams_own_calls() -> None:
    own = _event({"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": "call_up", "type": "function",
         "function": {"name": "get_weather", "arguments": "{}"}}]}, "finish_reason": None})
    content = render_markup("dsml-v4", [Call("c0", "read", {"path": "x"}, "{}")])
    events = [own, *_stream([content])[1:]]
    body, _ = _run(RepairFrames("dsml-v4", None), events)
    calls = _assemble(body)["message"]["tool_calls"]
    assert [(c["id"] == "call_up", c["function"]["name"]) for c in calls] == [
        (True, "get_weather"), (False, "read")]


def test_markup_of_a_family_not_repaired_is_still_a_leak() -> None:
    frames = RepairFrames("dsml-v4", None)
    _run(frames, _stream(["<tool_call>\n{\"name\": \"x\", \"arguments\": {}}\n</tool_call>"]))
    assert [f.kind for f in frames.findings()] == [FindingKind.MARKUP_LEAK]


# ── end to end ───────────────────────────────────────────────────────────────────────────────────


#: Every family the chaos server can leave in content, and a piece of its markup.
ALL_FAMILIES = {"dsml-v32": MARK, "dsml-v4": MARK, "dsml-v41": MARK, "deepseek-v3": "tool▁calls",
                "deepseek-v31": "tool▁calls", "hermes": "<tool_call>", "qwen3-coder": "<tool_call>",
                # docs/design/markup.md classes C, D and E
                "pythonic": "<|python_start|>", "olmo3": "<function_calls>",
                "lfm2": "<|tool_call_start|>", "mistral": "[TOOL_CALLS]",
                "plamo3": "<|plamo:begin_tool_name:plamo|>",
                "functiongemma": "<start_function_call>", "gemma4": "<|tool_call>",
                # docs/design/markup.md classes F, G, H
                "seed-oss": "<seed:tool_call>", "zaya": "<zyphra_tool_call>",
                "dots": "<dots_function_call>", "step3": "<｜tool_calls_begin｜>",
                "minicpm5": '<function name="', "gigachat35": "｜GCML｜",
                "iquest-q1": "<iquest_tool_call>", "hunyuan": "<tool_calls>",
                "k2-horizon": "<ifm|tool_calls>", "kimi-k3": "<|open|>tools<|sep|>",
                "minimax-m3": "]<]minimax[>[", "muse": "<atem:function_calls>"}


async def _generated_calls(chaos: ChaosConfig) -> list[tuple[str, Any]]:
    """The calls the chaos server generates for this seed, as it sends them when it is not told to
    leave markup: structured tool_calls, read by the SDK (ground truth, no parser of ours involved)."""
    async with run_chaos(replace(chaos, raw_markup=None)) as plain, \
            openai.AsyncOpenAI(base_url=plain.url, api_key=KEY, max_retries=0) as client, \
            client.chat.completions.stream(model="chaos-1", messages=MESSAGES,  # type: ignore[arg-type]
                                           tools=[WEATHER_TOOL]) as stream:
        final = await stream.get_final_completion()
    return [(c.function.name, json.loads(c.function.arguments))
            for c in final.choices[0].message.tool_calls or []]


@pytest.mark.parametrize("mode", ["family", "auto"])
@pytest.mark.parametrize("family", sorted(ALL_FAMILIES))
async def test_the_sdk_gets_the_generated_tool_calls_from_raw_markup(family: str, mode: str,
                                                                     tmp_path: Path) -> None:
    chaos = ChaosConfig(seed=21, raw_markup=family, pacing=Pacing(tokens=6))
    db = tmp_path / "repair.db"
    generated = await _generated_calls(chaos)
    async with run_chaos(chaos) as direct, \
            chaos_proxy(chaos, repair_markup=family if mode == "family" else "auto",
                        store=str(db)) as (_, px):
        raw = await raw_post(direct.chat_url, chat(tools=[WEATHER_TOOL]))
        async with openai.AsyncOpenAI(base_url=px.url, api_key=KEY, max_retries=0) as client, \
                client.chat.completions.stream(model="chaos-1", messages=MESSAGES,  # type: ignore[arg-type]
                                               tools=[WEATHER_TOOL]) as stream:
            final = await stream.get_final_completion()
    raw_content = "".join(
        (json.loads(e.data)["choices"] or [{}])[0].get("delta", {}).get("content") or ""
        for e in SSEDecoder().feed(raw.body) if e.data != "[DONE]")
    marker = ALL_FAMILIES[family]
    assert marker in raw_content  # the upstream really left markup in content
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert marker not in (choice.message.content or "")
    got = [(c.function.name, json.loads(c.function.arguments)) for c in choice.message.tool_calls or []]
    assert got == generated and got
    store = open_store(str(db))
    try:
        [record] = list(store.read())
    finally:
        store.close()
    assert record.extra["repaired_tool_calls"] == len(got) and record.extra["repair"] == (
        family if mode == "family" else "auto")
    assert record.ending == "complete" and record.passed  # what the client got was a good stream
    if mode == "auto":
        assert record.extra["repair_family"] == family


async def test_malformed_dsml_reaches_the_sdk_as_an_error_never_as_content() -> None:
    chaos = ChaosConfig(seed=21, raw_markup="dsml-v4", pacing=Pacing(tokens=6))
    async with chaos_proxy(chaos, repair_markup="auto") as (_, px):
        seen: list[str] = []
        async with openai.AsyncOpenAI(base_url=px.url, api_key=KEY, max_retries=0) as client:
            with pytest.raises(openai.APIError) as info:
                async for chunk in await client.chat.completions.create(
                        model="chaos-1", messages=MESSAGES, tools=[WEATHER_TOOL], stream=True,  # type: ignore[arg-type]
                        extra_headers={"x-sseguard-inject": "malformed_closing_tag"}):
                    seen.extend(c.delta.content or "" for c in chunk.choices)
    assert info.value.code == "markup_malformed_tag"
    assert MARK not in "".join(seen) and "DSML" not in "".join(seen)


async def test_repair_leaves_a_healthy_text_stream_byte_identical() -> None:
    chaos = ChaosConfig(seed=21, pacing=Pacing(tokens=12))
    async with run_chaos(chaos) as direct, chaos_proxy(chaos, repair_markup="auto") as (_, px):
        want = await raw_post(direct.chat_url, chat(stream_options={"include_usage": True}))
        got = await raw_post(f"{px.url}/chat/completions", chat(stream_options={"include_usage": True}))
    assert same_second(got.body) == same_second(want.body)


# ── messages ─────────────────────────────────────────────────────────────────────────────────────


def _messages_events(texts: list[str], *, own_tool: bool = False) -> list[SSEEvent]:
    """A Messages stream: one text block of ``texts`` (then, with ``own_tool``, the upstream's own
    tool_use block), ended with ``end_turn``."""
    raws = [event("message_start", {"type": "message_start", "message": MESSAGE_OBJ}),
            event("content_block_start", {"type": "content_block_start", "index": 0,
                                          "content_block": {"type": "text", "text": ""}})]
    raws += [event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                           "delta": {"type": "text_delta", "text": t}})
             for t in texts]
    raws.append(event("content_block_stop", {"type": "content_block_stop", "index": 0}))
    if own_tool:
        raws += [event("content_block_start", {"type": "content_block_start", "index": 1,
                                               "content_block": {"type": "tool_use", "id": "toolu_up",
                                                                 "name": "get_weather", "input": {}}}),
                 event("content_block_delta", {"type": "content_block_delta", "index": 1, "delta": {
                     "type": "input_json_delta", "partial_json": '{"location": "Paris"}'}}),
                 event("content_block_stop", {"type": "content_block_stop", "index": 1})]
    raws += [event("message_delta", {"type": "message_delta", "delta": {
        "stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": 3}}),
        MESSAGE_STOP]
    return [e for raw in raws for e in SSEDecoder().feed(raw)]


def _run_messages(frames: MessagesRepairFrames, events: list[SSEEvent]) -> tuple[bytes, list[bytes]]:
    pieces = [frames.transform(e) for e in events]
    return b"".join(pieces) + frames.flush(), pieces


def _message(body: bytes) -> tuple[dict[str, Any], Any]:
    """The message a client assembles from ``body``, and the strict contract's verdict on it."""
    checker = checker_for("messages")
    checker.feed(body)
    verdict = checker.close()
    return verdict.message, verdict


@settings(max_examples=120, deadline=None)
@given(family=st.sampled_from(DSML), auto=st.booleans(), prefix=_prefix, suffix=_prefix,
       calls=st.lists(st.tuples(st.sampled_from(["read", "ns::search"]), _values), min_size=1,
                      max_size=3),
       cuts=st.sets(st.integers(1, 400), max_size=25), own_tool=st.booleans())
def test_dsml_in_a_messages_text_block_becomes_tool_use_blocks_under_any_split(
        family: str, auto: bool, prefix: str, suffix: str, calls: list[tuple[str, dict[str, str]]],
        cuts: set[int], own_tool: bool) -> None:
    rendered = render_markup(family, [Call(f"c{i}", name, values, json.dumps(values))
                                      for i, (name, values) in enumerate(calls)])
    frames = MessagesRepairFrames("auto" if auto else family, None)
    body, _ = _run_messages(frames, _messages_events(_split(prefix + rendered + suffix, cuts),
                                                     own_tool=own_tool))
    message, verdict = _message(body)
    assert str(verdict.ending) == "complete" and verdict.findings == ()  # a well-formed stream
    assert message["stop_reason"] == "tool_use" and MARK not in body.decode()
    blocks = message["content"]
    texts = [b["text"] for b in blocks if b["type"] == "text"]
    uses = [b for b in blocks if b["type"] == "tool_use"]
    assert "".join(texts) == prefix + suffix and all(texts)  # no empty text block left behind
    repaired = [(u["name"], u["input"]) for u in uses if u["id"] != "toolu_up"]
    assert repaired == [(name, values) for name, values in calls]
    assert all(u["id"].startswith("toolu_") and len(u["id"]) == 30 for u in uses
               if u["id"] != "toolu_up")
    if own_tool:
        assert (uses[-1]["id"], uses[-1]["input"]) == ("toolu_up", {"location": "Paris"})
    assert frames.failure is None and frames.calls == len(calls)


@settings(max_examples=80, deadline=None)
# no marker lead: "<", "｜", "]" (MiniMax-M3's token ]<]minimax[>[), "[" (Mistral's [TOOL_CALLS]) and
# "f" (Phi-4-mini's functools[, GigaChat 3's "function call"), which auto holds at a chunk end
@given(texts=st.lists(st.text(st.characters(blacklist_characters="<\n｜][f",
                                            blacklist_categories=("Cs",)), min_size=1),
                      min_size=0, max_size=6),
       family=st.sampled_from([*DSML, "auto"]), own_tool=st.booleans())
def test_a_messages_stream_without_markup_passes_byte_identical(texts: list[str], family: str,
                                                                own_tool: bool) -> None:
    # ``auto`` holds an answer that opens with whitespace only (a family's markup may follow it) or
    # with what may still become Harmony's ``to=R`` header lead (``t``, `` to``, ``to=x``): those holds
    # are stated by their own tests; here the first piece is already plain text.
    lead = texts[0].lstrip() if texts else "."
    assume(family != "auto" or (lead != "" and not "to=".startswith(lead[:3])))
    events = _messages_events(texts, own_tool=own_tool)
    body, _ = _run_messages(MessagesRepairFrames(family, None), events)
    assert body == b"".join(e.raw for e in events)


def test_unparseable_markup_in_a_messages_block_stops_the_stream() -> None:
    content = render_markup("dsml-v4", [Call("c0", "read", {"path": "a"}, "{}")], malformed=True)
    frames = MessagesRepairFrames("dsml-v4", None)
    body, _ = _run_messages(frames, _messages_events([content]))
    assert frames.failure is not None and frames.failure[0] == "markup_malformed_tag"
    assert MARK not in body.decode()


def test_a_messages_call_to_a_tool_not_offered_is_kept_and_reported() -> None:
    content = render_markup("dsml-v32", [Call("c0", "rm_rf", {"path": "/"}, "{}")])
    frames = frames_for("dsml-v32", {"tools": [{"name": "get_weather", "input_schema": {}}]},
                        Api.MESSAGES)
    assert isinstance(frames, MessagesRepairFrames)
    body, _ = _run_messages(frames, _messages_events([content]))
    assert [b["name"] for b in _message(body)[0]["content"]] == ["rm_rf"]
    assert [f.kind for f in frames.findings()] == [FindingKind.TOOL_UNDEFINED_FUNCTION]


@pytest.mark.parametrize("family", DSML)
async def test_the_anthropic_sdk_gets_tool_use_blocks_from_raw_dsml(family: str,
                                                                     tmp_path: Path) -> None:
    chaos = ChaosConfig(seed=21, raw_markup=family, pacing=Pacing(tokens=6))
    db = tmp_path / "repair.db"
    tool: Any = {"name": "get_weather", "description": "Weather.",
                 "input_schema": WEATHER_TOOL["function"]["parameters"]}
    request: dict[str, Any] = {"model": "chaos-1", "max_tokens": 1024, "messages": MESSAGES,
                               "tools": [tool], "stream": True}
    async with run_chaos(replace(chaos, raw_markup=None)) as plain, \
            anthropic.AsyncAnthropic(base_url=plain.url.removesuffix("/v1"), api_key=KEY,
                                     max_retries=0) as client, \
            client.messages.stream(model="chaos-1", max_tokens=1024, messages=MESSAGES,
                                   tools=[tool]) as stream:
        # The calls the chaos server generates, as it sends them structured: ground truth.
        generated = [(b.name, b.input) for b in (await stream.get_final_message()).content
                     if b.type == "tool_use"]
    async with run_chaos(chaos) as direct, \
            chaos_proxy(chaos, repair_markup="auto", store=str(db)) as (_, px):
        raw = await raw_post(direct.messages_url, request)
        async with anthropic.AsyncAnthropic(base_url=px.url.removesuffix("/v1"), api_key=KEY,
                                            max_retries=0) as client, \
                client.messages.stream(model="chaos-1", max_tokens=1024, messages=MESSAGES,
                                       tools=[tool]) as stream:
            final = await stream.get_final_message()
    raw_text = "".join(json.loads(e.data)["delta"].get("text", "")
                       for e in SSEDecoder().feed(raw.body) if e.event == "content_block_delta")
    assert MARK in raw_text  # the upstream really left markup in a text block
    assert final.stop_reason == "tool_use"
    got = [(b.name, b.input) for b in final.content if b.type == "tool_use"]
    assert got == generated and got
    assert all(MARK not in b.text for b in final.content if b.type == "text")
    store = open_store(str(db))
    try:
        [record] = list(store.read())
    finally:
        store.close()
    assert record.api == "messages" and record.ending == "complete" and record.passed
    assert record.extra["repaired_tool_calls"] == len(got) and record.extra["repair_family"] == family


# ── responses ────────────────────────────────────────────────────────────────────────────────────


def _responses_events(texts: list[str], *, own_item: bool = False) -> list[SSEEvent]:
    """A Responses stream: one message item of ``texts`` (then, with ``own_item``, the upstream's own
    function_call item), ending with response.completed."""
    r = Responses()
    text = "".join(texts)
    body = r.head() + r.deltas(texts) + r.closing(text)
    if own_item:
        item = {"id": "fc_up", "type": "function_call", "status": "in_progress", "arguments": "",
                "call_id": "call_up", "name": "get_weather"}
        done = {**item, "status": "completed", "arguments": '{"location": "Paris"}'}
        body += (r.ev("response.output_item.added", output_index=1, item=item)
                 + r.ev("response.function_call_arguments.delta", item_id="fc_up", output_index=1,
                        delta=done["arguments"])
                 + r.ev("response.function_call_arguments.done", item_id="fc_up", output_index=1,
                        arguments=done["arguments"])
                 + r.ev("response.output_item.done", output_index=1, item=done))
    body += r.completed(text)
    return SSEDecoder().feed(body)


def _run_responses(frames: ResponsesRepairFrames, events: list[SSEEvent]) -> bytes:
    return b"".join(frames.transform(e) for e in events) + frames.flush()


def _response(body: bytes) -> tuple[dict[str, Any], Any]:
    checker = checker_for("responses")
    checker.feed(body)
    verdict = checker.close()
    return verdict.message, verdict


def _terminal_output(body: bytes) -> list[dict[str, Any]]:
    [last] = [e for e in SSEDecoder().feed(body) if e.event == "response.completed"]
    output: list[dict[str, Any]] = json.loads(last.data)["response"]["output"]
    return output


@settings(max_examples=120, deadline=None)
@given(family=st.sampled_from(DSML), auto=st.booleans(), prefix=_prefix, suffix=_prefix,
       calls=st.lists(st.tuples(st.sampled_from(["read", "ns::search"]), _values), min_size=1,
                      max_size=3),
       cuts=st.sets(st.integers(1, 400), max_size=25), own_item=st.booleans())
def test_dsml_in_output_text_becomes_function_call_items_under_any_split(
        family: str, auto: bool, prefix: str, suffix: str, calls: list[tuple[str, dict[str, str]]],
        cuts: set[int], own_item: bool) -> None:
    rendered = render_markup(family, [Call(f"c{i}", name, values, json.dumps(values))
                                      for i, (name, values) in enumerate(calls)])
    frames = ResponsesRepairFrames("auto" if auto else family, None)
    body = _run_responses(frames, _responses_events(_split(prefix + rendered + suffix, cuts),
                                                    own_item=own_item))
    response, verdict = _response(body)
    # Well-formed: numbering, item order, done texts equal to the deltas, nothing left open.
    assert str(verdict.ending) == "complete" and verdict.findings == (), verdict.findings
    assert MARK not in body.decode()
    output = response["output"]
    assert output == _terminal_output(body)  # the terminal event lists what the client got
    texts = ["".join(c["text"] for c in item["content"]) for item in output
             if item["type"] == "message"]
    repaired = [(i["name"], json.loads(i["arguments"])) for i in output
                if i["type"] == "function_call" and i["id"] != "fc_up"]
    assert "".join(texts) == prefix + suffix and all(texts)  # no empty message item left behind
    assert repaired == [(name, values) for name, values in calls]
    assert all(i["call_id"].startswith("call_") for i in output if i["type"] == "function_call")
    if own_item:
        assert (output[-1]["id"], output[-1]["arguments"]) == ("fc_up", '{"location": "Paris"}')
    assert frames.failure is None and frames.calls == len(calls)


@settings(max_examples=80, deadline=None)
# no marker lead: "<", "｜", "]" (MiniMax-M3's token ]<]minimax[>[), "[" (Mistral's [TOOL_CALLS]) and
# "f" (Phi-4-mini's functools[, GigaChat 3's "function call"), which auto holds at a chunk end
@given(texts=st.lists(st.text(st.characters(blacklist_characters="<\n｜][f",
                                            blacklist_categories=("Cs",)), min_size=1),
                      min_size=0, max_size=6),
       family=st.sampled_from([*DSML, "auto"]), own_item=st.booleans())
def test_a_responses_stream_without_markup_passes_byte_identical(texts: list[str], family: str,
                                                                 own_item: bool) -> None:
    # ``auto`` holds an answer that opens with whitespace only (a family's markup may follow it) or
    # with what may still become Harmony's ``to=R`` header lead (``t``, `` to``, ``to=x``): those holds
    # are stated by their own tests; here the first piece is already plain text.
    lead = texts[0].lstrip() if texts else "."
    assume(family != "auto" or (lead != "" and not "to=".startswith(lead[:3])))
    events = _responses_events(texts, own_item=own_item)
    body = _run_responses(ResponsesRepairFrames(family, None), events)
    assert body == b"".join(e.raw for e in events)


def test_unparseable_markup_in_output_text_stops_the_stream() -> None:
    content = render_markup("dsml-v4", [Call("c0", "read", {"path": "a"}, "{}")], malformed=True)
    frames = ResponsesRepairFrames("dsml-v4", None)
    body = _run_responses(frames, _responses_events([content]))
    assert frames.failure is not None and frames.failure[0] == "markup_malformed_tag"
    assert MARK not in body.decode()


def test_a_responses_call_to_a_tool_not_offered_is_kept_and_reported() -> None:
    content = render_markup("dsml-v32", [Call("c0", "rm_rf", {"path": "/"}, "{}")])
    frames = frames_for("dsml-v32", {"tools": [{"type": "function", "name": "get_weather",
                                                "parameters": {}}]}, Api.RESPONSES)
    assert isinstance(frames, ResponsesRepairFrames)
    body = _run_responses(frames, _responses_events([content]))
    assert [i["name"] for i in _response(body)[0]["output"]] == ["rm_rf"]
    assert [f.kind for f in frames.findings()] == [FindingKind.TOOL_UNDEFINED_FUNCTION]


@pytest.mark.parametrize("family", DSML)
async def test_the_openai_sdk_gets_function_call_items_from_raw_dsml(family: str) -> None:
    chaos = ChaosConfig(seed=21, raw_markup=family, pacing=Pacing(tokens=6))
    tool: Any = {"type": "function", "name": "get_weather", "description": "Weather.",
                 "parameters": WEATHER_TOOL["function"]["parameters"]}
    request: dict[str, Any] = {"model": "chaos-1", "input": "Weather?", "tools": [tool],
                               "stream": True}
    async with run_chaos(replace(chaos, raw_markup=None)) as plain, \
            openai.AsyncOpenAI(base_url=plain.url, api_key=KEY, max_retries=0) as client, \
            client.responses.stream(model="chaos-1", input="Weather?", tools=[tool]) as stream:
        # The calls the chaos server generates, as it sends them structured: ground truth.
        generated = [(i.name, json.loads(i.arguments))
                     for i in (await stream.get_final_response()).output if i.type == "function_call"]
    async with run_chaos(chaos) as direct, chaos_proxy(chaos, repair_markup="auto") as (_, px):
        raw = await raw_post(direct.responses_url, request)
        async with openai.AsyncOpenAI(base_url=px.url, api_key=KEY, max_retries=0) as client, \
                client.responses.stream(model="chaos-1", input="Weather?",
                                        tools=[tool]) as stream:
            final = await stream.get_final_response()
    raw_text = "".join(json.loads(e.data)["delta"] for e in SSEDecoder().feed(raw.body)
                       if e.event == "response.output_text.delta")
    assert MARK in raw_text  # the upstream really left markup in output_text
    got = [(i.name, json.loads(i.arguments)) for i in final.output if i.type == "function_call"]
    assert got == generated and got
    assert MARK not in final.output_text


@pytest.mark.parametrize("api", ["responses", "messages"])
async def test_a_repaired_stream_with_reasoning_first_is_a_well_formed_stream(api: str) -> None:
    """Reasoning (thinking) before the text: the repaired stream the client gets passes the strict
    contract of its protocol, items in order."""
    chaos = ChaosConfig(seed=4, raw_markup="dsml-v32", pacing=Pacing(tokens=6, reasoning_tokens=4))
    schema = WEATHER_TOOL["function"]["parameters"]
    if api == "responses":
        tool: dict[str, Any] = {"type": "function", "name": "get_weather", "parameters": schema}
        request: dict[str, Any] = {"model": "chaos-1", "input": "Weather?", "tools": [tool],
                                   "reasoning": {"effort": "low"}, "stream": True}
        kinds, key = ["reasoning", "message", "function_call"], "output"
    else:
        tool = {"name": "get_weather", "input_schema": schema}
        request = {"model": "chaos-1", "max_tokens": 4096, "tools": [tool], "stream": True,
                   "messages": MESSAGES, "thinking": {"type": "enabled", "budget_tokens": 1024}}
        kinds, key = ["thinking", "text", "tool_use"], "content"
    async with chaos_proxy(chaos, repair_markup="auto") as (_, px):
        got = await raw_post(f"{px.url}/{api}", request)
    checker = checker_for(api, request)
    checker.feed(got.body)
    verdict = checker.close()
    assert str(verdict.ending) == "complete" and verdict.findings == ()
    assert [item["type"] for item in verdict.message[key]] == kinds
    assert MARK not in got.body.decode()
