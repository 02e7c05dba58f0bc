"""Qwen3-Coder / Qwen3.5 XML tool calls: wrappers, schema typing, missing closers, separators."""

from __future__ import annotations

import pytest

from sseguard.core.toolcalls import ToolArgsDelta, parser_for
from support.toolcalls import calls_of, check_invariants, errors_of, run, text_of

TOOLS = [{"type": "function", "function": {"name": "read", "parameters": {"type": "object",
          "properties": {"path": {"type": "string"}, "limit": {"type": "integer"},
                         "opts": {"type": ["object", "null"]}, "flag": {"type": "boolean"}}}}}]


def parse(text: str, tools: list | None = None) -> list:
    whole = run("qwen3-coder", text, tools=tools)
    check_invariants("qwen3-coder", whole)
    for size in (1, 5):
        assert run("qwen3-coder", text, tools=tools, size=size).joined == whole.joined
    return whole.joined


def fn(name: str, *params: tuple[str, str], closer: str = "</parameter>") -> str:
    body = "".join(f"<parameter={k}>\n{v}\n{closer}" + ("\n" if closer else "")
                   for k, v in params)
    return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"


def test_without_tools_every_value_is_a_string_with_its_wrapper_newlines_removed() -> None:
    events = parse("Reading.\n\n" + fn("read", ("path", "src/app.py"), ("limit", "200"),
                                       ("code", "\nx < y\n")))
    assert text_of(events) == "Reading."
    assert calls_of(events) == [("read", {"path": "src/app.py", "limit": "200",
                                          "code": "\nx < y\n"})]


def test_with_tools_values_are_typed_by_the_schema() -> None:
    events = parse(fn("read", ("path", "123"), ("limit", "200"), ("opts", '{"a": [1]}'),
                      ("flag", "true")), TOOLS)
    assert calls_of(events) == [("read", {"path": "123", "limit": 200, "opts": {"a": [1]},
                                          "flag": True})]


def test_null_is_null_for_any_type_with_tools_and_a_string_without() -> None:
    text = fn("read", ("path", "null"), ("limit", "null"), ("other", "nullish"))
    assert calls_of(parse(text, TOOLS)) == [("read", {"path": None, "limit": None,
                                                      "other": "nullish"})]
    assert calls_of(parse(text)) == [("read", {"path": "null", "limit": "null",
                                               "other": "nullish"})]


def test_a_typed_value_that_is_not_json_is_bad_param_json() -> None:
    events = parse(fn("read", ("limit", "two hundred")) + "\n" + fn("read"), TOOLS)
    assert errors_of(events) == [("bad_param_json", 0)]
    assert calls_of(events) == [("read", {})]


def test_a_missing_parameter_closer_ends_at_the_next_tag() -> None:
    events = parse(fn("read", ("path", "a.py"), ("limit", "5"), closer=""))
    assert calls_of(events) == [("read", {"path": "a.py", "limit": "5"})]


def test_string_values_stream_holding_back_only_the_wrapper_newline() -> None:
    p = parser_for("qwen3-coder")
    assert p.feed("<tool_call>\n<function=w>\n<parameter=c>\n")[-1] == ToolArgsDelta(0, '{"c": "')
    assert p.feed("line one\n") == [ToolArgsDelta(0, "line one")]
    assert p.feed("line two\n") == [ToolArgsDelta(0, "\\nline two")]
    assert p.feed("</parameter>") == [ToolArgsDelta(0, '"')]


def test_separators_two_newlines_before_the_first_one_before_later() -> None:
    events = parse("a\n\n" + fn("f") + "\n\n" + fn("g") + "\nb")
    assert text_of(events) == "a\n\nb"
    assert [n for n, _ in calls_of(events)] == ["f", "g"]


def test_markup_of_other_tags_inside_a_value_is_value_text() -> None:
    events = parse(fn("w", ("c", "<tool_call> </tool_call> <function=x>")))
    assert calls_of(events) == [("w", {"c": "<tool_call> </tool_call> <function=x>"})]


@pytest.mark.parametrize("text,errors", [
    (fn("f", ("a", "1"), ("a", "2")), [("duplicate_parameter", 0)]),
    ("<tool_call>\n<function=f>\nstray text\n</function>\n</tool_call>", [("malformed_tag", 0)]),
    ("<tool_call>\nhello\n</tool_call>", [("malformed_tag", None)]),
    ("x</parameter>y", [("malformed_tag", None)]),
    ("<tool_call>\n<function=f>\n<parameter=a>\nv", [("unterminated", 0)]),
    ("text <tool_ca", [("unterminated", None)]),
])
def test_errors(text: str, errors: list) -> None:
    assert errors_of(parse(text)) == errors


def test_bare_function_and_undefined_function() -> None:
    events = parse("ok\n\n<function=nope>\n</function>", TOOLS)
    assert text_of(events) == "ok"
    assert calls_of(events) == [("nope", {})]
    assert errors_of(events) == [("undefined_function", 0)]
