"""ChatAssembler: folds deltas like a client, tolerant of the shapes good servers send."""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from sseguard.core.contract.chat.assembler import ChatAssembler, ChatChunk


def test_content_reasoning_and_metadata_fold() -> None:
    asm = ChatAssembler()
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
    asm = ChatAssembler()
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
    asm = ChatAssembler()
    for call in ({"id": "a", "function": {"name": "f", "arguments": "{"}},
                 {"function": {"arguments": "}"}},
                 {"id": "b", "function": {"name": "g", "arguments": "[]"}}):
        asm.add({"choices": [{"delta": {"tool_calls": [call]}}]})
    calls = asm.to_openai()["choices"][0]["message"]["tool_calls"]
    assert [c["function"]["arguments"] for c in calls] == ["{}", "[]"]


def test_wrong_types_are_reported_not_raised() -> None:
    asm = ChatAssembler()
    problems = asm.add({"id": 5, "choices": [{"index": "0"}, "x", {"delta": []},
                                             {"delta": {"content": 1, "tool_calls": {}}},
                                             {"finish_reason": 3}], "usage": []})
    assert problems == ["id is not a string", "usage is not an object", "choice index is not an integer",
                        "choice is not an object", "delta is not an object", "content is not a string",
                        "tool_calls is not a list", "finish_reason is not a string"]


# Values of every JSON type (and the absent key), so chunks are sometimes of the common shape and
# sometimes not; a field is left out when its strategy draws ``_ABSENT``.
_ABSENT = object()
_scalar = st.one_of(st.none(), st.booleans(), st.integers(-2, 3), st.floats(allow_nan=False),
                    st.sampled_from(["", "a", "<tool_call>", "stop", "tool_calls", "x1", "x2"]))
_any = st.recursive(_scalar, lambda inner: st.one_of(
    st.lists(inner, max_size=2), st.dictionaries(st.sampled_from(["index", "id", "name", "k"]),
                                                inner, max_size=2)), max_leaves=4)


def _maybe(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    # Mostly the right type, so that many chunks (and their choices) are of the common shape.
    return st.integers(0, 9).flatmap(
        lambda roll: st.just(_ABSENT) if roll < 3 else values if roll < 9 else _any)


def _obj(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({k: _maybe(v) for k, v in fields.items()}).map(
        lambda d: {k: v for k, v in d.items() if v is not _ABSENT})


_text = st.sampled_from(["", "Hi", " there", "<tool_call>", None])
_tool_call = _obj(index=st.integers(0, 2), id=st.sampled_from(["c1", "c2", ""]),
                  type=st.just("function"),
                  function=_obj(name=st.sampled_from(["f", "g"]), arguments=st.sampled_from(["{", "}"])))
_delta = _obj(role=st.sampled_from(["assistant", None]), content=_text, reasoning_content=_text,
              reasoning=_text, tool_calls=st.lists(_tool_call, max_size=2))
_choice = _obj(index=st.integers(0, 2), delta=_delta, message=_delta,
               finish_reason=st.sampled_from(["stop", "", None, "tool_calls"]), logprobs=st.none())
_chunk = _obj(id=st.sampled_from(["x1", "x2", None]), model=st.sampled_from(["m", ""]),
              system_fingerprint=st.sampled_from(["fp", None]),
              usage=st.just({"total_tokens": 3}), choices=st.lists(_choice, max_size=2),
              obfuscation=st.just("pad"), error=st.just({"message": "boom"}))


@settings(max_examples=400, deadline=None)
@given(chunks=st.lists(_chunk, max_size=6), keep_text=st.booleans())
def test_typed_fold_equals_the_generic_fold(chunks: list[dict[str, Any]], keep_text: bool) -> None:
    """Chunks that decode into ``ChatChunk`` fold through ``add_typed`` exactly as through ``add``
    (text, tool calls, ids, problems, every text delta seen); the others do not decode."""
    seen: dict[str, list[tuple[int, str, str]]] = {"generic": [], "typed": []}
    generic = ChatAssembler(keep_text=keep_text,
                               on_text=lambda *a: seen["generic"].append(a))
    typed = ChatAssembler(keep_text=keep_text, on_text=lambda *a: seen["typed"].append(a))
    decoder = msgspec.json.Decoder(ChatChunk)
    for chunk in chunks:
        body = msgspec.json.encode(chunk)
        expected = generic.add(msgspec.json.decode(body))
        try:
            got = typed.add_typed(decoder.decode(body))
        except msgspec.ValidationError:
            got = typed.add(msgspec.json.decode(body))
        assert got == expected
    assert seen["typed"] == seen["generic"]
    assert typed.to_openai() == generic.to_openai()
    assert (typed.first_id, typed.last_id, typed.ids_changed, typed.saw_token) == \
        (generic.first_id, generic.last_id, generic.ids_changed, generic.saw_token)


def test_well_formed_chunks_decode_into_the_typed_shape() -> None:
    """The common content chunk takes the typed path (else the fast path would never run)."""
    body = (b'{"id":"x1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,'
            b'"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}],"obfuscation":"p"}')
    chunk = msgspec.json.Decoder(ChatChunk).decode(body)
    asm = ChatAssembler()
    assert asm.add_typed(chunk) == []
    assert asm.to_openai()["choices"][0]["message"] == {"role": "assistant", "content": "Hi"}
