"""Hermes / Qwen 2.5 / Qwen 3 ``<tool_call>{json}</tool_call>`` blocks."""

from __future__ import annotations

import pytest

from sseguard.core.toolcalls import (
    Markup,
    MarkupError,
    ToolArgsDelta,
    ToolCallEnd,
    ToolCallStart,
    parser_for,
)
from support.toolcalls import calls_of, check_invariants, errors_of, run, text_of


def parse(text: str, tools: list | None = None) -> list:
    whole = run("hermes", text, tools=tools)
    check_invariants("hermes", whole)
    for size in (1, 4):
        assert run("hermes", text, tools=tools, size=size).joined == whole.joined
    return whole.joined


def call(body: str) -> str:
    return f"\n<tool_call>\n{body}\n</tool_call>"


def test_blocks_become_calls_and_one_newline_before_each_is_removed() -> None:
    events = parse("Looking.\n" + call('{"name": "f", "arguments": {"a": 1}}')
                   + call('{"name": "g", "arguments": {}}') + "\nok")
    assert text_of(events) == "Looking.\n\nok"
    assert calls_of(events) == [("f", {"a": 1}), ("g", {})]
    assert Markup("\n") in events


def test_a_closer_inside_a_json_string_does_not_end_the_call() -> None:
    body = '{"name": "f", "arguments": {"s": "</tool_call> and \\"</tool_call>\\" \\\\"}}'
    events = parse(call(body))
    assert calls_of(events) == [("f", {"s": '</tool_call> and "</tool_call>" \\'})]


def test_parameters_key_and_name_after_the_arguments() -> None:
    events = parse(call('{"parameters": {"x": [1]}, "name": "f"}'))
    assert calls_of(events) == [("f", {"x": [1]})]


@pytest.mark.parametrize("body,kind,index", [
    ('{"name": "f", "arguments": {"a": 1,}}', "bad_param_json", 0),
    ('{"arguments": {}}', "bad_param_json", None),
    ('{"name": "f", "arguments": "{}"}', "bad_param_json", 0),
    ('{"name": "f", "arguments": {"a": NaN}}', "bad_param_json", 0),
    ('{"arguments": {"a": 1}, "name": 3}', "bad_param_json", None),
    ('{"name": "f", "arguments": {"a": 1, "a": 2}}', "duplicate_parameter", 0),
    ('{"name": "f", "arguments": {"a": 1}, "id": 7}', "bad_param_json", 0),
])
def test_invalid_blocks_are_errors_and_their_siblings_stay(body: str, kind: str,
                                                           index: int | None) -> None:
    # a block in the usual order was announced (it streamed) before it failed, so its error
    # carries its index; one read whole never was
    events = parse(call(body) + call('{"name": "g", "arguments": {}}'))
    assert errors_of(events) == [(kind, index)]
    assert calls_of(events) == [("g", {})]
    assert next(e for e in events if isinstance(e, MarkupError)).raw.startswith("<tool_call>")


def test_arguments_stream_as_they_arrive_in_the_usual_order() -> None:
    p = parser_for("hermes")
    out = p.feed('<tool_call>\n{"name": "write", "arguments": {"text": "ab')
    assert out == [ToolCallStart(0, "write"), ToolArgsDelta(0, '{"text": "ab')]
    assert p.feed('c"}') == [ToolArgsDelta(0, 'c"')]  # the last "}" may be the outer object's
    assert p.feed("}\n") == [ToolArgsDelta(0, "}")]
    assert p.feed("</tool_call>") == [ToolCallEnd(0, "write", '{"text": "abc"}')]


def test_name_after_the_arguments_goes_out_whole_at_the_closer() -> None:
    p = parser_for("hermes")
    assert p.feed('<tool_call>{"arguments": {"x": 1}, "name": "f"}') == []
    assert p.feed("</tool_call>") == [ToolCallStart(0, "f"), ToolArgsDelta(0, '{"x": 1}'),
                                      ToolCallEnd(0, "f", '{"x": 1}')]


def test_a_new_block_before_the_closer_voids_the_open_one() -> None:
    events = parse('<tool_call>{"name": "f", ' + call('{"name": "g", "arguments": {}}'))
    assert errors_of(events) == [("malformed_tag", None)]
    assert calls_of(events) == [("g", {})]


def test_an_unclosed_json_string_runs_to_the_end_as_one_unterminated_block() -> None:
    # the price of honouring closers inside strings: nothing after an open quote is markup
    events = parse('<tool_call>{"name": "f, ' + call('{"name": "g", "arguments": {}}') + " text")
    assert errors_of(events) == [("unterminated", None)]
    assert calls_of(events) == []


def test_stray_closer_and_cut_blocks() -> None:
    assert errors_of(parse("a</tool_call>b")) == [("malformed_tag", None)]
    assert errors_of(parse('x\n<tool_call>{"name": "f"')) == [("unterminated", None)]
    events = parse("x\n<tool_ca")
    assert text_of(events) == "x"
    assert errors_of(events) == [("unterminated", None)]


def test_undefined_function_with_tools() -> None:
    tools = [{"type": "function", "function": {"name": "f"}}]
    events = parse(call('{"name": "h", "arguments": {}}'), tools)
    assert errors_of(events) == [("undefined_function", 0)]
    assert calls_of(events) == [("h", {})]
