"""docs/design/markup.md class G: invoke/parameter elements spelled otherwise — ``dots``, ``step3``
(``steptml:`` elements in per-call wrappers), ``minicpm5`` (``function``/``param``, either quote, CDATA, no
block) and ``gigachat35`` (DSML with ``｜GCML｜``)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sseguard.core.toolcalls import canonical
from support.toolcalls import check_invariants, run
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

DOTS_CALL = ('<dots_function_call><invoke name="get_weather"><parameter name="city">Paris'
             '</parameter><parameter name="days">2</parameter></invoke></dots_function_call>')
DOTS_JSON = ('<dots_function_call>{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}'
             "</dots_function_call>")
DOTS = [
    Case("MiniMax's body in <dots_function_call>; untyped values raw", "Hi " + DOTS_CALL + " ok",
         "Hi  ok", [("get_weather", {"city": "Paris", "days": "2"})]),
    Case("typed by the schema", DOTS_CALL, "", [("get_weather", {"city": "Paris", "days": 2})],
         tools=TOOLS),
    Case("an invoke outside the block is text", '<invoke name="f"></invoke>',
         '<invoke name="f"></invoke>', []),
    Case("unknown name kept with undefined_function (SGLang shows the block as text)",
         '<dots_function_call><invoke name="nope"></invoke></dots_function_call>', "",
         [("nope", {})], ["undefined_function"], tools=TOOLS),
    Case("a garbage block is malformed, never text (SGLang shows it)",
         "<dots_function_call>garbage</dots_function_call>after", "after", [],
         ["malformed_tag"]),
    Case("decision 3.3: a partial opener at the end is unterminated (SGLang flushes it as text)",
         "a<dots_function", "a", [], ["unterminated"]),
    Case("a stray closer is reported (SGLang strips it)", "a</dots_function_call>b", "ab", [],
         ["malformed_tag"]),
    # docs/design/markup.md §3.3: the block may hold one JSON object {name, arguments} instead of invokes
    Case("a JSON-object block is a call", "Hi " + DOTS_JSON + " ok", "Hi  ok",
         [("get_weather", {"city": "Paris", "days": 2})]),
    Case("a JSON block pretty-printed, its name last",
         '<dots_function_call>\n{\n "arguments": {"a": "}]"},\n "name": "f"\n}\n'
         "</dots_function_call>", "", [("f", {"a": "}]"})]),
    Case("a JSON block after an invoke in one block",
         '<dots_function_call><invoke name="f"></invoke>\n{"name": "g", "arguments": {}}'
         "</dots_function_call>", "", [("f", {}), ("g", {})]),
    Case("a JSON block's arguments are not typed by the schema (as DSML's JSON body)",
         '<dots_function_call>{"name": "get_weather", "arguments": {"city": "Paris"}}'
         "</dots_function_call>", "", [("get_weather", {"city": "Paris"})], tools=TOOLS),
    Case("the object runs to the block's closer: an invoke after it makes it bad_param_json",
         '<dots_function_call>{"name": "f", "arguments": {}}<invoke name="g"></invoke>'
         "</dots_function_call>x", "x", [], ["bad_param_json"]),
    Case("a JSON block without arguments is bad_param_json (never text: SGLang shows it)",
         '<dots_function_call>{"name": "f"}</dots_function_call>x', "x", [], ["bad_param_json"]),
    Case("a JSON block with a repeated key is duplicate_parameter",
         '<dots_function_call>{"name": "f", "arguments": {"a": 1}, "name": "g"}'
         "</dots_function_call>", "", [], ["duplicate_parameter"]),
    Case("an unknown name in a JSON block keeps the call with undefined_function",
         '<dots_function_call>{"name": "nope", "arguments": {}}</dots_function_call>', "",
         [("nope", {})], ["undefined_function"], tools=TOOLS),
    Case("a JSON block cut off at the end is unterminated",
         '<dots_function_call>{"name": "f", "arguments": {"a": "x</dots_func', "", [],
         ["unterminated"]),
    Case("the invoke's closer inside a value voids the call",
         '<dots_function_call><invoke name="f"><parameter name="a">x</invoke>'
         '<invoke name="g"></invoke></dots_function_call>', "", [("g", {})], ["malformed_tag"]),
]

STEP = ('<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="get_weather">'
        '<steptml:parameter name="city">a < b </steptml:parameter><steptml:parameter name="days">2'
        "</steptml:parameter></steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜>")
STEP3 = [
    Case("values byte-exact, a < kept (SGLang drops the parameter), GLM's untyped rule",
         "Hi" + STEP + "ok", "Hiok", [("get_weather", {"city": "a < b ", "days": 2})]),
    Case("two calls in one block",
         '<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="a">'
         "</steptml:invoke><｜tool_call_end｜>\n<｜tool_call_begin｜>function<｜tool_sep｜>"
         '<steptml:invoke name="b"></steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜>', "",
         [("a", {}), ("b", {})]),
    Case("a type word other than function is malformed",
         '<｜tool_calls_begin｜><｜tool_call_begin｜>fn<｜tool_sep｜><steptml:invoke name="a">'
         "</steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜>", "", [], ["malformed_tag"]),
    Case("the wrapper's call end missing voids the call",
         '<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="a">'
         "</steptml:invoke><｜tool_calls_end｜>", "", [], ["malformed_tag"]),
    Case("DeepSeek's markers (with ▁) are text here", "<｜tool▁calls▁begin｜>x",
         "<｜tool▁calls▁begin｜>x", []),
    Case("an open call at the end is unterminated",
         '<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="a">',
         "", [], ["unterminated"]),
]

MINICPM = [
    Case("either quote; values verbatim, no entity decoding",
         "Hi <function name=\"get_weather\"><param name='city'>A &amp; B</param></function> ok",
         "Hi  ok", [("get_weather", {"city": "A &amp; B"})]),
    Case("a CDATA section's inside is taken as is, markup included",
         '<function name="f"><param name="code"><![CDATA[if a</param> < b]]></param></function>',
         "", [("f", {"code": "if a</param> < b"})]),
    Case("decision 3.3: <function= / <function_call> / <function_calls> are not MiniCPM's",
         "<function=x> <function_call> <function_calls>",
         "<function=x> <function_call> <function_calls>", []),
    Case("MiniMax's untyped rule: the raw string", '<function name="f"><param name="n">42'
         "</param></function>", "", [("f", {"n": "42"})]),
    Case("parameter names are not checked against the schema (SGLang rejects the call)",
         '<function name="get_weather"><param name="zzz">1</param></function>', "",
         [("get_weather", {"zzz": "1"})], tools=TOOLS),
    Case("a broken call is swallowed up to its closer; the text after it stays",
         '<function name="f">junk</function>after', "after", [], ["malformed_tag"]),
    Case("a partial opener at the end is unterminated", 'x<function name="f', "x", [],
         ["unterminated"]),
    Case("the function's closer inside a value voids the call",
         '<function name="f"><param name="a">x</function>y', "y", [], ["malformed_tag"]),
]

GC = ('\n\n<｜GCML｜tool_calls>\n<｜GCML｜invoke name="get_weather">\n<｜GCML｜parameter name="city" '
      'string="true">Paris</｜GCML｜parameter>\n<｜GCML｜parameter name="days" string="false">2'
      "</｜GCML｜parameter>\n</｜GCML｜invoke>\n</｜GCML｜tool_calls>")
GIGACHAT = [
    Case("DSML's grammar with ｜GCML｜; the \\n\\n separator removed", "Hi" + GC, "Hi",
         [("get_weather", {"city": "Paris", "days": 2})]),
    Case("a flag other than true/false", '<｜GCML｜invoke name="f"><｜GCML｜parameter name="a" '
         'string="maybe">x</｜GCML｜parameter></｜GCML｜invoke>', "", [], ["invalid_string_flag"]),
    Case("DSML markup is text in this family", '<｜DSML｜invoke name="f"/>',
         '<｜DSML｜invoke name="f"/>', []),
    Case("the marker is reserved inside a string value",
         '<｜GCML｜invoke name="f"><｜GCML｜parameter name="a" string="true">x<｜GCML｜oops>'
         "</｜GCML｜parameter></｜GCML｜invoke>", "", [], ["malformed_tag"]),
]


@pytest.mark.parametrize("case", DOTS, ids=lambda c: c.id)
def test_dots_table(case: Case) -> None:
    check_case("dots", case)


@pytest.mark.parametrize("case", STEP3, ids=lambda c: c.id)
def test_step3_table(case: Case) -> None:
    check_case("step3", case)


@pytest.mark.parametrize("case", MINICPM, ids=lambda c: c.id)
def test_minicpm5_table(case: Case) -> None:
    check_case("minicpm5", case)


@pytest.mark.parametrize("case", GIGACHAT, ids=lambda c: c.id)
def test_gigachat35_table(case: Case) -> None:
    check_case("gigachat35", case)


@pytest.mark.parametrize("family,text", [("dots", DOTS_CALL), ("dots", DOTS_JSON), ("step3", STEP),
                                         ("minicpm5", MINICPM[1].text), ("gigachat35", GC)])
def test_a_stream_cut_at_any_position_never_raises_or_leaks(family: str, text: str) -> None:
    check_every_cut(family, text)


@pytest.mark.parametrize("family,text", [
    ("dots", '<dots_function_call><parameter name="a">1</parameter><invoke name="f">'
             "</dots_function_call></invoke>"),
    ("dots", '<dots_function_call>{"name": "f", <invoke name="g">}</dots_function_call></invoke>{'),
    ("step3", "<｜tool_calls_begin｜><｜tool_sep｜>function<｜tool_call_begin｜></steptml:invoke>"
              "<｜tool_calls_end｜>z"),
    ("minicpm5", "<function name='f'><param name=\"a\"><![CDATA[x</function>y"),
    ("minicpm5", '</param><function name="f"></param><param name="a">'),
    ("gigachat35", "</｜GCML｜tool_calls><｜GCML｜tool_calls><｜GCML｜parameter name=\"a\">"),
])
def test_garbled_markup_is_reported_never_raised(family: str, text: str) -> None:
    check_garbled(family, text)


def test_the_engine_names_are_aliases() -> None:
    assert [canonical(n) for n in ("dots3", "dots3_note")] == ["dots", "dots"]


@pytest.mark.parametrize("text,family", [
    ("a<function name='f'></function>", "minicpm5"), ("a<function=f>\n</function>", "qwen3-coder"),
    (DOTS_CALL, "dots"), (STEP, "step3"), (GC, "gigachat35")])
def test_auto_tells_the_families_apart_byte_by_byte(text: str, family: str) -> None:
    for size in (1, 2, len(text)):
        result = run("auto", text, size=size)
        check_invariants(family, result)
        assert result.detected == family


@pytest.mark.parametrize("family", ["dots", "step3", "minicpm5", "gigachat35"])
def test_render_then_parse_gives_the_calls_back(family: str) -> None:
    reserved = {"dots": ("</parameter>", "</invoke>", "</dots_function_call>"),
                "step3": ("</steptml:parameter>", "</steptml:invoke>", "<｜tool_calls_end｜>",
                          "<｜tool_call_end｜>"),
                "minicpm5": ("</param>", "</function>", "<![CDATA["),
                "gigachat35": ("<｜GCML｜", "</｜GCML｜")}[family]

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(calls=round_calls(reserved), cuts=st.lists(st.integers(0, 400), max_size=20))
    def prop(calls: list, cuts: list[int]) -> None:
        check_round_trip(family, calls, cuts)

    prop()
