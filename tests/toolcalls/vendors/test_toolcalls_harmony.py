"""gpt-oss Harmony (docs/design/markup.md §2): messages, channels, recipients, stop tokens, and the errors.

Every input and expectation is written out here; each parse is also checked fed one and three
characters at a time.
"""

from __future__ import annotations

import pytest

from sseguard.core.reasoning import ThinkSplitter
from sseguard.core.toolcalls import (
    Markup,
    MarkupError,
    MarkupErrorKind,
    Reasoning,
    Text,
    ToolArgsDelta,
    ToolCallEnd,
    ToolCallStart,
    consumed_text,
    event_to_dict,
    join_events,
    parser_for,
)
from support.toolcalls import calls_of, errors_of, parsed, reasoning_of, text_of

TOOLS = [{"type": "function", "function": {"name": "get_weather"}}]


def parse(text: str, tools: list | None = None) -> list:
    return parsed("harmony", text, tools)


def test_the_spec_example_gives_reasoning_text_and_a_call() -> None:
    text = ('<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>'
            'commentary<|message|>Checking.<|end|><|start|>assistant<|channel|>commentary '
            'to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>')
    assert parse(text) == [
        Markup("<|channel|>analysis<|message|>"),
        Reasoning("Need the weather."),
        Markup("<|end|><|start|>assistant<|channel|>commentary<|message|>"),
        Text("Checking."),
        Markup("<|end|>"),
        ToolCallStart(0, "get_weather"),
        ToolArgsDelta(0, '{"city":"Paris"}'),
        ToolCallEnd(0, "get_weather", '{"city":"Paris"}'),
    ]


def test_reasoning_is_an_event_of_its_own_and_accounted_for() -> None:
    text = "<|channel|>analysis<|message|>hmm<|end|>"
    events = parse(text)
    assert event_to_dict(events[1]) == {"type": "Reasoning", "text": "hmm"}
    assert consumed_text(events) == text
    assert join_events([Reasoning("a"), Reasoning("b"), Text("c")]) == [Reasoning("ab"), Text("c")]


def test_final_and_recipientless_commentary_are_the_visible_text_in_order() -> None:
    text = ("<|channel|>commentary<|message|>One.<|end|><|start|>assistant<|channel|>analysis"
            "<|message|>think<|end|><|start|>assistant<|channel|>final<|message|>Two.<|return|>")
    events = parse(text)
    assert text_of(events) == "One.Two."
    assert reasoning_of(events) == "think"
    assert errors_of(events) == []


@pytest.mark.parametrize("header", [
    "<|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>",
    "<|start|>assistant<|channel|>commentary to=functions.f<|constrain|>json<|message|>",
    "<|start|>assistant<|channel|>commentary to=functions.f json<|message|>",
    "<|start|>assistant<|channel|>commentary to=functions.f<|message|>",
    "<|start|>assistant to=functions.f<|channel|>commentary json<|message|>",
    "<|channel|>commentary to=functions.f <|constrain|>json<|message|>",
    " to=functions.f<|channel|>commentary <|constrain|>json<|message|>",  # opens the completion
    "<|start|>assistant<|channel|>analysis to=functions.f json<|message|>",
    "<|start|>assistant<|channel|>final to=functions.f<|message|>",
])
def test_every_header_spelling_of_the_grammar_makes_a_call(header: str) -> None:
    events = parse(header + '{"a": 1}<|call|>')
    assert calls_of(events) == [("f", {"a": 1})]
    assert errors_of(events) == [] and text_of(events) == ""


@pytest.mark.parametrize("recipient,name", [("functions.get_weather", "get_weather"),
                                            ("browser.search", "browser.search"),
                                            ("functions.functions.x", "functions.x"),
                                            ("python", "python")])
def test_the_name_is_the_recipient_minus_one_functions_prefix(recipient: str, name: str) -> None:
    events = parse(f"<|channel|>commentary to={recipient} json<|message|>{{}}<|call|>")
    assert events[0] == ToolCallStart(0, name)  # the header is the call's raw text


@pytest.mark.parametrize("header", [
    "<|channel|>banter<|message|>",                                   # no such channel
    "<|start|>user<|channel|>final<|message|>",                      # not the assistant
    "<|start|>assistant<|message|>",                                  # no channel
    "<|start|>assistant to=functions.f<|channel|>commentary to=functions.g json<|message|>",
    "<|channel|>commentary to=functions.f <|constrain|>xml<|message|>",
    "<|channel|>commentary to=functions. json<|message|>",            # an empty name
])
def test_a_header_outside_the_grammar_voids_its_message(header: str) -> None:
    text = header + '{"a": 1}<|end|>' + "<|start|>assistant<|channel|>final<|message|>ok<|return|>"
    events = parse(text)
    assert errors_of(events) == [("malformed_tag", None)]
    err = next(e for e in events if isinstance(e, MarkupError))
    assert err.raw == header + '{"a": 1}<|end|>'
    assert text_of(events) == "ok"
    assert calls_of(events) == []


