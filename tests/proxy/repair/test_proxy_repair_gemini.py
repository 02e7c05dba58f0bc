"""``--repair-markup`` on Gemini streams: markup in ``text`` parts becomes whole ``functionCall`` parts.

The writer is driven as the relay drives it: the upstream body, in either framing (``?alt=sse`` or the
streamed JSON array) and cut into reads anywhere (hypothesis), decoded into records by the contract's
own framing decoder; every record through the writer, the array's closing ``]`` held until the writer
is flushed. What the client gets is read back with ``json`` and judged by the strict Gemini checker.
End to end (a real proxy, the chaos upstream, the google-genai SDK): ``test_proxy_repair_gemini_e2e.py``.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sseguard.chaos.generate import GeneratedCall as Call  # renamed (issue 46)
from sseguard.chaos.generate import render_markup
from sseguard.core.contract import checker_for
from sseguard.core.contract.gemini import ARRAY_CLOSE, GeminiFrames
from sseguard.core.jsonarray import ArrayTail
from sseguard.core.sse import SSEDecoder, Tail
from sseguard.core.verdict import Api, FindingKind
from sseguard.proxy.repair import WRITERS, GeminiRepairFrames, frames_for

FRAMINGS = ["sse", "array"]
DSML = ["dsml-v32", "dsml-v4", "dsml-v41"]
#: The families of docs/design/markup.md §1 besides DSML (the chat writer's end-to-end families).
MARKUP1 = ["deepseek-v3", "deepseek-v31", "hermes", "qwen3-coder"]
MARKUP2 = ["kimi-k2", "glm45", "glm47", "harmony", "minimax-m2"]
#: Text of the markup that must never reach the client as text.
NEVER = ("｜DSML｜", "tool▁call", "<tool_call>", "</tool_call>", "<|", "|>", "<arg_", "</arg_",
         "minimax:", "<invoke", "<parameter", "<function=", "to=functions")
USAGE = {"promptTokenCount": 8, "totalTokenCount": 8}
FINAL_USAGE = {"promptTokenCount": 8, "candidatesTokenCount": 5, "totalTokenCount": 13}
#: Every parameter a string, so that GLM and MiniMax keep the values raw (decision 2.5).
STRING_TOOLS = {"tools": [{"functionDeclarations": [
    {"name": name, "parametersJsonSchema": {"type": "object", "properties": {
        k: {"type": "string"} for k in ("path", "query", "note")}}} for name in ("read", "fs.search")]}]}


def _record(parts: list[dict[str, Any]], finish: str | None = None, index: int = 0) -> dict[str, Any]:
    cand: dict[str, Any] = {"content": {"parts": parts, "role": "model"}}
    if finish is not None:
        cand["finishReason"] = finish
    cand["index"] = index
    return {"candidates": [cand], "usageMetadata": FINAL_USAGE if finish else USAGE,
            "modelVersion": "m", "responseId": "r1"}


def _body(records: list[dict[str, Any]], framing: str) -> bytes:
    """``records`` as Google frames them: ``data: …\\r\\n\\r\\n`` or ``[{…},\\r\\n{…}\\r\\n]``."""
    encoded = [json.dumps(r, ensure_ascii=False, separators=(",", ":")).encode() for r in records]
    if framing == "sse":
        return b"".join(b"data: " + e + b"\r\n\r\n" for e in encoded)
    return b"[" + b",\r\n".join(encoded) + b"\r\n]"


def _texts(texts: list[str], framing: str) -> bytes:
    """One candidate's answer: a record per text delta, then the record with ``STOP``."""
    return _body([*(_record([{"text": t}]) for t in texts), _record([{"text": ""}], "STOP")], framing)


def _cut(data: bytes, cuts: Collection[int]) -> list[bytes]:
    points = sorted(c for c in cuts if 0 < c < len(data))
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


def _split(text: str, cuts: set[int]) -> list[str]:
    points = sorted(c for c in cuts if 0 < c < len(text))
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]


