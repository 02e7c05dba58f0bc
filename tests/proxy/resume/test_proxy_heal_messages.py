"""``--resume anthropic``: a Messages stream that broke after text is continued by prefill and spliced
into the same client stream; with extended thinking it is not, and fails as before."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anthropic
from hypothesis import given, settings
from hypothesis import strategies as st

from sseguard.chaos import ChaosConfig, Fault, Pacing, run_chaos
from sseguard.core.contract import checker_for, protocol
from sseguard.core.policy import AGENTS
from sseguard.core.redact import DEFAULT
from sseguard.core.verdict import Api
from sseguard.proxy import run_proxy
from sseguard.proxy.machines.stream import StreamMachine
from sseguard.proxy.resume.dialects import DIALECTS
from sseguard.proxy.resume.messages import MessagesResume
from support.protocol_streams import Messages
from support.proxy import KEY, proxy_config, raw_post
from support.proxy_heal import Step, heal_proxy
from support.proxy_machine import client_text, drive, frames_of, machine_for, split


def _ev(obj: dict[str, Any]) -> bytes:
    return f"event: {obj['type']}\ndata: {json.dumps(obj)}\n\n".encode()


START = _ev({"type": "message_start", "message": {
    "id": "msg_client", "type": "message", "role": "assistant", "model": "m", "content": [],
    "stop_reason": None, "usage": {"input_tokens": 3, "output_tokens": 0}}})
PART = (START + _ev({"type": "content_block_start", "index": 0,
                     "content_block": {"type": "text", "text": ""}})
        + _ev({"type": "content_block_delta", "index": 0,
               "delta": {"type": "text_delta", "text": "Hello "}}))
REST = (_ev({"type": "message_start", "message": {
    "id": "msg_other", "type": "message", "role": "assistant", "model": "m", "content": [],
    "stop_reason": None, "usage": {"input_tokens": 5, "output_tokens": 0}}})
        + _ev({"type": "content_block_start", "index": 0,
               "content_block": {"type": "text", "text": ""}})
        + _ev({"type": "content_block_delta", "index": 0,
               "delta": {"type": "text_delta", "text": " world"}})
        + _ev({"type": "content_block_stop", "index": 0})
        + _ev({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
               "usage": {"output_tokens": 2}})
        + _ev({"type": "message_stop"}))
REQUEST = {"model": "m", "max_tokens": 100, "stream": True,
           "messages": [{"role": "user", "content": "hi"}]}
HEADERS = {"anthropic-version": "2023-06-01"}


def _frames(body: bytes) -> list[dict[str, Any]]:
    return [json.loads(f.split(b"data: ", 1)[1]) for f in body.split(b"\n\n") if b"data: " in f]


async def test_a_messages_break_after_text_is_continued_by_prefill() -> None:
    async with heal_proxy([Step(PART, end="reset"), Step(REST)], resume="anthropic") as (
            up, px, _, records):
        got = await raw_post(f"{px.url}/messages", REQUEST, headers=HEADERS)
        for _ in range(500):
            if len(records.items) >= 2:
                break
            await asyncio.sleep(0.01)
    sent = json.loads(up.bodies[1])
    assert sent["messages"] == [{"role": "user", "content": "hi"},
                                {"role": "assistant", "content": "Hello"}]
    frames = _frames(got.body)
    assert [f["type"] for f in frames] == [
        "message_start", "content_block_start", "content_block_delta", "content_block_delta",
        "content_block_stop", "message_delta", "message_stop"]
    assert frames[0]["message"]["id"] == "msg_client"
    assert "".join(f["delta"]["text"] for f in frames if f["type"] == "content_block_delta") == \
        "Hello world"
    client = next(r for r in records.items if r.heal_of is None)
    assert client.ending == "complete" and client.healed == "resume"


THOUGHT = (START + _ev({"type": "content_block_start", "index": 0,
                       "content_block": {"type": "thinking", "thinking": "", "signature": ""}})
           + _ev({"type": "content_block_delta", "index": 0,
                  "delta": {"type": "thinking_delta", "thinking": "Let me think."}})
           + _ev({"type": "content_block_delta", "index": 0,
                  "delta": {"type": "signature_delta", "signature": "c2ln"}})
           + _ev({"type": "content_block_stop", "index": 0})
           + _ev({"type": "content_block_start", "index": 1,
                  "content_block": {"type": "text", "text": ""}})
           + _ev({"type": "content_block_delta", "index": 1,
                  "delta": {"type": "text_delta", "text": "Hello "}}))
#: The same answer asked with ``display: "omitted"``: the thinking block carries no text.
OMITTED = THOUGHT.replace(_ev({"type": "content_block_delta", "index": 0,
                               "delta": {"type": "thinking_delta", "thinking": "Let me think."}}),
                          b"")


async def test_a_break_after_thinking_text_reached_the_client_is_not_continued() -> None:
    request = {**REQUEST, "thinking": {"type": "enabled", "budget_tokens": 1024}}
    async with heal_proxy([Step(THOUGHT, end="reset"), Step(REST)], resume="anthropic") as (
            up, px, _, _r):
        got = await raw_post(f"{px.url}/messages", request, headers=HEADERS)
    assert len(up.paths) == 1
    assert _frames(got.body)[-1]["type"] == "error"


async def test_with_thinking_omitted_a_break_is_continued_without_thinking_in_one_text_block() -> None:
    request = {**REQUEST, "thinking": {"type": "adaptive", "display": "omitted"},
               "context_management": {"edits": [
                   {"type": "clear_thinking_20251015", "keep": "all"},
                   {"type": "clear_tool_uses_20250919"}]}}
    async with heal_proxy([Step(OMITTED, end="reset"), Step(REST)], resume="anthropic") as (
            up, px, _, records):
        got = await raw_post(f"{px.url}/messages", request, headers=HEADERS)
        for _ in range(500):
            if len(records.items) >= 2:
                break
            await asyncio.sleep(0.01)
    assert json.loads(up.bodies[1]) == {  # what is left of the budget: one delta went out
        "model": "m", "max_tokens": 99, "stream": True,
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello"}],
        "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]}}
    frames = _frames(got.body)
    assert [(f["type"], f.get("index")) for f in frames] == [
        ("message_start", None), ("content_block_start", 0), ("content_block_delta", 0),
        ("content_block_stop", 0), ("content_block_start", 1), ("content_block_delta", 1),
        ("content_block_delta", 1), ("content_block_stop", 1), ("message_delta", None),
        ("message_stop", None)]
    assert [f["delta"]["text"] for f in frames if f["type"] == "content_block_delta"
            and f["delta"]["type"] == "text_delta"] == ["Hello ", "world"]
    client = next(r for r in records.items if r.heal_of is None)
    assert client.ending == "complete" and client.healed == "resume"
    assert client.extra["heal_dialect"] == "anthropic"


async def test_with_thinking_cut_inside_an_empty_thinking_block_the_block_is_closed_first() -> None:
    request = {**REQUEST, "thinking": {"type": "adaptive", "display": "omitted"}}
    cut = OMITTED[:OMITTED.index(b"event: content_block_stop")]
    async with heal_proxy([Step(cut, end="reset"), Step(REST)], resume="anthropic") as (
            up, px, _, _r):
        got = await raw_post(f"{px.url}/messages", request, headers=HEADERS)
    assert json.loads(up.bodies[1])["messages"] == [{"role": "user", "content": "hi"}]
    frames = _frames(got.body)
    assert [(f["type"], f.get("index")) for f in frames] == [
        ("message_start", None), ("content_block_start", 0), ("content_block_delta", 0),
        ("content_block_stop", 0), ("content_block_start", 1), ("content_block_delta", 1),
        ("content_block_stop", 1), ("message_delta", None), ("message_stop", None)]


async def test_chaos_messages_streams_heal_to_the_fault_free_answer_for_the_anthropic_sdk() -> None:
    pacing = Pacing(ttft_ms=0, inter_token_ms=0, tokens=16)
    faults = {Fault.TRUNCATED: 0.2, Fault.CUT_MID_FRAME: 0.1, Fault.TRANSPORT_ERROR: 0.05,
              Fault.HTTP_ERROR: 0.05}
    tool = {"name": "get_weather", "description": "weather", "input_schema": {
        "type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}}
    cases = [([{"role": "user", "content": f"what is the weather in city {i}?"}],
              [tool] if i % 2 else None) for i in range(60)]
    async with run_chaos(ChaosConfig(seed=3, pacing=pacing, faults=faults)) as bad, \
            run_chaos(ChaosConfig(seed=3, pacing=pacing)) as good, \
            run_proxy(proxy_config(bad.url, resume="vllm,anthropic", resume_max=20,
                                   retry=20)) as px:
        px.state.sleep = _no_wait

        async def answer(base: str, messages: list[dict[str, str]],
                         tools: list[dict[str, Any]] | None) -> tuple[str, list[Any], str | None]:
            client = anthropic.AsyncAnthropic(base_url=base, api_key=KEY, max_retries=0, timeout=30)
            async with client, client.messages.stream(
                    model="chaos-1", max_tokens=200, messages=messages,  # type: ignore[arg-type]
                    **({"tools": tools} if tools else {})) as stream:
                message = await stream.get_final_message()
            text = "".join(b.text for b in message.content if b.type == "text")
            calls = [(b.name, b.input) for b in message.content if b.type == "tool_use"]
            return text, calls, message.stop_reason

        root = px.url.removesuffix("/v1")
        got = await asyncio.gather(*(answer(root, m, t) for m, t in cases))
        want = await asyncio.gather(*(answer(good.url.removesuffix("/v1"), m, t) for m, t in cases))
        requests = bad.stats.requests
    assert got == want
    assert all(stop in ("end_turn", "tool_use", "max_tokens") for _, _, stop in want)
    assert requests > len(cases)


async def _no_wait(seconds: float) -> None:
    return None


def test_a_closed_text_block_ending_in_a_space_with_no_stop_reason_heals_into_one_exact_block() -> None:
    """The issue-38 bug, literally: the prefill must drop the trailing space, the continuation
    brings it again, and the client still gets one block with the answer's exact text."""
    answer = "The weather in Lisbon is mild today, with a light breeze from the Atlantic, " \
             "and the afternoon should stay dry."
    half = "The weather in Lisbon is mild today, with a light breeze from the Atlantic, "
    broken = (START + _ev({"type": "content_block_start", "index": 0,
                           "content_block": {"type": "text", "text": ""}})
              + _ev({"type": "content_block_delta", "index": 0,
                     "delta": {"type": "text_delta", "text": half}})
              + _ev({"type": "content_block_stop", "index": 0}))
    asked: list[Any] = []

    def continuation(body: bytes) -> list[bytes]:
        asked.append(json.loads(body)["messages"][-1])
        return [REST.replace(b'" world"', b'" and the afternoon should stay dry."')]

    run = drive(machine_for("messages", resume="anthropic"), [broken], {},
                continuation=continuation)
    assert asked == [{"role": "assistant", "content": half.rstrip()}]
    got = frames_of(bytes(run.body))
    assert [f["type"] for f in got].count("content_block_start") == 1
    assert {f["index"] for f in got if "index" in f} == {0}
    text = "".join(f["delta"]["text"] for f in got if f["type"] == "content_block_delta")
    assert text == answer and len(text) == 110
    assert run.ended == "eof"


