"""MiniMax-M2 tool calls (``minimax-m2``): the decisions of docs/design/markup.md §2, one by one."""

from __future__ import annotations

import json
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
        "city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"},
        "opts": {"type": "object"}, "when": {"type": ["string", "integer"]}}}}}]


def parse(text: str, tools: list | None = None) -> list:
    """Events of ``text`` joined, after checking every invariant and that chunking changes nothing."""
    whole = run("minimax-m2", text, tools=tools)
    check_invariants("minimax-m2", whole)
    for size in (1, 2, 7):
        assert run("minimax-m2", text, tools=tools, size=size).joined == whole.joined
    return whole.joined


def invoke(name: str, *params: tuple[str, str]) -> str:
    body = "".join(f'<parameter name="{k}">{v}</parameter>\n' for k, v in params)
    return f'<invoke name="{name}">\n{body}</invoke>\n'


def block(*invokes: str) -> str:
    return "<minimax:tool_call>\n" + "".join(invokes) + "</minimax:tool_call>"


def test_the_template_output_is_one_block_of_calls_and_the_text_before_it() -> None:
    text = ('Let me check.\n<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">'
            'Paris</parameter>\n<parameter name="days">2</parameter>\n</invoke>\n'
            "</minimax:tool_call>")
    assert parse(text, TOOLS) == [
        Text("Let me check."), Markup("\n<minimax:tool_call>\n"), ToolCallStart(0, "get_weather"),
        ToolArgsDelta(0, '{"city": "Paris", "days": 2}'),
        ToolCallEnd(0, "get_weather", '{"city": "Paris", "days": 2}'),
        Markup("\n</minimax:tool_call>")]


def test_several_invokes_in_one_block_are_parallel_calls() -> None:
    events = parse(block(invoke("a", ("x", "1")), invoke("b"), invoke("c", ("y", "2"))))
    assert calls_of(events) == [("a", {"x": "1"}), ("b", {}), ("c", {"y": "2"})]


# decision 2.2: visible text ------------------------------------------------------------------------

def test_one_newline_before_each_block_is_removed_and_text_after_blocks_is_kept() -> None:
    text = "a\n\n" + block(invoke("f")) + "\n" + block(invoke("g")) + "\nthe end"
    events = parse(text)
    assert text_of(events) == "a\n\nthe end"
    assert [n for n, _ in calls_of(events)] == ["f", "g"]


def test_whitespace_framing_the_answer_at_stream_start_is_markup_not_text() -> None:
    # MiniMax writes </think>\n\n before the answer: that framing is not the answer's text
    assert parse("\n\nAnswer.\n") == [Markup("\n\n"), Text("Answer.\n")]
    events = parse("\n\n" + block(invoke("f")) + "\n\nok")
    assert events[0] == Markup("\n\n<minimax:tool_call>\n")
    assert text_of(events) == "\n\nok"


# decision 2.3: the quoted name, verbatim ----------------------------------------------------------

@pytest.mark.parametrize("tag,name", [('<invoke name="fs::read file">', "fs::read file"),
                                      ('<invoke  name="a.b-c" >', "a.b-c"),
                                      ('<invoke\nname=" x ">', " x ")])
def test_the_quoted_name_is_taken_verbatim(tag: str, name: str) -> None:
    events = parse(f"<minimax:tool_call>{tag}</invoke></minimax:tool_call>")
    assert calls_of(events) == [(name, {})]


# decision 2.5: schema typing ----------------------------------------------------------------------

def test_typed_values_follow_the_schema_and_untyped_ones_are_raw_strings() -> None:
    text = block(invoke("get_weather", ("city", " 12 "), ("days", " 3\n"), ("metric", "true"),
                        ("opts", '{"a": [1]}'), ("when", "noon"), ("extra", " [1, 2] ")))
    assert calls_of(parse(text, TOOLS)) == [("get_weather", {
        "city": " 12 ", "days": 3, "metric": True, "opts": {"a": [1]}, "when": "noon",
        "extra": " [1, 2] "})]
    assert calls_of(parse(text)) == [("get_weather", {
        "city": " 12 ", "days": " 3\n", "metric": "true", "opts": '{"a": [1]}', "when": "noon",
        "extra": " [1, 2] "})]


