"""DSML (V3.2, V4, V4.1): every shape docs/design/markup.md §1 lists, one example per numbered decision and
per error kind. Every example is also fed one character at a time and must give the same events."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sseguard.core.errors import UsageError
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

OPEN, CLOSE = "<｜DSML｜", "</｜DSML｜"


def parse(text: str, family: str = "dsml-v4", tools: list[dict[str, Any]] | None = None) -> list:
    whole = run(family, text, tools=tools)
    check_invariants(family, whole)
    for size in (1, 2, 7):
        assert run(family, text, tools=tools, size=size).joined == whole.joined
    return whole.joined


def block(*invokes: str, name: str = "function_calls", sp: str = "") -> str:
    return f"\n\n{OPEN}{sp}{name}>\n" + "\n".join(invokes) + f"\n{CLOSE}{sp}{name}>"


def invoke(name: str, *params: str, sp: str = "") -> str:
    return f'{OPEN}{sp}invoke name="{name}">\n' + "\n".join(params) + f"\n{CLOSE}{sp}invoke>"


def param(name: str, value: str, flag: str = "true", sp: str = "") -> str:
    return f'{OPEN}{sp}parameter name="{name}" string="{flag}">{value}{CLOSE}{sp}parameter>'


WEATHER = block(invoke("get_weather", param("location", "Hangzhou"), param("days", "3", "false")),
                invoke("get_time", param("tz", "Asia/Shanghai")))
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]


# ── shapes ────────────────────────────────────────────────────────────────────────────────────────

def test_v32_block_with_parameter_tags_gives_parallel_calls_in_order() -> None:
    events = parse("Let me check." + WEATHER, "dsml-v32")
    assert text_of(events) == "Let me check."
    assert calls_of(events) == [("get_weather", {"location": "Hangzhou", "days": 3}),
                                ("get_time", {"tz": "Asia/Shanghai"})]
    assert [e.index for e in events if isinstance(e, ToolCallStart)] == [0, 1]
    assert errors_of(events) == []


def test_arguments_stream_as_the_value_arrives() -> None:
    p = parser_for("dsml-v32")
    p.feed(f'{OPEN}function_calls>{OPEN}invoke name="w">{OPEN}parameter name="c" string="true">hel')
    assert p.feed("lo wo") == [ToolArgsDelta(0, "lo wo")]
    assert p.feed('rld"') == [ToolArgsDelta(0, 'rld\\"')]


def test_v4_parser_reads_the_v32_function_calls_block() -> None:
    assert calls_of(parse(WEATHER, "dsml-v4"))[0][0] == "get_weather"


def test_v41_spaced_tags_and_namespaced_names() -> None:
    text = "Reading." + block(invoke("fs::read_file", param("path", "src/app.py", sp=" "), sp=" "),
                          name="calls", sp=" ")
    for family in ("dsml-v41", "dsml-v4", "dsml-v32"):
        events = parse(text, family)
        assert text_of(events) == "Reading."
        assert calls_of(events) == [("fs::read_file", {"path": "src/app.py"})]


def test_json_body_invoke_is_a_call_with_its_object_verbatim() -> None:
    events = parse(block(f'{OPEN}invoke name="x">\n{{"k": "v", "n": [1, 2]}}\n{CLOSE}invoke>'))
    assert calls_of(events) == [("x", {"k": "v", "n": [1, 2]})]
    end = next(e for e in events if isinstance(e, ToolCallEnd))
    assert end.arguments == '{"k": "v", "n": [1, 2]}'


def test_zero_argument_invokes_whitespace_body_and_self_closing() -> None:
    events = parse(block(f'{OPEN}invoke name="a">\n\n{CLOSE}invoke>', f'{OPEN}invoke name="b"/>',
                         f'{OPEN}invoke name="c" />'))
    assert calls_of(events) == [("a", {}), ("b", {}), ("c", {})]
    assert [e.arguments for e in events if isinstance(e, ToolCallEnd)] == ["{}"] * 3


def test_text_after_a_block_is_not_held_until_the_end_of_the_stream() -> None:
    p = parser_for("dsml-v4")
    p.feed(WEATHER)
    assert p.feed("Done.") == [Text("Done.")]


def test_close_twice_or_feed_after_close_is_a_usage_error() -> None:
    p = parser_for("dsml-v4")
    p.close()
    with pytest.raises(UsageError):
        p.feed("x")
    with pytest.raises(UsageError):
        p.close()


def test_unknown_family_and_bad_tools_are_usage_errors() -> None:
    with pytest.raises(UsageError):
        parser_for("dsml-v9")
    with pytest.raises(UsageError):
        parser_for("dsml-v4", tools=[{"type": "function"}])


# ── decisions ─────────────────────────────────────────────────────────────────────────────────────

def test_decision_1_string_values_are_byte_exact() -> None:
    value = '  line 1\n\t"quoted" &lt; <b> ｜ |DSML| </parameter> <invoke name="x">\r\n  '
    events = parse(block(invoke("w", param("content", value))))
    assert calls_of(events) == [("w", {"content": value})]


def test_decision_2_json_values_are_trimmed_and_any_json_type() -> None:
    events = parse(block(invoke("f", param("a", " \n[1, {\"b\": null}]\t", "false"),
                                param("b", "true", "false"), param("c", '"s"', "false"),
                                param("d", "-1.5e3", "false"))))
    assert calls_of(events) == [("f", {"a": [1, {"b": None}], "b": True, "c": "s", "d": -1500.0})]


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e400", "[1, 2,]", "{'a': 1}",
                                   '{"a": 1, "a": 2}', "", "\u00a03", "3 4", "Hangzhou"])
def test_decision_2_value_that_is_not_strict_json_is_bad_param_json(value: str) -> None:
    events = parse(block(invoke("f", param("x", value, "false")), invoke("g")))
    assert errors_of(events) == [("bad_param_json", 0)]
    err = next(e for e in events if isinstance(e, MarkupError))
    assert value in err.raw and err.raw.startswith(f'{OPEN}invoke name="f">')
    assert calls_of(events) == [("g", {})]


@pytest.mark.parametrize("attrs", ['string="yes"', 'string=""', 'string="True"', ""])
def test_decision_3_unknown_or_missing_string_flag_is_invalid_string_flag(attrs: str) -> None:
    bad = f'{OPEN}invoke name="f">\n{OPEN}parameter name="x" {attrs}>1{CLOSE}parameter>\n{CLOSE}invoke>'
    events = parse(block(bad, invoke("g", param("y", "2"))))
    assert errors_of(events) == [("invalid_string_flag", 0)]
    assert calls_of(events) == [("g", {"y": "2"})]


def test_decision_3_repeated_parameter_is_duplicate_parameter() -> None:
    events = parse(block(invoke("f", param("city", "Paris"), param("city", "Rome"))))
    assert errors_of(events) == [("duplicate_parameter", 0)]
    assert calls_of(events) == []


def test_decision_3_json_body_rules() -> None:
    dup = parse(block(f'{OPEN}invoke name="x">{{"k": 1, "k": 2}}{CLOSE}invoke>'))
    assert errors_of(dup) == [("duplicate_parameter", 0)]
    for body in ("[1, 2]", '{"k": NaN}', '{"k": 1', '"just a string"'):
        events = parse(block(f'{OPEN}invoke name="x">{body}{CLOSE}invoke>'))
        assert errors_of(events) == [("bad_param_json", 0)], body


def test_decision_4_a_void_invoke_ends_with_its_error_after_its_deltas() -> None:
    events = parse(block(invoke("f", param("a", "streamed"), param("b", "oops", "false")),
                         invoke("g", param("c", "fine"))))
    kinds = [type(e).__name__ for e in events if not isinstance(e, Markup | Text)]
    assert kinds == ["ToolCallStart", "ToolArgsDelta", "MarkupError",
                     "ToolCallStart", "ToolArgsDelta", "ToolCallEnd"]
    delta = next(e for e in events if isinstance(e, ToolArgsDelta))
    assert delta == ToolArgsDelta(0, '{"a": "streamed"')  # forwarded, then declared void
    err = next(e for e in events if isinstance(e, MarkupError))
    assert (err.kind, err.index) == (MarkupErrorKind.BAD_PARAM_JSON, 0)
    # in a block the void invoke runs to where parsing resumes: the next invoke opener
    assert err.raw == invoke("f", param("a", "streamed"), param("b", "oops", "false")) + "\n"
    assert calls_of(events) == [("g", {"c": "fine"})]


def test_decision_4_undefined_function_keeps_the_call() -> None:
    events = parse(WEATHER, tools=TOOLS)
    assert errors_of(events) == [("undefined_function", 1)]
    assert [name for name, _ in calls_of(events)] == ["get_weather", "get_time"]


def test_decision_5_marker_inside_a_value_drops_the_invoke_and_resumes() -> None:
    bad = (f'{OPEN}invoke name="f">\n{OPEN}parameter name="p" string="true">a {OPEN}b c'
           f'{CLOSE}parameter>\n{CLOSE}invoke>')
    events = parse("Hi" + block(bad, invoke("g")))
    assert text_of(events) == "Hi"
    assert errors_of(events) == [("malformed_tag", 0)]
    assert calls_of(events) == [("g", {})]


def test_decision_5_an_invoke_closer_inside_a_value_does_not_leak_the_value_tail() -> None:
    bad = (f'{OPEN}invoke name="f">\n{OPEN}parameter name="p" string="true">head {CLOSE}invoke> tail'
           f'{CLOSE}parameter>\n{CLOSE}invoke>')
    events = parse("Hi" + block(bad, invoke("g")) + " bye")
    assert text_of(events) == "Hi bye"
    assert errors_of(events) == [("malformed_tag", 0)]
    assert calls_of(events) == [("g", {})]


def test_decision_5_misspelled_parameter_closer_loses_only_its_invoke() -> None:
    bad = (f'{OPEN}invoke name="write">\n{OPEN}parameter name="path" string="true">a.txt'
           f'{CLOSE}paramter>\n{CLOSE}invoke>')
    events = parse(block(bad, invoke("read", param("path", "b.txt"))))
    assert errors_of(events) == [("malformed_tag", 0)]
    assert calls_of(events) == [("read", {"path": "b.txt"})]


def test_decision_5_junk_between_invokes_is_an_error_not_text() -> None:
    events = parse("Hi" + block(invoke("f"), "I will now call g:", invoke("g")))
    assert text_of(events) == "Hi"
    assert errors_of(events) == [("malformed_tag", None)]
    assert next(e for e in events if isinstance(e, MarkupError)).raw == "I will now call g:\n"
    assert [n for n, _ in calls_of(events)] == ["f", "g"]


def test_decision_5_text_without_the_marker_is_ordinary_text() -> None:
    text = 'Use </parameter>, <invoke name="x">, |DSML| and a lone ｜ freely. ‖DSML‖ ｜｜DSML｜｜'
    events = parse(text)
    assert events == [Text(text)]


def test_decision_5_a_stray_dsml_tag_in_content_is_malformed_not_text() -> None:
    events = parse(f"a{CLOSE}invoke>b{OPEN}bogus>c")
    assert text_of(events) == "abc"
    assert errors_of(events) == [("malformed_tag", None), ("malformed_tag", None)]


def test_decision_6_block_opener_picks_the_dialect_and_mixing_is_malformed() -> None:
    mixed = block(invoke("spaced", sp=" "), invoke("ok"))  # unspaced block, spaced invoke
    events = parse(mixed, "dsml-v41")
    assert errors_of(events) == [("malformed_tag", None)]
    assert calls_of(events) == [("ok", {})]
    closer = (f'{OPEN}invoke name="f">\n{OPEN}parameter name="p" string="true">v'
              f'{CLOSE} parameter>\n{CLOSE}invoke>')
    assert errors_of(parse(block(closer))) == [("malformed_tag", 0)]


def test_decision_7_end_of_stream_inside_an_invoke_keeps_closed_ones() -> None:
    cut = f"Hi\n\n{OPEN}function_calls>\n" + invoke("f") + f'\n{OPEN}invoke name="g">\n{OPEN}parameter na'
    events = parse(cut)
    assert text_of(events) == "Hi"
    assert calls_of(events) == [("f", {})]
    assert errors_of(events) == [("unterminated", 1)]
    err = next(e for e in events if isinstance(e, MarkupError))
    assert err.raw == f'{OPEN}invoke name="g">\n{OPEN}parameter na'


@pytest.mark.parametrize("cut", ["<｜", "<｜DSML", f"{OPEN}", f"{OPEN}function_ca", "</｜DS",
                                 f"{OPEN}invoke"])
def test_decision_7_a_partial_opener_at_the_end_is_unterminated_not_text(cut: str) -> None:
    events = parse("Answer.\n\n" + cut)
    assert text_of(events) == "Answer."
    assert errors_of(events) == [("unterminated", None)]
    assert next(e for e in events if isinstance(e, MarkupError)).raw == "\n\n" + cut


def test_decision_7_a_lone_angle_bracket_at_the_end_is_text() -> None:
    assert parse("a <") == [Text("a <")]


@pytest.mark.parametrize("before,visible", [("Hi\n\n", "Hi"), ("Hi\n\n\n", "Hi\n"), ("Hi\n", "Hi\n"),
                                            ("Hi", "Hi"), ("\n\n", ""), ("Hi\n\n\n\n", "Hi\n\n")])
def test_decision_8_exactly_one_separator_is_removed_whatever_the_chunking(before: str,
                                                                          visible: str) -> None:
    events = parse(before + WEATHER.removeprefix("\n\n") + "\n\nafter")
    assert text_of(events) == visible + "\n\nafter"


def test_decision_8_the_separator_before_a_non_opener_stays_text() -> None:
    events = parse(f"Hi\n\n{CLOSE}invoke>")
    assert text_of(events) == "Hi\n\n"


def test_decision_9_bare_invokes_are_calls() -> None:
    events = parse("Sure.\n\n" + invoke("f", param("a", "1")) + "\n" + invoke("g"))
    assert calls_of(events) == [("f", {"a": "1"}), ("g", {})]
    assert text_of(events) == "Sure.\n"  # only the separator before an opener is removed


def test_decision_9_unclosed_block_keeps_complete_invokes_and_reports_unterminated() -> None:
    events = parse(f"\n\n{OPEN}tool_calls>\n" + invoke("f") + "\n")
    assert calls_of(events) == [("f", {})]
    assert errors_of(events) == [("unterminated", None)]


def test_decision_11_flexible_attribute_whitespace_and_verbatim_names() -> None:
    text = (f'\n\n{OPEN}function_calls >\n{OPEN}invoke\n  name="my tool"  >\n{OPEN}parameter\tname="k"'
            f'\n string="false" >1{CLOSE}parameter >\n{CLOSE}invoke>\n{CLOSE}function_calls>')
    assert calls_of(parse(text)) == [("my tool", {"k": 1})]


def test_decision_11_attributes_in_the_wrong_order_are_malformed() -> None:
    bad = f'{OPEN}invoke name="f">\n{OPEN}parameter string="true" name="k">v{CLOSE}parameter>\n{CLOSE}invoke>'
    assert errors_of(parse(block(bad))) == [("malformed_tag", 0)]


def test_one_stream_can_carry_every_error_kind_and_its_good_calls_survive() -> None:
    flag = (f'{OPEN}invoke name="ok">{OPEN}parameter name="x" string="maybe">1'
            f'{CLOSE}parameter>{CLOSE}invoke>')
    text = "Hi" + block(invoke("ok", param("a", "NaN", "false")), flag,
                        invoke("ok", param("d", "1"), param("d", "2")),
                        f'{OPEN}invoke name="ok">{{"k": 1, "k": 1}}{CLOSE}invoke>',
                        invoke("ok", param("good", "yes")), "junk", invoke("unknown")
                        ) + f'\n\n{OPEN}invoke name="ok">{OPEN}param'
    events = parse(text, tools=[{"type": "function", "function": {"name": "ok"}}])
    assert errors_of(events) == [("bad_param_json", 0), ("invalid_string_flag", 1),
                                 ("duplicate_parameter", 2), ("duplicate_parameter", 3),
                                 ("malformed_tag", None), ("undefined_function", 5),
                                 ("unterminated", 6)]
    assert {k for k, _ in errors_of(events)} == {k.value for k in MarkupErrorKind}
    assert calls_of(events) == [("ok", {"good": "yes"}), ("unknown", {})]
    assert text_of(events) == "Hi"


def test_arguments_json_is_the_exact_join_of_the_deltas_for_unicode_and_escapes() -> None:
    value = 'é🙂\\"\u2028\x00'
    events = parse(block(invoke("f", param("v", value))))
    end = next(e for e in events if isinstance(e, ToolCallEnd))
    assert json.loads(end.arguments) == {"v": value}
    assert "".join(e.fragment for e in events if isinstance(e, ToolArgsDelta)) == end.arguments