def _relay(frames: GeminiRepairFrames, body: bytes, cuts: Collection[int] = ()) -> bytes:
    return _relay_and_rest(frames, body, cuts)[0]


def _relay_and_rest(frames: GeminiRepairFrames, body: bytes,
                    cuts: Collection[int] = ()) -> tuple[bytes, bytes]:
    """What the relay sends for ``body`` read in pieces cut at ``cuts``: each record through the
    writer as it completes, the array's ``]`` held until the writer is flushed (as the relay holds a
    terminal event); after a failure, nothing more (the relay's error frame comes next). And the bytes
    after the last frame, which belong to no frame (the ``\n`` of a final ``\r\n`` read after its
    ``\r`` had ended the frame)."""
    decoder = GeminiFrames()
    out: list[bytes] = []
    held = b""
    for piece in _cut(body, cuts):
        for event in decoder.feed(piece):
            sent = frames.transform(event)
            if event.event == ARRAY_CLOSE:
                held = sent
            else:
                out.append(sent)
            if frames.failure is not None:  # the relay ends the stream with its error frame
                return b"".join(out), b""
    tail = decoder.close()
    rest = tail.raw if isinstance(tail, Tail | ArrayTail) else b""
    return b"".join(out) + frames.flush() + held, rest


def _records(body: bytes, framing: str) -> list[dict[str, Any]]:
    """The records the client reads: one JSON array, or the data of each SSE event (a read that
    ends between ``\r\n`` and ``\r\n`` moves a line end from one frame's bytes to the next's: the
    frames are whole SSE, not byte for byte Google's, so they are read as SSE)."""
    if framing == "array":
        records: list[dict[str, Any]] = json.loads(body)
        return records
    events = SSEDecoder().feed(body)
    assert all(e.event == "message" for e in events)
    return [json.loads(e.data) for e in events]


def _parts(records: list[dict[str, Any]], index: int = 0) -> list[dict[str, Any]]:
    return [p for r in records for c in r["candidates"] if c.get("index", 0) == index
            for p in c.get("content", {}).get("parts", [])]


def _verdict(body: bytes, request: dict[str, Any] | None = None) -> tuple[str, list[Any]]:
    checker = checker_for("gemini", request or {})
    checker.feed(body)
    verdict = checker.close()
    return str(verdict.ending), list(verdict.findings)


_values = st.dictionaries(st.sampled_from(["path", "query", "note"]),
                          st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
                          .filter(lambda s: "｜" not in s), min_size=0, max_size=3)
_prefix = st.text(st.sampled_from("ab <>\n.é"), max_size=12).filter(
    lambda s: not s.endswith("\n"))


@settings(max_examples=150, deadline=None)
@given(family=st.sampled_from([*DSML, "hermes"]), auto=st.booleans(), framing=st.sampled_from(FRAMINGS),
       prefix=_prefix, suffix=_prefix,
       calls=st.lists(st.tuples(st.sampled_from(["read", "ns::search"]), _values), min_size=1,
                      max_size=3),
       cuts=st.sets(st.integers(1, 400), max_size=25), reads=st.sets(st.integers(1, 3000), max_size=40))
def test_markup_in_text_parts_becomes_the_same_function_calls_under_any_split(
        family: str, auto: bool, framing: str, prefix: str, suffix: str,
        calls: list[tuple[str, dict[str, str]]], cuts: set[int], reads: set[int]) -> None:
    rendered = render_markup(family, [Call(f"c{i}", name, values, json.dumps(values))
                                      for i, (name, values) in enumerate(calls)])
    texts = _split(prefix + rendered + suffix, cuts)
    upstream = _texts(texts, framing)
    frames = GeminiRepairFrames("auto" if auto else family, None)
    body = _relay(frames, upstream, reads)
    records = _records(body, framing)
    assert len(records) == len(texts) + 1  # one record out per record in
    parts = _parts(records)
    assert "".join(p.get("text", "") for p in parts) == prefix + suffix
    assert [p["functionCall"] for p in parts if "functionCall" in p] == [
        {"name": name, "args": values} for name, values in calls]
    assert all(set(p) in ({"text"}, {"functionCall"}) for p in parts)
    text = "".join(p.get("text", "") for p in parts)
    assert not any(piece in text for piece in NEVER) and "｜DSML｜" not in body.decode()
    assert records[-1]["candidates"][0]["finishReason"] == "STOP"  # Gemini has no tool_calls reason
    assert _verdict(body) == ("complete", [])
    assert frames.failure is None and frames.findings() == [] and frames.calls == len(calls)


