"""The checkers' fast paths for the events of a long answer give the verdict of the general way.

Responses ``output_text.delta`` events decode into a typed struct and Messages ``text_delta`` events
are folded inline; every event that is not quite the common one (out of order, out of sequence, a
wrong type, a closed block, after the end) must take the general way untouched. Each test feeds
streams of such events one frame per read, with the fast path and with it disabled, and compares the
verdicts: ending, findings with their places, the assembled object, the error.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sseguard.core.contract import checker_for
from sseguard.core.contract.messages import checker as messages_module
from sseguard.core.contract.responses import checker as responses_module
from sseguard.core.verdict import Verdict


def frame(obj: Any, name: str | None = None) -> bytes:
    head = f"event: {name}\n".encode() if name else b""
    return head + b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"


def verdict(api: str, frames: list[bytes]) -> Verdict:
    checker = checker_for(api)
    for f in frames:
        checker.feed(f)
    return checker.close()


def facts(v: Verdict) -> tuple[Any, ...]:
    return v.ending, v.findings, v.message, v.error, v.chunks


#: Mostly the index of the open block, sometimes another, or not an integer at all.
_odd = st.sampled_from([0, 0, 0, 0, 0, 1, True, "0", None, 2.0])
#: A usual start (so that most deltas could take the fast path), then anything in any order.
_START = st.lists(st.booleans(), min_size=3, max_size=3).map(lambda keep: [
    step for step, k in zip(("created", "item", "part"), keep, strict=True) if k or keep.count(True) < 2])
_text = st.sampled_from(["Hi", "", " there", "<tool_call>", "a｜b"])


@st.composite
def responses_frames(draw: Any) -> list[bytes]:
    seq = 0
    out: list[bytes] = []

    def add(etype: str, **fields: Any) -> None:
        nonlocal seq
        number = draw(st.sampled_from([seq, seq, seq, seq, seq, seq + 1, seq - 1, "x", None]))
        obj = {"type": etype, **fields}
        if number is not None:
            obj["sequence_number"] = number
        name = draw(st.sampled_from([etype, etype, etype, etype, "error", None]))
        out.append(frame(obj, name))
        seq += 1

    response = {"id": "resp_1", "object": "response", "status": "in_progress", "output": []}
    steps = draw(_START) + draw(st.lists(st.sampled_from([
        "created", "item", "part", "delta", "delta", "delta", "delta", "part_done", "item_done",
        "completed", "junk"]), max_size=14))
    for step in steps:
        if step == "created":
            add("response.created", response=response)
        elif step == "item":
            add("response.output_item.added", output_index=draw(st.sampled_from([0, 0, 0, 1])),
                item={"id": "msg_1", "type": draw(st.sampled_from(["message"] * 4 + ["reasoning"])),
                      "content": []})
        elif step == "part":
            add("response.content_part.added", item_id="msg_1", output_index=0,
                content_index=draw(st.sampled_from([0, 0, 0, 1])),
                part={"type": "output_text", "text": ""})
        elif step == "delta":
            add("response.output_text.delta", item_id="msg_1", output_index=draw(_odd),
                content_index=draw(_odd), delta=draw(st.one_of(_text, st.just(5))),
                obfuscation="pad")
        elif step == "part_done":
            add("response.content_part.done", item_id="msg_1", output_index=0, content_index=0,
                part={"type": "output_text", "text": "Hi"})
        elif step == "item_done":
            add("response.output_item.done", output_index=0,
                item={"id": "msg_1", "type": "message", "content": []})
        elif step == "completed":
            add("response.completed", response=dict(response, status="completed"))
        else:
            out.append(b'data: {"type": "response.output_text.delta", "delta": \n\n')
    return out


@settings(max_examples=500, deadline=None)
@given(frames=responses_frames())
def test_responses_text_delta_fast_path_gives_the_general_verdict(frames: list[bytes]) -> None:
    fast = verdict("responses", frames)

    def never(data: str) -> Any:
        raise msgspec.ValidationError("fast path disabled")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(responses_module, "_decode_text_delta", never)
        general = verdict("responses", frames)
    assert facts(fast) == facts(general)


@st.composite
def messages_frames(draw: Any) -> list[bytes]:
    out: list[bytes] = []
    steps = ["start", "block"][:draw(st.sampled_from([2, 2, 2, 1, 0]))] + draw(st.lists(
        st.sampled_from(["start", "block", "tool", "delta", "delta", "delta", "delta", "stop_block",
                         "message_delta", "stop"]), max_size=14))
    for step in steps:
        name: str | None
        if step == "start":
            obj: dict[str, Any] = {"type": "message_start", "message": {
                "id": "msg_1", "type": "message", "role": "assistant", "content": [],
                "usage": {"input_tokens": 1}}}
        elif step in ("block", "tool"):
            obj = {"type": "content_block_start", "index": draw(st.sampled_from([0, 0, 0, 1])),
                   "content_block": {"type": "text", "text": ""} if step == "block" else
                   {"type": "tool_use", "id": "t", "name": "f", "input": {}}}
        elif step == "delta":
            obj = {"type": "content_block_delta", "index": draw(_odd),
                   "delta": draw(st.sampled_from([
                       {"type": "text_delta", "text": "Hi"}, {"type": "text_delta", "text": ""},
                       {"type": "text_delta", "text": 3}, {"type": "input_json_delta",
                                                          "partial_json": "{"},
                       {"type": "text_delta", "text": "<tool_call>"}, "x"]))}
        elif step == "stop_block":
            obj = {"type": "content_block_stop", "index": 0}
        elif step == "message_delta":
            obj = {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                   "usage": {"output_tokens": 2}}
        else:
            obj = {"type": "message_stop"}
        name = draw(st.sampled_from([obj["type"]] * 4 + ["error", None]))
        out.append(frame(obj, name))
    return out


@settings(max_examples=500, deadline=None)
@given(frames=messages_frames())
def test_messages_text_delta_fast_path_gives_the_general_verdict(frames: list[bytes]) -> None:
    fast = verdict("messages", frames)
    with pytest.MonkeyPatch.context() as patch:
        # Without the object's type the inline fold never applies: every frame goes the general
        # way, which reads the same JSON again.
        patch.setattr(messages_module, "decode_json", lambda data: None)
        general = verdict("messages", frames)
    assert facts(fast) == facts(general)


def _responses_prefix() -> list[bytes]:
    return [
        frame({"type": "response.created", "sequence_number": 0,
               "response": {"id": "resp_1", "status": "in_progress", "output": []}}),
        frame({"type": "response.output_item.added", "sequence_number": 1, "output_index": 0,
               "item": {"id": "msg_1", "type": "message", "content": []}}),
        frame({"type": "response.content_part.added", "sequence_number": 2, "output_index": 0,
               "content_index": 0, "part": {"type": "output_text", "text": ""}}),
    ]


def test_a_text_delta_out_of_sequence_is_a_gap() -> None:
    """The typed delta takes the fast path only when it is the next in sequence."""
    frames = [*_responses_prefix(),
              frame({"type": "response.output_text.delta", "sequence_number": 7, "output_index": 0,
                     "content_index": 0, "delta": "Hi"})]
    found = verdict("responses", frames).findings
    assert [(f.kind, f.detail, f.frame) for f in found] == [
        ("sequence_gap", "sequence_number 7 where 3 was next", 4)]


def test_a_text_delta_in_sequence_is_folded() -> None:
    frames = [*_responses_prefix(),
              frame({"type": "response.output_text.delta", "sequence_number": 3, "output_index": 0,
                     "content_index": 0, "delta": "Hi", "obfuscation": "pad"})]
    v = verdict("responses", frames)
    assert v.findings == ()
    assert v.chunks == 4