@pytest.mark.parametrize("key", ["city", "days", "metric", "opts", "when", "extra"])
def test_exact_null_is_null_for_any_type_but_none_nil_and_padded_null_are_not(key: str) -> None:
    for tools in (None, TOOLS):
        args = calls_of(parse(block(invoke("get_weather", (key, "null"))), tools))[0][1]
        assert args == {key: None}
    for word in ("None", "nil", "NULL", "nullable"):
        args = calls_of(parse(block(invoke("get_weather", ("city", word))), TOOLS))[0][1]
        assert args == {"city": word}
    assert calls_of(parse(block(invoke("get_weather", ("city", " null"))), TOOLS))[0][1] == {
        "city": " null"}


@pytest.mark.parametrize("value,expected", [("12", 12), ("noon", "noon"), (" 7 ", 7),
                                            ("1.5", "1.5"), ("true", "true"), ("null", None)])
def test_a_string_or_integer_takes_an_integer_else_the_raw_string(value: str,
                                                                 expected: object) -> None:
    args = calls_of(parse(block(invoke("get_weather", ("when", value))), TOOLS))[0][1]
    assert args == {"when": expected}


@pytest.mark.parametrize("key,value", [("days", "three"), ("days", "3.5"), ("metric", "True"),
                                       ("metric", "yes"), ("metric", "1"), ("opts", "[1]"),
                                       ("opts", '{"a": 1, "a": 2}'), ("days", "None")])
def test_a_value_not_of_its_declared_type_is_bad_param_json(key: str, value: str) -> None:
    text = block(invoke("get_weather", (key, value)), invoke("get_weather"))
    events = parse(text, TOOLS)
    assert errors_of(events) == [("bad_param_json", 0)]
    assert calls_of(events) == [("get_weather", {})]


def test_string_values_stream_holding_back_only_what_may_still_be_null() -> None:
    p = parser_for("minimax-m2")
    assert p.feed('<minimax:tool_call>\n<invoke name="w">\n<parameter name="c">')[-1] == \
        ToolCallStart(0, "w")
    assert p.feed("nu") == []
    assert p.feed("mber one") == [ToolArgsDelta(0, '{"c": "number one')]
    assert p.feed(" and two") == [ToolArgsDelta(0, " and two")]
    assert p.feed("</parameter>") == [ToolArgsDelta(0, '"')]


def test_a_repeated_parameter_is_duplicate_parameter() -> None:
    events = parse(block(invoke("f", ("a", "1"), ("a", "2")), invoke("g")))
    assert errors_of(events) == [("duplicate_parameter", 0)]
    assert calls_of(events) == [("g", {})]


# decision 2.6: inside a value only its closer ends it --------------------------------------------

def test_other_tags_inside_a_value_are_value_text() -> None:
    value = '<invoke name="x"><parameter name="y"><minimax:tool_call><think>'
    assert calls_of(parse(block(invoke("f", ("v", value))))) == [("f", {"v": value})]


def test_an_invoke_closer_inside_a_value_voids_the_call_and_the_block_goes_on() -> None:
    text = ('<minimax:tool_call>\n<invoke name="f">\n<parameter name="v">abc</invoke>'
            '\n<invoke name="g">\n</invoke>\n</minimax:tool_call>after')
    events = parse(text)
    assert errors_of(events) == [("malformed_tag", 0)]
    assert calls_of(events) == [("g", {})]
    assert text_of(events) == "after"
    void = next(e for e in events if isinstance(e, MarkupError))
    assert void.raw == '<invoke name="f">\n<parameter name="v">abc</invoke>\n'


def test_a_block_closer_inside_a_value_voids_the_call_and_closes_the_block() -> None:
    # the closer is one special token: the model ended the block there; what follows is content
    text = ('<minimax:tool_call>\n<invoke name="f">\n<parameter name="v">abc</minimax:tool_call>'
            '\n<invoke name="g">\n</invoke>')
    events = parse(text)
    assert errors_of(events) == [("malformed_tag", 0)]
    assert calls_of(events) == []
    assert text_of(events) == '\n<invoke name="g">\n</invoke>'