@settings(max_examples=100, deadline=None)
@given(family=st.sampled_from(MARKUP2), auto=st.booleans(), framing=st.sampled_from(FRAMINGS),
       prefix=st.text(st.sampled_from("ab <>.é"), max_size=10).filter(lambda s: s.strip()),
       calls=st.lists(st.tuples(st.sampled_from(["read", "fs.search"]),
                                st.dictionaries(st.sampled_from(["path", "query", "note"]),
                                                st.text(st.sampled_from("ab é1<>.\n\"\\"),
                                                        max_size=12), max_size=3)),
                      min_size=1, max_size=3),
       thought=st.text(st.sampled_from("ab .é"), max_size=10),
       cuts=st.sets(st.integers(1, 500), max_size=30), reads=st.sets(st.integers(1, 3000), max_size=40))
def test_markup2_in_text_parts_becomes_the_same_function_calls_under_any_split(
        family: str, auto: bool, framing: str, prefix: str, calls: list[tuple[str, dict[str, str]]],
        thought: str, cuts: set[int], reads: set[int]) -> None:
    rendered = render_markup(family, [Call(f"c{i}", name, values, json.dumps(values))
                                      for i, (name, values) in enumerate(calls)])
    if family == "harmony":  # a completion of messages: reasoning, the preface, then the calls
        content = (f"<|channel|>analysis<|message|>{thought}<|end|><|start|>assistant"
                   f"<|channel|>commentary<|message|>{prefix}<|end|>{rendered}")
        visible = prefix
    else:  # the whitespace that frames the answer at its start is not text (decision 2.2);
        # auto sends text before the first marker as it comes, so it cannot know that yet
        content, visible = prefix + rendered, prefix if auto else prefix.lstrip(" ")
    frames = GeminiRepairFrames.for_request("auto" if auto else family, STRING_TOOLS)
    body = _relay(frames, _texts(_split(content, cuts), framing), reads)
    parts = _parts(_records(body, framing))
    assert "".join(p["text"] for p in parts if "text" in p and not p.get("thought")) == visible
    assert "".join(p["text"] for p in parts if p.get("thought")) == (
        thought if family == "harmony" else "")
    got = [p["functionCall"] for p in parts if "functionCall" in p]
    if family == "kimi-k2":  # the model's own ids are what it expects back in the function responses
        assert got == [{"id": f"functions.{name}:{i}", "name": name, "args": values}
                       for i, (name, values) in enumerate(calls)]
    else:
        assert got == [{"name": name, "args": values} for name, values in calls]
    assert not any(piece in p["text"] for p in parts if "text" in p for piece in NEVER)
    assert _verdict(body, STRING_TOOLS) == ("complete", [])
    assert frames.failure is None and frames.findings() == [] and frames.calls == len(calls)


@settings(max_examples=100, deadline=None)
# no marker lead: "<", "｜", "]" (MiniMax-M3's token ]<]minimax[>[), "[" (Mistral's [TOOL_CALLS]) and
# "f" (Phi-4-mini's functools[, GigaChat 3's "function call"), which auto holds at a chunk end
@given(texts=st.lists(st.text(st.characters(blacklist_characters="<\n｜][f",
                                            blacklist_categories=("Cs",)), min_size=1),
                      min_size=0, max_size=6),
       family=st.sampled_from([*DSML, "hermes", "auto"]), framing=st.sampled_from(FRAMINGS),
       reads=st.sets(st.integers(1, 2000), max_size=30))
