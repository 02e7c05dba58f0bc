"""``first_answer``: chaos breaks each conversation's first answer once, at half of it, and answers every
later request of that conversation whole — what a healing layer is measured against (issue 38).

The log alone first (hypothesis: whatever the order of requests over several conversations, each is
broken exactly once, at its first request that can carry the fault), then the real openai and
anthropic SDKs against a chaos server, and the configuration (TOML key, CLI flag).
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import anthropic
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from sseguard.chaos import ChaosConfig, Fault, FaultOptions, Pacing, run_chaos, run_chaos_in_thread
from sseguard.chaos.conversations import ConversationLog, first_answer_decision, settle
from sseguard.chaos.faults import Decision
from sseguard.chaos.request import ChatRequest, Tool
from sseguard.cli import app
from sseguard.core.errors import ConfigError

PACING = Pacing(tokens=12, reasoning_tokens=0)
HELLO: list[Any] = [{"role": "user", "content": "Say hello"}]


def _request(first_user: str, *, stream: bool = True, calls: bool = False) -> ChatRequest:
    """A request of conversation ``first_user``; ``calls``: its answer is a tool call (tools
    offered, the user's turn)."""
    return ChatRequest(model="m", stream=stream, include_usage=False,
                       tools=(Tool("t", {}),) if calls else (), tool_choice=None,
                       parallel_tool_calls=True, max_tokens=None, n=1, reasoning=0.0,
                       last_role="user", last_text=first_user, prompt_words=2,
                       fingerprint=b"f", first_user=first_user)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.booleans(), st.booleans()),
                max_size=12))
def test_each_conversation_breaks_once_at_its_first_text_stream(
        arrivals: list[tuple[str, bool, bool]]) -> None:
    log = ConversationLog()
    broken: list[tuple[str, int]] = []
    for position, (who, stream, calls) in enumerate(arrivals):
        _, conv = log.arrive(_request(who, stream=stream, calls=calls))
        fault, at = first_answer_decision(Fault.TRUNCATED, conv,
                                          _request(who, stream=stream, calls=calls))
        # truncated is a stream fault: a plain request cannot carry it (``decide.applicable``)
        applied = Decision(fault if stream else None, at=at)
        settle(applied, conv)
        if applied.fault is not None:
            broken.append((who, position))
            assert at == 0.5
    expected = []
    for who in ("a", "b", "c"):
        first = next((i for i, (w, s, c) in enumerate(arrivals) if w == who and s and not c),
                     None)
        if first is not None:
            expected.append((who, first))
    assert sorted(broken) == sorted(expected)
    assert sum(c.requests for c in log.seen.values()) == len(arrivals)


def _chat_text(client: openai.OpenAI, messages: list[Any], *, stream: bool = True) -> str:
    if not stream:
        answer = client.chat.completions.create(model="chaos-1", messages=messages)
        return answer.choices[0].message.content or ""
    chunks = list(client.chat.completions.create(model="chaos-1", messages=messages, stream=True))
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def test_the_first_answer_is_cut_at_half_and_every_later_request_is_whole() -> None:
    with run_chaos_in_thread(ChaosConfig(seed=4, pacing=PACING,
                                         first_answer=Fault.TRUNCATED)) as up:
        with openai.OpenAI(base_url=up.url, api_key="sk-test", max_retries=0) as client:
            cut = _chat_text(client, HELLO)  # the SDK ends quietly on a clean cut
            again = _chat_text(client, HELLO)
            turn = [*HELLO, {"role": "assistant", "content": again},
                    {"role": "user", "content": "And goodbye?"}]
            later = _chat_text(client, turn)
            other = _chat_text(client, [{"role": "user", "content": "Another question"}])
            other_again = _chat_text(client, [{"role": "user", "content": "Another question"}])
        with urllib.request.urlopen(up.url.removesuffix("/v1") + "/chaos/conversations") as r:
            log = json.load(r)
    assert len(again.split()) == 12 and again.startswith(cut) and len(cut.split()) == 7
    assert len(later.split()) == 12 and later != again
    assert other_again.startswith(other) and len(other.split()) == 7
    assert up.stats.faults == {"truncated": 2, "none": 3}
    assert up.stats.sources["first_answer"] == 2 and up.stats.conversations == 2
    assert sorted((c["requests"], c["broken"]) for c in log.values()) == [
        (2, "truncated"), (3, "truncated")]
    assert {c["last_text"] for c in log.values()} == {later, other_again}


