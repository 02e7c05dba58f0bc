"""GLM-4.5 (``glm45``) and GLM-4.7 (``glm47``) tool calls: docs/design/markup.md §2, one decision at a
time."""

from __future__ import annotations

from pathlib import Path

import pytest

from sseguard.core.toolcalls import (
    Markup,
    MarkupError,
    MarkupErrorKind,
    Text,
    ToolArgsDelta,
    ToolCallEnd,
    ToolCallStart,
    parser_for,
)
from support.toolcalls import calls_of, check_invariants, errors_of, run, text_of

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "markup"
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "ratio": {"type": "number"},
        "metric": {"type": "boolean"}, "opts": {"type": ["object", "null"]},
        "tags": {"type": "array"}, "note": {"type": ["string", "null"]},
        "unit": {"enum": ["c", "f", 0]}, "when": {"anyOf": [{"type": "string"},
                                                            {"type": "integer"}]},
        "level": {"oneOf": [{"type": "integer"}, {"type": "null"}]}}}}}]


def parse(family: str, text: str, tools: list | None = None) -> list:
    """Events of ``text`` joined, after checking every invariant and that chunking changes nothing."""
    whole = run(family, text, tools=tools)
    check_invariants(family, whole)
    for size in (1, 2, 7):
        assert run(family, text, tools=tools, size=size).joined == whole.joined
    return whole.joined


def call45(name: str, *args: tuple[str, str]) -> str:
    body = "".join(f"<arg_key>{k}</arg_key>\n<arg_value>{v}</arg_value>\n" for k, v in args)
    return f"<tool_call>{name}\n{body}</tool_call>"


def call47(name: str, *args: tuple[str, str]) -> str:
    body = "".join(f"<arg_key>{k}</arg_key><arg_value>{v}</arg_value>" for k, v in args)
    return f"<tool_call>{name}{body}</tool_call>"


def test_the_glm45_template_output_is_one_call_and_the_text_before_it() -> None:
    text = ("Let me check.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>北京"
            "</arg_value>\n<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n</tool_call>")
    assert parse("glm45", text, TOOLS) == [
        Text("Let me check."), Markup("\n"), ToolCallStart(0, "get_weather"),
        ToolArgsDelta(0, '{"city": "北京", "days": 2}'),
        ToolCallEnd(0, "get_weather", '{"city": "北京", "days": 2}')]


def test_the_glm47_template_output_has_no_spacing_and_parses_the_same() -> None:
    text = ("Let me check.<tool_call>get_weather<arg_key>city</arg_key><arg_value>北京</arg_value>"
            "<arg_key>days</arg_key><arg_value>2</arg_value></tool_call>")
    assert calls_of(parse("glm47", text, TOOLS)) == [("get_weather", {"city": "北京", "days": 2})]
    assert text_of(parse("glm47", text, TOOLS)) == "Let me check."


@pytest.mark.parametrize("family", ["glm45", "glm47"])
def test_each_parser_reads_both_spacings(family: str) -> None:
    text = call45("a", ("x", "1")) + call47("b", ("y", "2"))
    assert calls_of(parse(family, text)) == [("a", {"x": 1}), ("b", {"y": 2})]


# decision 2.2: visible text, and the separator of each family --------------------------------------

def test_glm45_removes_one_newline_before_each_call_and_keeps_text_after_calls() -> None:
    text = "a\n\n" + call45("f") + "\n" + call45("g") + "\nafter the calls"
    events = parse("glm45", text)
    assert text_of(events) == "a\n\nafter the calls"
    assert [name for name, _ in calls_of(events)] == ["f", "g"]


