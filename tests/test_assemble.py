"""MessageAssembler: folds deltas like a client, tolerant of the shapes good servers send."""

from __future__ import annotations

from sseguard.assemble import MessageAssembler


def test_content_reasoning_and_metadata_fold() -> None:
    asm = MessageAssembler()
    for c in [
        {"id": "x1", "model": "m", "system_fingerprint": "fp", "choices": [
            {"index": 0, "delta": {"role": "assistant", "reasoning": "think "}, "finish_reason": ""}]},
        {"id": "x1", "choices": [{"index": 0, "delta": {"reasoning_content": "more"}}]},
        {"id": "x1", "choices": [{"index": 0, "delta": {"content": "Hi"}, "obfuscation": "pad"}]},
        {"id": "x1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {"id": "x1", "choices": [{"index": 0, "delta": {}}]},
        {"id": "x1", "choices": None, "usage": {"total_tokens": 3}},
    ]:
        assert asm.add(c) == []
    out = asm.to_openai()
    assert out["model"] == "m" and out["system_fingerprint"] == "fp" and out["usage"] == {"total_tokens": 3}
    assert out["choices"] == [{"index": 0, "finish_reason": "stop", "message": {
        "role": "assistant", "content": "Hi", "reasoning_content": "think more"}}]


def test_tool_calls_by_index_and_n_choices() -> None:
    asm = MessageAssembler()
    asm.add({"choices": [
        {"index": 1, "delta": {"tool_calls": [
            {"index": 1, "id": "b", "type": "function", "function": {"name": "g", "arguments": "{"}},
            {"index": 0, "id": "a", "type": "function", "function": {"name": "f", "arguments": ""}}]}},
        {"index": 0, "delta": {"content": "zero"}}]})
    asm.add({"choices": [{"index": 1, "delta": {"tool_calls": [
        {"index": 1, "function": {"arguments": "}"}}]}, "finish_reason": "tool_calls"}]})
    out = asm.to_openai()["choices"]
    assert out[0]["message"]["content"] == "zero"
    calls = out[1]["message"]["tool_calls"]
    assert [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in calls] == [
        ("a", "f", ""), ("b", "g", "{}")]


def test_missing_tool_index_follows_the_id() -> None:
    asm = MessageAssembler()
    for call in ({"id": "a", "function": {"name": "f", "arguments": "{"}},
                 {"function": {"arguments": "}"}},
                 {"id": "b", "function": {"name": "g", "arguments": "[]"}}):
        asm.add({"choices": [{"delta": {"tool_calls": [call]}}]})
    calls = asm.to_openai()["choices"][0]["message"]["tool_calls"]
    assert [c["function"]["arguments"] for c in calls] == ["{}", "[]"]


def test_wrong_types_are_reported_not_raised() -> None:
    asm = MessageAssembler()
    problems = asm.add({"id": 5, "choices": [{"index": "0"}, "x", {"delta": []},
                                             {"delta": {"content": 1, "tool_calls": {}}},
                                             {"finish_reason": 3}], "usage": []})
    assert problems == ["id is not a string", "usage is not an object", "choice index is not an integer",
                        "choice is not an object", "delta is not an object", "content is not a string",
                        "tool_calls is not a list", "finish_reason is not a string"]
