"""Kimi K3 XTML (``kimi-k3``, docs/design/markup.md classes G+I): channels, calls, typed arguments."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sseguard.core.toolcalls import ToolCallStart, canonical
from support.toolcalls import run
from support.toolcalls_case_tables import (
    Case,
    check_case,
    check_every_cut,
    check_garbled,
    check_round_trip,
    round_calls,
)

CALL = ('<|open|>tools<|sep|><|open|>call tool="get_weather" index="3"<|sep|>'
        '<|open|>argument key="city" type="string"<|sep|> Paris &amp; "Rome"<|close|>argument<|sep|>'
        '<|open|>argument key="days" type="integer"<|sep|>2<|close|>argument<|sep|>'
        "<|close|>call<|sep|><|close|>tools<|sep|>")
CASES = [
    Case("channels: think is reasoning, response visible, tools calls",
         "<|open|>think<|sep|>Need weather.<|close|>think<|sep|><|open|>response<|sep|>Checking."
         "<|close|>response<|sep|>" + CALL, "Checking.",
         [("get_weather", {"city": ' Paris &amp; "Rome"', "days": 2})], reasoning="Need weather."),
    Case("a tools opener ends an open think channel (decision 3.9)",
         "<|open|>think<|sep|>hm" + CALL, "",
         [("get_weather", {"city": ' Paris &amp; "Rome"', "days": 2})], reasoning="hm"),
    Case("attributes unescape &quot; and &amp;",
         '<|open|>tools<|sep|><|open|>call tool="a&amp;b" index="1"<|sep|><|open|>argument '
         'key="k&quot;" type="boolean"<|sep|>true<|close|>argument<|sep|><|close|>call<|sep|>'
         "<|close|>tools<|sep|>", "", [("a&b", {'k"': True})]),
    Case("a type that is no JSON Schema type name is invalid_string_flag",
         '<|open|>tools<|sep|><|open|>call tool="f" index="1"<|sep|><|open|>argument key="a" '
         'type="str"<|sep|>x<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>', "",
         [], ["invalid_string_flag"]),
    Case("no type at all is invalid_string_flag",
         '<|open|>call tool="f"<|sep|><|open|>argument key="a"<|sep|>x<|close|>argument<|sep|>'
         "<|close|>call<|sep|>", "", [], ["invalid_string_flag"]),
    Case("a value that is not of its type is bad_param_json",
         '<|open|>call tool="f"<|sep|><|open|>argument key="a" type="integer"<|sep|>"1"'
         "<|close|>argument<|sep|><|close|>call<|sep|>", "", [], ["bad_param_json"]),
    Case("the markers are reserved inside a value",
         '<|open|>call tool="f"<|sep|><|open|>argument key="a" type="string"<|sep|>x<|open|>y'
         "<|close|>argument<|sep|><|close|>call<|sep|>after", "after", [], ["malformed_tag"]),
    Case("unknown name kept with undefined_function", '<|open|>call tool="nope"<|sep|>'
         "<|close|>call<|sep|>", "", [("nope", {})], ["undefined_function"],
         tools=[{"type": "function", "function": {"name": "get_weather"}}]),
    Case("max_tokens right after a control token: unterminated",
         "<|open|>response<|sep|>Hi<|close|>", "Hi", [], ["unterminated"]),
    Case("max_tokens before <|sep|>: unterminated", "<|open|>response<|sep|>Hi<|close|>response",
         "Hi", [], ["unterminated"]),
    Case("an open call at the end is unterminated",
         '<|open|>tools<|sep|><|open|>call tool="f"<|sep|>', "", [], ["unterminated"]),
    Case("an open think channel at the end is reasoning", "<|open|>think<|sep|>still", "", [],
         reasoning="still"),
    Case("a stray <|sep|> is reported", "a<|sep|>b", "ab", [], ["malformed_tag"]),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_kimi_k3_table(case: Case) -> None:
    check_case("kimi-k3", case)


def test_the_index_is_the_call_id() -> None:
    starts = [e for e in run("kimi-k3", CALL).events if isinstance(e, ToolCallStart)]
    assert [(s.index, s.name, s.id) for s in starts] == [(0, "get_weather", "3")]


def test_a_stream_cut_at_any_position_never_raises_or_leaks() -> None:
    check_every_cut("kimi-k3", CASES[0].text)


@pytest.mark.parametrize("text", [
    '<|close|>tools<|sep|><|open|>argument key="a" type="string"<|sep|>x<|close|>call<|sep|>',
    '<|open|>tools<|sep|>junk<|open|>call<|sep|><|open|>call tool="f"<|sep|><|close|>tools<|sep|>',
    "<|open|><|open|>tools<|sep|><|sep|><|close|>",
])
def test_garbled_markup_is_reported_never_raised(text: str) -> None:
    check_garbled("kimi-k3", text)


def test_the_engine_name_is_an_alias() -> None:
    assert canonical("kimi_k3") == "kimi-k3"


def test_render_then_parse_gives_the_calls_back() -> None:
    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(calls=round_calls(("<|open|>", "<|close|>", "<|sep|>")),
           cuts=st.lists(st.integers(0, 400), max_size=20))
    def prop(calls: list, cuts: list[int]) -> None:
        check_round_trip("kimi-k3", calls, cuts)

    prop()
