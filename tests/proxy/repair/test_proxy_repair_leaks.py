"""A repaired stream is scanned for leaked markup as an unrepaired one is (decision 2.11 of
docs/design/markup.md).

The repair turns the checker's content scan off (the upstream's markup is its input) and scans what it
sends instead. It used to scan for markers only, so a server that strips special tokens — Kimi K2's
``functions.NAME:IDX{…}``, Harmony's ``…commentary to=functions.NAME json{…}``, shapes no parser can
turn into a call — passed a leaked call through ``--repair-markup`` that the plain proxy fails.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sseguard.core.sse import SSEDecoder
from sseguard.core.verdict import FindingKind
from sseguard.proxy import run_proxy
from sseguard.proxy.repair import MessagesRepairFrames, RepairFrames, ResponsesRepairFrames
from sseguard.store import open_store
from support.proxy import Script, error_code, proxy_config, raw_post, scripted

#: Content a server that strips special tokens sends for one call: the text before it, then the call.
KIMI = ["Let me check. functions.get_wea", 'ther:0{"city": "Paris"}', " and more text"]
HARMONY = ["analysisNeed the weather.assistantcommentary to=func",
           'tions.get_weather json{"city": "P"}', " and more text"]
REPAIRS = ["auto", "hermes", "kimi-k2", "harmony", "dsml-v4"]


def chat_body(deltas: list[str]) -> bytes:
    """A whole, well-ended chat stream whose content is ``deltas``."""
    head = '{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":'
    out = [head + '[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}']
    out += [head + '[{"index":0,"delta":{"content":' + json.dumps(d) + '},"finish_reason":null}]}'
            for d in deltas]
    out.append(head + '[{"index":0,"delta":{},"finish_reason":"stop"}]}')
    return b"".join(b"data: " + line.encode() + b"\n\n" for line in out) + b"data: [DONE]\n\n"


def messages_body(deltas: list[str]) -> bytes:
    """A whole Messages stream with one text block holding ``deltas``."""
    events = [("message_start", '{"type":"message_start","message":{"id":"msg_1","type":"message",'
                                '"role":"assistant","model":"m","content":[],"stop_reason":null,'
                                '"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}'),
              ("content_block_start", '{"type":"content_block_start","index":0,'
                                      '"content_block":{"type":"text","text":""}}')]
    events += [("content_block_delta", '{"type":"content_block_delta","index":0,"delta":'
                                       '{"type":"text_delta","text":' + json.dumps(d) + '}}')
               for d in deltas]
    events += [("content_block_stop", '{"type":"content_block_stop","index":0}'),
               ("message_delta", '{"type":"message_delta","delta":{"stop_reason":"end_turn",'
                                 '"stop_sequence":null},"usage":{"output_tokens":3}}'),
               ("message_stop", '{"type":"message_stop"}')]
    return b"".join(f"event: {n}\ndata: {d}\n\n".encode() for n, d in events)


def responses_body(deltas: list[str]) -> bytes:
    """A whole Responses stream with one message item holding ``deltas``."""
    text = "".join(deltas)
    item = {"id": "msg_1", "type": "message", "status": "in_progress", "role": "assistant",
            "content": []}
    part = {"type": "output_text", "text": "", "annotations": []}
    done_part = {**part, "text": text}
    done_item = {**item, "status": "completed", "content": [done_part]}
    response = {"id": "resp_1", "object": "response", "status": "in_progress", "model": "m",
                "output": []}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": response},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.content_part.added", "item_id": "msg_1", "output_index": 0,
         "content_index": 0, "part": part},
        *({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0,
           "content_index": 0, "delta": d} for d in deltas),
        {"type": "response.output_text.done", "item_id": "msg_1", "output_index": 0,
         "content_index": 0, "text": text},
        {"type": "response.content_part.done", "item_id": "msg_1", "output_index": 0,
         "content_index": 0, "part": done_part},
        {"type": "response.output_item.done", "output_index": 0, "item": done_item},
        {"type": "response.completed", "response": {
            **response, "status": "completed", "output": [done_item],
            "usage": {"input_tokens": 5, "output_tokens": 3, "total_tokens": 8}}},
    ]
    return b"".join(f"event: {e['type']}\ndata: ".encode() + json.dumps(
        {**e, "sequence_number": i}).encode() + b"\n\n" for i, e in enumerate(events))


# ── the repair itself ────────────────────────────────────────────────────────────────────────────


def _leak_kinds(frames: Any, body: bytes) -> list[FindingKind]:
    for event in SSEDecoder().feed(body):
        frames.transform(event)
    frames.flush()
    return [f.kind for f in frames.findings()]


@settings(max_examples=60, deadline=None)
@given(content=st.sampled_from(["".join(KIMI), "".join(HARMONY)]),
       cuts=st.lists(st.integers(1, 90), max_size=6), family=st.sampled_from(REPAIRS))
def test_a_stripped_token_call_is_a_leak_after_repair_wherever_the_deltas_split_it(
        content: str, cuts: list[int], family: str) -> None:
    bounds = sorted({min(c, len(content)) for c in cuts} | {0, len(content)})
    deltas = [content[a:b] for a, b in itertools.pairwise(bounds)]
    assert _leak_kinds(RepairFrames(family, None), chat_body(deltas)) == [FindingKind.MARKUP_LEAK]


@pytest.mark.parametrize("deltas", [KIMI, HARMONY], ids=["kimi", "harmony"])
def test_a_stripped_token_call_is_a_leak_after_repair_in_messages_and_responses(
        deltas: list[str]) -> None:
    assert _leak_kinds(MessagesRepairFrames("auto", None), messages_body(deltas)) == [
        FindingKind.MARKUP_LEAK]
    assert _leak_kinds(ResponsesRepairFrames("auto", None), responses_body(deltas)) == [
        FindingKind.MARKUP_LEAK]


def test_text_that_only_mentions_functions_is_no_leak_after_repair() -> None:
    deltas = ["The functions.py module ", "defines helpers: {a}"]
    assert _leak_kinds(RepairFrames("auto", None), chat_body(deltas)) == []


# ── through the proxy: the same outcome with and without repair ──────────────────────────────────

CHAT_REQUEST = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "Weather?"}]}
MESSAGES_REQUEST = {"model": "m", "max_tokens": 64, "stream": True,
                    "messages": [{"role": "user", "content": "Weather?"}]}
RESPONSES_REQUEST = {"model": "m", "input": "Weather?", "stream": True}


async def _through_proxy(body: bytes, path: str, request: dict[str, Any], repair: str,
                         db: Path) -> tuple[bytes, list[str], bool]:
    """What the client got, and the record's finding kinds and pass mark."""
    async with scripted(Script([body])) as up, \
            run_proxy(proxy_config(up.url, repair_markup=repair, store=str(db))) as px:
        got = await raw_post(px.url + path, request)
    store = open_store(str(db))
    try:
        [record] = list(store.read())
    finally:
        store.close()
    return got.body, sorted(record.finding_kinds), record.passed


