"""Guarantee 6 as properties: a kind no table knows, anywhere in a healthy stream, changes nothing but
the record; a finish reason outside the finished and policy classes is a failure, whatever its
spelling; a Gemini call's streamed arguments, split anywhere, assemble into the same call."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sseguard.core.contract import checker_for
from sseguard.core.verdict import Ending, Verdict

NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,12}", fullmatch=True)


def check(api: str, body: bytes) -> Verdict:
    checker = checker_for(api)
    checker.feed(body)
    return checker.close()


MESSAGES_FRAMES = [
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message",'
    b'"role":"assistant","model":"m","content":[],"stop_reason":null,"usage":{"input_tokens":3,'
    b'"output_tokens":1}}}\n\n',
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":'
    b'{"type":"text","text":""}}\n\n',
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":'
    b'{"type":"text_delta","text":"Hi"}}\n\n',
    b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n',
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},'
    b'"usage":{"output_tokens":5}}\n\n',
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n',
]


@settings(max_examples=40, deadline=None)
@given(name=NAMES, at=st.integers(1, len(MESSAGES_FRAMES) - 1), as_block=st.booleans())
def test_an_unknown_event_or_block_anywhere_changes_nothing_but_the_record(
        name: str, at: int, as_block: bool) -> None:
    kind = f"tomorrow_{name}"
    if as_block:  # a whole block of an unknown type, with a delta of an unknown type, before the text
        extra = [
            b'event: content_block_start\ndata: {"type":"content_block_start","index":1,'
            b'"content_block":{"type":"' + kind.encode() + b'"}}\n\n',
            b'event: content_block_delta\ndata: {"type":"content_block_delta","index":1,'
            b'"delta":{"type":"' + kind.encode() + b'_delta","x":1}}\n\n',
            b'event: content_block_stop\ndata: {"type":"content_block_stop","index":1}\n\n']
        at = min(at, 4)
        recorded = (f"block:{kind}", f"delta:{kind}_delta")
    else:
        extra = [b"event: " + kind.encode() + b'\ndata: {"type":"' + kind.encode() + b'"}\n\n']
        at = min(at, 5)
        recorded = (kind,)
    body = b"".join([*MESSAGES_FRAMES[:at], *extra, *MESSAGES_FRAMES[at:]])
    verdict = check("messages", body)
    assert (verdict.ending, verdict.findings) == (Ending.COMPLETE, ())
    assert verdict.unknown_kinds == tuple(sorted(recorded))


def gemini(parts: list[dict[str, Any]], reason: str | None = "STOP") -> bytes:
    """One record; ``reason`` None: a record before the last (no finish, no usage)."""
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    record: dict[str, Any] = {"candidates": [candidate], "responseId": "r1"}
    if reason is not None:
        candidate["finishReason"] = reason
        record["usageMetadata"] = {"promptTokenCount": 1, "candidatesTokenCount": 1,
                                   "totalTokenCount": 2}
    return b"data: " + json.dumps(record).encode() + b"\r\n\r\n"


@settings(max_examples=40, deadline=None)
@given(name=NAMES)
def test_an_unknown_part_field_passes_and_is_recorded(name: str) -> None:
    verdict = check("gemini", gemini([{"text": "Hi"}, {f"tomorrow{name}": {"x": 1}}]))
    assert (verdict.ending, verdict.findings) == (Ending.COMPLETE, ())
    assert verdict.unknown_kinds == (f"part:tomorrow{name}",)


#: What each protocol's table classes finished or policy, written here (the rest fails).
ENDS_WELL = {
    "chat": {"stop", "length", "tool_calls", "function_call", "content_filter"},
    "messages": {"end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal",
                 "model_context_window_exceeded", "compaction"},
    "gemini": {"STOP", "MAX_TOKENS", "CONTINUATION", "SAFETY", "RECITATION", "LANGUAGE",
               "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY",
               "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION", "ESCALATION",
               "PUP_LIMITED_DISABLED", "MODEL_ARMOR"},
}


def _body(api: str, reason: str) -> bytes:
    if api == "gemini":
        return gemini([{"text": "Hi"}], reason)
    if api == "messages":
        frames = list(MESSAGES_FRAMES)
        frames[4] = frames[4].replace(b'"end_turn"', json.dumps(reason).encode())
        return b"".join(frames)
    return (b'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":'
            + json.dumps(reason).encode() + b'}]}\n\ndata: [DONE]\n\n')


@settings(max_examples=60, deadline=None)
@given(api=st.sampled_from(sorted(ENDS_WELL)),
       reason=st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_"),
                      min_size=1, max_size=24))
def test_a_reason_outside_the_finished_and_policy_classes_is_a_failure(api: str,
                                                                       reason: str) -> None:
    verdict = check(api, _body(api, reason))
    expected = Ending.COMPLETE if reason in ENDS_WELL[api] else Ending.ERROR_EVENT
    assert verdict.ending is expected


@settings(max_examples=60, deadline=None)
@given(args=st.dictionaries(st.from_regex(r"[a-z]{1,6}", fullmatch=True),
                            st.text(max_size=12) | st.integers(-5, 5) | st.booleans() | st.none(),
                            max_size=4),
       data=st.data())
def test_streamed_arguments_split_anywhere_assemble_into_the_same_call(
        args: dict[str, Any], data: st.DataObject) -> None:
    parts: list[dict[str, Any]] = [{"functionCall": {"name": "f", "willContinue": True}}]
    for key, value in args.items():
        path = f"$.{key}"
        if isinstance(value, str):
            cuts = sorted(data.draw(st.lists(st.integers(0, len(value)), max_size=3)))
            pieces = [value[a:b] for a, b in zip([0, *cuts], [*cuts, len(value)], strict=True)]
            for i, piece in enumerate(pieces):
                arg: dict[str, Any] = {"jsonPath": path, "stringValue": piece}
                if i < len(pieces) - 1:
                    arg["willContinue"] = True
                parts.append({"functionCall": {"partialArgs": [arg], "willContinue": True}})
        else:
            field = ("nullValue" if value is None else "boolValue" if isinstance(value, bool)
                     else "numberValue")
            parts.append({"functionCall": {"partialArgs": [
                {"jsonPath": path, field: "NULL_VALUE" if value is None else value}],
                "willContinue": True}})
    parts.append({"functionCall": {}})
    body = b"".join(gemini([p], reason=None) for p in parts) + gemini([{"text": ""}])
    verdict = check("gemini", body)
    assert (verdict.ending, verdict.findings) == (Ending.COMPLETE, ())
    [call] = [p["functionCall"] for p in verdict.message["candidates"][0]["content"]["parts"]
              if "functionCall" in p]
    assert call == {"name": "f", "args": args}


CHAT_FRAMES = [
    b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":'
    b'[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n',
    b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":'
    b'[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}]}\n\n',
    b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":'
    b'[{"index":0,"delta":{"content":" there"},"logprobs":null,"finish_reason":null}]}\n\n',
    b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":'
    b'[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}\n\n',
    b"data: [DONE]\n\n",
]
#: Where a new field goes in a chat frame: after the delta's first field, after the choice's
#: ``"index":0``, before the chunk's ``"choices"``; and the name it is recorded under.
CHAT_PLACES = {
    "delta": (b'"delta":{', "delta."),
    "choice": (b'"index":0,', "choice."),
    "chunk": (b'"model":"m",', "chunk."),
}


def _with_field(frame: bytes, where: str, name: str) -> bytes:
    anchor, _ = CHAT_PLACES[where]
    at = frame.index(anchor) + len(anchor)
    comma = b"" if frame[at:at + 1] == b"}" else b","  # an empty delta takes the field alone
    return frame[:at] + b'"' + name.encode() + b'":{"x":[1,"y"]}' + comma + frame[at:]


def test_a_chat_delta_with_a_new_field_is_recorded_and_folded_as_before() -> None:
    body = (b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m",'
            b'"choices":[{"index":0,"delta":{"role":"assistant","content":"Hi","foo":{"bar":1}},'
            b'"logprobs":null,"finish_reason":null}]}\n\n'
            b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m",'
            b'"choices":[{"index":0,"delta":{"content":"!","foo":null},"logprobs":null,'
            b'"finish_reason":"stop","native_finish_reason":"end"}],"x_vendor":{"id":"q"}}\n\n'
            b"data: [DONE]\n\n")
    verdict = check("chat", body)
    assert (verdict.ending, verdict.findings, verdict.error) == (Ending.COMPLETE, (), None)
    assert verdict.unknown_kinds == ("choice.native_finish_reason", "chunk.x_vendor", "delta.foo")
    assert verdict.message["choices"] == [{"index": 0, "message": {"role": "assistant", "content": "Hi!"},
                                           "finish_reason": "stop"}]
    # The same stream cut before its end is still a bad ending: the new field changes nothing there.
    assert check("chat", body[:-len(b"data: [DONE]\n\n")]).ending is Ending.NO_DONE


@settings(max_examples=60, deadline=None)
@given(name=NAMES, at=st.integers(0, 3), where=st.sampled_from(sorted(CHAT_PLACES)),
       cut=st.integers(1, 64))
def test_a_new_chat_field_anywhere_changes_nothing_but_the_record(name: str, at: int, where: str,
                                                                   cut: int) -> None:
    kind = f"tomorrow_{name}"
    frames = list(CHAT_FRAMES)
    frames[at] = _with_field(frames[at], where, kind)
    body = b"".join(frames)
    plain = check("chat", b"".join(CHAT_FRAMES))
    checker = checker_for("chat")
    for i in range(0, len(body), cut):  # split anywhere: the same verdict
        checker.feed(body[i:i + cut])
    verdict = checker.close()
    assert (verdict.ending, verdict.findings, verdict.message) == (plain.ending, (), plain.message)
    assert verdict.ending is Ending.COMPLETE
    assert verdict.unknown_kinds == (CHAT_PLACES[where][1] + kind,)


def test_the_typed_chat_shapes_know_exactly_the_vocabularys_fields() -> None:
    """A field the typed decoding accepts is one the tables know, and the reverse: otherwise a new
    field would be skipped unrecorded, or every chunk of a known field would take the slow path."""
    from sseguard.core.contract.chat.assembler import ChatChoice, ChatChunk, ChatDelta
    from sseguard.core.contract.chat.vocabulary import KINDS

    assert {f"chunk.{f}" for f in ChatChunk.__struct_fields__} == {
        "chunk.id", "chunk.object", "chunk.created", "chunk.model", "chunk.choices", "chunk.usage",
        "chunk.system_fingerprint", "chunk.service_tier", "chunk.obfuscation", "chunk.moderation",
        "chunk.error"}
    assert {f"choice.{f}" for f in ChatChoice.__struct_fields__} == {
        "choice.index", "choice.delta", "choice.finish_reason", "choice.logprobs", "choice.message",
        "choice.stop_reason", "choice.matched_stop"}
    assert set(ChatDelta.__struct_fields__) == {"role", "content", "reasoning_content", "reasoning",
                                                "tool_calls", "function_call", "refusal", "audio"}
    assert KINDS.fields == ({f"chunk.{f}" for f in ChatChunk.__struct_fields__}
                            | {f"choice.{f}" for f in ChatChoice.__struct_fields__})
    assert KINDS.deltas == set(ChatDelta.__struct_fields__)