THINKING_OMITTED = {"model": "m", "stream": True, "max_tokens": 100,
                    "thinking": {"type": "adaptive", "display": "omitted"},
                    "messages": [{"role": "user", "content": "hi"}]}


@settings(max_examples=100, deadline=None)
@given(words=st.lists(st.sampled_from(["Hello", " ", "world", "\n", "é", ".", " end"]), min_size=1,
                      max_size=6),
       fault=st.sampled_from(["cut", "reset", "stall"]), at=st.integers(0, 10**6),
       cuts=st.lists(st.integers(0, 10**6), max_size=8), sizes=st.lists(st.integers(1, 6),
                                                                          max_size=4))
def test_a_thinking_omitted_stream_cut_anywhere_heals_into_one_exact_text_block(
        words: list[str], fault: str, at: int, cuts: list[int], sizes: list[int]) -> None:
    """Claude Code's requests: the thinking block carries no text, so any break is continued
    without thinking, and the client's answer is the fault-free one, in one text block."""
    full = "".join(words)
    r = Messages(mid="msg_1").start()
    # display: "omitted": the block, its signature, no thinking text
    r.ev("content_block_start", index=0, content_block={"type": "thinking", "thinking": "",
                                                        "signature": ""})
    r.ev("content_block_delta", index=0, delta={"type": "signature_delta", "signature": "c2ln"})
    r.ev("content_block_stop", index=0)
    r.index = 1
    whole = r.text(words).delta("end_turn").stop().body()
    at %= len(whole) + 1
    end = {"cut": {}, "reset": {"broke": "upstream connection reset after 1 bytes"},
           "stall": {"stalled": True}}[fault]
    asked: list[dict[str, Any]] = []

    def continuation(body: bytes) -> list[bytes]:
        obj = json.loads(body)
        asked.append(obj)
        assert "thinking" not in obj  # Anthropic refuses a prefill with thinking on
        last = obj["messages"][-1]
        done = last["content"] if last["role"] == "assistant" else ""
        assert full.startswith(done)
        rest, pieces = full[len(done):], []
        for size in sizes:
            if rest:
                pieces.append(rest[:size])
                rest = rest[size:]
        if rest:
            pieces.append(rest)
        return split(Messages(mid="msg_2").start().text(pieces).delta("end_turn").stop().body(),
                     cuts)

    dialect = DIALECTS["anthropic"]
    proto = protocol(Api.MESSAGES)
    machine = StreamMachine(
        api=proto.api, wire=proto.relay, policy=AGENTS,
        checker=checker_for(proto.api, THINKING_OMITTED, keep_text=False),
        frames=dialect.frames(), redactor=DEFAULT, request_obj=THINKING_OMITTED,
        resume=dialect.state(THINKING_OMITTED, 2), continued_frames=dialect.frames)
    run = drive(machine, split(whole[:at], cuts), end, continuation=continuation)
    text, blocks = client_text("messages", bytes(run.body))
    assert full.startswith(text)
    if run.continuations:
        assert run.ended == "eof" and text == full and blocks == 1
        checker = checker_for(Api.MESSAGES, THINKING_OMITTED)
        checker.feed(bytes(run.body))
        assert AGENTS.failure(checker.close()) is None


