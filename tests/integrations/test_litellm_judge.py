"""The guardrail's judge, without LiteLLM: items in as LiteLLM's hook gets them, a judgement out.

Raw SSE routes (Messages, Gemini) get bytes; the chat route gets parsed chunk objects, here the openai
SDK's own pydantic ``ChatCompletionChunk`` (what LiteLLM's ``ModelResponseStream`` is shaped like:
both are pydantic models written as ``data: <model_dump_json>``).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.chat import ChatCompletionChunk

from sseguard.core.policy import AGENTS, STRICT
from sseguard.integrations.litellm import HookJudge, wire_bytes
from sseguard.integrations.litellm.recorder import Recorder, StreamFacts
from sseguard.store import open_store
from support.protocol_streams import Messages, messages_text


def chunk(n: int, *, content: str | None = None, finish: str | None = None,
          usage: bool = False) -> ChatCompletionChunk:
    delta = {} if content is None else {"content": content}
    obj = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1764748800,
           "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage:
        obj["choices"] = []
        obj["usage"] = {"prompt_tokens": 3, "completion_tokens": n, "total_tokens": 3 + n}
    return ChatCompletionChunk.model_validate(obj)


WORDS = ["Hello", " there", " friend."]


def chat_items(*, finish: bool) -> list[ChatCompletionChunk]:
    items = [chunk(i, content=w) for i, w in enumerate(WORDS)]
    if finish:
        items.append(chunk(3, finish="stop"))
    return items


def judge_chat(items: list[ChatCompletionChunk], **close: bool | None) -> HookJudge:
    judge = HookJudge("chat", {"messages": []}, policy=AGENTS)
    for item in items:
        judge.see(item)
    return judge


# ── what the hook's items become on the wire ──────────────────────────────────────────────────────
def test_bytes_are_the_wire_as_they_are() -> None:
    assert wire_bytes(b"event: ping\ndata: {}\n\n") == b"event: ping\ndata: {}\n\n"
    assert wire_bytes(bytearray(b"data: 1\n\n")) == b"data: 1\n\n"


def test_a_pydantic_chunk_is_one_data_line_of_its_json_without_nones() -> None:
    data = wire_bytes(chunk(0, content="Hi"))
    assert data is not None and data.startswith(b"data: ") and data.endswith(b"\n\n")
    assert json.loads(data[6:]) == {"id": "chatcmpl-1", "object": "chat.completion.chunk",
                                    "created": 1764748800, "model": "m",
                                    "choices": [{"index": 0, "delta": {"content": "Hi"}}]}


def test_a_dict_and_a_plain_string_are_data_lines() -> None:
    assert wire_bytes({"a": "é"}) == 'data: {"a": "é"}\n\n'.encode()
    assert wire_bytes("plain") == b"data: plain\n\n"
    assert wire_bytes("data: [DONE]\n\n") == b"data: [DONE]\n\n"


def test_an_item_of_an_unknown_kind_is_counted_not_judged() -> None:
    judge = HookJudge("messages", None, policy=AGENTS)
    judge.see(object())
    judge.see({"not json": object()})  # a mapping json cannot write: passed on, not judged
    assert (judge.items, judge.unseen) == (2, 2)


# ── chat: objects, LiteLLM's [DONE], and the finish LiteLLM fills in ─────────────────────────────
def test_a_finished_chat_stream_passes_with_the_done_litellm_writes() -> None:
    judgement = judge_chat(chat_items(finish=True)).close(provider_finished=True)
    assert judgement.passed
    assert str(judgement.verdict.ending) == "complete"
    assert judgement.completion == b""


def test_a_chat_stream_without_a_finish_fails_as_no_finish() -> None:
    judgement = judge_chat(chat_items(finish=False)).close()
    assert judgement.failure == "no_finish"
    assert judgement.message.startswith("sseguard: no_finish: ")
    assert judgement.frame.startswith(b'data: {"error": {"message": "sseguard: ')


def test_the_stop_litellm_fills_in_is_not_taken_for_the_providers() -> None:
    judge = judge_chat([*chat_items(finish=True), chunk(4, usage=True)])
    judgement = judge.close(provider_finished=False)
    assert judge.finish_filled
    assert judgement.failure == "truncated"
    assert str(judgement.verdict.ending) == "truncated"


def test_a_chat_stream_litellm_raised_on_is_a_transport_error() -> None:
    judgement = judge_chat(chat_items(finish=False)).close(transport_error="connection reset")
    assert judgement.failure == "transport_error"
    assert b"connection reset" in judgement.frame


# ── raw bytes: Messages ───────────────────────────────────────────────────────────────────────────
def test_a_whole_messages_stream_passes_untouched() -> None:
    judge = HookJudge("messages", None, policy=AGENTS)
    judge.see(messages_text(WORDS))
    judgement = judge.close()
    assert judgement.passed and judgement.completion == b""


def test_a_messages_stream_without_message_stop_is_completed_under_agents_only() -> None:
    body = messages_text(WORDS, stop=False)
    agents = HookJudge("messages", None, policy=AGENTS)
    agents.see(body)
    done = agents.close()
    assert done.passed
    assert done.completion == b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    strict = HookJudge("messages", None, policy=STRICT)
    strict.see(body)
    assert strict.close().failure == "no_done"


def test_a_truncated_messages_stream_gets_the_anthropic_error_event() -> None:
    body = Messages().start().text(WORDS).body()
    judge = HookJudge("messages", None, policy=AGENTS)
    judge.see(body)
    judgement = judge.close()
    assert judgement.failure == "truncated"
    assert judgement.frame.startswith(b"event: error\ndata: ")
    assert json.loads(judgement.frame.split(b"data: ", 1)[1])["error"]["type"] == "api_error"


@settings(max_examples=60, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=12),
       stop=st.booleans())
def test_the_judgement_does_not_depend_on_how_the_bytes_were_split(cuts: list[int],
                                                                   stop: bool) -> None:
    body = messages_text(WORDS, stop_reason="end_turn" if stop else None, stop=stop)
    whole = HookJudge("messages", None, policy=AGENTS)
    whole.see(body)
    expected = whole.close()
    pieces = HookJudge("messages", None, policy=AGENTS)
    edges = sorted({0, len(body), *(c % (len(body) + 1) for c in cuts)})
    for a, b in itertools.pairwise(edges):
        pieces.see(body[a:b])
    got = pieces.close()
    assert (got.failure, got.verdict.ending) == (expected.failure, expected.verdict.ending)
    assert got.frame == expected.frame


# ── the record ────────────────────────────────────────────────────────────────────────────────────
def test_every_judged_stream_is_recorded_in_the_store(tmp_path: Path) -> None:
    target = str(tmp_path / "records.db")
    recorder = Recorder(target, run_id="unit")
    judge = judge_chat(chat_items(finish=False))
    judgement = judge.close()
    recorder.record(judgement, StreamFacts(path="/v1/chat/completions", model="m",
                                           started_at=1764748800.0), policy=AGENTS)
    recorder.close()
    store = open_store(target)
    try:
        (record,) = list(store.read())
    finally:
        store.close()
    assert (record.source, record.run_id, record.api, record.ending) == (
        "litellm", "unit", "chat", "no_finish")
    assert (record.passed, record.policy) == (False, "agents")
    assert record.extra["action"] == "error-event"
    assert record.extra["error_code"] == "no_finish"


def test_without_a_store_nothing_is_written(tmp_path: Path) -> None:
    recorder = Recorder(None)
    recorder.record(judge_chat(chat_items(finish=True)).close(),
                    StreamFacts(path="/v1/chat/completions", model=None, started_at=0.0),
                    policy=AGENTS)
    recorder.close()
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_policy_is_a_config_error() -> None:
    from sseguard.core.errors import ConfigError
    from sseguard.core.policy import Policy

    with pytest.raises(ConfigError, match="unknown policy 'lax'"):
        Policy.from_spec("lax")
