"""Class D of docs/design/markup.md §3: ``pythonic``, ``olmo3`` and ``lfm2`` call lists written as Python.

Every input and expectation is written out here (the spec's examples, then each decision of §3 and
§4); each parse is also checked fed whole, in 1-, 2-, 3- and 7-character pieces and in random pieces.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import support.toolcalls  # noqa: F401 - loads the support modules in their order
from sseguard.core.toolcalls import Markup, Text, ToolArgsDelta, ToolCallEnd, ToolCallStart, family
from support.toolcalls_python import assert_robust, everyhow, outcome

PS, PE = "<|python_start|>", "<|python_end|>"
TS, TE = "<|tool_call_start|>", "<|tool_call_end|>"
FC, FE = "<function_calls>", "</function_calls>"
BAD, MAL, DUP, UNT = "bad_param_json", "malformed_tag", "duplicate_parameter", "unterminated"

# (family, input, visible text, calls, errors)
TABLE: list[tuple[str, str, str, list[tuple[str, Any]], list[tuple[str, int | None]]]] = [
    # the spec's examples (docs/design/markup.md §3.1)
    ("pythonic", '[f(a=1), g(b="x")]', "", [("f", {"a": 1}), ("g", {"b": "x"})], []),
    ("pythonic", f'{PS}[f(a=1), g(b="x")]{PE}', "", [("f", {"a": 1}), ("g", {"b": "x"})], []),
    ("olmo3", f"{FC}f(a=1)\ng(b=2){FE}", "", [("f", {"a": 1}), ("g", {"b": 2})], []),
    ("lfm2", f"{TS}[f(a=1)]{TE}", "", [("f", {"a": 1})], []),
    ("lfm2", f'{TS}[{{"name": "f", "arguments": {{"a": 1}}}}]{TE}', "", [("f", {"a": 1})], []),
    # the literal set (vLLM's get_parameter_value): negatives, both constant spellings, tuples,
    # sets, dicts, every string quoting and escape, bases and underscores
    ("pythonic", "[f(a=-1, b=+2.5, c=- 3, d=True, e=false, f=None, g=null)]", "",
     [("f", {"a": -1, "b": 2.5, "c": -3, "d": True, "e": False, "f": None, "g": None})], []),
    ("pythonic", "[f(t=(1, 'x'), u=(1,), e=(), s={3}, d={'k': [1, {'n': None}]}, p=(7))]", "",
     [("f", {"t": [1, "x"], "u": [1], "e": [], "s": [3], "d": {"k": [1, {"n": None}]},
             "p": 7})], []),
    ("pythonic", "[f(a='it\\'s', b=\"q\\\"\", c='''two\nlines''', d=r'\\d+', e='\\u00e9\\x41\\n',"
     " f='\\N{BULLET}', g='\\101')]", "",
     [("f", {"a": "it's", "b": 'q"', "c": "two\nlines", "d": "\\d+", "e": "éA\n", "f": "•",
             "g": "A"})], []),
    ("pythonic", "[f(a=0x1F, b=0o17, c=0b101, d=1_000, e=.5, f=5., g=1e3)]", "",
     [("f", {"a": 31, "b": 15, "c": 5, "d": 1000, "e": 0.5, "f": 5.0, "g": 1000.0})], []),
    ("pythonic", "[\n  web.search(\n    q = 'x',\n    n = 2,\n  ),\n]", "",
     [("web.search", {"q": "x", "n": 2})], []),
    ("pythonic", "[f()]", "", [("f", {})], []),
    # only where the answer starts (decision 3.2): elsewhere a list is text
    ("pythonic", "Sure: [f(a=1)]", "Sure: [f(a=1)]", [], []),
    ("pythonic", "[1, 2, 3] are numbers", "[1, 2, 3] are numbers", [], []),
    ("pythonic", "[link](http://x) [f(", "[link](http://x) [f(", [], []),
    ("pythonic", "[see (x)] prose", "[see (x)] prose", [], []),
    ("pythonic", "  [f(a=1)] done", "   done", [("f", {"a": 1})], []),
    ("pythonic", f"Calling. {PS}[f(a=1)]{PE} Done.", "Calling.  Done.", [("f", {"a": 1})], []),
    # text after the list is visible (vLLM's whole-output match drops the calls then)
    ("pythonic", "[f(a=1)]\nThat was it.", "\nThat was it.", [("f", {"a": 1})], []),
    # a void call: its siblings are kept
    ("pythonic", "[f(1), g(b=2)]", "", [("g", {"b": 2})], [(BAD, 0)]),
    ("pythonic", "[f(a=x), g(b=2)]", "", [("g", {"b": 2})], [(BAD, 0)]),
    ("pythonic", "[f(a=1+2, b=')'), g()]", "", [("g", {})], [(BAD, 0)]),
    ("pythonic", "[f(a=b'x'), g(a=f'{x}'), h(a=1e999), i(a=1j)]", "", [],
     [(BAD, 0), (BAD, 1), (BAD, 2), (BAD, 3)]),
    ("pythonic", "[f(a=1, a=2), g(d={'k': 1, 'k': 2})]", "", [], [(DUP, 0), (DUP, 1)]),
    ("pythonic", "[f(a='\\ud800'), g()]", "", [("g", {})], [(BAD, 0)]),
    # a broken structure: the rest of the list is void, the calls before it kept
    ("pythonic", "[f(a=1), g(b=2 c=3), h()] after", " after", [("f", {"a": 1})], [(MAL, 1)]),
    ("pythonic", "[f(a=1) g()] after", " after", [("f", {"a": 1})], [(MAL, None)]),
    ("pythonic", "[f(a='open\n')]", "", [], [(MAL, 0)]),
    # end of stream
    ("pythonic", "[f(a=1), g(b='cut", "", [("f", {"a": 1})], [(UNT, 1)]),
    ("pythonic", "[f(a=1)", "", [("f", {"a": 1})], [(UNT, None)]),
    ("pythonic", "[f", "[f", [], []),
    ("pythonic", "<|python_st", "", [], [(UNT, None)]),
    # reserved markers out of place are reported, the text around them kept
    ("pythonic", f"a {PE} b", "a  b", [], [(MAL, None)]),
    ("pythonic", f"a {PS} b", "a  b", [], [(MAL, None)]),
    # olmo3: one call per line, the block reserved only as the whole tag
    ("olmo3", f"Let me look.\n{FC}\nf(a='x')\n\ng(b=[1, 2])\n{FE}\nok", "Let me look.\n\nok",
     [("f", {"a": "x"}), ("g", {"b": [1, 2]})], []),
    ("olmo3", f"{FC}f(a=1) g(){FE}", "", [("f", {"a": 1})], [(MAL, None)]),
    ("olmo3", f"{FC}f(a=1)\ng(", "", [("f", {"a": 1})], [(UNT, 1)]),
    ("olmo3", "f(a=1)\n<function_call>", "f(a=1)\n<function_call>", [], []),
    ("olmo3", f"x{FE}y", "xy", [], [(MAL, None)]),
    # lfm2: either list, text around blocks visible
    ("lfm2", f"a{TS}[f(a=1)]{TE}b{TS}[{{\"name\": \"g\", \"arguments\": {{}}}}]{TE}c", "abc",
     [("f", {"a": 1}), ("g", {})], []),
    ("lfm2", f"{TS}[f(a=1)] junk {TE}after", "after", [("f", {"a": 1})], [(MAL, None)]),
    ("lfm2", f"{TS}[f(a=1)]", "", [("f", {"a": 1})], [(UNT, None)]),
    ("lfm2", f"{TS}[]{TE}", "", [], []),
    ("lfm2", f'{TS}[{{"name": "f", "arguments": "{{}}"}}]{TE}', "", [], [(BAD, None)]),
]


@pytest.mark.parametrize("fam,text,visible,calls,errors", TABLE)
def test_the_table_under_every_chunking(fam: str, text: str, visible: str,
                                        calls: list[tuple[str, Any]],
                                        errors: list[tuple[str, int | None]]) -> None:
    assert outcome(fam, text) == (visible, calls, errors)


def test_arguments_stream_value_by_value_and_strings_as_they_arrive() -> None:
    events = everyhow("pythonic", "[f(path='a.txt', body='x' )]")
    assert events == [
        Markup("["), ToolCallStart(0, "f"),
        ToolArgsDelta(0, '{"path": "a.txt", "body": "x"}'),
        ToolCallEnd(0, "f", '{"path": "a.txt", "body": "x"}'), Markup("]")]
    parser = family("pythonic").make(None)
    out = parser.feed("[f(body='hello wor")
    assert out[-1] == ToolArgsDelta(0, '{"body": "hello wor')
    assert parser.feed("ld") == [ToolArgsDelta(0, "ld")]


def test_an_undecided_bracket_holds_only_its_own_output() -> None:
    parser = family("pythonic").make(None)
    assert parser.feed("[f(a=1, b=('x'")[-1] == ToolArgsDelta(0, '{"a": 1, "b": ')
    assert parser.feed(", 'y'") == [ToolArgsDelta(0, '["x", "y"')]


def test_unknown_names_keep_the_call_with_undefined_function() -> None:
    tools = [{"type": "function", "function": {"name": "f"}}]
    assert outcome("pythonic", "[g(a=1)]", tools) == ("", [("g", {"a": 1})],
                                                      [("undefined_function", 0)])


def test_the_families_have_the_engine_names() -> None:
    assert family("llama4_pythonic").name == "pythonic"


# ── malformed input never raises, loses nothing, leaks nothing ─────────────────────────────────

VALID = {
    "pythonic": f"ok [x] {PS}[f(a='v', b=(1, 2)), g.h(c={{'k': None}})]{PE} end",
    "olmo3": f"ok {FC}f(a='v')\ng(b=[1, 2]){FE} end",
    "lfm2": f"ok {TS}[f(a='v'), g(b=[1])]{TE} {TS}[{{\"name\": \"h\", \"arguments\": {{}}}}]{TE}",
}


@pytest.mark.parametrize("fam", sorted(VALID))
def test_a_document_cut_at_every_position_is_reported_not_lost(fam: str) -> None:
    text = VALID[fam]
    for k in range(len(text) + 1):
        assert_robust(fam, text[:k])


@pytest.mark.parametrize("fam", sorted(VALID))
def test_swapped_markers_are_reported_not_shown(fam: str) -> None:
    opener, closer = family(fam).markers
    text = VALID[fam]
    swapped = text.replace(opener, "\0").replace(closer, opener).replace("\0", closer)
    assert_robust(fam, swapped)
    assert_robust(fam, text.replace(closer, ""))
    assert_robust(fam, text.replace(opener, opener + opener))


JUNK = st.sampled_from(["(", ")", "[", "]", "{", "}", ",", "=", "'", '"', "'''", "\\", "\n", "x",
                        "<|", "1", "-", ".", ":", "#", "<|python_end|>", "<function_calls>",
                        "<|tool_call_end|>", "True", "b'", "é"])


@pytest.mark.parametrize("fam", sorted(VALID))
def test_junk_inside_is_reported_not_shown(fam: str) -> None:
    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(junk=st.lists(st.tuples(st.integers(0, 200), JUNK), min_size=1, max_size=4))
    def prop(junk: list[tuple[int, str]]) -> None:
        text = VALID[fam]
        for at, piece in junk:
            at %= len(text) + 1
            text = text[:at] + piece + text[at:]
        assert_robust(fam, text)

    prop()


# ── render → parse ───────────────────────────────────────────────────────────────────────────────


class _Call:
    def __init__(self, name: str, values: dict[str, Any]) -> None:
        import json

        self.name, self.values, self.arguments = name, values, json.dumps(values)


@pytest.mark.parametrize("fam", ["lfm2", "olmo3", "pythonic"])
def test_what_the_family_renders_parses_back(fam: str) -> None:
    from support.toolcalls_python import IDENT, PY_VALUE

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(calls=st.lists(st.tuples(IDENT, st.dictionaries(IDENT, PY_VALUE, max_size=3)),
                          min_size=1, max_size=3))
    def prop(calls: list[tuple[str, dict[str, Any]]]) -> None:
        rendered = family(fam).render([_Call(n, v) for n, v in calls], False)
        events = everyhow(fam, rendered)
        assert [e for e in events if isinstance(e, Text)] == []
        assert [(e.name, __import__("json").loads(e.arguments)) for e in events
                if isinstance(e, ToolCallEnd)] == calls

    prop()