def test_arguments_stream_verbatim_as_they_arrive() -> None:
    p = parser_for("harmony")
    assert p.feed("<|channel|>commentary to=functions.write json<|message|>") == [
        ToolCallStart(0, "write")]
    assert p.feed('{"text": "a<|end|>') == [ToolArgsDelta(0, '{"text": "a<|end|>')]
    assert p.feed('b"} ') == [ToolArgsDelta(0, 'b"}')]
    assert p.feed("<|call|>") == [ToolCallEnd(0, "write", '{"text": "a<|end|>b"}')]


def test_markers_inside_json_strings_are_string_text() -> None:
    body = '{"s": "<|call|><|start|>assistant<|channel|>final<|message|>\\"<|end|>"}'
    events = parse(f"<|channel|>commentary to=functions.f json<|message|>{body}<|call|>")
    assert calls_of(events) == [("f", {"s": '<|call|><|start|>assistant<|channel|>final'
                                            '<|message|>"<|end|>'})]


def test_whitespace_only_arguments_are_an_empty_object() -> None:
    events = parse("<|channel|>commentary to=functions.now json<|message|> \n<|call|>")
    assert [(e.name, e.arguments) for e in events if isinstance(e, ToolCallEnd)] == [("now", "{}")]


@pytest.mark.parametrize("body,kind", [('{"a": 1, "a": 2}', "duplicate_parameter"),
                                       ('{"a": 1,}', "bad_param_json"),
                                       ("[1]", "bad_param_json"),
                                       ('{"a": Infinity}', "bad_param_json"),
                                       ("print('hi')", "bad_param_json")])
def test_bodies_that_are_not_one_strict_object_void_only_that_call(body: str, kind: str) -> None:
    text = (f"<|channel|>commentary to=functions.bad json<|message|>{body}<|call|>"
            '<|start|>assistant<|channel|>commentary to=functions.good json<|message|>{}<|call|>')
    events = parse(text)
    assert errors_of(events) == [(kind, 0)]
    assert calls_of(events) == [("good", {})]


def test_a_header_marker_outside_a_string_in_a_body_is_malformed() -> None:
    events = parse('<|channel|>commentary to=functions.f json<|message|>{"a": <|constrain|>1}'
                   "<|call|>after")
    assert errors_of(events) == [("malformed_tag", 0)]
    assert text_of(events) == "after"


def test_a_cut_stop_token_ends_the_message_at_the_next_header() -> None:
    text = ('<|channel|>analysis<|message|>plan<|start|>assistant<|channel|>commentary '
            'to=functions.f json<|message|>{"a": 1}<|start|>assistant<|channel|>final<|message|>ok')
    events = parse(text)
    assert reasoning_of(events) == "plan"
    assert calls_of(events) == [("f", {"a": 1})]
    assert text_of(events) == "ok"
    assert errors_of(events) == []


def test_stray_stop_tokens_and_header_parts_outside_messages_are_malformed() -> None:
    events = parse("a<|end|>b<|call|>c<|return|>d<|message|>e<|constrain|>f")
    assert text_of(events) == "abcdef"
    assert errors_of(events) == [("malformed_tag", None)] * 5
    # inside a text message, header parts are malformed too, the message goes on
    events = parse("<|channel|>final<|message|>x<|message|>y<|end|>")
    assert text_of(events) == "xy"
    assert errors_of(events) == [("malformed_tag", None)]


def test_text_outside_messages_is_text_and_leading_whitespace_frames_the_answer() -> None:
    events = parse("\n \n<|channel|>final<|message|>ok<|end|>\nbye")
    assert events[0] == Markup("\n \n<|channel|>final<|message|>")
    assert text_of(events) == "ok\nbye"


def test_end_of_stream_open_text_messages_are_complete() -> None:
    events = parse("<|channel|>analysis<|message|>still thinking")
    assert reasoning_of(events) == "still thinking" and errors_of(events) == []
    events = parse("<|channel|>final<|message|>half an ans")
    assert text_of(events) == "half an ans" and errors_of(events) == []


