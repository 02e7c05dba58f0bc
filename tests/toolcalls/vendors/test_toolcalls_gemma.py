"""Class E of docs/design/markup.md: Gemma's ``call:NAME{key:value}`` syntax (``functiongemma``, ``gemma4``).

Every input and expectation is written out here (the spec's examples, then decision 3.6's typing and the
errors); each parse is also checked fed whole, in 1-, 2-, 3- and 7-character pieces and in random
pieces.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import support.toolcalls  # noqa: F401 - loads the support modules in their order
from sseguard.core.toolcalls import ToolArgsDelta, ToolCallStart, family
from support.toolcalls import reasoning_of
from support.toolcalls_python import assert_robust, everyhow, outcome

FS, FE, ESC = "<start_function_call>", "<end_function_call>", "<escape>"
GS, GE, Q = "<|tool_call>", "<tool_call|>", '<|"|>'
BAD, MAL, DUP, UNT = "bad_param_json", "malformed_tag", "duplicate_parameter", "unterminated"
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
          "properties": {"s": {"type": "string"}, "n": {"type": "integer"}}}}}]

TABLE: list[tuple[str, str, str, list[tuple[str, Any]], list[tuple[str, int | None]]]] = [
    # the spec's examples (docs/design/markup.md §3.1)
    ("functiongemma", f"{FS}call:get_weather{{city:{ESC}Paris{ESC}}}{FE}", "",
     [("get_weather", {"city": "Paris"})], []),
    ("gemma4", f"{GS}call:get_weather{{city:{Q}Paris{Q},n:42}}{GE}", "",
     [("get_weather", {"city": "Paris", "n": 42})], []),
    # delimited strings are verbatim: "}" and "," inside are text, no strip, no decoding
    ("gemma4", f"{GS}call:f{{a:{Q} x, }} &amp; {Q}}}{GE}", "", [("f", {"a": " x, } &amp; "})], []),
    # decision 3.6: Gemma 4's strings are strings; FunctionGemma's are JSON when they parse
    ("gemma4", f"{GS}call:f{{a:{Q}42{Q}}}{GE}", "", [("f", {"a": "42"})], []),
    ("functiongemma", f"{FS}call:f{{a:{ESC}42{ESC},b:{ESC}[1, 2]{ESC},c:{ESC}4 2{ESC}}}{FE}",
     "", [("f", {"a": 42, "b": [1, 2], "c": "4 2"})], []),
    # bare values: strict JSON scalars, None and null are null, other words the raw string
    ("gemma4", f"{GS}call:f{{a:true,b:null,c:None,d:-1.5,e:hello world,f:1e400x}}{GE}", "",
     [("f", {"a": True, "b": None, "c": None, "d": -1.5, "e": "hello world", "f": "1e400x"})],
     []),
    # nesting, quoted keys (Gemma 4), the comma FunctionGemma may leave out after <escape>
    ("gemma4", f"{GS}call:f{{{Q}k k{Q}:{{a:[1,{Q}]{Q},{{}}],b:{{}}}}}}{GE}", "",
     [("f", {"k k": {"a": [1, "]", {}], "b": {}}})], []),
    ("functiongemma", f"{FS}call:f{{a:{ESC}x{ESC}b:{ESC}y{ESC}}}{FE}", "",
     [("f", {"a": "x", "b": "y"})], []),
    ("gemma4", f"{GS}call:f{{}}{GE}", "", [("f", {})], []),
    # text around calls is visible
    ("gemma4", f"Sure.{GS}call:f{{a:1}}{GE}{GS}call:g{{}}{GE}Done.", "Sure.Done.",
     [("f", {"a": 1}), ("g", {})], []),
    # Granite 3.0's <|tool_call|> is not Gemma 4's <|tool_call> (decision 3.3)
    ("gemma4", "<|tool_call|>[]", "<|tool_call|>[]", [], []),
    # errors
    ("gemma4", f"{GS}call:f{{a:1,a:2}}{GE}{GS}call:g{{}}{GE}", "", [("g", {})], [(DUP, 0)]),
    ("gemma4", f"{GS}f{{a:1}}{GE}", "", [], [(MAL, None)]),
    ("gemma4", f"{GS}call:{{a:1}}{GE}", "", [], [(MAL, None)]),
    ("gemma4", f"{GS}call:f{{a 1}}{GE}", "", [], [(MAL, 0)]),
    ("gemma4", f"{GS}call:f{{a:1}} junk{GE}", "", [], [(MAL, 0)]),
    ("gemma4", f"{GS}call:f{{a:{Q}open", "", [], [(UNT, 0)]),
    ("gemma4", f"{GS}call:f{{a:1}}<turn|>", "", [], [(MAL, 0)]),
    ("gemma4", f"{GS}call:f{{a:1<turn|>", "", [], [(UNT, 0)]),
    ("gemma4", "a <tool_call|> b", "a  b", [], [(MAL, None)]),
    ("functiongemma", f"{FS}call:f{{a:1}}", "", [], [(UNT, 0)]),
    ("functiongemma", f"x{ESC}y", "xy", [], [(MAL, None)]),
]


@pytest.mark.parametrize("fam,text,visible,calls,errors", TABLE)
def test_the_table_under_every_chunking(fam: str, text: str, visible: str,
                                        calls: list[tuple[str, Any]],
                                        errors: list[tuple[str, int | None]]) -> None:
    assert outcome(fam, text) == (visible, calls, errors)


def test_escape_values_are_typed_by_the_schema() -> None:
    text = f"{FS}call:f{{s:{ESC}42{ESC},n:{ESC}7{ESC},x:{ESC}1{ESC}}}{FE}"
    assert outcome("functiongemma", text, TOOLS) == ("", [("f", {"s": "42", "n": 7, "x": 1})], [])
    bad = f"{FS}call:f{{n:{ESC}seven{ESC}}}{FE}"
    assert outcome("functiongemma", bad, TOOLS) == ("", [], [(BAD, 0)])


def test_a_string_value_streams_as_it_arrives() -> None:
    parser = family("gemma4").make(None)
    assert parser.feed(f"{GS}call:write{{body:{Q}first part") == [
        ToolCallStart(0, "write"), ToolArgsDelta(0, '{"body": "first part')]
    assert parser.feed(" and more") == [ToolArgsDelta(0, " and more")]


def test_gemma4_reasoning_is_its_thought_channel_and_a_call_ends_it() -> None:
    text = f"<|channel>thought\nPlan.<channel|>Ok.{GS}call:f{{}}{GE}"
    assert reasoning_of(everyhow("gemma4", text)) == "\nPlan."
    assert outcome("gemma4", text) == ("Ok.", [("f", {})], [])
    early = f"<|channel>thought\nPlan.{GS}call:f{{}}{GE}"
    assert reasoning_of(everyhow("gemma4", early)) == "\nPlan."
    assert outcome("gemma4", early) == ("", [("f", {})], [])


# ── malformed input ──────────────────────────────────────────────────────────────────────────────

VALID = {
    "functiongemma": f"a{FS}call:f{{s:{ESC}x, }}{ESC}n:2,o:{{l:[1,{ESC}y{ESC}]}}}}{FE}b",
    "gemma4": f"<|channel>thought t<channel|>a{GS}call:f{{{Q}s{Q}:{Q}x{Q},o:{{l:[1,null]}}}}{GE}b",
}


@pytest.mark.parametrize("fam", sorted(VALID))
def test_a_document_cut_at_every_position_is_reported_not_lost(fam: str) -> None:
    text = VALID[fam]
    for k in range(len(text) + 1):
        assert_robust(fam, text[:k])


@pytest.mark.parametrize("fam", sorted(VALID))
def test_swapped_markers_are_reported_not_shown(fam: str) -> None:
    opener, closer = family(fam).markers[:2]
    text = VALID[fam]
    assert_robust(fam, text.replace(opener, "\0").replace(closer, opener).replace("\0", closer))
    assert_robust(fam, text.replace(closer, ""))


JUNK = st.sampled_from(["{", "}", "[", "]", ",", ":", "<", ESC, Q, GS, GE, FS, FE, "call:", "x",
                        "\n", "None", "<|channel>thought", "<channel|>"])


@pytest.mark.parametrize("fam", sorted(VALID))
def test_junk_inside_is_reported_not_shown(fam: str) -> None:
    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(junk=st.lists(st.tuples(st.integers(0, 300), JUNK), min_size=1, max_size=4))
    def prop(junk: list[tuple[int, str]]) -> None:
        text = VALID[fam]
        for at, piece in junk:
            at %= len(text) + 1
            text = text[:at] + piece + text[at:]
        assert_robust(fam, text)

    prop()


def test_auto_does_not_take_an_answer_that_mentions_escape_for_functiongemma() -> None:
    from sseguard.core.toolcalls import ToolCallEnd, parser_for

    text = 'Wrap it in <escape> tags.\n<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>'
    parser = parser_for("auto")
    events = parser.feed(text) + parser.close()
    assert getattr(parser, "detected", None) == "hermes"
    assert [e.name for e in events if isinstance(e, ToolCallEnd)] == ["f"]
    # named, the delimiter out of place is reported, never shown
    assert outcome("functiongemma", "a <escape> b") == ("a  b", [], [(MAL, None)])