def test_text_without_markup_passes_byte_identical(texts: list[str], family: str, framing: str,
                                                   reads: set[int]) -> None:
    # auto holds whitespace at the very start of an answer (it may be the framing of a family's
    # markup, decision 2.2): an answer that opens with a delta of only whitespace waits.
    assume(family != "auto" or not texts or texts[0].strip())
    upstream = _texts(texts, framing)
    body, rest = _relay_and_rest(GeminiRepairFrames(family, None), upstream, reads)
    assert body + rest == upstream and rest in (b"", b"\n")


@pytest.mark.parametrize("framing", FRAMINGS)
def test_a_repaired_body_is_exactly_this(framing: str) -> None:
    """Text before the markup, the call whole where its markup ended, text after: literal."""
    upstream = _texts(['Let me check.\n<tool_', 'call>\n{"name": "get_weather", "arguments": '
                       '{"location": "Paris", "days": 2}}\n</tool_call>', " Done."], framing)
    body = _relay(GeminiRepairFrames("hermes", None), upstream)
    tail = (b',"usageMetadata":{"promptTokenCount":8,"totalTokenCount":8},"modelVersion":"m",'
            b'"responseId":"r1"}')
    records = [
        b'{"candidates":[{"content":{"parts":[{"text":"Let me check."}],"role":"model"},"index":0}]'
        + tail,
        b'{"candidates":[{"content":{"parts":[{"functionCall":{"name":"get_weather","args":'
        b'{"location":"Paris","days":2}}}],"role":"model"},"index":0}]' + tail,
        b'{"candidates":[{"content":{"parts":[{"text":" Done."}],"role":"model"},"index":0}]' + tail,
        b'{"candidates":[{"content":{"parts":[{"text":""}],"role":"model"},"finishReason":"STOP",'
        b'"index":0}],"usageMetadata":{"promptTokenCount":8,"candidatesTokenCount":5,'
        b'"totalTokenCount":13},"modelVersion":"m","responseId":"r1"}',
    ]
    if framing == "sse":
        assert body == b"".join(b"data: " + r + b"\r\n\r\n" for r in records)
    else:
        assert body == b"[" + b",\r\n".join(records) + b"\r\n]"


def test_auto_holds_an_answer_that_opens_with_only_whitespace_until_it_settles() -> None:
    upstream = _texts([" ", "a"], "sse")
    body = _relay(GeminiRepairFrames("auto", None), upstream)
    assert [p["text"] for p in _parts(_records(body, "sse"))] == ["", " a", ""]


def test_only_a_possible_marker_prefix_is_held_back_and_then_released() -> None:
    upstream = _texts(["x <", "｜not a marker"], "sse")
    body = _relay(GeminiRepairFrames("dsml-v32", None), upstream)
    assert [p["text"] for p in _parts(_records(body, "sse"))] == ["x ", "<｜not a marker", ""]


def test_a_record_whose_text_is_all_held_back_goes_out_with_an_empty_text_part() -> None:
    upstream = _texts(["a", "<tool_call>", '{"name": "f", "arguments": {}}</tool_call>'], "array")
    body = _relay(GeminiRepairFrames("hermes", None), upstream)
    assert [r["candidates"][0]["content"]["parts"] for r in json.loads(body)] == [
        [{"text": "a"}], [{"text": ""}], [{"functionCall": {"name": "f", "args": {}}}], [{"text": ""}]]