def test_end_of_stream_a_complete_object_is_a_call_the_stop_token_was_cut() -> None:
    events = parse('<|channel|>commentary to=functions.f json<|message|>{"a": [1, 2]}\n')
    assert calls_of(events) == [("f", {"a": [1, 2]})]
    assert errors_of(events) == []
    events = parse('<|channel|>commentary to=functions.f json<|message|>{"a": 1}<|ca')
    assert calls_of(events) == [("f", {"a": 1})]


@pytest.mark.parametrize("text,kind,index", [
    ('<|channel|>commentary to=functions.f json<|message|>{"a": [1, ', "unterminated", 0),
    ('<|channel|>commentary to=functions.f json<|message|>{"a": "<|call|>', "unterminated", 0),
    ("<|channel|>commentary to=functions.f json<|message|>", "unterminated", 0),
    ('<|channel|>commentary to=functions.f json<|message|>{"a": 1, "a": 1}', "duplicate_parameter",
     0),
    ("<|start|>assistant<|channel|>comment", "unterminated", None),
    ("<|start|>assistant<|chan", "unterminated", None),
    ("ok <|sta", "unterminated", None),
])
def test_end_of_stream_an_incomplete_body_or_header_is_unterminated(text: str, kind: str,
                                                                    index: int | None) -> None:
    events = parse(text)
    assert errors_of(events) == [(kind, index)]
    assert calls_of(events) == []


def test_undefined_function_keeps_the_call() -> None:
    text = ("<|channel|>commentary to=functions.get_weather json<|message|>{}<|call|>"
            "<|start|>assistant<|channel|>commentary to=functions.nope json<|message|>{}<|call|>")
    events = parse(text, tools=TOOLS)
    assert errors_of(events) == [("undefined_function", 1)]
    assert calls_of(events) == [("get_weather", {}), ("nope", {})]


def test_stripped_special_tokens_are_only_text() -> None:
    text = ('analysisNeed the weather.assistantcommentary to=functions.get_weather json'
            '{"city":"Paris"}')
    assert parse(text) == [Text(text)]


def test_the_think_splitter_leaves_harmony_to_its_parser() -> None:
    s = ThinkSplitter(family="harmony")
    text = "<|channel|>analysis<|message|>hmm<|end|><|start|>assistant<|channel|>final<|message|>x"
    assert "".join(e.text for e in s.feed(text) + s.close()) == text
    assert s.ended_by is None


# ── issue 29: what is held back at a call's end does not depend on where the input was cut ──────────


def _joined(family: str, pieces: list[str]) -> list:
    p = parser_for(family)
    events = []
    for piece in pieces:
        events += p.feed(piece)
    return join_events(events + p.close())


@pytest.mark.parametrize("family", ["harmony", "auto"])
def test_trailing_whitespace_inside_an_unterminated_string_is_streamed_however_the_input_is_cut(
        family: str) -> None:
    whole = ('<|channel|>commentary to=functions.write_file <|constrain|>json<|message|>'
             '{"path":"m.txt","content":"<|call> |call|> ')
    pieces = ['<|channel|>comme', 'ntary to=functio', 'ns.write_file <|', 'constrain|>json<', '|m',
              'ess', 'age', '|>{"', 'pat', 'h":', '"', 'm.txt","content"', ':', '"<|call> |call|>', ' ']
    assert "".join(pieces) == whole
    expected = [
        ToolCallStart(0, "write_file"),
        ToolArgsDelta(0, '{"path":"m.txt","content":"<|call> |call|> '),  # the space is string text
        MarkupError(MarkupErrorKind.UNTERMINATED, whole, 0),
    ]
    assert _joined(family, [whole]) == expected
    assert _joined(family, pieces) == expected
    assert _joined(family, list(whole)) == expected


@pytest.mark.parametrize("family", ["harmony", "auto"])
def test_an_unterminated_second_call_ending_in_a_newline_inside_a_string_is_cut_invariant(
        family: str) -> None:
    first = '<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}<|call|>'
    second = ('<|start|>assistant<|channel|>commentary to=functions.g json<|message|>'
              '{"x":"parmeter>\n</｜DSML｜invoke>\n')
    whole = first + second
    expected = [
        ToolCallStart(0, "f"), ToolArgsDelta(0, "{}"), ToolCallEnd(0, "f", "{}"),
        ToolCallStart(1, "g"),
        ToolArgsDelta(1, '{"x":"parmeter>\n</｜DSML｜invoke>\n'),  # the last newline included
        MarkupError(MarkupErrorKind.UNTERMINATED, second, 1),
    ]
    assert _joined(family, [whole]) == expected
    for cut in range(1, len(whole)):
        assert _joined(family, [whole[:cut], whole[cut:]]) == expected, cut