@pytest.mark.parametrize("family", ["glm45", "glm47"])
def test_whitespace_framing_the_answer_at_stream_start_is_markup_not_text(family: str) -> None:
    # what follows </think> (or starts the stream) is framing; the same whitespace later is text
    assert parse(family, " \n\nAnswer.\n\n") == [Markup(" \n\n"), Text("Answer.\n\n")]
    assert parse(family, "\u00a0Answer.") == [Text("\u00a0Answer.")]  # a NBSP is content
    events = parse(family, "\n\n" + call47("f") + "\n\nok")
    assert events[0] == Markup("\n\n")
    assert text_of(events) == "\n\nok"


def test_glm47_removes_nothing() -> None:
    events = parse("glm47", "a\n" + call47("f") + "\nb")
    assert text_of(events) == "a\n\nb"


def test_a_newline_before_a_non_opener_stays_text() -> None:
    events = parse("glm45", "a\n</arg_key>b")
    assert text_of(events) == "a\nb"
    assert errors_of(events) == [("malformed_tag", None)]


# decision 2.3: names ------------------------------------------------------------------------------

@pytest.mark.parametrize("text,name", [
    ("<tool_call>  get_weather \n</tool_call>", "get_weather"),
    ("<tool_call>get_weather<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>",
     "get_weather"),
    ("<tool_call> fs.read-file</tool_call>", "fs.read-file"),
])
def test_the_name_ends_at_a_newline_arg_key_or_the_closer_and_is_trimmed(text: str,
                                                                         name: str) -> None:
    assert [n for n, _ in calls_of(parse("glm45", text))] == [name]


@pytest.mark.parametrize("text", ["<tool_call>\nget_weather\n</tool_call>",
                                  "<tool_call>  </tool_call>", "<tool_call><arg_key>a</arg_key>"
                                  "<arg_value>1</arg_value></tool_call>"])
def test_an_empty_name_is_malformed_and_the_whole_call_is_swallowed(text: str) -> None:
    events = parse("glm45", text + "after")
    assert errors_of(events) == [("malformed_tag", None)]
    assert calls_of(events) == []
    assert text_of(events) == "after"


# decision 2.5: schema typing ----------------------------------------------------------------------

def test_typed_values_follow_the_schema() -> None:
    text = call45("get_weather", ("city", " 123 "), ("days", " 3\n"), ("ratio", "2.5"),
                  ("metric", "false"), ("opts", '{"a": [1]}'), ("tags", '["x"]'),
                  ("unit", "f"), ("level", "null"))
    assert calls_of(parse("glm45", text, TOOLS)) == [("get_weather", {
        "city": " 123 ", "days": 3, "ratio": 2.5, "metric": False, "opts": {"a": [1]},
        "tags": ["x"], "unit": "f", "level": None})]


def test_a_string_typed_value_is_byte_exact() -> None:
    value = '  <b>"quoted"</b>\n\tnull &amp; \\n '
    assert calls_of(parse("glm45", call45("get_weather", ("city", value)), TOOLS)) == [
        ("get_weather", {"city": value})]


@pytest.mark.parametrize("value,expected", [
    ("null", None), (" null\n", None), (" 7 ", " 7 "), ("seven", "seven"), ('"7"', '"7"'),
    ("[1]", "[1]"),
])
def test_string_with_null_takes_null_else_the_raw_string(value: str, expected: object) -> None:
    # ["string", "null"]: an integer is no type it allows, so " 7 " stays the raw string
    args = calls_of(parse("glm45", call45("get_weather", ("note", value)), TOOLS))[0][1]
    assert args == {"note": expected}


@pytest.mark.parametrize("value,expected", [
    ("12", 12), (" 12 ", 12), ("noon", "noon"), ("1.5", "1.5"), ("null", "null"), ("true", "true"),
])
def test_any_of_string_or_integer_takes_an_integer_else_the_raw_string(value: str,
                                                                      expected: object) -> None:
    args = calls_of(parse("glm45", call45("get_weather", ("when", value)), TOOLS))[0][1]
    assert args == {"when": expected}


