"""MessagesChecker: the Anthropic Messages ending table, every finding, the assembled message, chunking."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sseguard.core.contract import MessagesChecker, checker_for, detect_api
from sseguard.core.errors import UsageError
from sseguard.core.verdict import Api, Ending, FindingKind, Verdict
from support.protocol_streams import (
    AROUND,
    BODIES,
    MARKERS,
    STRIPPED,
    Messages,
    assert_leak_found_where_it_is,
    cut_or_crlf,
    facts,
    feed_in_sizes,
    kinds,
    messages_text,
    run,
    sample_verdict,
    sdk_shape,
    shipped_samples,
    split_at,
    sse,
)

#: The verdict every shipped Messages sample body must get: (ending, finding kinds, error message).
EXPECTED: dict[str, tuple[Ending, list[FindingKind], str | None]] = {
    "complete": (Ending.COMPLETE, [], None),
    "tool_calls": (Ending.COMPLETE, [], None),
    "no_done": (Ending.NO_DONE, [], None),
    "no_finish": (Ending.NO_FINISH, [], None),
    "truncated": (Ending.TRUNCATED, [], None),
    "cut_mid_frame": (Ending.CUT_MID_FRAME, [], None),
    "error_event": (Ending.ERROR_EVENT, [], "Overloaded"),
    "event_order": (Ending.COMPLETE, [FindingKind.EVENT_ORDER], None),
    "block_unterminated": (Ending.COMPLETE, [FindingKind.BLOCK_UNTERMINATED], None),
    "markup_leak": (Ending.COMPLETE, [FindingKind.MARKUP_LEAK], None),
    "missing_usage": (Ending.COMPLETE, [FindingKind.MISSING_USAGE], None),
    "tool_args_invalid_json": (Ending.COMPLETE, [FindingKind.TOOL_ARGS_INVALID_JSON], None),
    "tool_call_unterminated": (Ending.TRUNCATED, [FindingKind.TOOL_CALL_UNTERMINATED], None),
    "dialect_pings_and_unknown_events": (Ending.COMPLETE, [], None),
}

TOOLS = {"tools": [{"name": "get_weather", "description": "Weather of a city",
                    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                                     "required": ["city"]}}]}


# ── the shipped sample bodies ───────────────────────────────────────────────────────────────────

def test_every_messages_sample_body_is_shipped_and_expected() -> None:
    assert shipped_samples("messages") == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_sample_body_verdict_is_the_same_for_every_split(name: str) -> None:
    v = sample_verdict("messages", name)
    assert (v.ending, kinds(v), v.error) == EXPECTED[name]
    assert detect_api((BODIES / f"messages_{name}.sse").read_bytes()) is Api.MESSAGES


# ── endings ─────────────────────────────────────────────────────────────────────────────────────

def test_stop_reason_then_message_stop_is_complete_with_the_final_message() -> None:
    v = run("messages", messages_text(["Hi", " there"]))
    assert (v.ending, v.findings, v.api) == (Ending.COMPLETE, (), "messages")
    assert v.message["content"] == [{"type": "text", "text": "Hi there"}]
    assert v.message["stop_reason"] == "end_turn"
    # Usage on message_delta overwrites the counts it carries and keeps the others.
    assert v.message["usage"] == {"input_tokens": 25, "output_tokens": 15,
                                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    assert (v.first_id, v.last_id) == ("msg_01", "msg_01")


def test_stop_reason_without_message_stop_is_no_done() -> None:
    v = run("messages", messages_text(["Hi"], stop=False))
    assert (v.ending, v.findings) == (Ending.NO_DONE, ())


def test_message_stop_without_a_stop_reason_is_no_finish() -> None:
    v = run("messages", messages_text(["Hi"], stop_reason=None))
    assert (v.ending, v.findings) == (Ending.NO_FINISH, ())


def test_clean_eof_after_content_is_truncated() -> None:
    v = run("messages", Messages().start().text(["Hi"]).body())
    assert (v.ending, v.findings) == (Ending.TRUNCATED, ())
    assert v.message["content"][0]["text"] == "Hi" and v.message["stop_reason"] is None


def test_error_event_keeps_its_message() -> None:
    body = Messages().start().text(["Hi"]).ev(
        "error", error={"type": "overloaded_error", "message": "Overloaded"}).body()
    v = run("messages", body)
    assert (v.ending, v.error) == (Ending.ERROR_EVENT, "Overloaded")


def test_pings_are_keep_alives_never_content() -> None:
    body = Messages().ping().start().ping().text(["Hi"]).ping().delta().stop().body()
    assert (run("messages", body).ending, run("messages", body).findings) == (Ending.COMPLETE, ())
    only_pings = Messages().ping().ping().body()
    assert run("messages", only_pings).ending is Ending.EMPTY


def test_adapter_endings_mean_the_same_as_in_chat() -> None:
    body = Messages().start().text(["Hi"]).body()
    assert run("messages", body[:-3]).ending is Ending.CUT_MID_FRAME
    assert run("messages", body, transport_error="reset").ending is Ending.TRANSPORT_ERROR
    assert run("messages", body, stalled=True).ending is Ending.STALLED
    v = run("messages", b"", http_status=529,
            body=b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}')
    assert (v.ending, v.http_status, v.api) == (Ending.HTTP_ERROR, 529, "messages")
    assert run("messages", b"").ending is Ending.EMPTY


def test_a_trailing_done_sentinel_is_ignored() -> None:
    v = run("messages", messages_text(["Hi"]) + b"data: [DONE]\n\n")
    assert (v.ending, v.findings) == (Ending.COMPLETE, ())


# ── findings ────────────────────────────────────────────────────────────────────────────────────

def test_delta_for_a_block_never_opened_is_out_of_order() -> None:
    body = Messages().start().ev("content_block_delta", index=3,
                                 delta={"type": "text_delta", "text": "x"}).delta().stop().body()
    v = run("messages", body)
    assert (v.ending, kinds(v)) == (Ending.COMPLETE, [FindingKind.EVENT_ORDER])
    assert v.findings[0].detail == "content_block_delta for content block 3, which is never opened"


def test_block_opened_twice_or_stopped_twice_is_out_of_order() -> None:
    m = Messages().start().text(["a"])
    m.ev("content_block_start", index=0, content_block={"type": "text", "text": ""})
    m.ev("content_block_stop", index=0)
    v = run("messages", m.delta().stop().body())
    assert kinds(v) == [FindingKind.EVENT_ORDER, FindingKind.EVENT_ORDER]
    assert "opened twice" in v.findings[0].detail and "not open" in v.findings[1].detail


def test_events_before_message_start_are_out_of_order() -> None:
    v = run("messages", Messages().text(["a"]).delta().stop().body())
    assert kinds(v) == [FindingKind.EVENT_ORDER]
    assert v.findings[0].detail == "content_block_start before message_start"


def test_content_after_message_stop_is_out_of_order() -> None:
    m = Messages().start().text(["a"]).delta().stop()
    m.index = 1
    v = run("messages", m.text(["late"]).body())
    assert (v.ending, kinds(v)) == (Ending.COMPLETE, [FindingKind.EVENT_ORDER])
    assert v.findings[0].detail == "content_block_start after message_stop"
    assert len(v.message["content"]) == 1


def test_content_after_the_stop_reason_is_out_of_order() -> None:
    m = Messages().start().text(["a"]).delta()
    v = run("messages", m.text(["late"]).stop().body())
    assert kinds(v) == [FindingKind.EVENT_ORDER]
    assert v.findings[0].detail == "content_block_start after the stop_reason"


def test_a_second_message_start_is_out_of_order_and_a_new_id_is_id_changed() -> None:
    m = Messages().start().text(["a"])
    m.mid = "msg_02"
    v = run("messages", m.start().delta().stop().body())
    assert kinds(v) == [FindingKind.EVENT_ORDER, FindingKind.ID_CHANGED]
    assert (v.first_id, v.last_id) == ("msg_01", "msg_02")


def test_block_still_open_at_the_stop_is_unterminated() -> None:
    v = run("messages", Messages().start().text(["a"], close=False).delta().stop().body())
    assert (v.ending, kinds(v)) == (Ending.COMPLETE, [FindingKind.BLOCK_UNTERMINATED])
    assert "content block 0 (text) still open" in v.findings[0].detail


def test_tool_block_still_open_at_the_stop_is_tool_call_unterminated() -> None:
    body = Messages().start().tool("get_weather", ['{"city": "Paris"}'], close=False
                                   ).delta("tool_use").stop().body()
    v = run("messages", body, request=TOOLS)
    assert kinds(v) == [FindingKind.TOOL_CALL_UNTERMINATED]


def test_tool_input_cut_off_by_a_clean_eof_is_unterminated() -> None:
    body = Messages().start().tool("get_weather", ['{"city": "Pa'], close=False).body()
    v = run("messages", body, request=TOOLS)
    assert (v.ending, kinds(v)) == (Ending.TRUNCATED, [FindingKind.TOOL_CALL_UNTERMINATED])


def test_tool_input_assembles_from_partial_json() -> None:
    body = Messages().start().text(["Let me look."]).tool(
        "get_weather", ['{"ci', 'ty": ', '"Paris"}']).delta("tool_use").stop().body()
    v = run("messages", body, request=TOOLS)
    assert (v.ending, v.findings) == (Ending.COMPLETE, ())
    assert v.message["content"][1] == {"type": "tool_use", "id": "toolu_01", "name": "get_weather",
                                       "input": {"city": "Paris"}}


def test_empty_partial_json_means_an_empty_object() -> None:
    tools = {"tools": [{"name": "now", "input_schema": {"type": "object"}}]}
    body = Messages().start().tool("now", [""]).delta("tool_use").stop().body()
    v = run("messages", body, request=tools)
    assert (v.ending, v.findings) == (Ending.COMPLETE, ())
    assert v.message["content"][0]["input"] == {}


def test_invalid_tool_input_json() -> None:
    body = Messages().start().tool("get_weather", ['{"city": Paris}']).delta("tool_use").stop().body()
    v = run("messages", body, request=TOOLS)
    assert kinds(v) == [FindingKind.TOOL_ARGS_INVALID_JSON]


def test_undefined_tool_and_schema_mismatch_use_the_anthropic_tool_format() -> None:
    body = Messages().start().tool("get_time", ["{}"]).delta("tool_use").stop().body()
    assert kinds(run("messages", body, request=TOOLS)) == [FindingKind.TOOL_UNDEFINED_FUNCTION]
    assert kinds(run("messages", body)) == []
    bad = Messages().start().tool("get_weather", ['{"city": 7}']).delta("tool_use").stop().body()
    v = run("messages", bad, request=TOOLS)
    assert kinds(v) == [FindingKind.TOOL_ARGS_SCHEMA_MISMATCH]
    assert "7 is not of type 'string'" in v.findings[0].detail


def test_markup_in_text_delta_is_found_across_deltas_in_flight() -> None:
    checker = MessagesChecker()
    checker.feed(Messages().start().text(["ok <tool", "_call>{}"], close=False).body())
    (leak,) = checker.findings_so_far
    assert leak.detail == "'<tool_call>' in text of content block 0 at 3"
    assert leak.frame == 4  # message_start, block start, the two deltas


def test_markup_in_thinking_delta_is_found() -> None:
    body = Messages().start().text(["hmm <function=get", "_weather>"], kind="thinking").text(
        ["ok"]).delta().stop().body()
    v = run("messages", body)
    assert kinds(v) == [FindingKind.MARKUP_LEAK]
    assert v.findings[0].detail == "'<function=' in thinking of content block 0 at 4"
    assert v.message["content"][0] == {"type": "thinking",
                                       "thinking": "hmm <function=get_weather>",
                                       "signature": "EqQBCgIYAhIM"}


def test_missing_usage_in_message_delta() -> None:
    body = Messages().start().text(["a"]).delta(usage=False).stop().body()
    v = run("messages", body)
    assert (v.ending, kinds(v)) == (Ending.COMPLETE, [FindingKind.MISSING_USAGE])


def test_bad_json_and_wrong_shapes_are_findings_not_crashes() -> None:
    m = Messages().start().raw(b"event: content_block_delta\ndata: {nope\n\n").raw(b"data: 7\n\n")
    m.raw(b'data: {"index": 0}\n\n')
    m.ev("content_block_start", index="0", content_block={"type": "text"})
    m.ev("content_block_start", index=0, content_block=None)
    m.text(["a"], close=False)
    m.ev("content_block_delta", index=0, delta={"type": "text_delta", "text": 5})
    m.ev("content_block_stop", index=0)
    m.ev("message_delta", delta=None)
    v = run("messages", m.delta().stop().body())
    assert kinds(v) == [FindingKind.BAD_CHUNK_JSON, *[FindingKind.CHUNK_SCHEMA] * 6]
    assert v.ending is Ending.COMPLETE


def test_a_delta_of_another_block_type_is_chunk_schema() -> None:
    m = Messages().start().text(["a"], close=False)
    m.ev("content_block_delta", index=0, delta={"type": "input_json_delta", "partial_json": "{"})
    assert kinds(run("messages", m.body())) == [FindingKind.CHUNK_SCHEMA]


def test_unknown_event_and_delta_types_are_ignored() -> None:
    m = Messages().start().ev("future_event", x=1).text(["a"], close=False)
    m.ev("content_block_delta", index=0, delta={"type": "citations_delta", "citation": {}})
    m.ev("content_block_delta", index=0, delta={"type": "future_delta"})
    v = run("messages", m.ev("content_block_stop", index=0).delta().stop().body())
    assert (v.ending, v.findings) == (Ending.COMPLETE, ())


def test_in_flight_flags() -> None:
    checker = checker_for("messages")
    body = messages_text(["a"])
    cut = body.index(b"event: content_block_delta")
    checker.feed(body[:cut])
    assert not checker.saw_content and not checker.saw_done
    stop = body.index(b"event: message_stop")
    checker.feed(body[cut:stop])
    assert checker.saw_content and not checker.saw_done
    checker.feed(body[stop:])
    assert checker.saw_done and checker.error_message is None and checker.bytes_seen == len(body)
    assert checker.close().ending is Ending.COMPLETE
    with pytest.raises(UsageError):
        checker.feed(b"x")


def test_without_kept_text_the_verdict_is_the_same_but_for_the_text() -> None:
    body = Messages().start().text(["a <tool_call>"]).tool("get_weather", ['{"city": "P"}']).body()
    kept, lean = run("messages", body, request=TOOLS), run("messages", body, request=TOOLS,
                                                           keep_text=False)
    assert (kept.ending, kept.findings) == (lean.ending, lean.findings)
    assert kept.message["content"][0]["text"] == "a <tool_call>"
    assert lean.message["content"][0]["text"] == ""
    assert lean.message["content"][1]["input"] == {"city": "P"}


def test_verdict_round_trips_through_json() -> None:
    v = run("messages", Messages().start().text(["<tool_call>"]).body())
    back = Verdict.from_dict(json.loads(json.dumps(v.to_dict())))
    assert back == v and back.api == "messages"


def test_body_is_detected_as_messages() -> None:
    assert detect_api(Messages().ping().start().body()) is Api.MESSAGES


# ── chunking invariance and robustness ──────────────────────────────────────────────────────────

@st.composite
def messages_streams(draw: st.DrawFn) -> bytes:
    """Valid and broken Messages streams: text, thinking and tool blocks, any ending, cut anywhere."""
    words = draw(st.lists(st.text(min_size=1, max_size=6), max_size=5))
    m = Messages()
    if draw(st.booleans()):
        m.start()
    for kind in draw(st.lists(st.sampled_from(["text", "thinking", "tool", "open", "ping"]),
                              max_size=3)):
        if kind in ("text", "thinking"):
            m.text(words, kind=kind)
        elif kind == "tool":
            args = json.dumps({"city": "".join(words)}, ensure_ascii=False)
            cuts = sorted(draw(st.lists(st.integers(0, len(args)), max_size=3)))
            m.tool("get_weather", [args[a:b] for a, b in itertools.pairwise([0, *cuts, len(args)])],
                   close=draw(st.booleans()))
        elif kind == "open":
            m.text(words, close=False)
        else:
            m.ping()
    end = draw(st.sampled_from(["complete", "no_done", "no_finish", "none", "error"]))
    if end in ("complete", "no_done"):
        m.delta(draw(st.sampled_from(["end_turn", "tool_use", "max_tokens"])),
                usage=draw(st.booleans()))
    if end in ("complete", "no_finish"):
        m.stop()
    if end == "error":
        m.ev("error", error={"type": "api_error", "message": "boom"})
    return cut_or_crlf(draw, m.body())


@settings(max_examples=120, deadline=None)
@given(body=messages_streams(), sizes=st.lists(st.integers(1, 40), min_size=1, max_size=20),
       keep_text=st.booleans())
def test_random_stream_verdict_is_the_same_for_every_split(body: bytes, sizes: list[int],
                                                           keep_text: bool) -> None:
    expected = run("messages", body, request=TOOLS, keep_text=keep_text)
    assert facts(run("messages", body, 1, request=TOOLS, keep_text=keep_text)) == facts(expected)
    split = feed_in_sizes(MessagesChecker(TOOLS, keep_text=keep_text), body, sizes)
    assert facts(split) == facts(expected)


_DELTAS = st.one_of(st.none(), st.integers(), st.fixed_dictionaries(
    {"type": st.sampled_from(["text_delta", "thinking_delta", "input_json_delta", "signature_delta",
                              "x", 3])},
    optional={"text": st.one_of(st.text(max_size=6), st.integers()),
              "thinking": st.text(max_size=6), "partial_json": st.text(max_size=6),
              "stop_reason": st.one_of(st.none(), st.sampled_from(["end_turn", "tool_use"]),
                                       st.integers())}))
_FIELDS = st.fixed_dictionaries({}, optional={
    "index": st.one_of(st.integers(-1, 3), st.text(max_size=2), st.none(), st.booleans()),
    "delta": _DELTAS,
    "usage": st.one_of(st.none(), st.integers(), st.just({"output_tokens": 3, "input_tokens": None})),
    "content_block": st.one_of(st.none(), st.text(max_size=3), st.fixed_dictionaries(
        {"type": st.sampled_from(["text", "thinking", "tool_use", 4])},
        optional={"name": st.one_of(st.text(max_size=4), st.integers()),
                  "input": st.one_of(st.just({}), st.just({"city": "x"}), st.text(max_size=3)),
                  "text": st.one_of(st.text(max_size=3), st.integers())})),
    "message": st.one_of(st.none(), st.integers(), st.fixed_dictionaries(
        {}, optional={"id": st.one_of(st.text(max_size=3), st.integers()),
                      "usage": st.one_of(st.none(), st.integers(), st.just({"input_tokens": 1})),
                      "content": st.lists(st.integers(), max_size=2)})),
    "error": st.one_of(st.none(), st.text(max_size=3), st.just({"message": "m"})),
})
_TYPES = st.sampled_from(["message_start", "content_block_start", "content_block_delta",
                          "content_block_stop", "message_delta", "message_stop", "ping", "error",
                          "other"])


@settings(max_examples=150, deadline=None)
@given(events=st.lists(st.tuples(_TYPES, _FIELDS), max_size=12), raw=st.binary(max_size=40))
def test_arbitrary_events_and_bytes_never_raise(events: list[tuple[str, dict[str, Any]]],
                                                raw: bytes) -> None:
    body = b"".join(sse({"type": t, **fields}, t) for t, fields in events) + raw
    for step in (None, 3):
        v = run("messages", body, step, request=TOOLS, keep_text=step is None)
        assert v.ending in set(Ending) and v.api == "messages"
    assert run("messages", raw, 1).ending in set(Ending)


# ── the assembled message is what the anthropic SDK accumulates ─────────────────────────────────

def _anthropic_snapshot(body: bytes) -> dict[str, Any]:
    """Run the body's events through the anthropic SDK's own ``accumulate_event``."""
    from anthropic.lib.streaming._messages import accumulate_event

    from sseguard.core.sse import SSEDecoder

    snapshot: Any = None
    buffers: dict[int, bytes] = {}
    for event in SSEDecoder().feed(body):
        obj = json.loads(event.data)
        if obj["type"] != "ping":
            snapshot = accumulate_event(event=obj, current_snapshot=snapshot, json_bufs=buffers)
    return dict(snapshot.to_dict(mode="json"))


@pytest.mark.parametrize("body", [
    messages_text(["Hi", " there"]),
    Messages().start().text(["a", "b"], kind="thinking").text(["Hi"]).tool(
        "get_weather", ['{"ci', 'ty": "P"}']).delta("tool_use").stop().body(),
    Messages().start().ping().text(["cut"]).tool("get_weather", ['{"city": "P"}']).body(),
    Messages().start().text(["x"], close=False).ev(
        "content_block_delta", index=0,
        delta={"type": "citations_delta", "citation": {"type": "char_location", "cited_text": "x",
                                                       "document_index": 0, "start_char_index": 0,
                                                       "end_char_index": 1}}).body(),
], ids=["text", "thinking-text-tool", "truncated", "citations"])
def test_assembled_message_is_what_the_anthropic_sdk_accumulates(body: bytes) -> None:
    v = run("messages", body)
    assert sdk_shape(v.message) == sdk_shape(_anthropic_snapshot(body))


@pytest.mark.parametrize("name", ["complete", "tool_calls", "no_done", "no_finish", "truncated",
                                  "dialect_pings_and_unknown_events", "markup_leak"])
def test_sample_bodies_are_what_the_anthropic_sdk_accumulates(name: str) -> None:
    body = (BODIES / f"messages_{name}.sse").read_bytes()
    assert sdk_shape(run("messages", body).message) == sdk_shape(_anthropic_snapshot(body))


def test_server_tool_input_is_folded_but_not_checked_against_the_request_tools() -> None:
    m = Messages().start()
    m.ev("content_block_start", index=0, content_block={"type": "server_tool_use", "id": "srvtoolu_1",
                                                         "name": "web_search", "input": {}})
    m.ev("content_block_delta", index=0, delta={"type": "input_json_delta", "partial_json": ""})
    m.ev("content_block_delta", index=0,
         delta={"type": "input_json_delta", "partial_json": '{"query": "weather"}'})
    m.ev("content_block_stop", index=0)
    body = m.delta().stop().body()
    v = run("messages", body, request=TOOLS)
    assert (v.ending, v.findings) == (Ending.COMPLETE, ())
    assert v.message["content"][0]["input"] == {"query": "weather"}
    assert sdk_shape(v.message) == sdk_shape(_anthropic_snapshot(body))



@settings(max_examples=150, deadline=None)
@given(before=AROUND, marker=st.sampled_from([*MARKERS, "", "<tool", "｜DS"]),
       after=AROUND, cuts=st.lists(st.integers(0, 60), max_size=5),
       keep_text=st.booleans(), kind=st.sampled_from(["text", "thinking"]))
def test_leak_is_found_wherever_the_deltas_split_it(before: str, marker: str, after: str,
                                                    cuts: list[int], keep_text: bool,
                                                    kind: str) -> None:
    text = before + marker + after
    deltas = split_at(text, cuts)
    body = Messages().start().text(deltas, kind=kind).delta().stop().body()
    assert_leak_found_where_it_is(text, run("messages", body, keep_text=keep_text))


@pytest.mark.parametrize("text", STRIPPED)
@pytest.mark.parametrize("kind", ["text", "thinking"])
def test_the_shape_stripped_special_tokens_leave_is_a_leak(text: str, kind: str) -> None:
    for size in (len(text), 3, 1):
        deltas = [text[i:i + size] for i in range(0, len(text), size)]
        body = Messages().start().text(deltas, kind=kind).delta().stop().body()
        leaks = [f for f in run("messages", body).findings if f.kind is FindingKind.MARKUP_LEAK]
        assert len(leaks) == 1 and "functions.get_weather" in leaks[0].detail


def test_json_nested_deeper_than_python_can_read_is_a_finding_not_a_crash() -> None:
    body = Messages().start().tool("get_weather", ["[" * 5000 + "]" * 5000]).delta("tool_use"
                                                                                   ).stop().body()
    v = run("messages", body, request=TOOLS)
    assert kinds(v) == [FindingKind.TOOL_ARGS_INVALID_JSON]
    assert v.message["content"][0]["input"] == {}
