"""Kimi K2 markup (docs/design/markup.md §2): sections, call ids, JSON arguments streamed, and the errors.

Every input and expectation is written out here; each parse is also checked fed one and three
characters at a time.
"""

from __future__ import annotations

import pytest

from sseguard.cli.parse import parse_text
from sseguard.core.toolcalls import (
    Markup,
    MarkupError,
    Text,
    ToolArgsDelta,
    ToolCallEnd,
    ToolCallStart,
    event_to_dict,
    parser_for,
)
from support.toolcalls import calls_of, errors_of, parsed, text_of

SB, SE = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
SB1, SE1 = "<|tool_call_section_begin|>", "<|tool_call_section_end|>"
B, A, E = "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"
TOOLS = [{"type": "function", "function": {"name": "get_weather"}}]


def parse(text: str, tools: list | None = None) -> list:
    return parsed("kimi-k2", text, tools)


def call(call_id: str, body: str) -> str:
    return f"{B}{call_id}{A}{body}{E}"


def test_the_spec_example_gives_two_calls_with_their_ids_and_the_text() -> None:
    text = ('Let me check.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0'
            '<|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|><|tool_call_begin|>'
            'functions.get_weather:1<|tool_call_argument_begin|>{"city": "Rome"}<|tool_call_end|>'
            '<|tool_calls_section_end|>')
    assert parse(text) == [
        Text("Let me check."),
        Markup("<|tool_calls_section_begin|>"),
        ToolCallStart(0, "get_weather", "functions.get_weather:0"),
        ToolArgsDelta(0, '{"city": "Paris"}'),
        ToolCallEnd(0, "get_weather", '{"city": "Paris"}', id="functions.get_weather:0"),
        ToolCallStart(1, "get_weather", "functions.get_weather:1"),
        ToolArgsDelta(1, '{"city": "Rome"}'),
        ToolCallEnd(1, "get_weather", '{"city": "Rome"}', id="functions.get_weather:1"),
        Markup("<|tool_calls_section_end|>"),
    ]


def test_the_call_id_is_on_the_json_form_of_the_events() -> None:
    events = parse(SB + call("functions.f:7", "{}") + SE)
    assert event_to_dict(events[1]) == {"type": "ToolCallStart", "index": 0, "name": "f",
                                        "id": "functions.f:7"}
    assert event_to_dict(events[3])["id"] == "functions.f:7"


def test_singular_section_markers_and_newlines_around_markers() -> None:
    text = ('Hi\n<|tool_call_section_begin|>\n<|tool_call_begin|>\nfunctions.search:3\n'
            '<|tool_call_argument_begin|>\n{"q": "x"}\n<|tool_call_end|>\n'
            '<|tool_call_section_end|>\nBye')
    events = parse(text)
    assert text_of(events) == "Hi\n\nBye"  # no separator is removed for Kimi
    assert calls_of(events) == [("search", {"q": "x"})]
    assert [e.id for e in events if isinstance(e, ToolCallEnd)] == ["functions.search:3"]
    # either closer ends either section
    assert calls_of(parse(SB1 + call("f:0", "{}") + SE)) == [("f", {})]


@pytest.mark.parametrize("call_id,name", [
    ("functions.get_weather:0", "get_weather"),
    ("get_weather:12", "get_weather"),                # no functions. prefix
    ("functions.fs.read-file:2", "fs.read-file"),     # dots and hyphens kept
    ("functions.functions.x:1", "functions.x"),       # one prefix dropped, not two
    ("functions.ns:tool:4", "ns:tool"),               # only the last :DIGITS is the counter
])
def test_names_drop_one_functions_prefix_and_the_last_counter(call_id: str, name: str) -> None:
    events = parse(SB + call(call_id, "{}") + SE)
    assert events[1] == ToolCallStart(0, name, call_id)


def test_the_index_counts_calls_in_this_stream_not_the_id_counter() -> None:
    events = parse(SB + call("functions.a:7", "{}") + call("functions.b:8", "{}") + SE)
    assert [(e.index, e.name) for e in events if isinstance(e, ToolCallEnd)] == [(0, "a"), (1, "b")]


@pytest.mark.parametrize("call_id", ["functions.get_weather", "get_weather:", "functions.:0",
                                     "functions.a:b", "get weather:0", ""])
def test_an_id_without_name_and_counter_is_malformed(call_id: str) -> None:
    events = parse(SB + call(call_id, '{"a": 1}') + call("g:1", "{}") + SE)
    assert errors_of(events) == [("malformed_tag", None)]
    assert calls_of(events) == [("g", {})]


def test_arguments_stream_verbatim_as_they_arrive() -> None:
    p = parser_for("kimi-k2")
    assert p.feed(SB + B + "functions.write:0" + A) == [
        Markup(SB), ToolCallStart(0, "write", "functions.write:0")]
    assert p.feed(' {"text": "ab') == [ToolArgsDelta(0, '{"text": "ab')]
    assert p.feed("cd  ") == [ToolArgsDelta(0, "cd  ")]  # inside a string: no padding to hold
    assert p.feed('"} \n') == [ToolArgsDelta(0, '"}')]  # after the object: maybe padding
    assert p.feed(E) == [ToolCallEnd(0, "write", '{"text": "abcd  "}', id="functions.write:0")]


def test_a_marker_inside_a_json_string_is_string_text() -> None:
    body = '{"code": "<|tool_call_end|><|tool_calls_section_end|></think>\\"<|tool_call_begin|>"}'
    events = parse(SB + call("functions.f:0", body) + SE)
    assert calls_of(events) == [("f", {"code": '<|tool_call_end|><|tool_calls_section_end|>'
                                               '</think>"<|tool_call_begin|>'})]
    assert errors_of(events) == []