@pytest.mark.parametrize("repair", ["off", "auto", "kimi-k2", "harmony", "hermes"])
@pytest.mark.parametrize("deltas", [KIMI, HARMONY], ids=["kimi", "harmony"])
async def test_a_leaked_stripped_token_call_fails_the_chat_stream_with_or_without_repair(
        deltas: list[str], repair: str, tmp_path: Path) -> None:
    body, kinds, passed = await _through_proxy(chat_body(deltas), "/chat/completions",
                                               CHAT_REQUEST, repair, tmp_path / "r.db")
    assert error_code(body) == "markup_leak"
    assert b"data: [DONE]" not in body
    assert kinds == ["markup_leak"] and not passed


@pytest.mark.parametrize("repair", ["off", "auto"])
@pytest.mark.parametrize("deltas", [KIMI, HARMONY], ids=["kimi", "harmony"])
async def test_a_leaked_stripped_token_call_fails_messages_and_responses_with_or_without_repair(
        deltas: list[str], repair: str, tmp_path: Path) -> None:
    body, kinds, passed = await _through_proxy(messages_body(deltas), "/messages",
                                               MESSAGES_REQUEST, repair, tmp_path / "m.db")
    assert body.endswith(b"\n\n") and b"event: message_stop" not in body
    assert b'"type":"error"' in body.replace(b" ", b"") and b"markup_leak: " in body
    assert kinds == ["markup_leak"] and not passed
    body, kinds, passed = await _through_proxy(responses_body(deltas), "/responses",
                                               RESPONSES_REQUEST, repair, tmp_path / "r.db")
    assert b"event: response.completed" not in body
    assert b"event: error" in body and b'"code": "markup_leak"' in body
    assert kinds == ["markup_leak"] and not passed
