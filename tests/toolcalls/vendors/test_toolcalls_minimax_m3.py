"""MiniMax-M3 (``minimax-m3``, docs/design/markup.md class G′): ``]<]minimax[>[``-prefixed tags, parameters as
elements named by their keys, nested elements as objects."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sseguard.core.toolcalls import FAMILIES, canonical, parser_for
from support.toolcalls import calls_of, check_invariants, errors_of, run
from support.toolcalls_case_tables import (
    Case,
    RenderCall,
    check_case,
    check_every_cut,
    check_garbled,
)

NS = "]<]minimax[>["
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {
    "type": "object", "properties": {"n": {"type": "integer"}, "tags": {"type": "array"},
                                     "s": {"type": "string"}}}}}]


def call(body: str, name: str = "f") -> str:
    return f'{NS}<tool_call>{NS}<invoke name="{name}">{body}{NS}</invoke>{NS}</tool_call>'


CASES = [
    Case("leaves are raw strings without a schema, text around verbatim",
         "Hi " + call(f"{NS}<a> 1 & <b>{NS}</a>") + " ok", "Hi  ok", [("f", {"a": " 1 & <b>"})]),
    Case("an element with children is an object; a repeated name gathers an array",
         call(f"{NS}<o>\n{NS}<x>1{NS}</x>{NS}<y>2{NS}</y>{NS}<y>3{NS}</y>\n{NS}</o>"), "",
         [("f", {"o": {"x": "1", "y": ["2", "3"]}})]),
    Case("the schema types a leaf; an array parameter takes its children as items",
         call(f"{NS}<n>42{NS}</n>{NS}<tags>{NS}<item>a{NS}</item>{NS}<item>b{NS}</item>{NS}</tags>"),
         "", [("f", {"n": 42, "tags": ["a", "b"]})], tools=TOOLS),
    Case("exactly null is null", call(f"{NS}<a>null{NS}</a>"), "", [("f", {"a": None})]),
    Case("whitespace between the token and the tag is allowed",
         f"{NS} <tool_call>{NS}\n<invoke name='g'>{NS}\t</invoke>{NS} </tool_call>", "",
         [("g", {})]),
    Case("a string parameter with children is bad_param_json",
         call(f"{NS}<s>{NS}<x>1{NS}</x>{NS}</s>"), "", [], ["bad_param_json"], tools=TOOLS),
    Case("text beside child elements is malformed", call(f"{NS}<o>t{NS}<x>1{NS}</x>{NS}</o>"), "",
         [], ["malformed_tag"]),
    Case("a mismatched closer is malformed", call(f"{NS}<a>1{NS}</b>"), "", [], ["malformed_tag"]),
    Case("duplicate parameter", call(f"{NS}<a>1{NS}</a>{NS}<a>2{NS}</a>"), "", [],
         ["duplicate_parameter"]),
    Case("unknown name kept with undefined_function", call("", "nope"), "", [("nope", {})],
         ["undefined_function"], tools=TOOLS),
    Case("a partial token at the end is unterminated", "x]<]mini", "x", [], ["unterminated"]),
    Case("an open call at the end is unterminated", f'{NS}<tool_call>{NS}<invoke name="f">', "",
         [], ["unterminated"]),
    Case("a lone ] is text", "a[0] = b]", "a[0] = b]", []),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_minimax_m3_table(case: Case) -> None:
    check_case("minimax-m3", case)


def test_nesting_deeper_than_128_is_malformed() -> None:
    deep = "".join(f"{NS}<e{i}>" for i in range(130)) + "x" + "".join(
        f"{NS}</e{i}>" for i in reversed(range(130)))
    events = run("minimax-m3", call(deep)).joined
    assert [e.kind for e in events if hasattr(e, "kind")] == ["malformed_tag"]
    ok = "".join(f"{NS}<e{i}>" for i in range(128)) + "x" + "".join(
        f"{NS}</e{i}>" for i in reversed(range(128)))
    result = run("minimax-m3", call(ok), size=7)
    check_invariants("minimax-m3", result)
    assert not [e for e in result.events if hasattr(e, "kind")]


def test_a_stream_cut_at_any_position_never_raises_or_leaks() -> None:
    check_every_cut("minimax-m3", CASES[1].text)


@pytest.mark.parametrize("text", [
    f"{NS}</tool_call>{NS}<invoke>{NS}<a>{NS}</invoke>x",
    f"{NS}<tool_call>junk{NS}<a>1{NS}</a>{NS}</tool_call>y",
    f"{NS}{NS}<{NS}<tool_call{NS}>",
])
def test_garbled_markup_is_reported_never_raised(text: str) -> None:
    check_garbled("minimax-m3", text)


def test_one_render_parses_back_and_the_alias() -> None:
    assert canonical("minimax_m3") == "minimax-m3"

    text = FAMILIES["minimax-m3"].render([RenderCall("f", {"s": "a <b>", "o": {"x": "1"}})], False)
    parser = parser_for("minimax-m3")
    events = [*parser.feed(text), *parser.close()]
    assert [e.arguments for e in events if hasattr(e, "arguments")] == [
        '{"s": "a <b>", "o": {"x": "1"}}']


LEAF = st.text(st.characters(blacklist_categories=("Cs",)), max_size=15).filter(
    lambda v: v != "null" and "]<]" not in v and not v.endswith(("]", "]<")))
KEY = st.text(st.sampled_from("abcxyz_019"), min_size=1, max_size=5)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=st.lists(st.builds(RenderCall, st.sampled_from(["f", "g"]), st.dictionaries(
    KEY, st.one_of(LEAF, st.dictionaries(KEY, LEAF, min_size=1, max_size=2)), max_size=3)),
    min_size=1, max_size=3), cuts=st.lists(st.integers(0, 400), max_size=20))
def test_render_then_parse_gives_the_calls_back(calls: list[RenderCall], cuts: list[int]) -> None:
    """Untyped round trip: string leaves and objects of them (nested leaves carry no schema)."""
    text = FAMILIES["minimax-m3"].render(calls, False)
    result = run("minimax-m3", text, cuts)
    check_invariants("minimax-m3", result)
    assert calls_of(result.joined) == [(c.name, c.values) for c in calls]
    assert errors_of(result.joined) == []
