"""A checker is freed by reference counting the moment its stream is done: it forms no reference cycle.

Why it matters: the proxy builds one checker per stream; a cycle per checker left ~14 objects per stream
for the cyclic garbage collector, whose young passes then held the event loop for 7-11 ms at 100 streams
(docs/benchmarks.md, guard proxy). With the collector disabled, a checker that is still alive after its
last reference is dropped is in a cycle.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

import sseguard.proxy.repair as repair
import sseguard.proxy.repair.gemini as gemini_repair
from sseguard.core.contract import checker_for, protocols

BODIES = {
    "chat": (
        b'data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,'
        b'"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}\n\n'
        b'data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,'
        b'"delta":{},"finish_reason":"stop"}]}\n\n'
        b"data: [DONE]\n\n"
    ),
    "responses": (
        b'event: response.created\ndata: {"type":"response.created","sequence_number":0,'
        b'"response":{"id":"r1","status":"in_progress","output":[]}}\n\n'
        b'event: response.output_item.added\ndata: {"type":"response.output_item.added",'
        b'"sequence_number":1,"output_index":0,"item":{"id":"m1","type":"message","role":"assistant",'
        b'"content":[]}}\n\n'
        b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta",'
        b'"sequence_number":2,"item_id":"m1","output_index":0,"content_index":0,"delta":"Hi"}\n\n'
        b'event: response.completed\ndata: {"type":"response.completed","sequence_number":3,'
        b'"response":{"id":"r1","status":"completed","output":[]}}\n\n'
    ),
    "messages": (
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message",'
        b'"role":"assistant","content":[],"model":"m","stop_reason":null}}\n\n'
        b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
        b'"content_block":{"type":"text","text":""}}\n\n'
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"text_delta","text":"Hi"}}\n\n'
        b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
        b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"}}\n\n'
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    ),
}


@pytest.fixture
def no_gc() -> Iterator[None]:
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@pytest.mark.parametrize("api", [str(p.api) for p in protocols()])
def test_a_new_checker_is_freed_without_the_cyclic_collector(no_gc: None, api: str) -> None:
    checker = checker_for(api, {"model": "m"}, keep_text=False)
    ref = weakref.ref(checker)
    del checker
    assert ref() is None


@pytest.mark.parametrize("api", sorted(BODIES))
def test_a_checker_that_judged_a_stream_is_freed_without_the_cyclic_collector(
        no_gc: None, api: str) -> None:
    checker = checker_for(api, {"model": "m"}, keep_text=False)
    for line in BODIES[api].split(b"\n\n")[:-1]:
        checker.feed(line + b"\n\n")
    verdict = checker.close()
    assert str(verdict.ending) == "complete", verdict
    ref = weakref.ref(checker)
    del checker
    assert ref() is None


def test_a_live_checker_still_gets_its_leak_findings(no_gc: None) -> None:
    """The scanner reports leaks through a weak reference: a live checker still gets them."""
    checker = checker_for("chat", {"model": "m"}, keep_text=False)
    checker.feed(b'data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,'
                 b'"delta":{"content":"x <tool_call> y"},"finish_reason":null}]}\n\n')
    assert [(str(f.kind), f.detail, f.frame) for f in checker.findings_so_far] == [
        ("markup_leak", "'<tool_call>' in content of choice 0 at 2", 1)]


@pytest.mark.parametrize("cls", ["RepairFrames", "ResponsesRepairFrames", "MessagesRepairFrames",
                                 "GeminiRepairFrames"])
def test_a_repair_engine_is_freed_without_the_cyclic_collector(no_gc: None, cls: str) -> None:
    """``--repair-markup`` builds one per stream too; its leak scanner reports the same weak way."""
    make = getattr(repair, cls, None) or getattr(gemini_repair, cls)
    frames = make("hermes", None)
    ref = weakref.ref(frames)
    del frames
    assert ref() is None
