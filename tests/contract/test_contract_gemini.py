"""GeminiChecker: the streamGenerateContent ending table, every finding, the assembled response, in both
framings (``?alt=sse`` and the streamed JSON array), whole and byte by byte."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sseguard.core.contract.gemini import GeminiChecker, looks_like_gemini
from sseguard.core.errors import UsageError
from sseguard.core.verdict import Ending, FindingKind, Verdict
from support.protocol_streams import MARKERS, assert_leak_found_where_it_is, feed_in_sizes, split_at

EXAMPLES = Path(__file__).parents[2] / "examples"
REQUEST = json.loads((EXAMPLES / "request_tools_gemini.json").read_text())
MODEL = "gemini-2.5-flash"
E, F = Ending, FindingKind

#: The verdict every shipped Gemini sample body must get, in each framing it ships in:
#: (ending, finding kinds, error message).
EXPECTED: dict[str, tuple[Ending, list[FindingKind], str | None]] = {
    "complete": (E.COMPLETE, [], None),
    "thoughts": (E.COMPLETE, [], None),
    "tool_calls": (E.COMPLETE, [], None),
    "max_tokens": (E.COMPLETE, [], None),
    "safety": (E.COMPLETE, [], None),
    "prompt_blocked": (E.COMPLETE, [], None),
    "truncated": (E.TRUNCATED, [], None),
    "cut_mid_frame": (E.CUT_MID_FRAME, [], None),
    "unclosed": (E.CUT_MID_FRAME, [], None),  # the array framing only: every record, no ']'
    "error_event": (E.ERROR_EVENT, [], "The model is overloaded. Please try again later."),
    "malformed_function_call": (E.ERROR_EVENT, [], "finishReason MALFORMED_FUNCTION_CALL: Malformed "
                                                   "function call: get_weather{location:"),
    "missing_usage": (E.COMPLETE, [F.MISSING_USAGE], None),
    "id_changed": (E.COMPLETE, [F.ID_CHANGED], None),
    "event_order": (E.COMPLETE, [F.EVENT_ORDER], None),
    "markup_leak": (E.COMPLETE, [F.MARKUP_LEAK], None),
    "tool_undefined_function": (E.COMPLETE, [F.TOOL_UNDEFINED_FUNCTION], None),
    "tool_args_schema_mismatch": (E.COMPLETE, [F.TOOL_ARGS_SCHEMA_MISMATCH], None),
    "bad_chunk_json": (E.COMPLETE, [F.BAD_CHUNK_JSON], None),
    "chunk_schema": (E.COMPLETE, [F.CHUNK_SCHEMA], None),
}
FRAMINGS = ("sse", "array")


# ── how Gemini writes a stream ──────────────────────────────────────────────────────────────────

def usage(out: bool = True) -> dict[str, Any]:
    u: dict[str, Any] = {"promptTokenCount": 9, "totalTokenCount": 9}
    if out:
        u.update(candidatesTokenCount=6, totalTokenCount=15)
    return u


def rec(parts: list[Any] | None = None, finish: str | None = None, *, index: int | None = None,
        use: dict[str, Any] | None = None, rid: str = "r1", **cand: Any) -> dict[str, Any]:
    """One GenerateContentResponse record with one candidate (index left out, as Gemini does for 0)."""
    c: dict[str, Any] = dict(cand)
    if parts is not None:
        c["content"] = {"parts": parts, "role": "model"}
    if finish is not None:
        c["finishReason"] = finish
    if index is not None:
        c["index"] = index
    out: dict[str, Any] = {"candidates": [c]}
    if use is not None:
        out["usageMetadata"] = use
    out.update(modelVersion=MODEL, responseId=rid)
    return out


def text(words: list[str], finish: str | None = "STOP", **last: Any) -> list[dict[str, Any]]:
    """Text records, the last one with ``finish`` and the usage."""
    records = [rec([{"text": w}], use=usage(False)) for w in words[:-1]]
    return [*records, rec([{"text": words[-1]}], finish, use=usage(finish is not None), **last)]


def body(records: list[Any], framing: str) -> bytes:
    """The records as ``?alt=sse`` writes them, or as the JSON array (strings are written verbatim)."""
    def dump(r: Any, indent: int | None) -> str:
        return r if isinstance(r, str) else json.dumps(r, indent=indent, ensure_ascii=False)
    if framing == "sse":
        return b"".join(b"data: " + dump(r, None).encode() + b"\r\n\r\n" for r in records)
    return ("[" + "\n,\r\n".join(dump(r, 2) for r in records) + "\n]").encode()


def check(stream: bytes, step: int | None = None, request: dict[str, Any] | None = None,
          *, keep_text: bool = True, **close: Any) -> Verdict:
    checker = GeminiChecker(request, keep_text=keep_text)
    size = step or max(len(stream), 1)
    for i in range(0, len(stream), size):
        checker.feed(stream[i:i + size])
    return checker.close(**close)


def run(records: list[Any], framing: str, request: dict[str, Any] | None = None,
        **close: Any) -> Verdict:
    return check(body(records, framing), request=request, **close)


def kinds(v: Verdict) -> list[FindingKind]:
    return [f.kind for f in v.findings]


def same_in_both(v: Verdict) -> tuple[Any, ...]:
    """What the framing must not change (offsets may: the frames differ in length)."""
    return (v.ending, [(f.kind, f.detail, f.frame) for f in v.findings], v.message, v.error,
            v.chunks, v.first_id, v.last_id)


def facts(v: Verdict) -> tuple[Any, ...]:
    """What the split must not change: everything, offsets of findings included."""
    return v.ending, v.findings, v.message, v.error, v.chunks


# ── the shipped sample bodies ───────────────────────────────────────────────────────────────────

def shipped() -> set[tuple[str, str]]:
    out = set()
    for path in (EXAMPLES / "bodies").glob("gemini_*"):
        out.add((path.stem.removeprefix("gemini_"), {".sse": "sse", ".json": "array"}[path.suffix]))
    return out


def test_every_gemini_sample_body_is_shipped_in_both_framings_and_expected() -> None:
    assert {name for name, _ in shipped()} == set(EXPECTED)
    assert shipped() == {(n, f) for n in EXPECTED for f in FRAMINGS} - {("unclosed", "sse")}


@pytest.mark.parametrize(("name", "framing"), sorted(shipped()))
def test_sample_body_verdict_whole_and_byte_by_byte(name: str, framing: str) -> None:
    path = EXAMPLES / "bodies" / f"gemini_{name}.{'sse' if framing == 'sse' else 'json'}"
    data = path.read_bytes()
    whole = check(data, request=REQUEST)
    assert (whole.ending, kinds(whole), whole.error, whole.api) == (*EXPECTED[name], "gemini")
    for size in (1, 2, 3, 7, 64):
        assert facts(check(data, size, request=REQUEST)) == facts(whole), size


@pytest.mark.parametrize("name", sorted(set(EXPECTED) - {"unclosed"}))
def test_a_sample_gives_the_same_verdict_in_both_framings(name: str) -> None:
    sse, array = (check((EXAMPLES / "bodies" / f"gemini_{name}.{ext}").read_bytes(), request=REQUEST)
                  for ext in ("sse", "json"))
    assert same_in_both(sse) == same_in_both(array)


# ── endings ─────────────────────────────────────────────────────────────────────────────────────

@pytest.mark.parametrize("framing", FRAMINGS)
def test_finish_reason_then_a_clean_end_is_complete_with_the_joined_response(framing: str) -> None:
    v = run(text(["Hi", " there"]), framing)
    assert (v.ending, v.findings, v.api, v.chunks) == (E.COMPLETE, (), "gemini", 2)
    assert v.message == {
        "candidates": [{"content": {"parts": [{"text": "Hi there"}], "role": "model"},
                        "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 9, "totalTokenCount": 15, "candidatesTokenCount": 6},
        "modelVersion": MODEL, "responseId": "r1"}
    assert (v.first_id, v.last_id) == ("r1", "r1")


@pytest.mark.parametrize("framing", FRAMINGS)
@pytest.mark.parametrize("reason", ["MAX_TOKENS", "SAFETY", "RECITATION", "LANGUAGE", "BLOCKLIST",
                                    "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"])
def test_every_other_finish_reason_is_a_legitimate_stop(framing: str, reason: str) -> None:
    v = run(text(["Hi"], reason), framing)
    assert (v.ending, v.findings, v.error) == (E.COMPLETE, (), None)
    assert v.message["candidates"][0]["finishReason"] == reason


@pytest.mark.parametrize("framing", FRAMINGS)
@pytest.mark.parametrize("reason", ["MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "OTHER",
                                    "FINISH_REASON_UNSPECIFIED"])
def test_a_finish_reason_that_says_the_model_failed_is_an_error_event(framing: str,
                                                                      reason: str) -> None:
    v = run(text(["Hi"], reason), framing)
    assert (v.ending, v.error) == (E.ERROR_EVENT, f"finishReason {reason}")


@pytest.mark.parametrize("framing", FRAMINGS)
def test_a_finish_reason_no_table_names_is_a_failure_not_a_finished_answer(framing: str) -> None:
    v = run(text(["Hi"], "A_NEW_REASON"), framing)
    assert v.ending is E.ERROR_EVENT
    assert v.error is not None and v.error.startswith("finishReason A_NEW_REASON (a reason")


@pytest.mark.parametrize("framing", FRAMINGS)
def test_an_error_record_after_the_200_is_an_error_event(framing: str) -> None:
    error = {"error": {"code": 500, "message": "An internal error has occurred.", "status": "INTERNAL"}}
    v = run([*text(["Hi"], None), error], framing)
    assert (v.ending, v.error, v.chunks) == (E.ERROR_EVENT, "An internal error has occurred.", 1)


@pytest.mark.parametrize("framing", FRAMINGS)
def test_a_blocked_prompt_without_candidates_is_a_legitimate_stop(framing: str) -> None:
    blocked = {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": usage(False),
               "modelVersion": MODEL, "responseId": "r1"}
    v = run([blocked], framing)
    assert (v.ending, v.findings) == (E.COMPLETE, ())
    assert v.message["promptFeedback"] == {"blockReason": "SAFETY"}


@pytest.mark.parametrize("framing", FRAMINGS)
def test_clean_end_after_content_without_a_finish_reason_is_truncated(framing: str) -> None:
    v = run(text(["Hi", " there"], None), framing)
    assert (v.ending, v.findings) == (E.TRUNCATED, ())  # no missing_usage: the stream never finished
    assert v.message["candidates"][0]["content"]["parts"] == [{"text": "Hi there"}]
    assert "finishReason" not in v.message["candidates"][0]


@pytest.mark.parametrize("framing", FRAMINGS)
def test_every_candidate_needs_its_finish_reason(framing: str) -> None:
    first = rec([{"text": "A"}], index=0)
    second = rec([{"text": "B"}], index=1)
    one_done = rec([{"text": "."}], "STOP", index=0, use=usage())
    two_done = rec([{"text": "."}], "STOP", index=1, use=usage())
    assert run([first, second, one_done], framing).ending is E.TRUNCATED
    v = run([first, second, one_done, two_done], framing)
    assert (v.ending, v.findings) == (E.COMPLETE, ())
    assert [c["index"] for c in v.message["candidates"]] == [0, 1]


def test_adapter_endings_mean_the_same_as_in_the_other_protocols() -> None:
    for framing in FRAMINGS:
        data = body(text(["Hi"], None), framing)
        assert check(data[:-5]).ending is E.CUT_MID_FRAME
        assert check(data, transport_error="reset").ending is E.TRANSPORT_ERROR
        assert check(data, stalled=True).ending is E.STALLED
    error = b'{"error": {"code": 429, "message": "Resource exhausted.", "status": "RESOURCE_EXHAUSTED"}}'
    v = check(b"", http_status=429, body=error)
    assert (v.ending, v.http_status, v.api) == (E.HTTP_ERROR, 429, "gemini")
    for nothing in (b"", b"\r\n", b"\xef\xbb\xbf"):
        assert check(nothing).ending is E.EMPTY
    assert check(b"[]").ending is E.EMPTY
    assert check(b"\xef\xbb").ending is E.CUT_MID_FRAME


def test_an_array_never_closed_is_cut_even_after_every_record() -> None:
    data = body(text(["Hi"]), "array")
    assert check(data[:-1]).ending is E.CUT_MID_FRAME
    assert check(data + b"\r\n").ending is E.COMPLETE


def test_every_byte_of_an_array_body_comes_out_in_an_event_for_a_relay_to_forward() -> None:
    data = body(text(["Hi", "!"]), "array")
    for size in (1, 5, len(data)):
        checker = GeminiChecker()
        events = [e for i in range(0, len(data), size) for e in checker.feed(data[i:i + size])]
        assert b"".join(e.raw for e in events) == data
        assert [e.event for e in events] == ["message", "message", "]"]
        v = checker.close()
        assert (v.ending, v.chunks) == (E.COMPLETE, 2)


def test_a_trailing_done_sentinel_from_a_gateway_is_ignored() -> None:
    v = check(body(text(["Hi"]), "sse") + b"data: [DONE]\n\n")
    assert (v.ending, v.findings) == (E.COMPLETE, ())


def test_a_bare_error_object_with_a_200_is_an_error_event() -> None:
    v = check(b'{"error": {"code": 400, "message": "API key not valid.", "status": "INVALID_ARGUMENT"}}')
    assert (v.ending, v.error) == (E.ERROR_EVENT, "API key not valid.")


# ── the assembled response ──────────────────────────────────────────────────────────────────────

@pytest.mark.parametrize("framing", FRAMINGS)
def test_thoughts_stay_apart_and_function_calls_arrive_whole(framing: str) -> None:
    call = {"functionCall": {"name": "get_weather", "args": {"location": "Paris"}, "id": "c1"},
            "thoughtSignature": "sig2"}
    records = [rec([{"text": "Think", "thought": True}]), rec([{"text": "ing.", "thought": True}]),
               rec([{"text": "Sure", "thoughtSignature": "sig1"}]), rec([{"text": "."}]),
               rec([call]), rec([{"text": "Done"}], "STOP", use=usage())]
    v = run(records, framing, REQUEST)
    assert (v.ending, v.findings) == (E.COMPLETE, ())
    assert v.message["candidates"][0]["content"]["parts"] == [
        {"text": "Thinking.", "thought": True}, {"text": "Sure.", "thoughtSignature": "sig1"},
        call, {"text": "Done"}]


def test_keep_text_false_keeps_the_verdict_and_no_text() -> None:
    data = body(text(["Hi", ' <tool_call>{"name": "x"}']), "sse")
    kept, lean = check(data), check(data, keep_text=False)
    assert (lean.ending, lean.findings) == (kept.ending, kept.findings)
    assert lean.message["candidates"][0]["content"]["parts"] == [{"text": ""}]


def test_saw_content_and_saw_done_in_flight_and_the_framing_told_from_the_first_byte() -> None:
    for framing in FRAMINGS:
        checker = GeminiChecker()
        data = body(text(["Hi", "!"]), framing)
        first = data.index(b"\r\n\r\n") + 4 if framing == "sse" else data.index(b"\n,\r\n")
        assert checker.framing is None
        checker.feed(b"\r\n" if framing == "array" else b"")
        assert checker.framing is None
        checker.feed(data[:first])
        assert checker.framing == framing
        assert checker.saw_content and not checker.saw_done
        checker.feed(data[first:])
        assert checker.saw_done
        assert checker.close().ending is E.COMPLETE


# ── findings ────────────────────────────────────────────────────────────────────────────────────

@pytest.mark.parametrize("framing", FRAMINGS)
def test_content_after_the_finish_reason_is_out_of_order_once(framing: str) -> None:
    late = [rec([{"text": " more"}]), rec([{"text": " and more"}], use=usage())]
    v = run([*text(["Hi"]), *late], framing)
    assert (v.ending, kinds(v)) == (E.COMPLETE, [F.EVENT_ORDER])
    assert (v.findings[0].detail, v.findings[0].frame) == (
        "content for candidate 0 after its finishReason STOP", 2)
    assert v.message["candidates"][0]["content"]["parts"] == [{"text": "Hi"}]
    # an empty text part, or a record of usage alone, after the finish is no content
    tail = [rec([{"text": ""}]), {"usageMetadata": usage(), "modelVersion": MODEL, "responseId": "r1"}]
    assert run([*text(["Hi"]), *tail], framing).findings == ()


@pytest.mark.parametrize("framing", FRAMINGS)
def test_markup_leaks_are_found_in_text_and_thought_parts_across_records(framing: str) -> None:
    v = run([rec([{"text": "ok <tool_", "thought": True}]), rec([{"text": "call>", "thought": True}]),
             *text(["fine"])], framing)
    assert (kinds(v), v.findings[0].detail) == ([F.MARKUP_LEAK],
                                                "'<tool_call>' in thought of candidate 0 at 3")
    v = run(text(["Sure. <｜DSML｜function_calls>", "x"]), framing)
    assert (kinds(v), v.findings[0].frame) == ([F.MARKUP_LEAK], 1)


@pytest.mark.parametrize("framing", FRAMINGS)
def test_function_calls_are_checked_against_the_function_declarations(framing: str) -> None:
    def call(name: str, args: Any) -> list[dict[str, Any]]:
        return [rec([{"functionCall": {"name": name, "args": args}}], "STOP", use=usage())]
    assert run(call("get_weather", {"location": "Paris"}), framing, REQUEST).findings == ()
    v = run(call("get_forecast", {}), framing, REQUEST)
    assert [(f.kind, f.detail) for f in v.findings] == [
        (F.TOOL_UNDEFINED_FUNCTION, "candidate 0 function call 'get_forecast': not among the 1 "
                                    "offered tools")]
    v = run(call("get_weather", {"days": 2}), framing, REQUEST)
    assert [(f.kind, f.detail) for f in v.findings] == [
        (F.TOOL_ARGS_SCHEMA_MISMATCH, "candidate 0 function call 'get_weather': 'location' is a "
                                      "required property")]
    # no tools offered: nothing to check against; only built-in tools offered: no function is defined
    assert run(call("anything", {}), framing).findings == ()
    assert kinds(run(call("anything", {}), framing, {"tools": [{"googleSearch": {}}]})) == [
        F.TOOL_UNDEFINED_FUNCTION]


def test_parameters_json_schema_and_nullable_openapi_fields_are_honoured() -> None:
    tools = {"tools": [{"functionDeclarations": [
        {"name": "a", "parametersJsonSchema": {"type": "object", "properties": {"n": {"type": "integer"}}}},
        {"name": "b", "parameters": {"type": "OBJECT", "properties": {
            "note": {"type": "STRING", "nullable": True},
            "tags": {"type": "ARRAY", "items": {"type": "STRING"}}}}}]}]}

    def verdict(name: str, args: Any) -> list[FindingKind]:
        call = {"functionCall": {"name": name, "args": args}}
        return kinds(run([rec([call], "STOP", use=usage())], "sse", tools))
    assert verdict("a", {"n": 1}) == [] and verdict("a", {"n": "1"}) == [F.TOOL_ARGS_SCHEMA_MISMATCH]
    assert verdict("b", {"note": None, "tags": ["x"]}) == []
    assert verdict("b", {"tags": [1]}) == [F.TOOL_ARGS_SCHEMA_MISMATCH]


@pytest.mark.parametrize("framing", FRAMINGS)
def test_missing_usage_is_judged_on_the_final_record(framing: str) -> None:
    assert kinds(run([*text(["Hi"]), rec([])], framing)) == [F.MISSING_USAGE]
    no_count = text(["Hi"])
    no_count[-1]["usageMetadata"] = usage(False)
    v = run(no_count, framing)
    assert [(f.kind, f.detail) for f in v.findings] == [
        (F.MISSING_USAGE, "the final record's usageMetadata has no candidatesTokenCount")]
    # a stop with no answer leaves the zero count out, as protocol-buffer JSON does: no finding
    assert run([rec(None, "SAFETY", use=usage(False))], framing).findings == ()


@pytest.mark.parametrize("framing", FRAMINGS)
def test_a_response_id_that_changes_is_reported(framing: str) -> None:
    v = run([rec([{"text": "Hi"}], rid="a"), rec([{"text": "!"}], "STOP", use=usage(), rid="b")],
            framing)
    assert [(f.kind, f.detail) for f in v.findings] == [
        (F.ID_CHANGED, "response id changed from 'a' to 'b'")]
    assert (v.first_id, v.last_id) == ("a", "b")


@pytest.mark.parametrize("framing", FRAMINGS)
@pytest.mark.parametrize(("bad", "detail"), [
    ({"candidates": {"x": 1}}, "candidates is not a list"),
    ({"candidates": ["x"]}, "a candidate is not an object"),
    ({"candidates": [{"index": "0"}]}, "candidate index is not an integer"),
    ({"candidates": [{"content": []}]}, "candidate 0: content is not an object"),
    ({"candidates": [{"content": {"parts": {}}}]}, "candidate 0: parts is not a list"),
    ({"candidates": [{"content": {"parts": [1]}}]}, "candidate 0: a part is not an object"),
    ({"candidates": [{"content": {"parts": [{"text": 1}]}}]}, "candidate 0: text is not a string"),
    ({"candidates": [{"content": {"parts": [{"functionCall": {"args": {}}}]}}]},
     "candidate 0: functionCall without a name"),
    ({"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": []}}]}}]},
     "candidate 0: functionCall args is not an object"),
    ({"candidates": [{"finishReason": 1}]}, "candidate 0: finishReason is not a string"),
    ({"usageMetadata": 3}, "usageMetadata is not an object"),
    ([1, 2], "record is a list, not an object"),
])
def test_records_of_the_wrong_shape_are_chunk_schema(framing: str, bad: Any, detail: str) -> None:
    v = run([rec([{"text": "Hi"}]), bad, *text(["!"])], framing)
    assert [(f.kind, f.detail, f.frame) for f in v.findings] == [(F.CHUNK_SCHEMA, detail, 2)]
    assert v.ending is E.COMPLETE


@pytest.mark.parametrize("framing", FRAMINGS)
def test_a_record_that_is_not_json_is_bad_chunk_json(framing: str) -> None:
    v = run([rec([{"text": "Hi"}]), "{'candidates': []}", *text(["!"])], framing)
    assert [(f.kind, f.detail) for f in v.findings] == [
        (F.BAD_CHUNK_JSON, "not JSON: \"{'candidates': []}\"")]


@pytest.mark.parametrize(("obj", "claimed"), [
    (rec([{"text": "Hi"}]), True),
    ({"promptFeedback": {"blockReason": "SAFETY"}, "responseId": "r1"}, True),
    ({"candidates": [], "usageMetadata": usage()}, True),
    ({"candidates": [{"content": {}}]}, False),  # none of the response's own fields
    ({"error": {"code": 500, "message": "x", "status": "INTERNAL"}}, False),
    ({"object": "chat.completion.chunk", "choices": [], "id": "c"}, False),
    ({"type": "message_start", "message": {"id": "msg_1"}}, False),
])
def test_a_record_is_told_apart_from_the_other_protocols(obj: Any, claimed: bool) -> None:
    assert looks_like_gemini(obj) is claimed


def test_misuse_raises_usage_error() -> None:
    checker = GeminiChecker()
    checker.close()
    with pytest.raises(UsageError):
        checker.feed(b"data: {}\n\n")
    with pytest.raises(UsageError):
        checker.close()


# ── guarantees ──────────────────────────────────────────────────────────────────────────────────

_words = st.lists(st.text(alphabet=st.sampled_from(list("ab <>|/=:\"\\{}[],\n日✓")), min_size=1,
                          max_size=8), min_size=1, max_size=5)


@st.composite
def streams(draw: Any) -> tuple[list[Any], str]:
    """Records of one answer: maybe a thought, maybe a leaked marker, maybe a call, maybe an end."""
    words = draw(_words)
    if draw(st.booleans()):
        words = split_at(draw(st.sampled_from(MARKERS)) + "".join(words),
                         draw(st.lists(st.integers(0, 40), max_size=3)))
    records: list[Any] = [rec([{"text": w, "thought": True}]) for w in draw(st.lists(_words.map(
        "".join), max_size=2))]
    records += [rec([{"text": w}]) for w in words]
    if draw(st.booleans()):
        records.append(rec([{"functionCall": {"name": draw(st.sampled_from(["get_weather", "f"])),
                                              "args": {"location": draw(st.sampled_from(["x", 1]))}}}]))
    ending = draw(st.sampled_from(["STOP", "MAX_TOKENS", "OTHER", None, "error"]))
    if ending == "error":
        records.append({"error": {"code": 500, "message": "boom", "status": "INTERNAL"}})
    else:
        records.append(rec([], ending, use=usage()))
    return records, "".join(words)


@settings(max_examples=150, deadline=None)
@given(streams(), st.lists(st.integers(1, 9), min_size=1, max_size=5))
def test_any_split_of_either_framing_gives_the_same_verdict_as_the_other_framing(
        case: tuple[list[Any], str], sizes: list[int]) -> None:
    records, answer = case
    verdicts = {}
    for framing in FRAMINGS:
        data = body(records, framing)
        whole = check(data, request=REQUEST)
        assert facts(feed_in_sizes(GeminiChecker(REQUEST), data, sizes)) == facts(whole)
        verdicts[framing] = whole
    assert same_in_both(verdicts["sse"]) == same_in_both(verdicts["array"])
    if verdicts["sse"].ending is E.COMPLETE:
        assert_leak_found_where_it_is(answer, verdicts["sse"])


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300) | streams().map(lambda c: body(c[0], "array")[:-3]),
       st.lists(st.integers(1, 9), min_size=1, max_size=5))
def test_arbitrary_bytes_never_raise_and_the_split_never_matters(data: bytes, sizes: list[int]) -> None:
    whole = check(data, request=REQUEST)
    assert facts(feed_in_sizes(GeminiChecker(REQUEST), data, sizes)) == facts(whole)
