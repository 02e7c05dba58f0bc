"""DeepSeek V3 / R1 and V3.1 markup: shapes, streaming of the model's own JSON, and the errors."""

from __future__ import annotations

import pytest

from sseguard.core.toolcalls import MarkupError, Text, ToolArgsDelta, ToolCallEnd, parser_for
from support.toolcalls import calls_of, check_invariants, errors_of, run, text_of

CB, B, S, E, CE = ("<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>",
                   "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>")


def parse(text: str, family: str = "deepseek-v3", tools: list | None = None) -> list:
    whole = run(family, text, tools=tools)
    check_invariants(family, whole)
    for size in (1, 3):
        assert run(family, text, tools=tools, size=size).joined == whole.joined
    return whole.joined


def v3(name: str, body: str) -> str:
    return f"{B}function{S}{name}\n```json\n{body}\n```{E}"


def v31(name: str, body: str) -> str:
    return f"{B}{name}{S}{body}{E}"


def test_v3_calls_in_a_section_and_text_kept_verbatim() -> None:
    text = "Checking.\n\n" + CB + v3("get_weather", '{"location": "Paris"}') + "\n" + v3(
        "get_time", "{}") + CE + "\nDone."
    events = parse(text)
    # docs/design/markup.md decision 1.8: nothing removed for V3
    assert text_of(events) == "Checking.\n\n\nDone."
    assert calls_of(events) == [("get_weather", {"location": "Paris"}), ("get_time", {})]
    assert errors_of(events) == []


def test_v31_json_follows_the_separator() -> None:
    events = parse("Hi" + CB + v31("get_weather", '{"k": "v"}') + v31("f", "{}") + CE,
                   "deepseek-v31")
    assert calls_of(events) == [("get_weather", {"k": "v"}), ("f", {})]


def test_arguments_stream_verbatim_and_padding_is_not_part_of_them() -> None:
    p = parser_for("deepseek-v31")
    p.feed(CB + B + "f" + S)
    assert p.feed('{"a": "x  ') == [ToolArgsDelta(0, '{"a": "x')]
    assert p.feed('y"} \n') == [ToolArgsDelta(0, '  y"}')]
    end = p.feed(E)
    assert end == [ToolCallEnd(0, "f", '{"a": "x  y"}')]


def test_v3_without_the_fence_is_accepted() -> None:
    events = parse(CB + f'{B}function{S}f\n{{"a": 1}}{E}' + CE)
    assert calls_of(events) == [("f", {"a": 1})]


@pytest.mark.parametrize("body,kind", [('{"a": 1,}', "bad_param_json"), ("[1]", "bad_param_json"),
                                       ('{"a": NaN}', "bad_param_json"), ("", "bad_param_json"),
                                       ('{"a": 1, "a": 2}', "duplicate_parameter")])
def test_invalid_arguments_void_the_call_and_keep_its_sibling(body: str, kind: str) -> None:
    events = parse(CB + v3("bad", body) + v3("good", '{"b": 2}') + CE)
    assert errors_of(events) == [(kind, 0)]
    assert calls_of(events) == [("good", {"b": 2})]


def test_a_marker_inside_the_arguments_is_malformed_and_parsing_resumes() -> None:
    events = parse(CB + f'{B}function{S}f\n```json\n{{"a": "{S}x"}}```{E}' + v3("g", "{}") + CE)
    assert errors_of(events) == [("malformed_tag", 0)]
    assert calls_of(events) == [("g", {})]
    # a call opener inside the arguments is where parsing resumes: it opens the next (broken) call
    events = parse(CB + f'{B}function{S}f\n```json\n{{"a": "{B}x"}}```{E}' + v3("g", "{}") + CE)
    assert errors_of(events) == [("malformed_tag", 0), ("malformed_tag", None)]
    assert calls_of(events) == [("g", {})]


def test_v3_header_other_than_function_is_malformed() -> None:
    events = parse(CB + v31("f", "{}") + CE, "deepseek-v3")
    assert errors_of(events) == [("malformed_tag", None)]
    assert calls_of(events) == []


def test_stray_markers_in_content_are_errors_not_text() -> None:
    events = parse(f"a{E}b{S}c")
    assert text_of(events) == "abc"
    assert errors_of(events) == [("malformed_tag", None)] * 2


def test_a_call_without_the_section_is_a_call() -> None:
    events = parse("x" + v3("f", '{"a": [1]}') + "y")
    assert text_of(events) == "xy"
    assert calls_of(events) == [("f", {"a": [1]})]


def test_end_of_stream_inside_a_call_or_a_section() -> None:
    events = parse(CB + v3("f", "{}") + f'{B}function{S}g\n```json\n{{"a"')
    assert calls_of(events) == [("f", {})]
    assert errors_of(events) == [("unterminated", 1)]
    assert errors_of(parse(CB + v3("f", "{}"))) == [("unterminated", None)]


def test_a_partial_marker_at_the_end_is_unterminated() -> None:
    events = parse("Answer<｜tool▁cal")
    assert events[0] == Text("Answer")
    assert errors_of(events) == [("unterminated", None)]


def test_undefined_function_with_tools() -> None:
    tools = [{"type": "function", "function": {"name": "f"}}]
    events = parse(CB + v3("f", "{}") + v3("nope", "{}") + CE, tools=tools)
    assert errors_of(events) == [("undefined_function", 1)]
    assert len(calls_of(events)) == 2
    assert not any(isinstance(e, MarkupError) and e.index == 0 for e in events)