def test_each_candidate_has_its_own_parser() -> None:
    call = '<tool_call>{"name": "f", "arguments": {"n": %d}}</tool_call>'
    upstream = _body([_record([{"text": "zero "}], index=0), _record([{"text": "one <tool"}], index=1),
                      _record([{"text": call % 0}], index=0), _record([{"text": "_call>"}], index=1),
                      _record([{"text": call[11:] % 1}], index=1),
                      _record([{"text": ""}], "STOP", index=0), _record([{"text": ""}], "STOP", index=1)],
                     "sse")
    body = _relay(GeminiRepairFrames("hermes", None), upstream)
    records = _records(body, "sse")
    assert _parts(records, 0) == [{"text": "zero "}, {"functionCall": {"name": "f", "args": {"n": 0}}},
                                  {"text": ""}]
    assert _parts(records, 1) == [{"text": "one "}, {"text": ""},
                                  {"functionCall": {"name": "f", "args": {"n": 1}}}, {"text": ""}]


def test_thought_parts_and_the_upstreams_own_calls_pass_as_they_came() -> None:
    own = {"functionCall": {"name": "get_time", "args": {"tz": "UTC"}}, "thoughtSignature": "c2ln"}
    upstream = _body([_record([{"text": "<tool_call> is a tag I know", "thought": True}]),
                      _record([own]), _record([{"text": ""}], "STOP")], "sse")
    frames = GeminiRepairFrames("hermes", None)
    assert _relay(frames, upstream) == upstream
    assert [f.kind for f in frames.findings()] == [FindingKind.MARKUP_LEAK]  # in a thought: a leak


def test_a_signature_on_a_rewritten_text_part_rides_on_the_first_part_made_of_it() -> None:
    upstream = _body([_record([{"text": "<tool_call>", "thoughtSignature": "c2ln"}]),
                      _record([{"text": '{"name": "f", "arguments": {}}</tool_call>ok'}]),
                      _record([{"text": ""}], "STOP")], "sse")
    body = _relay(GeminiRepairFrames("hermes", None), upstream)
    assert _parts(_records(body, "sse")) == [
        {"text": "", "thoughtSignature": "c2ln"}, {"functionCall": {"name": "f", "args": {}}},
        {"text": "ok"}, {"text": ""}]


@pytest.mark.parametrize("framing", FRAMINGS)
def test_unparseable_markup_stops_the_stream_naming_the_kind(framing: str) -> None:
    content = render_markup("dsml-v4", [Call("c0", "read", {"path": "a"}, "{}")], malformed=True)
    frames = GeminiRepairFrames("dsml-v4", None)
    body = _relay(frames, _texts(["Sure.", content], framing))
    assert frames.failure is not None and frames.failure[0] == "markup_malformed_tag"
    assert "DSML" not in body.decode()


def test_a_failure_in_the_record_that_opens_the_array_keeps_its_bracket() -> None:
    """The guard's error element (``,{"error": …}]``) follows what went out: the ``[`` must have."""
    content = render_markup("dsml-v4", [Call("c0", "read", {"path": "a"}, "{}")], malformed=True)
    frames = GeminiRepairFrames("dsml-v4", None)
    body = _relay(frames, _texts(["Sure." + content], "array"))
    assert frames.failure is not None and frames.failure[0] == "markup_malformed_tag"
    assert body == (b'[{"candidates":[{"content":{"parts":[{"text":""}],"role":"model"},"index":0}],'
                    b'"usageMetadata":{"promptTokenCount":8,"totalTokenCount":8},"modelVersion":"m",'
                    b'"responseId":"r1"}')


def test_arguments_that_are_no_object_fail_the_stream() -> None:
    frames = GeminiRepairFrames("hermes", None)
    body = _relay(frames, _texts(['<tool_call>{"name": "f", "arguments": [1]}</tool_call>'], "sse"))
    assert frames.failure is not None and frames.failure[0].startswith("markup_")
    assert "tool_call" not in body.decode()


