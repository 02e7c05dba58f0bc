"""One workload, three wire formats: each protocol's request, its answers read back, multi-turn tools
and reuse conversations in each protocol's own way, and `--body` files checked against the arm's api."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sseguard.core.errors import ConfigError
from sseguard.core.verdict import Ending, Verdict
from sseguard.probe.config import WorkloadSpec, build_config
from sseguard.probe.formats import Call, Turn, check_request_body, format_for, thinking_budget
from sseguard.probe.workloads import Workload

APIS = ("chat", "responses", "messages")


def _first_body(api: str, workload: str = "small", **spec: Any) -> dict[str, Any]:
    w = Workload(WorkloadSpec(name=workload, **spec))
    return w.finish(w.conversation("w1", api).next_body(), model="m-1", api=api)


def test_small_workload_in_each_protocols_request_shape() -> None:
    chat = _first_body("chat", max_tokens=64, reasoning_effort="low")
    assert chat["model"] == "m-1" and chat["stream"] is True
    assert [m["role"] for m in chat["messages"]] == ["system", "user"]
    assert chat["stream_options"] == {"include_usage": True}
    assert chat["max_tokens"] == 64 and chat["reasoning_effort"] == "low"

    responses = _first_body("responses", max_tokens=64, reasoning_effort="low")
    assert responses["instructions"] == "You are a concise assistant."
    assert [i["role"] for i in responses["input"]] == ["user"]
    assert responses["max_output_tokens"] == 64 and responses["reasoning"] == {"effort": "low"}
    # The Responses API has no usage option and no chat-only fields.
    assert not {"messages", "stream_options", "max_tokens", "reasoning_effort"} & set(responses)

    messages = _first_body("messages", max_tokens=64)
    assert messages["system"] == "You are a concise assistant."
    assert [m["role"] for m in messages["messages"]] == ["user"]
    assert messages["max_tokens"] == 64 and messages["stream"] is True
    assert not {"stream_options", "reasoning_effort", "instructions"} & set(messages)
    # The same worker key asks the same question in every protocol.
    assert chat["messages"][1]["content"] == responses["input"][0]["content"] \
        == messages["messages"][0]["content"]


def test_messages_always_carries_max_tokens_and_turns_effort_into_a_thinking_budget() -> None:
    assert _first_body("messages")["max_tokens"] == 1024
    thinking = _first_body("messages", reasoning_effort="high", max_tokens=500)
    assert thinking["thinking"] == {"type": "enabled", "budget_tokens": 16384}
    assert thinking["max_tokens"] > thinking["thinking"]["budget_tokens"]
    assert thinking_budget("2048") == 2048
    with pytest.raises(ConfigError, match="at least 1024"):
        thinking_budget("100")
    with pytest.raises(ConfigError, match="reasoning-effort 'extreme'"):
        thinking_budget("extreme")


def test_tools_in_each_protocols_tool_format() -> None:
    chat = _first_body("chat", "tools")
    assert chat["tools"][0] == {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
            "required": ["city"]}}}
    responses = _first_body("responses", "tools")
    assert responses["tools"][0] == {"type": "function", "name": "get_weather",
                                     "description": "Current weather for a city.",
                                     "parameters": chat["tools"][0]["function"]["parameters"]}
    messages = _first_body("messages", "tools")
    assert messages["tools"][0] == {"name": "get_weather", "description": "Current weather for a city.",
                                    "input_schema": chat["tools"][0]["function"]["parameters"]}
    assert len(chat["tools"]) == len(responses["tools"]) == len(messages["tools"]) == 12


# Assembled answers as each protocol's checker builds them: a tool call, then text.
CALL_ANSWER = {
    "chat": {"choices": [{"index": 0, "message": {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_7", "type": "function",
         "function": {"name": "get_time", "arguments": "{\"timezone\": \"Asia/Tokyo\"}"}}]},
        "finish_reason": "tool_calls"}]},
    "responses": {"id": "resp_1", "status": "completed", "output": [
        {"type": "function_call", "id": "fc_1", "call_id": "call_7", "name": "get_time",
         "arguments": "{\"timezone\": \"Asia/Tokyo\"}"}]},
    "messages": {"id": "msg_1", "role": "assistant", "stop_reason": "tool_use", "content": [
        {"type": "tool_use", "id": "call_7", "name": "get_time", "input": {"timezone": "Asia/Tokyo"}}]},
}
TEXT_ANSWER = {
    "chat": {"choices": [{"index": 0, "message": {"role": "assistant", "content": "It is noon."},
                          "finish_reason": "stop"}]},
    "responses": {"output": [{"type": "message", "role": "assistant",
                              "content": [{"type": "output_text", "text": "It is noon."}]}]},
    "messages": {"content": [{"type": "text", "text": "It is noon."}], "stop_reason": "end_turn"},
}


def _verdict(api: str, message: dict[str, Any], ending: Ending = Ending.COMPLETE) -> Verdict:
    return Verdict(ending=ending, message=message, api=api)


@pytest.mark.parametrize("api", APIS)
def test_tools_conversation_answers_a_call_with_a_result_in_the_protocols_own_way(api: str) -> None:
    w = Workload(WorkloadSpec(name="tools"))
    conversation = w.conversation("w1", api)
    first = conversation.next_body()
    conversation.observe(_verdict(api, CALL_ANSWER[api]))
    second = conversation.next_body()
    if api == "chat":
        assistant, result = second["messages"][-2:]
        assert assistant["tool_calls"][0]["id"] == "call_7"
        assert assistant["tool_calls"][0]["function"]["name"] == "get_time"
        assert result["role"] == "tool" and result["tool_call_id"] == "call_7"
        content = result["content"]
    elif api == "responses":
        call, result = second["input"][-2:]
        assert call == {"type": "function_call", "call_id": "call_7", "name": "get_time",
                        "arguments": "{\"timezone\": \"Asia/Tokyo\"}"}
        assert result["type"] == "function_call_output" and result["call_id"] == "call_7"
        content = result["output"]
    else:
        assistant, user = second["messages"][-2:]
        assert assistant == {"role": "assistant", "content": [
            {"type": "tool_use", "id": "call_7", "name": "get_time",
             "input": {"timezone": "Asia/Tokyo"}}]}
        assert user["role"] == "user" and user["content"][0]["type"] == "tool_result"
        assert user["content"][0]["tool_use_id"] == "call_7"
        content = user["content"][0]["content"]
    assert json.loads(content)["arguments_seen"] == {"timezone": "Asia/Tokyo"}
    # A text answer closes the task: the next request starts a new one, as short as the first.
    conversation.observe(_verdict(api, TEXT_ANSWER[api]))
    third = conversation.next_body()
    assert len(json.dumps(third)) < len(json.dumps(second))
    assert len(json.dumps(first)) == pytest.approx(len(json.dumps(third)), abs=80)


@pytest.mark.parametrize("api", APIS)
def test_reuse_grows_after_a_whole_answer_and_not_after_a_cut_one(api: str) -> None:
    w = Workload(WorkloadSpec(name="reuse"))
    conversation = w.conversation("w1", api)
    first = conversation.next_body()
    conversation.observe(_verdict(api, TEXT_ANSWER[api], Ending.TRUNCATED))
    assert conversation.next_body() == first  # the same turn again
    conversation.observe(_verdict(api, TEXT_ANSWER[api]))
    grown = conversation.next_body()
    turns = grown["input"] if api == "responses" else grown["messages"]
    assert turns[-2]["role"] == "assistant" and turns[-2]["content"] == "It is noon."
    assert turns[-1]["role"] == "user"


# ── --body in the arm's own format ────────────────────────────────────────────────────────────────
CHAT_BODY = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]}
RESPONSES_BODY = {"input": [{"role": "user", "content": "hi"}], "instructions": "Be brief."}
MESSAGES_BODY = {"system": "Be brief.", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
NEUTRAL_BODY = {"messages": [{"role": "user", "content": "hi"}]}  # fits chat and messages alike
FITS = {  # body → the apis it is a request of
    "chat": (CHAT_BODY, {"chat"}),
    "responses": (RESPONSES_BODY, {"responses"}),
    "messages": (MESSAGES_BODY, {"messages"}),
    "neutral": (NEUTRAL_BODY, {"chat", "messages"}),
}
EXPECTED_WORDS = {"chat": "Chat Completions body", "responses": "Responses body",
                  "messages": "Anthropic Messages body"}


@pytest.mark.parametrize("name", FITS)
@pytest.mark.parametrize("api", APIS)
def test_a_body_fits_only_the_protocols_whose_format_it_is(name: str, api: str) -> None:
    body, fits = FITS[name]
    if api in fits:
        check_request_body(body, api, path="req.json")
        return
    with pytest.raises(ConfigError) as err:
        check_request_body(body, api, path="req.json", arm="a")
    text = str(err.value)
    assert "\n" not in text and "req.json" in text and f"arm 'a' speaks {api}" in text
    assert f"needs {'an' if api == 'messages' else 'a'} {EXPECTED_WORDS[api]}" in text


def test_a_body_file_in_the_wrong_format_is_refused_when_the_config_is_built(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(CHAT_BODY))
    opts = {"arms": ["a=http://127.0.0.1:9/v1"], "body": str(path), "out": str(tmp_path / "o")}
    assert build_config(opts).workload.body_file == str(path)
    with pytest.raises(ConfigError, match="Anthropic Messages body"):
        build_config({**opts, "api": "messages"})


def test_a_users_body_keeps_its_fields_and_gets_the_protocols_settings(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text(json.dumps({**MESSAGES_BODY, "temperature": 0.2, "model": "mine"}))
    w = Workload(WorkloadSpec(name="body", body_file=str(path), max_tokens=300))
    body = w.finish(w.conversation(0, "messages").next_body(), model=None, api="messages")
    assert body == {**MESSAGES_BODY, "temperature": 0.2, "model": "mine", "stream": True,
                    "max_tokens": 300}


# ── property: every protocol holds the same conversation ──────────────────────────────────────────
_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)
_call = st.builds(Call, st.from_regex(r"call_[a-z0-9]{1,8}", fullmatch=True),
                  st.sampled_from(["get_time", "read_file"]),
                  st.dictionaries(st.sampled_from(["a", "b"]), st.integers(), max_size=2).map(json.dumps))


@st.composite
def _histories(draw: st.DrawFn) -> list[Turn]:
    turns = [Turn("user", draw(_text))]
    for _ in range(draw(st.integers(0, 4))):
        calls = tuple({c.id: c for c in draw(st.lists(_call, max_size=3))}.values())
        turns.append(Turn("assistant", draw(_text) if not calls else draw(st.none() | _text), calls))
        if calls:
            turns.append(Turn("tool", results=tuple((c, f"result of {c.id}") for c in calls)))
        turns.append(Turn("user", draw(_text)))
    return turns


def _said(api: str, body: dict[str, Any]) -> tuple[list[str], list[tuple[str, str, str]], list[str]]:
    """(texts of user/assistant turns, calls as (id, name, args json), answered call ids) of a body."""
    texts: list[str] = []
    calls: list[tuple[str, str, str]] = []
    answered: list[str] = []
    if api == "responses":
        for item in body["input"]:
            if item.get("type") == "function_call":
                calls.append((item["call_id"], item["name"], item["arguments"]))
            elif item.get("type") == "function_call_output":
                answered.append(item["call_id"])
            else:
                texts.append(item["content"])
        return texts, calls, answered
    for m in body["messages"][1:] if api == "chat" else body["messages"]:
        if m["role"] == "tool":
            answered.append(m["tool_call_id"])
        elif isinstance(m["content"], list):
            for block in m["content"]:
                if block["type"] == "text":
                    texts.append(block["text"])
                elif block["type"] == "tool_use":
                    calls.append((block["id"], block["name"], json.dumps(block["input"])))
                else:
                    answered.append(block["tool_use_id"])
        else:
            texts.append(m["content"] or "")
        for c in m.get("tool_calls") or []:
            calls.append((c["id"], c["function"]["name"], c["function"]["arguments"]))
    return texts, calls, answered


@settings(max_examples=150, deadline=None)
@given(history=_histories())
def test_any_conversation_is_the_same_conversation_in_every_protocol(history: list[Turn]) -> None:
    said = {api: _said(api, format_for(api).render("sys", history, ())) for api in APIS}
    expected_texts = [t.text or "" for t in history if t.role != "tool" and (t.text or not t.calls)]
    expected_calls = [(c.id, c.name, json.dumps(json.loads(c.arguments)))
                      for t in history for c in t.calls]
    for api, (texts, calls, answered) in said.items():
        assert [t for t in texts if t] == [t for t in expected_texts if t], api
        assert [(i, n, json.dumps(json.loads(a))) for i, n, a in calls] == expected_calls, api
        # Every call is answered once, by its own id.
        assert answered == [c[0] for c in expected_calls], api