def _continuation_request(request: dict[str, Any]) -> dict[str, Any]:
    state = MessagesResume(request, 2)
    state.note(OMITTED)
    assert state.why_not() is None
    return dict(json.loads(state.continuation().body))


def test_the_continuation_drops_thinking_and_only_the_edits_that_need_it() -> None:
    base = {"model": "m", "max_tokens": 100, "stream": True,
            "messages": [{"role": "user", "content": "hi"}]}
    prefill = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello"}]
    # What is left of the budget: one text delta ("Hello") went out.
    left = {"max_tokens": 99}
    only_thinking_edit = {**base, "thinking": {"type": "enabled", "budget_tokens": 2048},
                          "context_management": {"edits": [{"type": "clear_thinking_20251015"}]}}
    assert _continuation_request(only_thinking_edit) == {**base, "messages": prefill, **left}
    other_key = {**base, "thinking": {"type": "adaptive", "display": "omitted"},
                 "context_management": {"edits": [{"type": "clear_thinking_20251015"}],
                                        "note": "kept"}}
    assert _continuation_request(other_key) == {**base, "messages": prefill,
                                                "context_management": {"note": "kept"}, **left}
    no_thinking = {**base, "context_management": {"edits": [{"type": "clear_thinking_20251015"}]}}
    assert _continuation_request(no_thinking) == {**no_thinking, "messages": prefill, **left}
