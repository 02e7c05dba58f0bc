"""Muse (``muse``, docs/design/markup.md classes G+I): messages outside, ``atem:`` invokes inside."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sseguard.core.toolcalls import canonical
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
BLOCK = ('<atem:function_calls><atem:invoke name="get_weather"><atem:parameter name="city">Paris'
         '</atem:parameter><atem:parameter name="days">2</atem:parameter></atem:invoke>'
         "</atem:function_calls>")
CASES = [
    Case("to=self is reasoning, to=user visible, a tool message's block calls",
         "<|start|>assistant to=self<|message|>Think.<|eom|><|start|>assistant to=user<|message|>"
         "Checking.<|eom|><|start|>assistant to=functions.get_weather<|message|>" + BLOCK + "<|eom|>",
         "Checking.", [("get_weather", {"city": "Paris", "days": "2"})], reasoning="Think."),
    Case("typed by the schema", BLOCK, "", [("get_weather", {"city": "Paris", "days": 2})],
         tools=TOOLS),
    Case("a doubled bare name is the offered name",
         '<atem:function_calls><atem:invoke name="get_weather.get_weather"></atem:invoke>'
         "</atem:function_calls>", "", [("get_weather", {})], tools=TOOLS),
    Case("a doubled name stays as written without tools",
         '<atem:function_calls><atem:invoke name="a.a"></atem:invoke></atem:function_calls>', "",
         [("a.a", {})]),
    Case("decision 3.9: a block opener inside a to=self message ends the reasoning",
         "<|start|>assistant to=self<|message|>hm" + BLOCK + "<|eom|>after", "after",
         [("get_weather", {"city": "Paris", "days": "2"})], reasoning="hm"),
    Case("to=developer is not shown", "<|start|>assistant to=developer<|message|>x<|eom|>y", "y",
         []),
    Case("a header cut off at the end is unterminated", "ok<|start|>assistant to=us", "ok", [],
         ["unterminated"]),
    Case("a header without a recipient is malformed", "<|start|>user<|message|>x", "x", [],
         ["malformed_tag"]),
    Case("an invoke outside the block is text", '<atem:invoke name="f"></atem:invoke>',
         '<atem:invoke name="f"></atem:invoke>', []),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_muse_table(case: Case) -> None:
    check_case("muse", case)


def test_a_stream_cut_at_any_position_never_raises_or_leaks() -> None:
    check_every_cut("muse", CASES[0].text)


@pytest.mark.parametrize("text", [
    "<|eom|><|message|><|start|><|start|>assistant to=self<|message|><atem:function_calls>",
    '<atem:function_calls><|eom|><atem:invoke name="f"><|start|></atem:function_calls>z',
])
def test_garbled_markup_is_reported_never_raised(text: str) -> None:
    check_garbled("muse", text)


def test_the_engine_names_are_aliases() -> None:
    assert [canonical(n) for n in ("muse_glimmer", "musespark", "musespark1x")] == ["muse"] * 3


def test_render_then_parse_gives_the_calls_back() -> None:
    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(calls=round_calls(("</atem:parameter>", "</atem:invoke>", "</atem:function_calls>",
                              "<|eom|>", "<|start|>")),
           cuts=st.lists(st.integers(0, 400), max_size=20))
    def prop(calls: list, cuts: list[int]) -> None:
        check_round_trip("muse", calls, cuts)

    prop()
