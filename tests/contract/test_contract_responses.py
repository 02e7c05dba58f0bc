"""ResponsesChecker: the Responses ending table, every finding, the assembled response, chunking."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sseguard.core.contract import ResponsesChecker, checker_for, detect_api
from sseguard.core.errors import UsageError
from sseguard.core.verdict import Api, Ending, FindingKind, Verdict
from support.protocol_streams import (
    AROUND,
    BODIES,
    MARKERS,
    STRIPPED,
    Responses,
    assert_leak_found_where_it_is,
    cut_or_crlf,
    facts,
    feed_in_sizes,
    kinds,
    responses_text,
    run,
    sample_verdict,
    sdk_shape,
    shipped_samples,
    split_at,
    sse,
)

#: The verdict every shipped Responses sample body must get: (ending, finding kinds, error message).
EXPECTED: dict[str, tuple[Ending, list[FindingKind], str | None]] = {
    "complete": (Ending.COMPLETE, [], None),
    "incomplete": (Ending.COMPLETE, [], None),
    "truncated": (Ending.TRUNCATED, [], None),
    "no_finish": (Ending.NO_FINISH, [], None),
    "cut_mid_frame": (Ending.CUT_MID_FRAME, [], None),
    "error_event": (Ending.ERROR_EVENT, [],
                    "The server had an error while processing your request."),
    "error_event_nested": (Ending.ERROR_EVENT, [], "upstream stream ended badly"),
    "failed": (Ending.ERROR_EVENT, [], "The model produced invalid content."),
    "dialect_trailing_done": (Ending.COMPLETE, [], None),
    "tool_calls": (Ending.COMPLETE, [], None),
    "sequence_gap": (Ending.COMPLETE, [FindingKind.SEQUENCE_GAP], None),
    "event_order": (Ending.COMPLETE, [FindingKind.EVENT_ORDER], None),
    "block_unterminated": (Ending.COMPLETE, [FindingKind.BLOCK_UNTERMINATED], None),
    "done_mismatch": (Ending.COMPLETE, [FindingKind.DONE_MISMATCH], None),
    "markup_leak": (Ending.COMPLETE, [FindingKind.MARKUP_LEAK], None),
    "missing_usage": (Ending.COMPLETE, [FindingKind.MISSING_USAGE], None),
    "tool_args_invalid_json": (Ending.COMPLETE, [FindingKind.TOOL_ARGS_INVALID_JSON], None),
    "tool_call_unterminated": (Ending.TRUNCATED, [FindingKind.TOOL_CALL_UNTERMINATED], None),
}

TOOLS = {"tools": [{"type": "function", "name": "get_weather", "description": "Weather of a city",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                   "required": ["city"]}}]}


# ── the shipped sample bodies ───────────────────────────────────────────────────────────────────

def test_every_responses_sample_body_is_shipped_and_expected() -> None:
    assert shipped_samples("responses") == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_sample_body_verdict_is_the_same_for_every_split(name: str) -> None:
    v = sample_verdict("responses", name)
    assert (v.ending, kinds(v), v.error) == EXPECTED[name]
    assert detect_api((BODIES / f"responses_{name}.sse").read_bytes()) is Api.RESPONSES


# ── endings ─────────────────────────────────────────────────────────────────────────────────────

def test_completed_is_complete_with_the_final_response_object() -> None:
    v = run("responses", responses_text(["Hel", "lo"]))
    assert (v.ending, v.findings, v.api) == (Ending.COMPLETE, (), "responses")
    assert v.message["status"] == "completed" and v.message["id"] == "resp_1"
    (item,) = v.message["output"]
    assert item["content"][0]["text"] == "Hello"
    assert v.message["usage"]["total_tokens"] == 17
    assert (v.first_id, v.last_id) == ("resp_1", "resp_1")


def test_incomplete_is_a_legitimate_stop() -> None:
    v = run("responses", responses_text(["Hel", "lo"], end="incomplete"))
    assert (v.ending, v.findings) == (Ending.COMPLETE, ())
    assert v.message["incomplete_details"] == {"reason": "max_output_tokens"}


def test_clean_eof_after_content_is_truncated() -> None:
    v = run("responses", responses_text(["Hel", "lo"], end="none"))
    assert (v.ending, v.findings) == (Ending.TRUNCATED, ())
    # Without a terminal response the output is what streamed, as the SDK's snapshot holds it.
    assert v.message["status"] == "in_progress"
    assert v.message["output"][0]["content"][0]["text"] == "Hello"


def test_trailing_done_is_tolerated_never_required() -> None:
    body = responses_text(["a"]) + b"data: [DONE]\n\n"
    assert (run("responses", body).ending, run("responses", body).findings) == (Ending.COMPLETE, ())


def test_done_without_a_terminal_event_is_no_finish() -> None:
    assert run("responses", responses_text(["a"], end="[DONE]")).ending is Ending.NO_FINISH
    body = Responses().created().message(0, ["a"]).ev("response.done").body()
    assert run("responses", body).ending is Ending.NO_FINISH


def test_flat_error_event_keeps_its_message() -> None:
    body = Responses().created().message(0, ["a"]).ev(
        "error", code="rate_limit_exceeded", message="Slow down", param=None).body()
    v = run("responses", body)
    assert (v.ending, v.error) == (Ending.ERROR_EVENT, "Slow down")


def test_nested_error_event_keeps_its_message() -> None:
    body = Responses().created().body() + sse(
        {"type": "error", "sequence_number": 2, "code": "stream_truncated", "message": "flat",
         "error": {"type": "upstream_stream_error", "code": "truncated", "message": "nested"}},
        "error")
    assert run("responses", body).error == "nested"
    bare = Responses().created().body() + sse({"error": {"message": "only nested"}}, "error")
    assert (run("responses", bare).ending, run("responses", bare).error) == (
        Ending.ERROR_EVENT, "only nested")


def test_response_failed_is_an_error_event_with_the_response_error() -> None:
    v = run("responses", responses_text(["a"], end="failed"))
    assert (v.ending, v.error, v.message["status"]) == (Ending.ERROR_EVENT, "The model failed",
                                                        "failed")


def test_body_ending_inside_a_frame_is_cut_mid_frame() -> None:
    body = responses_text(["a"])
    assert run("responses", body[:-5]).ending is Ending.CUT_MID_FRAME


def test_adapter_endings_mean_the_same_as_in_chat() -> None:
    body = responses_text(["a"], end="none")
    assert run("responses", body, transport_error="reset").ending is Ending.TRANSPORT_ERROR
    assert run("responses", body, stalled=True).ending is Ending.STALLED
    v = run("responses", b"", http_status=429, body=b'{"error": {"message": "rate"}}')
    assert (v.ending, v.http_status, v.api) == (Ending.HTTP_ERROR, 429, "responses")
    assert run("responses", b"").ending is Ending.EMPTY
    assert run("responses", b": keep-alive\n\n").ending is Ending.EMPTY


# ── findings ────────────────────────────────────────────────────────────────────────────────────

def test_sequence_numbers_must_rise_by_one() -> None:
    r = Responses().created()
    r.seq += 3
    v = run("responses", r.message(0, ["a"]).completed().body())
    assert (v.ending, kinds(v)) == (Ending.COMPLETE, [FindingKind.SEQUENCE_GAP])
    assert "sequence_number 5 where 2 was next" in v.findings[0].detail
    assert v.findings[0].frame == 3


def test_delta_for_an_item_never_opened_is_out_of_order() -> None:
    r = Responses().created().ev("response.output_text.delta", item_id="m", output_index=4,
                                 content_index=0, delta="x")
    v = run("responses", r.completed().body())
    assert kinds(v) == [FindingKind.EVENT_ORDER]
    assert "output item 4, which is never opened" in v.findings[0].detail


def test_item_opened_twice_and_closed_twice_are_out_of_order() -> None:
    r = Responses().created().message(0, ["a"])
    r.ev("response.output_item.added", output_index=0, item={"type": "message", "content": []})
    r.ev("response.output_item.done", output_index=0, item={"type": "message", "content": []})
    v = run("responses", r.completed().body())
    assert kinds(v) == [FindingKind.EVENT_ORDER, FindingKind.EVENT_ORDER]
    assert "opened twice" in v.findings[0].detail and "not open" in v.findings[1].detail


def test_text_before_its_content_part_is_out_of_order() -> None:
    r = Responses().created().ev("response.output_item.added", output_index=0,
                                 item={"id": "m", "type": "message", "content": []})
    r.ev("response.output_text.delta", item_id="m", output_index=0, content_index=0, delta="x")
    v = run("responses", r.body())
    assert (v.ending, kinds(v)) == (Ending.TRUNCATED, [FindingKind.EVENT_ORDER])


def test_content_after_the_terminal_event_is_out_of_order() -> None:
    body = Responses().created().message(0, ["a"]).completed().message(1, ["late"]).body()
    v = run("responses", body)
    assert (v.ending, kinds(v)) == (Ending.COMPLETE, [FindingKind.EVENT_ORDER])
    assert v.findings[0].detail == "response.output_item.added after the end of the response"
    assert len(v.message["output"]) == 1  # what came after the end is not folded


def test_events_before_response_created_are_out_of_order() -> None:
    r = Responses()
    r.message(0, ["a"]).completed()
    v = run("responses", r.body())
    assert kinds(v) == [FindingKind.EVENT_ORDER]
    assert v.findings[0].detail == "response.output_item.added before response.created"


def test_item_still_open_at_the_terminal_event_is_unterminated() -> None:
    body = Responses().created().message(0, ["a"], close=False).completed().body()
    v = run("responses", body)
    assert (v.ending, kinds(v)) == (Ending.COMPLETE, [FindingKind.BLOCK_UNTERMINATED])
    assert "output item 0 (message) still open" in v.findings[0].detail


def test_tool_call_still_open_at_the_terminal_event_is_tool_call_unterminated() -> None:
    body = Responses().created().function_call(0, "get_weather", ['{"city": "Pa'],
                                               close=False).completed().body()
    v = run("responses", body, request=TOOLS)
    assert kinds(v) == [FindingKind.TOOL_CALL_UNTERMINATED]


def test_tool_call_cut_off_by_a_clean_eof_is_unterminated() -> None:
    body = Responses().created().function_call(0, "get_weather", ['{"city": "Pa'],
                                               close=False).body()
    v = run("responses", body, request=TOOLS)
    assert (v.ending, kinds(v)) == (Ending.TRUNCATED, [FindingKind.TOOL_CALL_UNTERMINATED])
    assert v.message["output"][0]["arguments"] == '{"city": "Pa'


def test_done_text_that_differs_from_the_deltas_is_done_mismatch() -> None:
    r = Responses().created()
    r.ev("response.output_item.added", output_index=0, item={"id": "m", "type": "message",
                                                              "content": []})
    r.ev("response.content_part.added", item_id="m", output_index=0, content_index=0,
         part={"type": "output_text", "text": ""})
    r.ev("response.output_text.delta", item_id="m", output_index=0, content_index=0, delta="Hel")
    r.ev("response.output_text.done", item_id="m", output_index=0, content_index=0, text="Hello")
    v = run("responses", r.body())
    assert kinds(v) == [FindingKind.DONE_MISMATCH]
    assert "full text of output item 0" in v.findings[0].detail


def test_done_arguments_that_differ_from_the_deltas_are_done_mismatch() -> None:
    r = Responses().created()
    r.ev("response.output_item.added", output_index=0,
         item={"id": "fc", "type": "function_call", "name": "get_weather", "arguments": ""})
    r.ev("response.function_call_arguments.delta", item_id="fc", output_index=0, delta='{"city"')
    r.ev("response.function_call_arguments.done", item_id="fc", output_index=0,
         arguments='{"city": "Paris"}')
    r.ev("response.output_item.done", output_index=0,
         item={"id": "fc", "type": "function_call", "name": "get_weather",
               "arguments": '{"city": "Paris"}'})
    v = run("responses", r.completed().body(), request=TOOLS)
    assert kinds(v)[:2] == [FindingKind.DONE_MISMATCH, FindingKind.DONE_MISMATCH]
    assert kinds(v)[2:] == [FindingKind.TOOL_ARGS_INVALID_JSON]  # the streamed arguments are checked


def test_markup_in_output_text_is_found_across_deltas_in_flight() -> None:
    body = Responses().created().message(0, ["Sure <tool", "_call>{}</tool_call>"]).completed().body()
    checker = ResponsesChecker()
    checker.feed(body)
    (leak,) = checker.findings_so_far
    assert leak.kind is FindingKind.MARKUP_LEAK
    assert leak.detail == "'<tool_call>' in output_text of output item 0 at 5"
    assert leak.frame == 6  # created, in_progress, item added, part added, the two deltas


def test_markup_in_reasoning_summary_is_found() -> None:
    body = Responses().created().reasoning(0, ["think <｜tool▁calls▁begin｜>"]).message(
        1, ["ok"]).completed().body()
    v = run("responses", body)
    assert kinds(v) == [FindingKind.MARKUP_LEAK]
    assert "in reasoning of output item 0" in v.findings[0].detail


def test_tool_arguments_assemble_and_validate_against_responses_tools() -> None:
    body = Responses().created().function_call(0, "get_weather", ['{"ci', 'ty": ', '"Paris"}']
                                               ).completed().body()
    v = run("responses", body, request=TOOLS)
    assert (v.ending, v.findings) == (Ending.COMPLETE, ())
    assert v.message["output"][0]["arguments"] == '{"city": "Paris"}'


def test_invalid_arguments_of_a_closed_call() -> None:
    body = Responses().created().function_call(0, "get_weather", ['{"city": Paris}']).completed().body()
    v = run("responses", body, request=TOOLS)
    assert kinds(v) == [FindingKind.TOOL_ARGS_INVALID_JSON]


def test_undefined_function_and_schema_mismatch_use_the_responses_tool_format() -> None:
    body = Responses().created().function_call(0, "get_time", ["{}"]).completed().body()
    assert kinds(run("responses", body, request=TOOLS)) == [FindingKind.TOOL_UNDEFINED_FUNCTION]
    assert kinds(run("responses", body)) == []  # no request, no tool checks
    bad = Responses().created().function_call(0, "get_weather", ['{"city": 7}']).completed().body()
    v = run("responses", bad, request=TOOLS)
    assert kinds(v) == [FindingKind.TOOL_ARGS_SCHEMA_MISMATCH]
    assert "7 is not of type 'string'" in v.findings[0].detail
    # A chat-format tool is not a Responses function: the call names no offered tool.
    chat_tools = {"tools": [{"type": "function", "function": {"name": "get_weather"}}]}
    assert kinds(run("responses", bad, request=chat_tools)) == [FindingKind.TOOL_UNDEFINED_FUNCTION]


def test_missing_usage_in_the_terminal_response() -> None:
    body = Responses().created().message(0, ["a"]).completed(usage=False).body()
    v = run("responses", body)
    assert (v.ending, kinds(v)) == (Ending.COMPLETE, [FindingKind.MISSING_USAGE])


def test_bad_json_and_wrong_shapes_are_findings_not_crashes() -> None:
    r = Responses().created().raw(b"event: response.output_text.delta\ndata: {nope\n\n")
    r.raw(b"data: [1, 2]\n\n")
    r.raw(b'data: {"sequence_number": 2}\n\n')
    r.seq = 3
    r.ev("response.output_item.added", output_index="0", item={})
    r.ev("response.output_item.added", output_index=0, item="message")
    r.ev("response.completed", response=None)
    v = run("responses", r.body())
    assert kinds(v) == [FindingKind.BAD_CHUNK_JSON, FindingKind.CHUNK_SCHEMA,
                        FindingKind.CHUNK_SCHEMA, FindingKind.CHUNK_SCHEMA,
                        FindingKind.CHUNK_SCHEMA, FindingKind.CHUNK_SCHEMA,
                        FindingKind.MISSING_USAGE]
    assert v.ending is Ending.COMPLETE


def test_a_delta_of_the_wrong_type_is_chunk_schema() -> None:
    r = Responses().created().message(0, [], close=False)
    r.ev("response.output_text.delta", item_id="msg_1", output_index=0, content_index=0, delta=5)
    assert kinds(run("responses", r.body())) == [FindingKind.CHUNK_SCHEMA]


def test_changed_response_id_is_a_finding() -> None:
    r = Responses().created().message(0, ["a"])
    r.rid = "resp_2"
    v = run("responses", r.completed().body())
    assert kinds(v) == [FindingKind.ID_CHANGED]
    assert (v.first_id, v.last_id) == ("resp_1", "resp_2")


def test_unknown_event_types_are_ignored() -> None:
    r = Responses().created().ev("response.future_thing", payload={"x": 1}).message(0, ["a"])
    r.ev("response.output_text.annotation.added", item_id="msg_1", output_index=0,
         content_index=0, annotation_index=0, annotation={})
    r.completed().ev("response.future_thing", payload={"after": "the end"})
    v = run("responses", r.body())
    assert (v.ending, v.findings) == (Ending.COMPLETE, ())


def test_in_flight_flags() -> None:
    checker = checker_for("responses")
    body = responses_text(["a"])
    cut = body.index(b"response.output_text.delta")
    checker.feed(body[:cut])
    assert not checker.saw_content and not checker.saw_done
    checker.feed(body[cut:])
    assert checker.saw_content and checker.saw_done and checker.error_message is None
    assert checker.bytes_seen == len(body) and checker.findings_so_far == ()
    assert checker.close().ending is Ending.COMPLETE
    with pytest.raises(UsageError):
        checker.feed(b"x")
    with pytest.raises(UsageError):
        checker.close()


def test_error_message_is_known_as_soon_as_the_error_arrives() -> None:
    checker = ResponsesChecker()
    checker.feed(responses_text(["a"], end="failed"))
    assert checker.error_message == "The model failed" and not checker.saw_done


def test_without_kept_text_the_verdict_is_the_same_but_for_the_text() -> None:
    body = Responses().created().message(0, ["a <tool_call>"], close=False).body()
    kept, lean = run("responses", body), run("responses", body, keep_text=False)
    assert (kept.ending, kept.findings) == (lean.ending, lean.findings)
    assert kept.message["output"][0]["content"][0]["text"] == "a <tool_call>"
    assert lean.message["output"][0]["content"][0]["text"] == ""


def test_done_mismatch_is_found_without_kept_text_too() -> None:
    r = Responses().created().message(0, ["Hel"], close=False)
    r.ev("response.output_text.done", item_id="msg_1", output_index=0, content_index=0, text="Help")
    assert kinds(run("responses", r.body(), keep_text=False)) == [FindingKind.DONE_MISMATCH]
    good = Responses().created().message(0, ["Hel", "lo"]).completed().body()
    assert kinds(run("responses", good, keep_text=False)) == []


def test_verdict_round_trips_through_json() -> None:
    v = run("responses", Responses().created().message(0, ["<tool_call>"]).body())
    back = Verdict.from_dict(json.loads(json.dumps(v.to_dict())))
    assert back == v and back.api == "responses"


def test_body_is_detected_as_responses() -> None:
    assert detect_api(responses_text(["a"])) is Api.RESPONSES


# ── chunking invariance and robustness ──────────────────────────────────────────────────────────

@st.composite
def responses_streams(draw: st.DrawFn) -> bytes:
    """Valid and broken Responses streams: text, reasoning and tool items, any ending, cut anywhere."""
    words = draw(st.lists(st.text(min_size=1, max_size=6), max_size=5))
    r = Responses()
    if draw(st.booleans()):
        r.created()
    index = 0
    for kind in draw(st.lists(st.sampled_from(["text", "tool", "reasoning", "open", "gap"]),
                              max_size=3)):
        if kind == "text":
            r.message(index, words)
        elif kind == "tool":
            args = json.dumps({"city": "".join(words)}, ensure_ascii=False)
            cuts = sorted(draw(st.lists(st.integers(0, len(args)), max_size=3)))
            r.function_call(index, "get_weather",
                            [args[a:b] for a, b in itertools.pairwise([0, *cuts, len(args)])])
        elif kind == "reasoning":
            r.reasoning(index, words)
        elif kind == "open":
            r.message(index, words, close=False)
        else:
            r.seq += draw(st.integers(1, 3))
        index += draw(st.sampled_from([0, 1, 1]))
    end = draw(st.sampled_from(["completed", "incomplete", "failed", "none", "[DONE]", "error"]))
    if end == "completed":
        r.completed(usage=draw(st.booleans()))
    else:
        r.end(end)
    if draw(st.booleans()):
        r.raw(b"data: [DONE]\n\n")
    return cut_or_crlf(draw, r.body())


@settings(max_examples=120, deadline=None)
@given(body=responses_streams(), sizes=st.lists(st.integers(1, 40), min_size=1, max_size=20),
       keep_text=st.booleans())
def test_random_stream_verdict_is_the_same_for_every_split(body: bytes, sizes: list[int],
                                                           keep_text: bool) -> None:
    expected = run("responses", body, request=TOOLS, keep_text=keep_text)
    assert facts(run("responses", body, 1, request=TOOLS, keep_text=keep_text)) == facts(expected)
    split = feed_in_sizes(ResponsesChecker(TOOLS, keep_text=keep_text), body, sizes)
    assert facts(split) == facts(expected)


_FIELDS = st.fixed_dictionaries({}, optional={
    "output_index": st.one_of(st.integers(-1, 3), st.text(max_size=2), st.none()),
    "content_index": st.one_of(st.integers(-1, 2), st.none()),
    "summary_index": st.integers(0, 1),
    "sequence_number": st.one_of(st.integers(0, 9), st.booleans()),
    "delta": st.one_of(st.text(max_size=8), st.integers(), st.none()),
    "text": st.one_of(st.text(max_size=8), st.none()),
    "arguments": st.one_of(st.text(max_size=8), st.none()),
    "item": st.one_of(st.none(), st.text(max_size=3), st.fixed_dictionaries(
        {"type": st.sampled_from(["message", "function_call", "reasoning", 7])},
        optional={"name": st.one_of(st.text(max_size=4), st.integers()),
                  "arguments": st.one_of(st.text(max_size=6), st.integers())})),
    "part": st.one_of(st.none(), st.just({"type": "output_text", "text": ""})),
    "response": st.one_of(st.none(), st.integers(), st.fixed_dictionaries(
        {}, optional={"id": st.one_of(st.text(max_size=3), st.integers()),
                      "status": st.sampled_from(["completed", "incomplete", "in_progress", 3]),
                      "output": st.one_of(st.none(), st.lists(st.integers(), max_size=2)),
                      "usage": st.one_of(st.none(), st.just({"total_tokens": 1})),
                      "error": st.one_of(st.none(), st.text(max_size=3),
                                         st.just({"message": "m"}))})),
})
_TYPES = st.sampled_from(["response.created", "response.in_progress", "response.completed",
                          "response.incomplete", "response.failed", "response.done", "error",
                          "response.output_item.added", "response.output_item.done",
                          "response.content_part.added", "response.content_part.done",
                          "response.output_text.delta", "response.output_text.done",
                          "response.function_call_arguments.delta",
                          "response.function_call_arguments.done",
                          "response.reasoning_summary_part.added",
                          "response.reasoning_summary_text.delta", "response.refusal.delta",
                          "response.other"])


@settings(max_examples=150, deadline=None)
@given(events=st.lists(st.tuples(_TYPES, _FIELDS), max_size=12), raw=st.binary(max_size=40))
def test_arbitrary_events_and_bytes_never_raise(events: list[tuple[str, dict[str, Any]]],
                                                raw: bytes) -> None:
    body = b"".join(sse({"type": t, **fields}) for t, fields in events) + raw
    for step in (None, 3):
        v = run("responses", body, step, request=TOOLS, keep_text=step is None)
        assert v.ending in set(Ending) and v.api == "responses"
    assert run("responses", raw, 1).ending in set(Ending)


# ── the assembled response is what openai-python accumulates ────────────────────────────────────

def _openai_final_response(body: bytes) -> dict[str, Any]:
    """Run the body's events through openai-python's own ResponseStreamManager state."""
    from openai import omit
    from openai._models import construct_type_unchecked
    from openai.lib.streaming.responses._responses import ResponseStreamState
    from openai.types.responses import ResponseStreamEvent

    from sseguard.core.sse import SSEDecoder

    state = ResponseStreamState(input_tools=omit, text_format=omit)
    final: dict[str, Any] = {}
    for event in SSEDecoder().feed(body):
        typed = construct_type_unchecked(type_=ResponseStreamEvent, value=json.loads(event.data))
        for out in state.handle_event(typed):
            if out.type == "response.completed":
                final = out.response.to_dict(mode="json")
    return final


def _completed_without_output(r: Responses) -> Responses:
    response = r.response("completed", usage={"total_tokens": 3})
    response["output"] = None
    return r.ev("response.completed", response=response)


@pytest.mark.parametrize("body", [
    Responses().created().message(0, ["Hel", "lo"]).completed().body(),
    Responses().created().reasoning(0, ["think"]).message(1, ["Hi"]).function_call(
        2, "get_weather", ['{"city":', '"P"}']).completed().body(),
    _completed_without_output(Responses().created().message(0, ["a", "b"]).function_call(
        1, "get_weather", ["{}"])).body(),
], ids=["text", "reasoning-text-tool", "output-recovered-from-items"])
def test_assembled_response_is_what_openai_python_accumulates(body: bytes) -> None:
    v = run("responses", body)
    assert v.ending is Ending.COMPLETE
    assert sdk_shape(v.message) == sdk_shape(_openai_final_response(body))


@pytest.mark.parametrize("name", ["complete", "tool_calls", "dialect_trailing_done"])
def test_healthy_sample_bodies_are_what_openai_python_accumulates(name: str) -> None:
    body = (BODIES / f"responses_{name}.sse").read_bytes()
    if name == "dialect_trailing_done":
        body = body.replace(b"data: [DONE]\n\n", b"")  # the SDK's decoder ends the stream there
    assert sdk_shape(run("responses", body).message) == sdk_shape(_openai_final_response(body))


def test_open_reasoning_item_keeps_summary_and_reasoning_text_apart() -> None:
    r = Responses().created()
    r.ev("response.output_item.added", output_index=0,
         item={"id": "rs", "type": "reasoning", "summary": [], "content": []})
    r.ev("response.reasoning_summary_part.added", item_id="rs", output_index=0, summary_index=0,
         part={"type": "summary_text", "text": ""})
    r.ev("response.content_part.added", item_id="rs", output_index=0, content_index=0,
         part={"type": "reasoning_text", "text": ""})
    r.ev("response.reasoning_summary_text.delta", item_id="rs", output_index=0, summary_index=0,
         delta="short")
    r.ev("response.reasoning_text.delta", item_id="rs", output_index=0, content_index=0,
         delta="long thoughts")
    v = run("responses", r.body())
    (item,) = v.message["output"]
    assert item["summary"] == [{"type": "summary_text", "text": "short"}]
    assert item["content"] == [{"type": "reasoning_text", "text": "long thoughts"}]
    assert (v.ending, v.findings) == (Ending.TRUNCATED, ())



@settings(max_examples=150, deadline=None)
@given(before=AROUND, marker=st.sampled_from([*MARKERS, "", "<tool", "｜DS"]),
       after=AROUND, cuts=st.lists(st.integers(0, 60), max_size=5),
       keep_text=st.booleans(), reasoning=st.booleans())
def test_leak_is_found_wherever_the_deltas_split_it(before: str, marker: str, after: str,
                                                    cuts: list[int], keep_text: bool,
                                                    reasoning: bool) -> None:
    text = before + marker + after
    deltas = split_at(text, cuts)
    r = Responses().created()
    (r.reasoning(0, deltas) if reasoning else r.message(0, deltas)).completed()
    assert_leak_found_where_it_is(text, run("responses", r.body(), keep_text=keep_text))


@pytest.mark.parametrize("text", STRIPPED)
@pytest.mark.parametrize("reasoning", [False, True])
def test_the_shape_stripped_special_tokens_leave_is_a_leak(text: str, reasoning: bool) -> None:
    for size in (len(text), 3, 1):
        deltas = [text[i:i + size] for i in range(0, len(text), size)]
        r = Responses().created()
        (r.reasoning(0, deltas) if reasoning else r.message(0, deltas)).completed()
        leaks = [f for f in run("responses", r.body()).findings if f.kind is FindingKind.MARKUP_LEAK]
        assert len(leaks) == 1 and "functions.get_weather" in leaks[0].detail


def test_json_nested_deeper_than_python_can_read_is_a_finding_not_a_crash() -> None:
    body = Responses().created().function_call(0, "get_weather", ["[" * 5000 + "]" * 5000]
                                               ).completed().body()
    assert kinds(run("responses", body, request=TOOLS)) == [FindingKind.TOOL_ARGS_INVALID_JSON]
    deep = Responses().created().raw(b"data: " + b"[" * 100_000 + b"\n\n").completed().body()
    assert kinds(run("responses", deep)) == [FindingKind.BAD_CHUNK_JSON]


def test_a_server_that_skips_the_content_part_gets_one_finding_not_one_per_delta() -> None:
    r = Responses().created().ev("response.output_item.added", output_index=0,
                                 item={"id": "m", "type": "message", "content": []})
    for word in ["a", "b", "c", "d"]:
        r.ev("response.output_text.delta", item_id="m", output_index=0, content_index=0, delta=word)
    for word in ["e", "f"]:
        r.ev("response.output_text.delta", item_id="m", output_index=3, content_index=0, delta=word)
    v = run("responses", r.body())
    assert [f.detail for f in v.findings] == [
        "response.output_text.delta for part 0 of output item 0, which is not open",
        "response.output_text.delta for output item 3, which is never opened"]