def test_whitespace_only_arguments_are_an_empty_object() -> None:
    events = parse(SB + call("functions.now:0", " \n ") + call("functions.later:1", "") + SE)
    assert [(e.name, e.arguments) for e in events if isinstance(e, ToolCallEnd)] == [
        ("now", "{}"), ("later", "{}")]


@pytest.mark.parametrize("body,kind", [
    ('{"a": 1, "a": 2}', "duplicate_parameter"),
    ('{"a": 1,}', "bad_param_json"),
    ('{"a": NaN}', "bad_param_json"),
    ("[1, 2]", "bad_param_json"),
    ('{"a": 1} trailing', "bad_param_json"),
    ("'single'", "bad_param_json"),
])
def test_arguments_that_are_not_one_strict_object_void_only_that_call(body: str,
                                                                      kind: str) -> None:
    events = parse(SB + call("functions.bad:0", body) + call("functions.good:1", '{"b": 2}') + SE)
    assert errors_of(events) == [(kind, 0)]
    assert calls_of(events) == [("good", {"b": 2})]
    # the void call's deltas went out before its error: a consumer learns they are void
    assert next(e for e in events if isinstance(e, MarkupError)).raw == (
        f"{B}functions.bad:0{A}{body}{E}")


def test_a_reserved_marker_outside_a_string_voids_the_call_and_parsing_resumes() -> None:
    events = parse(SB + f'{B}functions.f:0{A}{{"a": 1{SB}}}{E}' + call("functions.g:1", "{}") + SE)
    assert errors_of(events) == [("malformed_tag", 0)]
    assert calls_of(events) == [("g", {})]
    # an argument begin marker where the id should end the header is malformed too
    events = parse(SB + f"{B}functions.f:0{E}" + call("functions.g:1", "{}") + SE)
    assert errors_of(events) == [("malformed_tag", None)]
    assert calls_of(events) == [("g", {})]


def test_stray_markers_in_content_are_malformed_and_the_text_around_stays() -> None:
    events = parse(f"a{SE}b{E}c{A}d</think>e<think>f")
    assert text_of(events) == "abcdef"
    assert errors_of(events) == [("malformed_tag", None)] * 5


def test_junk_between_calls_in_a_section_is_not_text() -> None:
    events = parse(SB + call("functions.f:0", "{}") + "oops" + call("functions.g:1", "{}") + SE)
    assert text_of(events) == ""
    assert errors_of(events) == [("malformed_tag", None)]
    assert calls_of(events) == [("f", {}), ("g", {})]


def test_a_call_without_a_section_is_a_call() -> None:
    events = parse("Sure." + call("functions.f:0", '{"x": [1]}') + " Done.")
    assert text_of(events) == "Sure. Done."
    assert calls_of(events) == [("f", {"x": [1]})]


def test_text_after_the_section_is_kept() -> None:
    events = parse("a" + SB + call("functions.f:0", "{}") + SE + "after the calls")
    assert text_of(events) == "aafter the calls"


def test_the_whitespace_that_frames_the_answer_is_not_text() -> None:
    events = parse("\n\n  Hello\n" + call("functions.f:0", "{}"))
    assert events[0] == Markup("\n\n  ")
    assert text_of(events) == "Hello\n"
    # only at the start: the same whitespace later is text
    assert text_of(parse("Hi\n\n  there")) == "Hi\n\n  there"


def test_end_of_stream_keeps_closed_calls_and_reports_the_rest() -> None:
    events = parse(SB + call("functions.f:0", "{}") + f'{B}functions.g:1{A}{{"a": "cut')
    assert calls_of(events) == [("f", {})]
    assert errors_of(events) == [("unterminated", 1)]
    # a complete object without its end marker is still an open call
    assert errors_of(parse(f'{B}functions.g:0{A}{{"a": 1}}')) == [("unterminated", 0)]
    # a missing section closer after complete calls keeps them (decision 2.8)
    events = parse("x" + SB + call("functions.f:0", "{}"))
    assert calls_of(events) == [("f", {})]
    assert errors_of(events) == [("unterminated", None)]
    # an open header is not a call either
    assert errors_of(parse(SB + B + "functions.f")) == [("unterminated", None)]


def test_a_cut_marker_at_the_end_is_unterminated_not_text() -> None:
    events = parse("Answer<|tool_calls_sec")
    assert events[0] == Text("Answer")
    assert errors_of(events) == [("unterminated", None)]
    assert text_of(parse("a < b")) == "a < b"


def test_undefined_function_keeps_the_call() -> None:
    events = parse(SB + call("functions.get_weather:0", "{}") + call("functions.nope:1", "{}") + SE,
                   tools=TOOLS)
    assert errors_of(events) == [("undefined_function", 1)]
    assert calls_of(events) == [("get_weather", {}), ("nope", {})]


def test_stripped_special_tokens_are_only_text() -> None:
    text = 'Let me check.functions.get_weather:0{"city": "Paris"}'
    events = parse(text)
    assert events == [Text(text)]


def test_after_think_the_answer_framing_goes_and_a_call_opener_ends_reasoning() -> None:
    # the splitter and the parser together, as `sseguard parse` runs them
    result = parse_text("<think>\nweather?\n</think>\n\nSure." + call("functions.f:0", "{}"),
                        "kimi-k2", chunk=1)
    assert [type(e).__name__ for e in result.events][:2] == ["Reasoning", "Markup"]
    assert result.events[0].text == "\nweather?\n"
    assert text_of(result.events) == "Sure."
    # no </think>: the call opener ends the reasoning, and the call is parsed (decision 2.10)
    result = parse_text("<think>I will call f." + call("functions.f:0", '{"a": 1}'), "kimi-k2")
    assert result.events[0].text == "I will call f."
    assert calls_of(result.events) == [("f", {"a": 1})]