# decision 2.7: between tags only whitespace ---------------------------------------------------------

@pytest.mark.parametrize("body", [
    'junk<parameter name="a">1</parameter>',
    '<parameter name="a">1</parameter>junk',
    '</parameter><parameter name="a">1</parameter>',
    '<parameter name="">1</parameter>',
    "<parameter a>1</parameter>",
    '<invoke name="nested"></invoke>',
])
def test_junk_and_stray_tags_in_an_invoke_are_malformed(body: str) -> None:
    text = f'<minimax:tool_call><invoke name="f">{body}</invoke>\n<invoke name="g"></invoke>' \
           "</minimax:tool_call>after"
    events = parse(text)
    assert errors_of(events)[0] == ("malformed_tag", 0)
    assert calls_of(events)[-1] == ("g", {})
    assert text_of(events) == "after"


@pytest.mark.parametrize("junk", ["text", "</invoke>", '<parameter name="a">1</parameter>',
                                  "<minimax:tool_call>", '<invoke name="">'])
def test_junk_between_invokes_is_malformed_and_parsing_resumes_at_the_next(junk: str) -> None:
    events = parse(f'<minimax:tool_call>\n{junk}\n<invoke name="g"></invoke></minimax:tool_call>')
    assert errors_of(events) == [("malformed_tag", None)]
    assert calls_of(events) == [("g", {})]


# decision 2.8: end of stream -----------------------------------------------------------------------

def test_an_open_invoke_at_the_end_is_unterminated() -> None:
    events = parse("a\n" + '<minimax:tool_call>\n<invoke name="f">\n<parameter name="v">part')
    assert errors_of(events) == [("unterminated", 0)]
    assert text_of(events) == "a"


def test_a_missing_block_closer_keeps_the_complete_calls_and_is_unterminated() -> None:
    events = parse("a\n<minimax:tool_call>\n" + invoke("f", ("x", "1")))
    assert calls_of(events) == [("f", {"x": "1"})]
    assert errors_of(events) == [("unterminated", None)]
    assert text_of(events) == "a"


@pytest.mark.parametrize("tail", ["<minimax:tool", "\n<minimax:tool_c", "<minimax:tool_call>"])
def test_a_cut_opener_at_the_end_is_unterminated_and_not_text(tail: str) -> None:
    events = parse("a" + tail)
    assert text_of(events) == "a"
    assert errors_of(events) == [("unterminated", None)]


# decision 2.9: an invoke without the wrapper is text -----------------------------------------------

def test_an_invoke_outside_a_block_is_the_models_text() -> None:
    text = '<invoke name="f">\n<parameter name="a">1</parameter>\n</invoke>'
    assert parse(text) == [Text(text)]


# decision 2.1: reserved markers outside a block ----------------------------------------------------

@pytest.mark.parametrize("marker", ["</minimax:tool_call>", "<think>", "</think>"])
def test_a_reserved_marker_outside_a_block_is_malformed_and_the_text_around_stays(
        marker: str) -> None:
    assert parse(f"before {marker} after") == [
        Text("before "), MarkupError(MarkupErrorKind.MALFORMED_TAG, marker), Text(" after")]


# decision 2.12: unknown tool names keep the call ---------------------------------------------------

def test_an_unknown_tool_keeps_the_call_and_adds_undefined_function() -> None:
    events = parse(block(invoke("nope", ("a", "1"))) + "after", TOOLS)
    assert calls_of(events) == [("nope", {"a": "1"})]
    assert errors_of(events) == [("undefined_function", 0)]
    assert text_of(events) == "after"


def test_the_sample_parses_with_the_example_tools() -> None:
    tools = json.loads((EXAMPLES / "tools.json").read_text(encoding="utf-8"))
    events = parse((EXAMPLES / "minimax-m2.txt").read_text(encoding="utf-8"), tools)
    assert errors_of(events) == []
    assert calls_of(events) == [("get_weather", {"location": "Hangzhou", "days": 3}),
                                ("read_file", {"path": "src/<app>.py", "limit": 200})]
    assert text_of(events) == "I'll check the weather and read the file."
