"""docs/design/markup.md class F: the Qwen3-Coder body in other blocks — ``seed-oss`` (``<seed:tool_call>``,
its own ``<seed:think>`` reasoning) and ``zaya`` (``<zyphra_tool_call>``)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sseguard.core.toolcalls import FAMILIES, canonical, parser_for
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

SEED_CALL = ("<seed:tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
             "<parameter=days>\n2\n</parameter>\n</function>\n</seed:tool_call>")

SEED = [
    Case("one call after text: the \\n\\n separator is the template's",
         "Let me check.\n\n" + SEED_CALL, "Let me check.",
         [("get_weather", {"city": "Paris", "days": "2"})]),
    Case("typed by the schema", "x\n\n" + SEED_CALL, "x",
         [("get_weather", {"city": "Paris", "days": 2})], tools=TOOLS),
    Case("reasoning span, then the call",
         "<seed:think>Paris, two days.</seed:think>Sure.\n\n" + SEED_CALL, "Sure.",
         [("get_weather", {"city": "Paris", "days": "2"})], reasoning="Paris, two days."),
    Case("decision 3.9: a call written inside the reasoning stays reasoning",
         "<seed:think>I would write <seed:tool_call>\n<function=f>\n</function>\n</seed:tool_call>"
         " here.<seed:cot_budget_reflect>50 left</seed:cot_budget_reflect></seed:think>\n\n"
         + SEED_CALL, "",
         [("get_weather", {"city": "Paris", "days": "2"})],
         reasoning="I would write <seed:tool_call>\n<function=f>\n</function>\n</seed:tool_call>"
                   " here.<seed:cot_budget_reflect>50 left</seed:cot_budget_reflect>",
         quoted=True),
    Case("an unclosed reasoning span is reasoning to the end", "<seed:think>still thinking",
         "", [], reasoning="still thinking"),
    Case("text after the block is visible", "\n\n" + SEED_CALL + " Done.", " Done.",
         [("get_weather", {"city": "Paris", "days": "2"})]),
    Case("Qwen's <tool_call> is text in this family",
         "<tool_call>\n<function=x>\n</function>\n</tool_call>",
         "<tool_call>\n\n</tool_call>", [("x", {})], []),
    Case("unknown name: the call is kept with undefined_function",
         "\n\n<seed:tool_call>\n<function=nope>\n</function>\n</seed:tool_call>", "",
         [("nope", {})], ["undefined_function"], tools=TOOLS),
    Case("a value's closer missing: the value ends at </function>",
         "<seed:tool_call><function=f><parameter=a>\nv\n</function></seed:tool_call>", "",
         [("f", {"a": "v"})]),
    Case("junk between the tags voids the call",
         "<seed:tool_call><function=f>junk</function></seed:tool_call>", "", [],
         ["malformed_tag"]),
    Case("duplicate parameter",
         "<seed:tool_call><function=f><parameter=a>1</parameter><parameter=a>2</parameter>"
         "</function></seed:tool_call>", "", [], ["duplicate_parameter"]),
    Case("a partial opener at the end is unterminated (decision 3.3)", "Hi <seed:tool_c", "Hi ",
         [], ["unterminated"]),
    Case("an open call at the end is unterminated",
         "<seed:tool_call><function=f><parameter=a>\nv", "", [], ["unterminated"]),
    Case("a stray closer is reported, the text around it stays",
         "a</seed:tool_call>b", "ab", [], ["malformed_tag"]),
    Case("byte-exact string value (no strip beyond the wrapper newline)",
         "<seed:tool_call><function=f><parameter=a>\n  a &amp; <b>\n\n</parameter></function>"
         "</seed:tool_call>", "", [("f", {"a": "  a &amp; <b>\n"})]),
]

ZAYA_CALL = ("<zyphra_tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
             "</function>\n</zyphra_tool_call>")
ZAYA = [
    Case("one call", "Hi\n\n" + ZAYA_CALL, "Hi", [("get_weather", {"city": "Paris"})]),
    Case("two blocks: \\n before the second", "A\n\n" + ZAYA_CALL + "B\n" + ZAYA_CALL, "AB",
         [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Paris"})]),
    Case("two functions in one block",
         "<zyphra_tool_call><function=a></function>\n<function=b></function></zyphra_tool_call>",
         "", [("a", {}), ("b", {})]),
    Case("<seed:think> is text in zaya", "<seed:think>x", "<seed:think>x", []),
    Case("a block closer inside a value voids the call",
         "<zyphra_tool_call><function=f><parameter=a>\nx</zyphra_tool_call>", "", [],
         ["unterminated"]),
    Case("partial opener at the end", "ok <zyphra_tool", "ok ", [], ["unterminated"]),
]


@pytest.mark.parametrize("case", SEED, ids=lambda c: c.id)
def test_seed_oss_table(case: Case) -> None:
    check_case("seed-oss", case)


@pytest.mark.parametrize("case", ZAYA, ids=lambda c: c.id)
def test_zaya_table(case: Case) -> None:
    check_case("zaya", case)


@pytest.mark.parametrize("family,case", [("seed-oss", SEED[0]), ("seed-oss", SEED[3]),
                                         ("zaya", ZAYA[1])])
def test_a_stream_cut_at_any_position_never_raises_or_leaks(family: str, case: Case) -> None:
    check_every_cut(family, case.text, case.quoted)


@pytest.mark.parametrize("family,text", [
    ("seed-oss", "<seed:tool_call><parameter=a>x</parameter></seed:tool_call>"),  # swapped order
    ("seed-oss", "<seed:tool_call></function><function=f></seed:tool_call>"),
    ("seed-oss", "</seed:think><seed:tool_call><function=f><seed:think></function>"),
    ("zaya", "<zyphra_tool_call><function=f><parameter=a>1</zyphra_tool_call></parameter>"),
    ("zaya", "<zyphra_tool_call>junk<function=f></function>more</zyphra_tool_call>tail"),
])
def test_garbled_markup_is_reported_never_raised(family: str, text: str) -> None:
    check_garbled(family, text)


def test_the_engine_names_are_aliases() -> None:
    assert canonical("seed_oss") == "seed-oss"
    assert canonical("zaya_xml") == "zaya"
    assert parser_for("seed_oss").family == "seed-oss"  # type: ignore[attr-defined]


def test_auto_hands_seed_reasoning_and_blocks_to_seed_oss() -> None:
    parser = parser_for("auto")
    parser.feed("<seed:think>hm</seed:think>ok\n\n" + SEED_CALL)
    parser.close()
    assert parser.detected == "seed-oss"  # type: ignore[attr-defined]


def test_no_call_opener_ends_seed_reasoning() -> None:
    assert FAMILIES["seed-oss"].reasoning_exits == ()
    assert FAMILIES["zaya"].reasoning_exits == ("<zyphra_tool_call>",)


@pytest.mark.parametrize("family", ["seed-oss", "zaya"])
def test_render_then_parse_gives_the_calls_back(family: str) -> None:
    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(calls=round_calls(("</parameter>", "<parameter=", "</function>")),
           cuts=st.lists(st.integers(0, 400), max_size=20))
    def prop(calls: list, cuts: list[int]) -> None:
        check_round_trip(family, calls, cuts)

    prop()