@pytest.mark.parametrize("key,value", [
    ("days", "two"), ("days", "2.0"), ("days", "true"), ("days", "null"), ("metric", "True"),
    ("metric", "1"), ("ratio", "NaN"), ("opts", '{"a": 1, "a": 2}'), ("tags", "[1,]"),
    ("level", "1.5"), ("level", "one"),
])
def test_a_value_not_of_a_declared_type_is_bad_param_json(key: str, value: str) -> None:
    text = call45("get_weather", ("city", "x"), (key, value)) + "\n" + call45("get_weather")
    events = parse("glm45", text, TOOLS)
    assert errors_of(events) == [("bad_param_json", 0)]
    assert calls_of(events) == [("get_weather", {})]


@pytest.mark.parametrize("value,expected", [("0", 0), ("c ", "c "), ("7", 7), ("[0]", "[0]")])
def test_enum_value_types_are_the_declared_types(value: str, expected: object) -> None:
    # enum ["c", "f", 0]: string and integer (membership is the checker's business, not typing)
    args = calls_of(parse("glm45", call45("get_weather", ("unit", value)), TOOLS))[0][1]
    assert args == {"unit": expected}


@pytest.mark.parametrize("value,expected", [
    ("2", 2), (" [1, {\"a\": null}] ", [1, {"a": None}]), ('"quoted"', "quoted"), ("null", None),
    ("true", True), ("Paris", "Paris"), (" spaced ", " spaced "), ("NaN", "NaN"),
    ('{"a": 1, "a": 2}', '{"a": 1, "a": 2}'), ("", ""),
])
def test_untyped_values_are_strict_json_if_they_parse_else_the_raw_string(value: str,
                                                                          expected: object) -> None:
    for tools in (None, TOOLS):  # no tools, and a parameter the schema does not name
        args = calls_of(parse("glm45", call45("get_weather", ("extra", value)), tools))[0][1]
        assert args == {"extra": expected}


def test_string_values_stream_as_they_arrive_json_values_at_their_closer() -> None:
    p = parser_for("glm47", TOOLS)
    assert p.feed("<tool_call>get_weather<arg_key>city</arg_key><arg_value>Par") == [
        ToolCallStart(0, "get_weather"), ToolArgsDelta(0, '{"city": "Par')]
    assert p.feed("is") == [ToolArgsDelta(0, "is")]
    assert p.feed("</arg_value><arg_key>days</arg_key><arg_value>1") == [ToolArgsDelta(0, '"')]
    assert p.feed("0</arg_value>") == [ToolArgsDelta(0, ', "days": 10')]


def test_an_untyped_value_that_cannot_be_json_streams_once_its_first_character_shows_it() -> None:
    p = parser_for("glm47")
    p.feed("<tool_call>f<arg_key>code</arg_key><arg_value>\n")
    assert p.feed("  def f():") == [ToolArgsDelta(0, '{"code": "\\n  def f():')]
    assert p.feed(" pass") == [ToolArgsDelta(0, " pass")]


def test_a_repeated_key_is_duplicate_parameter() -> None:
    events = parse("glm45", call45("f", ("a", "1"), ("a", "2")) + "ok")
    assert errors_of(events) == [("duplicate_parameter", 0)]
    assert text_of(events) == "ok"


# decision 2.6: inside a value only its closer ends it --------------------------------------------

def test_tags_other_than_the_closers_are_value_text() -> None:
    value = "<tool_call>x<arg_key>k</arg_key><arg_value><think></think>"
    assert calls_of(parse("glm45", call45("f", ("v", value)))) == [("f", {"v": value})]


def test_a_call_closer_inside_a_value_voids_the_call() -> None:
    text = "<tool_call>f\n<arg_key>v</arg_key>\n<arg_value>abc</tool_call>after\n" + call45("g")
    events = parse("glm45", text)
    assert errors_of(events) == [("malformed_tag", 0)]
    assert calls_of(events) == [("g", {})]
    assert text_of(events) == "after"
    void = next(e for e in events if isinstance(e, MarkupError))
    assert void.raw == "<tool_call>f\n<arg_key>v</arg_key>\n<arg_value>abc</tool_call>"


