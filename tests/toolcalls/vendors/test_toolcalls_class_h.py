"""docs/design/markup.md class H: GLM's key/value tags spelled otherwise — ``iquest-q1``, ``hunyuan`` (Hy3
with ``<tool_sep>``, Hy4 without, a tokenizer suffix on every tag) and ``k2-horizon`` (``ifm|`` tags, an
optional type tag, its own reasoning spans)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sseguard.core.toolcalls import FAMILIES, canonical, consumed_text, join_events
from sseguard.core.toolcalls.grammars.key_value_tags import GLMParser
from sseguard.core.toolcalls.vendors.kv_tags import hunyuan_tags
from support.toolcalls import calls_of, check_invariants, errors_of, text_of
from support.toolcalls_case_tables import (
    Case,
    check_case,
    check_every_cut,
    check_garbled,
    check_round_trip,
    round_calls,
)

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}]

IQ = ("<iquest_tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>"
      "<arg_key>days</arg_key><arg_value>2</arg_value></iquest_tool_call>")
IQUEST = [
    Case("GLM-4.7 body in <iquest_tool_call>, text around verbatim", "Hi " + IQ + " ok", "Hi  ok",
         [("get_weather", {"city": "Paris", "days": 2})]),
    Case("decision 3.6: untyped values are JSON if they parse, else the raw string",
         "<iquest_tool_call>f<arg_key>a</arg_key><arg_value>[1, 2]</arg_value><arg_key>b</arg_key>"
         "<arg_value> not json </arg_value></iquest_tool_call>", "",
         [("f", {"a": [1, 2], "b": " not json "})]),
    Case("a string-typed value is byte-exact", "<iquest_tool_call>get_weather<arg_key>city"
         "</arg_key><arg_value> 2 &amp; </arg_value></iquest_tool_call>", "",
         [("get_weather", {"city": " 2 &amp; "})], tools=TOOLS),
    Case("an integer-typed value that is no integer voids the call",
         "<iquest_tool_call>get_weather<arg_key>days</arg_key><arg_value>two</arg_value>"
         "</iquest_tool_call>", "", [], ["bad_param_json"], tools=TOOLS),
    Case("GLM's <tool_call> is text here", "<tool_call>f</tool_call>", "<tool_call>f</tool_call>",
         []),
    Case("unknown name: kept, undefined_function", "<iquest_tool_call>nope</iquest_tool_call>", "",
         [("nope", {})], ["undefined_function"], tools=TOOLS),
    Case("the call's closer inside a value voids the call",
         "<iquest_tool_call>f<arg_key>a</arg_key><arg_value>x</iquest_tool_call>tail", "tail", [],
         ["malformed_tag"]),
    Case("an empty name is malformed", "<iquest_tool_call> <arg_key>a</arg_key><arg_value>1"
         "</arg_value></iquest_tool_call>", "", [], ["malformed_tag"]),
    Case("an open call at the end is unterminated", "a<iquest_tool_call>f<arg_key>a", "a", [],
         ["unterminated"]),
    Case("a partial opener at the end is unterminated", "a<iquest_tool", "a", [],
         ["unterminated"]),
]

HY3 = ("<tool_calls>\n<tool_call>get_weather<tool_sep>\n<arg_key>city</arg_key>\n"
       "<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n"
       "</tool_call>\n</tool_calls>")
HUNYUAN = [
    Case("Hy3: the name ends at <tool_sep>", "Sure.\n" + HY3 + "\nDone.", "Sure.\n\nDone.",
         [("get_weather", {"city": "Paris", "days": 2})]),
    Case("Hy4: no <tool_sep>, the name ends at the first tag",
         "<tool_calls><tool_call>f<arg_key>a</arg_key><arg_value>x</arg_value></tool_call>"
         "<tool_call>g\n</tool_call></tool_calls>", "", [("f", {"a": "x"}), ("g", {})]),
    Case("a bare <tool_call> is a call too", "<tool_call>f<tool_sep></tool_call>", "",
         [("f", {})]),
    Case("junk between the calls of a block is malformed, the next call kept",
         "<tool_calls>junk<tool_call>f<tool_sep></tool_call></tool_calls>", "", [("f", {})],
         ["malformed_tag"]),
    Case("a second <tool_sep> is malformed",
         "<tool_calls><tool_call>f<tool_sep><tool_sep></tool_call></tool_calls>", "", [],
         ["malformed_tag"]),
    Case("the block's closer missing after a complete call: the call stays, unterminated",
         "<tool_calls><tool_call>f<tool_sep></tool_call>", "", [("f", {})], ["unterminated"]),
    Case("the block's closer inside a value voids the call",
         "<tool_calls><tool_call>f<tool_sep><arg_key>a</arg_key><arg_value>x</tool_calls>", "",
         [], ["malformed_tag"]),
    Case("a stray think tag outside calls is reported", "a<think>b", "ab", [], ["malformed_tag"]),
]

K2_CALL = ("<ifm|tool_calls><ifm|tool_call>get_weather<ifm|arg_key>city</ifm|arg_key>"
           "<ifm|arg_type>string</ifm|arg_type><ifm|arg_value>42</ifm|arg_value>"
           "<ifm|arg_key>days</ifm|arg_key><ifm|arg_type>integer</ifm|arg_type>"
           "<ifm|arg_value>2</ifm|arg_value></ifm|tool_call></ifm|tool_calls>")
K2_JSON = ('<ifm|tool_calls><ifm|tool_call>{"name": "get_weather", "arguments": {"city": "Paris", '
           '"days": 2}}</ifm|tool_call></ifm|tool_calls>')
K2 = [
    Case("the type tag types the value: string raw, integer JSON", "Hi" + K2_CALL, "Hi",
         [("get_weather", {"city": "42", "days": 2})]),
    Case("the wire type wins over the schema", K2_CALL, "",
         [("get_weather", {"city": "42", "days": 2})], tools=TOOLS),
    Case("without a type tag: GLM's untyped rule",
         "<ifm|tool_call>f<ifm|arg_key>a</ifm|arg_key><ifm|arg_value>42</ifm|arg_value>"
         "</ifm|tool_call>", "", [("f", {"a": 42})]),
    Case("a type that is no JSON Schema type name is invalid_string_flag",
         "<ifm|tool_call>f<ifm|arg_key>a</ifm|arg_key><ifm|arg_type>str</ifm|arg_type>"
         "<ifm|arg_value>x</ifm|arg_value></ifm|tool_call>", "", [], ["invalid_string_flag"]),
    Case("a value that is not of its wire type is bad_param_json",
         "<ifm|tool_call>f<ifm|arg_key>a</ifm|arg_key><ifm|arg_type>integer</ifm|arg_type>"
         "<ifm|arg_value>1.5</ifm|arg_value></ifm|tool_call>", "", [], ["bad_param_json"]),
    Case("decision 3.9: call markup inside reasoning stays reasoning",
         "<ifm|think>maybe <ifm|tool_call>f</ifm|tool_call></ifm|think>Ok." + K2_CALL, "Ok.",
         [("get_weather", {"city": "42", "days": 2})],
         reasoning="maybe <ifm|tool_call>f</ifm|tool_call>", quoted=True),
    Case("the fast reasoning spans too", "<ifm|think_fast>q</ifm|think_fast>a", "a", [],
         reasoning="q"),
    Case("GLM's tags are text here", "<tool_call>f<arg_key>", "<tool_call>f<arg_key>", []),
    Case("an open call at the end is unterminated", "<ifm|tool_calls><ifm|tool_call>f", "", [],
         ["unterminated"]),
    # docs/design/markup.md §3.3: a call body that is one JSON object {name, arguments} is accepted
    Case("a JSON-object call body", K2_JSON, "", [("get_weather", {"city": "Paris", "days": 2})]),
    Case("a JSON body pretty-printed, its name last, text around kept",
         'Hi<ifm|tool_call>\n{\n  "arguments": {"a": [1, {"b": "}"}]},\n  "name": "f"\n}\n'
         "</ifm|tool_call>ok", "Hiok", [("f", {"a": [1, {"b": "}"}]})]),
    Case("a JSON body beside a tag call in one block",
         '<ifm|tool_calls><ifm|tool_call>{"name": "f", "arguments": {}}</ifm|tool_call>'
         "<ifm|tool_call>g<ifm|arg_key>a</ifm|arg_key><ifm|arg_value>1</ifm|arg_value>"
         "</ifm|tool_call></ifm|tool_calls>", "", [("f", {}), ("g", {"a": 1})]),
    Case("a JSON body with parameters for arguments",
         '<ifm|tool_call>{"name": "f", "parameters": {"a": 1}}</ifm|tool_call>', "",
         [("f", {"a": 1})]),
    Case("a JSON body whose arguments are a string holding an object is bad_param_json",
         '<ifm|tool_call>{"name": "f", "arguments": "{}"}</ifm|tool_call>x', "x", [],
         ["bad_param_json"]),
    Case("a JSON body without a name is bad_param_json",
         '<ifm|tool_call>{"arguments": {}}</ifm|tool_call>', "", [], ["bad_param_json"]),
    Case("a JSON body with a repeated key is duplicate_parameter",
         '<ifm|tool_call>{"name": "f", "arguments": {"a": 1, "a": 2}}</ifm|tool_call>', "", [],
         ["duplicate_parameter"]),
    Case("a JSON body that is not strict JSON is bad_param_json",
         "<ifm|tool_call>{'name': 'f', 'arguments': {}}</ifm|tool_call>", "", [],
         ["bad_param_json"]),
    Case("the call's closer ends a JSON body, in a string too: the object is cut (as GLM's "
         "closer inside a value), what follows is text and the second closer a stray one",
         '<ifm|tool_call>{"name": "f", "arguments": {"a": "</ifm|tool_call>"}}</ifm|tool_call>',
         '"}}', [], ["bad_param_json", "malformed_tag"]),
    Case("a JSON body cut off at the end is unterminated",
         '<ifm|tool_calls><ifm|tool_call>{"name": "f", "arguments": {"a": 1', "", [],
         ["unterminated"]),
    Case("an unknown name keeps the call with undefined_function",
         '<ifm|tool_call>{"name": "nope", "arguments": {}}</ifm|tool_call>', "", [("nope", {})],
         ["undefined_function"], tools=TOOLS),
    Case("a newline before a tag call's name still leaves an empty name (GLM's rule)",
         "<ifm|tool_call>\nf<ifm|arg_key>a</ifm|arg_key><ifm|arg_value>1</ifm|arg_value>"
         "</ifm|tool_call>", "", [], ["malformed_tag"]),
    Case("blanks before a tag call's name are trimmed",
         "<ifm|tool_call> f<ifm|arg_key>a</ifm|arg_key><ifm|arg_value>1</ifm|arg_value>"
         "</ifm|tool_call>", "", [("f", {"a": 1})]),
]


@pytest.mark.parametrize("case", IQUEST, ids=lambda c: c.id)
def test_iquest_q1_table(case: Case) -> None:
    check_case("iquest-q1", case)


@pytest.mark.parametrize("case", HUNYUAN, ids=lambda c: c.id)
def test_hunyuan_table(case: Case) -> None:
    check_case("hunyuan", case)


@pytest.mark.parametrize("case", K2, ids=lambda c: c.id)
def test_k2_horizon_table(case: Case) -> None:
    check_case("k2-horizon", case)


def test_hunyuan_tags_carry_the_tokenizers_suffix() -> None:
    text = ("x<tool_calls:opensource>\n<tool_call:opensource>f<tool_sep:opensource>\n"
            "<arg_key:opensource>a</arg_key:opensource>\n<arg_value:opensource>1"
            "</arg_value:opensource>\n</tool_call:opensource>\n</tool_calls:opensource>"
            "<tool_calls>")
    for size in (1, 3, len(text)):
        parser = GLMParser("hunyuan", None, tags=hunyuan_tags("opensource"), separator="",
                           frame=False)
        events = [e for i in range(0, len(text), size) for e in parser.feed(text[i:i + size])]
        events = join_events([*events, *parser.close()])
        assert consumed_text(events) == text
        assert calls_of(events) == [("f", {"a": 1})]
        assert text_of(events) == "x<tool_calls>"  # the unsuffixed tag is not this tokenizer's
        assert errors_of(events) == []


@pytest.mark.parametrize("family,text", [("iquest-q1", "a" + IQ + "b"), ("hunyuan", HY3),
                                         ("k2-horizon", K2_CALL), ("k2-horizon", K2_JSON)])
def test_a_stream_cut_at_any_position_never_raises_or_leaks(family: str, text: str) -> None:
    check_every_cut(family, text)


@pytest.mark.parametrize("family,text", [
    ("iquest-q1", "<iquest_tool_call>f<arg_value>1</arg_value><arg_key>a</arg_key>"
                  "</iquest_tool_call>"),  # value before key
    ("iquest-q1", "<iquest_tool_call>f<arg_key>a<arg_key>b</arg_key></iquest_tool_call>x"),
    ("hunyuan", "<tool_calls><tool_sep><tool_call>f</tool_calls></tool_call>y"),
    ("hunyuan", "</tool_calls><tool_calls><arg_key>k</arg_key>junk</tool_calls>"),
    ("k2-horizon", "<ifm|tool_call>f<ifm|arg_type>string</ifm|arg_type><ifm|arg_key>a"
                   "</ifm|arg_key></ifm|tool_call>"),
    ("k2-horizon", "</ifm|think><ifm|tool_calls>x<ifm|tool_call>f</ifm|tool_calls>"),
    ("k2-horizon", '<ifm|tool_call>{"name": <ifm|arg_key>"f"}</ifm|tool_calls></ifm|tool_call>{'),
    ("k2-horizon", '<ifm|tool_call> {"name": "f", "arguments": {}}} junk</ifm|tool_call>'),
])
def test_garbled_markup_is_reported_never_raised(family: str, text: str) -> None:
    check_garbled(family, text)


def test_the_engine_names_are_aliases() -> None:
    assert [canonical(n) for n in ("hy_v3", "hy_v4", "k2_horizon", "iquest_q1")] == [
        "hunyuan", "hunyuan", "k2-horizon", "iquest-q1"]


def test_reasoning_exits() -> None:
    assert FAMILIES["k2-horizon"].reasoning_exits == ()
    assert FAMILIES["hunyuan"].reasoning_exits == ("<tool_calls>", "<tool_call>")
    assert FAMILIES["iquest-q1"].reasoning_exits == ("<iquest_tool_call>",)


@pytest.mark.parametrize("family", ["iquest-q1", "hunyuan", "k2-horizon"])
def test_render_then_parse_gives_the_calls_back(family: str) -> None:
    reserved = {"iquest-q1": ("</arg_value>", "</iquest_tool_call>"),
                "hunyuan": ("</arg_value>", "</tool_call>", "</tool_calls>"),
                "k2-horizon": ("</ifm|arg_value>", "</ifm|tool_call>", "</ifm|tool_calls>")}[family]

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(calls=round_calls(reserved), cuts=st.lists(st.integers(0, 400), max_size=20))
    def prop(calls: list, cuts: list[int]) -> None:
        check_round_trip(family, calls, cuts)

    prop()


def test_auto_tells_hunyuan_from_the_json_array_families_by_what_follows_tool_calls() -> None:
    from support.toolcalls import run
    result = run("auto", "a<tool_calls>\n<tool_call>f<tool_sep></tool_call></tool_calls>", size=1)
    check_invariants("hunyuan", result)
    assert result.detected == "hunyuan"