def test_a_tool_call_answer_is_whole_and_the_text_answer_after_its_result_is_cut() -> None:
    tools: list[Any] = [{"type": "function", "function": {
        "name": "get_weather", "parameters": {"type": "object", "properties": {
            "location": {"type": "string"}}}}}]
    config = ChaosConfig(seed=4, pacing=PACING, first_answer=Fault.TRUNCATED)
    with run_chaos_in_thread(config) as up, \
            openai.OpenAI(base_url=up.url, api_key="sk-test", max_retries=0) as client:
        call = client.chat.completions.create(model="chaos-1", messages=HELLO, tools=tools)
        made = (call.choices[0].message.tool_calls or [])[0]
        turn = [*HELLO, call.choices[0].message.model_dump(exclude_none=True),
                {"role": "tool", "tool_call_id": made.id, "content": "sunny"}]
        cut = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(
            model="chaos-1", messages=turn, tools=tools, stream=True) if c.choices)
        whole = _chat_text(client, turn)  # no tools: the same conversation, answered whole
    assert call.choices[0].finish_reason == "tool_calls"
    assert len(cut.split()) == 7 and len(whole.split()) == 12 and whole.startswith(cut)
    assert up.stats.faults == {"none": 2, "truncated": 1}


def test_a_plain_request_cannot_be_cut_so_the_conversations_next_stream_is() -> None:
    config = ChaosConfig(seed=4, pacing=PACING, first_answer=Fault.TRUNCATED)
    with run_chaos_in_thread(config) as up, \
            openai.OpenAI(base_url=up.url, api_key="sk-test", max_retries=0) as client:
        plain = _chat_text(client, HELLO, stream=False)
        cut = _chat_text(client, HELLO)
        whole = _chat_text(client, HELLO)
    assert plain == whole and len(whole.split()) == 12 and len(cut.split()) == 7
    assert up.stats.faults == {"none": 2, "truncated": 1}
    assert up.stats.skipped == {"truncated": 1}


async def test_a_first_answer_failed_before_its_first_byte_is_whole_when_asked_again() -> None:
    config = ChaosConfig(seed=4, pacing=PACING, first_answer=Fault.HTTP_ERROR,
                         options=FaultOptions(http_statuses=(503,)))
    async with run_chaos(config) as up:
        client = anthropic.AsyncAnthropic(base_url=up.url.removesuffix("/v1"), api_key="sk-test",
                                          max_retries=0)
        with pytest.raises(anthropic.InternalServerError) as failed:
            await client.messages.create(model="claude-chaos", max_tokens=256, messages=HELLO)
        message = await client.messages.create(model="claude-chaos", max_tokens=256,
                                               messages=HELLO)
        await client.close()
    assert failed.value.status_code == 503
    assert message.stop_reason == "end_turn" and len(message.content[0].text.split()) == 12  # type: ignore[union-attr]
    assert up.stats.statuses == {503: 1, 200: 1}


async def test_a_background_reading_of_a_broken_first_answer_is_whole() -> None:
    async with run_chaos(ChaosConfig(seed=4, pacing=PACING, first_answer=Fault.TRUNCATED)) as up:
        client = openai.AsyncOpenAI(base_url=up.url, api_key="sk-test", max_retries=0)
        stream = await client.responses.create(model="m", input="Say hello", stream=True,
                                               background=True, store=True)
        events: list[Any] = [e async for e in stream]
        again = await client.responses.retrieve(events[0].response.id, stream=True,
                                                starting_after=events[-1].sequence_number)
        rest: list[Any] = [e async for e in again]
        await client.close()
    assert events[-1].type != "response.completed" and rest[-1].type == "response.completed"
    numbers = [e.sequence_number for e in events + rest]
    assert numbers == list(range(len(numbers)))
    assert up.stats.faults == {"truncated": 1, "none": 1}


def test_first_answer_is_read_from_toml_and_an_unknown_fault_is_a_config_error() -> None:
    assert ChaosConfig.from_mapping({"first_answer": "truncated"}).first_answer is Fault.TRUNCATED
    assert ChaosConfig().with_overrides(first_answer="http_error").first_answer is Fault.HTTP_ERROR
    with pytest.raises(ConfigError, match="unknown fault 'cut'"):
        ChaosConfig.from_mapping({"first_answer": "cut"})


def test_the_cli_refuses_an_unknown_first_answer_fault_in_one_line() -> None:
    result = CliRunner().invoke(app, ["chaos", "--first-answer", "cut"])
    assert result.exit_code == 2
    assert "unknown fault 'cut'" in result.output and "Traceback" not in result.output


def test_the_conversation_is_the_first_user_message_of_every_protocol() -> None:
    from sseguard.chaos import chat, gemini, messages, responses
    bodies = {
        chat.parse_request: {"messages": [{"role": "system", "content": "s"},
                                          {"role": "user", "content": "Say hello"},
                                          {"role": "assistant", "content": "x"},
                                          {"role": "user", "content": "more"}]},
        responses.parse_request: {"model": "m", "input": [
            {"role": "developer", "content": "d"}, {"role": "user", "content": "Say hello"},
            {"type": "function_call_output", "call_id": "c", "output": "o"}]},
        messages.parse_request: {"model": "m", "max_tokens": 9, "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Say hello"}]},
            {"role": "assistant", "content": "x"}, {"role": "user", "content": "more"}]},
        gemini.parse_request: {"contents": [{"role": "user", "parts": [{"text": "Say hello"}]},
                                            {"role": "model", "parts": [{"text": "x"}]}]},
    }
    for parse, body in bodies.items():
        assert parse(json.dumps(body).encode()).first_user == "Say hello"