# decision 2.7: between tags only whitespace -------------------------------------------------------

@pytest.mark.parametrize("text", [
    "<tool_call>f\njunk<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>",
    "<tool_call>f\n<arg_key>a</arg_key>junk<arg_value>1</arg_value></tool_call>",
    "<tool_call>f\n<arg_key>a</arg_key><arg_value>1</arg_value>junk</tool_call>",
    "<tool_call>f\n</arg_key><arg_key>a</arg_key><arg_value>1</arg_value></tool_call>",
    "<tool_call>f\n<arg_key>a<arg_value>1</arg_value></tool_call>",
    "<tool_call>f\n<arg_key>a</arg_key></tool_call>",
    "<tool_call>f\n<arg_value>1</arg_value></tool_call>",
    "<tool_call>f\n<arg_key></arg_key><arg_value>1</arg_value></tool_call>",
])
def test_junk_stray_tags_and_markers_in_keys_are_malformed(text: str) -> None:
    events = parse("glm45", text + "after")
    assert errors_of(events) == [("malformed_tag", 0)]
    assert calls_of(events) == []
    assert text_of(events) == "after"


def test_a_marker_in_a_name_is_malformed() -> None:
    events = parse("glm45", "<tool_call>f<arg_value>1</arg_value></tool_call>after")
    assert errors_of(events) == [("malformed_tag", None)]
    assert text_of(events) == "after"


def test_a_new_call_opener_inside_a_call_voids_it_and_starts_the_next() -> None:
    events = parse("glm45", "<tool_call>f\n<tool_call>g\n</tool_call>")
    assert errors_of(events) == [("malformed_tag", 0)]
    assert calls_of(events) == [("g", {})]


# decision 2.8: end of stream -----------------------------------------------------------------------

@pytest.mark.parametrize("tail,index", [
    ("<tool_call>g\n<arg_key>a</arg_key>\n<arg_value>partial", 1),
    ("<tool_call>g", None), ("<tool_call>", None), ("<tool_c", None), ("\n<tool_c", None),
])
def test_an_open_call_at_the_end_is_unterminated_and_nothing_of_it_is_text(
        tail: str, index: int | None) -> None:
    events = parse("glm45", "a" + call45("f") + tail)
    assert calls_of(events) == [("f", {})]
    assert errors_of(events) == [("unterminated", index)]
    assert text_of(events) == "a"


# decisions 2.1 and 2.9: reserved markers outside a call ----------------------------------------------

@pytest.mark.parametrize("marker", ["</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>",
                                    "</arg_value>", "<think>", "</think>"])
def test_a_reserved_marker_outside_a_call_is_malformed_and_the_text_around_stays(
        marker: str) -> None:
    events = parse("glm47", f"before {marker} after")
    assert events == [Text("before "), MarkupError(MarkupErrorKind.MALFORMED_TAG, marker),
                      Text(" after")]


# decision 2.12: unknown tool names --------------------------------------------------------------

def test_an_unknown_tool_keeps_the_call_and_adds_undefined_function() -> None:
    events = parse("glm47", call47("nope", ("a", "1")), TOOLS)
    assert calls_of(events) == [("nope", {"a": 1})]
    assert errors_of(events) == [("undefined_function", 0)]


# samples -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("family", ["glm45", "glm47"])
def test_the_samples_parse_with_the_example_tools(family: str) -> None:
    import json

    tools = json.loads((EXAMPLES / "tools.json").read_text(encoding="utf-8"))
    events = parse(family, (EXAMPLES / f"{family}.txt").read_text(encoding="utf-8"), tools)
    assert errors_of(events) == []
    assert calls_of(events) == [("get_weather", {"location": "Hangzhou", "days": 3}),
                                ("read_file", {"path": "src/<app>.py", "limit": 200})]
    assert text_of(events) == "I'll check the weather and read the file."