def test_a_call_to_a_function_not_declared_is_kept_and_reported() -> None:
    content = render_markup("dsml-v32", [Call("c0", "rm_rf", {"path": "/"}, "{}")])
    request = {"tools": [{"functionDeclarations": [
        {"name": "get_weather", "parameters": {"type": "OBJECT", "properties": {
            "location": {"type": "STRING"}}}}]}]}
    frames = frames_for("dsml-v32", request, Api.GEMINI)
    assert isinstance(frames, GeminiRepairFrames)
    body = _relay(frames, _texts([content], "sse"))
    assert [p["functionCall"]["name"] for p in _parts(_records(body, "sse")) if "functionCall" in p] == [
        "rm_rf"]
    assert [f.kind for f in frames.findings()] == [FindingKind.TOOL_UNDEFINED_FUNCTION]


def test_markup_of_a_family_not_repaired_is_still_a_leak() -> None:
    frames = GeminiRepairFrames("dsml-v4", None)
    _relay(frames, _texts(['<tool_call>\n{"name": "x", "arguments": {}}\n</tool_call>'], "sse"))
    assert [f.kind for f in frames.findings()] == [FindingKind.MARKUP_LEAK]


def test_a_candidate_without_finish_reason_is_closed_by_flush_in_its_framing() -> None:
    for framing, made in (("sse", b'data: {"candidates":[{"content":{"parts":[{"text":"<"}],'
                                  b'"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":'
                                  b'8,"totalTokenCount":8},"modelVersion":"m","responseId":"r1"}\r\n\r\n'),
                          ("array", b',\r\n{"candidates":[{"content":{"parts":[{"text":"<"}],'
                                    b'"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":'
                                    b'8,"totalTokenCount":8},"modelVersion":"m","responseId":"r1"}')):
        frames = GeminiRepairFrames("hermes", None)
        decoder = GeminiFrames()
        for event in decoder.feed(_body([_record([{"text": "a <"}])], framing)):
            if event.event != ARRAY_CLOSE:
                frames.transform(event)
        assert frames.flush() == made


def test_the_writer_table_has_gemini_and_frames_for_picks_from_it() -> None:
    assert set(WRITERS) == {Api.CHAT, Api.RESPONSES, Api.MESSAGES, Api.GEMINI}
    assert isinstance(frames_for("auto", {}, Api.GEMINI), GeminiRepairFrames)
    assert type(frames_for("off", {}, Api.GEMINI)).__name__ == "Frames"


def test_the_parsers_get_the_declared_schemas_in_either_spelling() -> None:
    """``parametersJsonSchema`` as it is (google-genai 3.6 sends it as ``parameters_json_schema``),
    ``parameters`` in Gemini's OpenAPI subset translated: GLM reads a value's type from them."""
    request = {"tools": [{"function_declarations": [
        {"name": "a", "parameters_json_schema": {"type": "object", "properties": {"n": {"type": "string"}}}},
        {"name": "b", "parametersJsonSchema": {"type": "object"}},
        {"name": "c", "parameters": {"type": "OBJECT", "properties": {"n": {"type": "INTEGER"}}}},
        {"name": "d"}]}]}
    assert GeminiRepairFrames.tools_of(request) == [
        {"type": "function", "function": {"name": "a", "parameters": {
            "type": "object", "properties": {"n": {"type": "string"}}}}},
        {"type": "function", "function": {"name": "b", "parameters": {"type": "object"}}},
        {"type": "function", "function": {"name": "c", "parameters": {
            "type": "object", "properties": {"n": {"type": "integer"}}}}},
        {"type": "function", "function": {"name": "d", "parameters": {}}}]
    assert GeminiRepairFrames.tools_of({}) is None
    glm = render_markup("glm45", [Call("c0", "a", {"n": "7"}, '{"n": "7"}')])
    body = _relay(GeminiRepairFrames.for_request("glm45", request), _texts([glm], "sse"))
    assert [p["functionCall"] for p in _parts(_records(body, "sse")) if "functionCall" in p] == [
        {"name": "a", "args": {"n": "7"}}]  # without its schema GLM would read the number 7
