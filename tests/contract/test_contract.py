"""StreamChecker: every contract rule, every sample body, and verdicts that never depend on chunking."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sseguard.core.contract import (
    MessagesChecker,
    ResponsesChecker,
    StreamChecker,
    api_for_path,
    checker_for,
    detect_api,
    leak_markers,
)
from sseguard.core.errors import UsageError
from sseguard.core.verdict import Ending, Finding, FindingKind, Verdict
from support.streams import DONE, chunk, frame, text_stream, tool_stream

BODIES = Path(__file__).parents[2] / "examples" / "bodies"
REQUEST_TOOLS = json.loads((BODIES.parent / "request_tools.json").read_text())

#: The verdict every shipped sample body must get: (ending, finding kinds).
EXPECTED = {
    "complete": (Ending.COMPLETE, set()),
    "truncated": (Ending.TRUNCATED, set()),
    "no_done": (Ending.NO_DONE, set()),
    "no_finish": (Ending.NO_FINISH, set()),
    "cut_mid_frame": (Ending.CUT_MID_FRAME, set()),
    "cut_mid_frame_no_blank_line": (Ending.CUT_MID_FRAME, set()),
    "error_event": (Ending.ERROR_EVENT, set()),
    "error_event_named": (Ending.ERROR_EVENT, set()),
    "empty": (Ending.EMPTY, set()),
    # Garbled text (contract.garble): warnings under the default policies.
    "invalid_text": (Ending.COMPLETE, {FindingKind.INVALID_TEXT}),
    "control_character": (Ending.COMPLETE, {FindingKind.CONTROL_CHARACTER}),
    "repeated_token": (Ending.COMPLETE, {FindingKind.REPEATED_TOKEN}),
    "reasoning_after_answer": (Ending.COMPLETE, {FindingKind.REASONING_AFTER_ANSWER}),
    "tool_calls": (Ending.COMPLETE, set()),
    "tool_args_invalid_json": (Ending.COMPLETE, {FindingKind.TOOL_ARGS_INVALID_JSON}),
    "finish_reason_mismatch": (Ending.COMPLETE, {FindingKind.FINISH_REASON_MISMATCH}),
    "markup_leak": (Ending.COMPLETE, {FindingKind.MARKUP_LEAK}),
    "bad_chunk_json": (Ending.COMPLETE, {FindingKind.BAD_CHUNK_JSON}),
    "frame_after_done": (Ending.COMPLETE, {FindingKind.FRAME_AFTER_DONE}),
    "dialect_no_finish_reason": (Ending.NO_FINISH, set()),
    "dialect_no_done": (Ending.NO_DONE, set()),
    "dialect_empty_finish_reason": (Ending.COMPLETE, set()),
    "dialect_usage_choices_null": (Ending.COMPLETE, set()),
    "dialect_usage_no_choices_key": (Ending.COMPLETE, set()),
    "dialect_obfuscation_and_extensions": (Ending.COMPLETE, set()),
    "crlf_comments": (Ending.COMPLETE, set()),
}


def check(body: bytes, sizes: int | None = None, **close: object) -> Verdict:
    checker = StreamChecker(close.pop("request", None))  # type: ignore[arg-type]
    step = sizes or max(len(body), 1)
    for i in range(0, len(body), step):
        checker.feed(body[i:i + step])
    return checker.close(**close)  # type: ignore[arg-type]


def facts(v: Verdict) -> tuple[Ending, tuple[Finding, ...], dict[str, object]]:
    return v.ending, v.findings, v.message


def test_every_sample_body_is_shipped_and_expected() -> None:
    # Bodies of the other protocols carry their name first; their tables are in their own tests.
    shipped = {p.stem for p in BODIES.glob("*.sse") if not p.stem.startswith(("responses_",
                                                                                "messages_",
                                                                                "gemini_"))}
    assert shipped == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_sample_body_verdict_is_the_same_for_every_split(name: str) -> None:
    body = (BODIES / f"{name}.sse").read_bytes()
    whole = check(body)
    assert (whole.ending, set(whole.finding_kinds)) == EXPECTED[name]
    for size in (1, 2, 3, 7, 64):
        assert facts(check(body, size)) == facts(whole)


def test_complete_needs_finish_and_done() -> None:
    v = check(text_stream(["a", "b"]))
    assert v.ending is Ending.COMPLETE and not v.findings
    assert v.message["choices"][0]["message"]["content"] == "ab"


def test_clean_eof_after_content_is_truncated() -> None:
    assert check(text_stream(["a"], finish=None, done=False)).ending is Ending.TRUNCATED


def test_finish_without_done_is_no_done() -> None:
    assert check(text_stream(["a"], done=False)).ending is Ending.NO_DONE


def test_done_without_finish_is_no_finish() -> None:
    assert check(text_stream(["a"], finish=None)).ending is Ending.NO_FINISH


def test_done_sentinel_must_be_exact() -> None:
    body = text_stream(["a"], done=False) + b"data: [DONE] \n\n"
    v = check(body)
    assert v.ending is Ending.NO_DONE
    assert FindingKind.BAD_CHUNK_JSON in v.finding_kinds
    assert check(text_stream(["a"], done=False) + b"data: [DONE]x\n\n").ending is Ending.NO_DONE


def test_every_choice_needs_a_finish_reason() -> None:
    body = (chunk({"content": "a"}, index=0) + chunk({"content": "b"}, index=1)
            + chunk({}, "stop", index=0) + DONE)
    assert check(body).ending is Ending.NO_FINISH
    body = body[:-len(DONE)] + chunk({}, "length", index=1) + DONE
    v = check(body)
    assert v.ending is Ending.COMPLETE
    assert [c["finish_reason"] for c in v.message["choices"]] == ["stop", "length"]


def test_fewer_choices_than_requested_is_not_finished() -> None:
    v = check(text_stream(["a"]), request={"n": 2})
    assert v.ending is Ending.NO_FINISH


def test_body_ending_inside_a_frame_is_cut_mid_frame() -> None:
    body = text_stream(["a"])
    assert check(body[:-5]).ending is Ending.CUT_MID_FRAME


def test_error_object_and_error_event_keep_the_message() -> None:
    v = check(text_stream(["a"], finish=None, done=False)
              + frame({"error": {"message": "overloaded", "code": 503}}))
    assert (v.ending, v.error) == (Ending.ERROR_EVENT, "overloaded")
    v = check(text_stream(["a"], finish=None, done=False) + b"event: error\ndata: boom\n\n")
    assert (v.ending, v.error) == (Ending.ERROR_EVENT, "boom")


def test_non_2xx_is_http_error_with_the_body_kept() -> None:
    checker = StreamChecker()
    v = checker.close(http_status=503, body=b'{"error":{"message":"busy"}}')
    assert v.ending is Ending.HTTP_ERROR and v.http_status == 503
    assert "busy" in (v.error or "") and b"busy" in v.tail


def test_no_bytes_is_empty() -> None:
    assert check(b"").ending is Ending.EMPTY
    assert check(b": keepalive\n\n").ending is Ending.EMPTY


def test_transport_error_and_stall_come_from_the_adapter() -> None:
    body = text_stream(["a"], finish=None, done=False)
    v = check(body, transport_error="connection reset")
    assert (v.ending, v.error) == (Ending.TRANSPORT_ERROR, "connection reset")
    assert check(body, stalled=True).ending is Ending.STALLED


def test_finish_reason_tool_calls_without_calls_is_a_mismatch() -> None:
    v = check(text_stream(["a"], finish="tool_calls"))
    assert FindingKind.FINISH_REASON_MISMATCH in v.finding_kinds


def test_tool_calls_with_stop_is_a_mismatch() -> None:
    v = check(tool_stream("get_weather", ['{"location": "x"}'], finish="stop"))
    assert FindingKind.FINISH_REASON_MISMATCH in v.finding_kinds


def test_tool_arguments_assemble_across_fragments() -> None:
    v = check(tool_stream("get_weather", ['{"loc', 'ation": "Ha', 'ngzhou"}']), request=REQUEST_TOOLS)
    call = v.message["choices"][0]["message"]["tool_calls"][0]
    assert call == {"id": "call_1", "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"location": "Hangzhou"}'}}
    assert v.finding_kinds == {FindingKind.MISSING_USAGE}


def test_invalid_tool_arguments_at_the_end() -> None:
    v = check(tool_stream("get_weather", ['{"location": ']))
    assert FindingKind.TOOL_ARGS_INVALID_JSON in v.finding_kinds


def test_cut_off_tool_call_is_unterminated() -> None:
    body = tool_stream("get_weather", ['{"location": "Han'])
    body = body[:body.index(b'data: {"id": "chatcmpl-1", "object": "chat.completion.chunk", '
                            b'"model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason"')]
    v = check(body)
    assert v.ending is Ending.TRUNCATED
    assert FindingKind.TOOL_CALL_UNTERMINATED in v.finding_kinds


def test_undefined_function_and_schema_mismatch_need_the_request() -> None:
    body = tool_stream("get_time", ["{}"])
    assert FindingKind.TOOL_UNDEFINED_FUNCTION not in check(body).finding_kinds
    assert FindingKind.TOOL_UNDEFINED_FUNCTION in check(body, request=REQUEST_TOOLS).finding_kinds
    bad = tool_stream("get_weather", ['{"days": "three"}'])
    v = check(bad, request=REQUEST_TOOLS)
    assert FindingKind.TOOL_ARGS_SCHEMA_MISMATCH in v.finding_kinds


def test_missing_usage_only_when_asked() -> None:
    asked = {"stream_options": {"include_usage": True}}
    assert FindingKind.MISSING_USAGE in check(text_stream(["a"]), request=asked).finding_kinds
    assert not check(text_stream(["a"], usage=True), request=asked).findings
    assert not check(text_stream(["a"])).findings


def test_bad_chunk_json_does_not_stop_checking() -> None:
    body = chunk({"content": "a"}) + b"data: {oops\n\n" + chunk({"content": "b"}) + chunk({}, "stop") + DONE
    v = check(body)
    assert v.ending is Ending.COMPLETE
    assert v.message["choices"][0]["message"]["content"] == "ab"
    assert [f.kind for f in v.findings] == [FindingKind.BAD_CHUNK_JSON]
    assert v.findings[0].frame == 2


def test_chunk_of_wrong_shape_is_a_schema_finding_not_a_crash() -> None:
    body = frame([1, 2]) + frame({"choices": "x"}) + frame({"choices": [{"delta": {"content": 5}}]})
    v = check(body + text_stream(["a"]))
    assert FindingKind.CHUNK_SCHEMA in v.finding_kinds
    assert v.ending is Ending.COMPLETE


def test_changed_response_id_is_a_finding() -> None:
    body = chunk({"content": "a"}, id="gw-1") + chunk({}, "stop", id="gw-2") + DONE
    v = check(body)
    assert FindingKind.ID_CHANGED in v.finding_kinds
    assert (v.first_id, v.last_id) == ("gw-1", "gw-2")


def test_markup_leak_in_reasoning_is_found() -> None:
    body = chunk({"reasoning_content": "plan <tool_call>{}"}) + chunk({}, "stop") + DONE
    assert FindingKind.MARKUP_LEAK in check(body).finding_kinds
    checker = StreamChecker(markup="dsml-v4")
    checker.feed(body)
    assert FindingKind.MARKUP_LEAK not in checker.close().finding_kinds


@pytest.mark.parametrize("family,content", [
    ("glm45", "Sure.\n<tool_call>get_weather\n<arg_key>city</arg_key>"),
    ("glm47", "Sure.<arg_value>Paris</arg_value>"),
    ("minimax-m2", "Sure.\n<minimax:tool_call>\n"),
    # docs/design/markup.md decision 2.11: skip_special_tokens removed the block tokens, the plain-text
    # invoke is left
    ("minimax-m2", 'Sure.\n\n<invoke name="get_weather">\n<parameter name="city">Paris'),
])
def test_glm_and_minimax_markup_in_content_is_a_leak_for_its_family_and_for_all(
        family: str, content: str) -> None:
    for markup in (family, "all"):
        checker = StreamChecker(markup=markup)
        checker.feed(text_stream([content[:9], content[9:]]))
        assert FindingKind.MARKUP_LEAK in checker.close().finding_kinds
    checker = StreamChecker(markup="dsml-v4")
    checker.feed(text_stream([content]))
    assert FindingKind.MARKUP_LEAK not in checker.close().finding_kinds


def test_tail_keeps_the_last_2_kib() -> None:
    body = text_stream(["x" * 100] * 100)
    v = check(body, 17)
    assert v.tail == body[-2048:]
    assert v.bytes == len(body)


def test_in_flight_flags() -> None:
    checker = StreamChecker()
    checker.feed(chunk({"role": "assistant", "content": ""}))
    assert not checker.saw_content
    checker.feed(chunk({"content": "hi"}))
    assert checker.saw_content and not checker.saw_done
    checker.feed(DONE)
    assert checker.saw_done


def test_feeding_after_close_is_misuse() -> None:
    checker = StreamChecker()
    checker.close()
    with pytest.raises(UsageError):
        checker.feed(b"data: x\n\n")
    with pytest.raises(UsageError):
        checker.close()


def test_verdict_round_trips_through_json() -> None:
    v = check(tool_stream("f", ["{}"]), request=REQUEST_TOOLS)
    assert Verdict.from_dict(json.loads(json.dumps(v.to_dict()))) == v


# ── property: the verdict never depends on how the bytes were split ──────────────────────────────

_word = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=8)


@st.composite
def streams(draw: st.DrawFn) -> bytes:
    """Random valid streams, then a random ending: whole, or cut anywhere."""
    words = draw(st.lists(_word, max_size=8))
    kind = draw(st.sampled_from(["text", "tools"]))
    if kind == "text":
        body = text_stream(words, finish=draw(st.sampled_from(["stop", "length", None])),
                           done=draw(st.booleans()), usage=draw(st.booleans()))
    else:
        args = json.dumps({"q": "".join(words)}, ensure_ascii=False)
        cuts = sorted(draw(st.lists(st.integers(0, len(args)), max_size=4)))
        pieces = [args[a:b] for a, b in zip([0, *cuts], [*cuts, len(args)], strict=True)]
        body = tool_stream("search", pieces)
    if draw(st.booleans()):
        body = body[:draw(st.integers(0, len(body)))]
    if draw(st.booleans()):
        body = body.replace(b"\n", b"\r\n")
    return body


@settings(max_examples=150, deadline=None)
@given(body=streams(), sizes=st.lists(st.integers(1, 40), min_size=1, max_size=20))
def test_random_stream_verdict_is_the_same_for_every_split(body: bytes, sizes: list[int]) -> None:
    expected = check(body)
    assert facts(check(body, 1)) == facts(expected)
    checker = StreamChecker()
    pos = 0
    for size in sizes * (len(body) // max(sum(sizes), 1) + 1):
        checker.feed(body[pos:pos + size])
        pos += size
    assert facts(checker.close()) == facts(expected)


@settings(max_examples=150, deadline=None)
@given(body=st.binary(max_size=300))
def test_arbitrary_bytes_never_raise(body: bytes) -> None:
    v = check(body, 3)
    assert v.ending in set(Ending)


# ── markup leaks are found in flight, across delta boundaries, with or without the text kept ─────

_MARKERS = list(leak_markers("all"))


@settings(max_examples=200, deadline=None)
@given(before=st.text(max_size=30), marker=st.sampled_from([*_MARKERS, "", "<tool", "｜DS"]),
       after=st.text(max_size=30),
       cuts=st.lists(st.integers(0, 80), max_size=6), keep_text=st.booleans())
def test_leak_is_found_wherever_the_deltas_split_it(before: str, marker: str, after: str,
                                                    cuts: list[int], keep_text: bool) -> None:
    content = before + marker + after
    bounds = sorted({min(c, len(content)) for c in cuts} | {0, len(content)})
    deltas = [content[a:b] for a, b in itertools.pairwise(bounds)]
    checker = StreamChecker(keep_text=keep_text)
    checker.feed(text_stream(deltas))
    leaks = [f for f in checker.close().findings if f.kind is FindingKind.MARKUP_LEAK]
    expected = any(m in content for m in _MARKERS)
    assert bool(leaks) == expected
    if leaks:
        pos = int(leaks[0].detail.rsplit(" at ", 1)[1])
        assert any(content.startswith(m, pos) for m in _MARKERS)


def test_leak_finding_names_the_frame_where_markup_appeared() -> None:
    body = text_stream(["plain ", "text <", "tool_call>", " more"])
    v = check(body)
    (leak,) = [f for f in v.findings if f.kind is FindingKind.MARKUP_LEAK]
    assert leak.frame == 4  # role chunk, "plain ", "text <", then the frame that completed the marker
    assert leak.detail.endswith(" at 11")


def test_without_kept_text_the_verdict_is_the_same_but_for_the_text() -> None:
    body = (BODIES / "markup_leak.sse").read_bytes()
    kept = StreamChecker()
    kept.feed(body)
    lean = StreamChecker(keep_text=False)
    lean.feed(body)
    a, b = kept.close(), lean.close()
    assert (a.ending, a.findings) == (b.ending, b.findings)
    assert a.message["choices"][0]["message"]["content"]
    assert not b.message["choices"][0]["message"]["content"]


# ── the door: one checker per protocol, told by path or by body ─────────────────────────────────

def test_checker_for_returns_each_protocols_checker_with_one_surface() -> None:
    expected = {"chat": StreamChecker, "responses": ResponsesChecker, "messages": MessagesChecker}
    for api, cls in expected.items():
        checker = checker_for(api, {"tools": []}, markup="hermes", keep_text=False)
        assert type(checker) is cls
        assert (checker.saw_content, checker.saw_done, checker.error_message,
                checker.findings_so_far, checker.bytes_seen) == (False, False, None, (), 0)
        assert checker.feed(b"") == []
        verdict = checker.close()
        assert (verdict.ending, verdict.api) == (Ending.EMPTY, api)
    with pytest.raises(UsageError, match="unknown api 'soap'"):
        checker_for("soap")


@pytest.mark.parametrize(("path", "api"), [
    ("/v1/chat/completions", "chat"), ("/openai/deployments/x/chat/completions?api-version=1", "chat"),
    ("/v1/responses", "responses"), ("/v1/responses/", "responses"), ("/v1/messages", "messages"),
    ("/anthropic/v1/messages", "messages"), ("/v1/messages/count_tokens", None),
    ("/v1/responses/resp_1", None), ("/v1/models", None),
])
def test_api_for_path(path: str, api: str | None) -> None:
    assert api_for_path(path) == api


@pytest.mark.parametrize(("body", "api"), [
    (chunk({"content": "a"}), "chat"),
    (b": ping\n\n" + frame({"choices": [], "usage": {"total_tokens": 1}}), "chat"),
    (b'event: response.created\ndata: {"type": "response.created", "sequence_number": 0, '
     b'"response": {}}\n\n', "responses"),
    (b'data: {"type": "response.created", "response": {}}\n\n', None),  # unnumbered: not Responses
    (b'event: ping\ndata: {"type": "ping"}\n\nevent: message_start\ndata: {"type": "message_start",'
     b' "message": {}}\n\n', "messages"),
    (b'data: {"error": {"message": "x"}}\n\n', None),
    (b"data: [DONE]\n\n", None), (b"\xff\xfe garbage", None), (b"", None),
])
def test_detect_api_from_the_first_recognisable_event(body: bytes, api: str | None) -> None:
    assert detect_api(body) == api


@settings(max_examples=150, deadline=None)
@given(body=st.binary(max_size=300))
def test_detect_api_never_raises(body: bytes) -> None:
    assert detect_api(body) in (None, "chat", "responses", "messages")


def test_json_nested_deeper_than_python_can_read_is_a_finding_not_a_crash() -> None:
    deep = b"[" * 100_000
    assert check(b"event: error\ndata: " + deep + b"\n\n").ending is Ending.ERROR_EVENT
    assert check(b"data: " + deep + b"\n\n").finding_kinds == {FindingKind.BAD_CHUNK_JSON}
    body = tool_stream("search", ["[" * 5000 + "]" * 5000])
    assert check(body).finding_kinds == {FindingKind.TOOL_ARGS_INVALID_JSON}


# ── Kimi and Harmony: their markers, and the shapes stripped special tokens leave (decision 2.11) ──

_STRIPPED = [
    ("Let me check.", 'functions.get_weather:0{"city": "Paris"}'),
    ("", 'functions.fs.read-file:12 {"path": "a"}'),
    ("analysisNeed the weather.assistantcommentary ", 'to=functions.get_weather json{"city": "P"}'),
    ("x", "to=functions.f{}"),
]


def _leaks(deltas: list[str], markup: str = "all") -> list[Finding]:
    checker = StreamChecker(markup=markup)
    checker.feed(text_stream(deltas))
    return [f for f in checker.close().findings if f.kind is FindingKind.MARKUP_LEAK]


@pytest.mark.parametrize("marker", ["<|tool_calls_section_begin|>", "<|tool_call_section_begin|>",
                                    "<|tool_call_begin|>", "<|tool_call_argument_begin|>",
                                    "<|tool_call_end|>", "<|start|>", "<|channel|>", "<|message|>",
                                    "<|constrain|>", "<|end|>", "<|call|>", "<|return|>"])
def test_kimi_and_harmony_markers_in_content_are_leaks(marker: str) -> None:
    (leak,) = _leaks(["Sure ", marker[:4], marker[4:] + " then"])
    assert repr(marker) in leak.detail and leak.detail.endswith(" at 5")


@settings(max_examples=100, deadline=None)
@given(case=st.sampled_from(_STRIPPED), cuts=st.lists(st.integers(0, 120), max_size=8))
def test_stripped_token_shapes_are_leaks_wherever_the_deltas_split_them(
        case: tuple[str, str], cuts: list[int]) -> None:
    before, shape = case
    content = before + shape + " and more text"
    bounds = sorted({min(c, len(content)) for c in cuts} | {0, len(content)})
    (leak,) = _leaks([content[a:b] for a, b in itertools.pairwise(bounds)])
    pos = int(leak.detail.rsplit(" at ", 1)[1])
    assert content.find("functions.") == pos


@pytest.mark.parametrize("content", [
    "The functions.py module defines helpers: {a}",      # no id counter, no to=
    "call functions.f:x{}",                               # not a counter
    "to=functions.f and then {",                          # text between the name and the brace
])
def test_text_that_only_mentions_functions_is_no_leak(content: str) -> None:
    assert _leaks([content]) == []
    assert _leaks(list(content)) == []


def test_shapes_are_looked_for_only_for_the_families_that_leave_them() -> None:
    deltas = ['functions.get_weather:0{"city": "Paris"}']
    assert len(_leaks(deltas, markup="kimi-k2")) == 1
    assert _leaks(deltas, markup="hermes") == []
    assert len(_leaks(["commentary to=functions.f json{}"], markup="harmony")) == 1
