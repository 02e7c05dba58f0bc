"""Guarantees 1–5 of docs/design/guarantees.md, proved per family with hypothesis.

Valid documents (random names, unicode values, values holding ``<``, ``｜``, quotes, newlines,
``</parameter>``, partial marker text, padding that must survive byte-exact), mixed with text and fed in
random splits down to one character, must give: the unsplit events once joined, the expected text and
calls, no marker in Text, deltas that join to the arguments. Soup of markup pieces must never raise and
never lose a character. Streams interleaved round-robin must not notice each other.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from sseguard.core.toolcalls import FAMILIES, MarkupError, consumed_text, parser_for
from support.toolcalls import (
    ASCII_WS,
    DOCS,
    FRAMED,
    LEAK_MARKERS,
    QWEN_TOOLS,
    SOUP,
    Doc,
    calls_of,
    check_invariants,
    ends_clean,
    qwen_docs,
    reasoning_of,
    run,
    text_of,
)
from support.toolcalls_jsoncalls import AUTO_NEVER, BARE_START
from support.toolcalls_markup2 import GLM_TOOLS, MINIMAX_TOOLS, glm_docs, minimax_docs
from support.toolcalls_python import PY_CANNED, UNMARKED

#: SSEGUARD_PROPS_SCALE=10 runs every property here with ten times the examples (issue 29: a longer
#: run found chunking-dependent events that the usual budget did not).
SCALE = max(1, int(os.environ.get("SSEGUARD_PROPS_SCALE", "1")))
PROPS = settings(max_examples=150 * SCALE, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
FAMILY_NAMES = sorted(DOCS)
CUTS = st.lists(st.integers(0, 4000), max_size=60)


def _check_valid(family: str, doc: Doc, cuts: list[int], tools: list | None = None) -> None:
    whole = run(family, doc.text, None, tools)
    check_invariants(family, whole)
    assert [e for e in whole.events if isinstance(e, MarkupError)] == []
    assert text_of(whole.events) == doc.visible
    assert reasoning_of(whole.events) == doc.reasoning
    assert calls_of(whole.events) == doc.calls
    split = run(family, doc.text, cuts, tools)
    check_invariants(family, split)
    assert split.joined == whole.joined
    singles = run(family, doc.text, size=1, tools=tools)
    assert singles.joined == whole.joined


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_valid_documents_parse_the_same_under_any_chunking(family: str) -> None:
    @PROPS
    @given(doc=DOCS[family], cuts=CUTS)
    def prop(doc: Doc, cuts: list[int]) -> None:
        _check_valid(family, doc, cuts)

    prop()


@PROPS
@given(doc=qwen_docs(typed=True), cuts=CUTS)
def test_qwen_schema_typed_values_parse_the_same_under_any_chunking(doc: Doc,
                                                                  cuts: list[int]) -> None:
    _check_valid("qwen3-coder", doc, cuts, QWEN_TOOLS)


@pytest.mark.parametrize("family", ["glm45", "glm47"])
def test_glm_schema_typed_values_parse_the_same_under_any_chunking(family: str) -> None:
    @PROPS
    @given(doc=glm_docs(family, typed=True), cuts=CUTS)
    def prop(doc: Doc, cuts: list[int]) -> None:
        _check_valid(family, doc, cuts, GLM_TOOLS)

    prop()


@PROPS
@given(doc=minimax_docs(typed=True), cuts=CUTS)
def test_minimax_schema_typed_values_parse_the_same_under_any_chunking(doc: Doc,
                                                                     cuts: list[int]) -> None:
    _check_valid("minimax-m2", doc, cuts, MINIMAX_TOOLS)


@pytest.mark.parametrize("family", [f for f in FAMILY_NAMES if f not in AUTO_NEVER])
def test_auto_parses_every_family_like_the_named_parser(family: str) -> None:
    other = set(LEAK_MARKERS["auto"]) - set(LEAK_MARKERS[family])

    @settings(PROPS, max_examples=60 * SCALE)
    @given(doc=DOCS[family], cuts=CUTS)
    def prop(doc: Doc, cuts: list[int]) -> None:
        # text holding another family's marker is that family's markup to auto
        assume(not any(m in doc.text for m in other) and ends_clean(doc.text, "auto"))
        # before any marker auto cannot know that leading whitespace frames the answer
        assume(family not in FRAMED or doc.text[:1] not in tuple(ASCII_WS))
        # auto never claims an unmarked answer (decision 3.2)
        assume(family not in BARE_START or doc.text.lstrip()[:1] not in ("{", "["))
        # a call list without a marker is calls only to the named parser (decision 3.2)
        assume(family not in UNMARKED or not doc.text.lstrip(ASCII_WS).startswith("["))
        named = run(family, doc.text)
        auto = run("auto", doc.text, cuts, markers_of=family)
        check_invariants(family, auto)
        assert auto.joined == named.joined

    prop()


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_soup_never_raises_never_loses_input_and_ignores_chunking(family: str) -> None:
    @settings(PROPS, max_examples=200 * SCALE)
    @given(text=SOUP, cuts=CUTS)
    def prop(text: str, cuts: list[int]) -> None:
        whole = run(family, text)
        check_invariants(family, whole)
        split = run(family, text, cuts)
        check_invariants(family, split)
        assert split.joined == whole.joined
        assert run(family, text, size=1).joined == whole.joined

    prop()


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_fragments_are_only_appended(family: str) -> None:
    """At every point of the stream, the arguments streamed so far are a prefix of the final ones."""
    @settings(PROPS, max_examples=60 * SCALE)
    @given(doc=DOCS.get(family, DOCS["dsml-v4"]), cuts=CUTS)
    def prop(doc: Doc, cuts: list[int]) -> None:
        result = run(family, doc.text, cuts)
        final = {e.index: e.arguments for e in result.events if hasattr(e, "arguments")}
        seen: dict[int, str] = {}
        for batch in [*result.feeds, result.closing]:
            for ev in batch:
                if hasattr(ev, "fragment"):
                    seen[ev.index] = seen.get(ev.index, "") + ev.fragment
                    if ev.index in final:
                        assert final[ev.index].startswith(seen[ev.index])

    prop()


def test_a_thousand_interleaved_streams_equal_the_same_streams_alone() -> None:
    rng = random.Random(20240611)
    families = sorted(FAMILIES)
    streams = []
    for n in range(1000):
        family = families[n % len(families)]
        text = _random_markup(rng, family)
        sizes = [rng.randint(1, 9) for _ in range(len(text) + 1)]
        streams.append((family, text, sizes))
    alone = []
    for family, text, sizes in streams:
        p = parser_for(family)
        out, pos = [], 0
        for size in sizes:
            if pos >= len(text):
                break
            out += p.feed(text[pos:pos + size])
            pos += size
        alone.append(out + p.close())
    parsers = [parser_for(family) for family, _, _ in streams]
    outs: list[list] = [[] for _ in streams]
    positions = [0] * len(streams)
    steps = [0] * len(streams)
    active = set(range(len(streams)))
    while active:
        for i in sorted(active):
            family, text, sizes = streams[i]
            if positions[i] >= len(text):
                outs[i] += parsers[i].close()
                active.discard(i)
                continue
            size = sizes[steps[i]]
            outs[i] += parsers[i].feed(text[positions[i]:positions[i] + size])
            positions[i] += size
            steps[i] += 1
    assert outs == alone
    assert all(consumed_text(o) == s[1] for o, s in zip(outs, streams, strict=True))


@dataclass(frozen=True)
class _Canned:
    """A call to render (``CallLike``)."""

    name: str
    values: dict[str, Any]

    @property
    def arguments(self) -> str:
        return json.dumps(self.values)


def _random_markup(rng: random.Random, family: str) -> str:
    """A stream built from canned calls of the family, text and the odd broken piece."""
    canned = {
        "dsml": ['\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="f">\n<｜DSML｜parameter '
                 'name="a" string="true">v<1</｜DSML｜parameter>\n</｜DSML｜invoke>\n'
                 '</｜DSML｜function_calls>', '<｜DSML｜ invoke name="g"/>',
                 '<｜DSML｜invoke name="h">{"k": [1, 2]}</｜DSML｜invoke>'],
        "deepseek-v3": ['<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n'
                        '{"a": 1}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>'],
        "deepseek-v31": ['<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{"a": "<"}'
                         '<｜tool▁call▁end｜><｜tool▁calls▁end｜>'],
        "hermes": ['\n<tool_call>\n{"name": "f", "arguments": {"a": "</tool_call>"}}\n</tool_call>'],
        "qwen3-coder": ['\n\n<tool_call>\n<function=f>\n<parameter=a>\nx < y\n</parameter>\n'
                        '</function>\n</tool_call>'],
        "kimi-k2": ['<|tool_calls_section_begin|><|tool_call_begin|>functions.f:3'
                    '<|tool_call_argument_begin|>{"a": "<|tool_call_end|>"}<|tool_call_end|>'
                    '<|tool_calls_section_end|>', '<|tool_call_begin|>g:0'
                    '<|tool_call_argument_begin|>{}<|tool_call_end|>'],
        "harmony": ['<|channel|>analysis<|message|>think<|end|>', '<|start|>assistant<|channel|>'
                    'commentary to=functions.f <|constrain|>json<|message|>{"a": 1}<|call|>',
                    '<|start|>assistant<|channel|>final<|message|>ok<|return|>'],
        "glm45": ['\n<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>x < y</arg_value>\n</tool_call>',
                  "<tool_call>g\n<arg_key>n</arg_key>\n<arg_value>[1, 2]</arg_value>\n</tool_call>"],
        "glm47": ["<tool_call>f<arg_key>a</arg_key><arg_value><arg_key></arg_value></tool_call>"],
        "minimax-m2": ['\n<minimax:tool_call>\n<invoke name="f">\n<parameter name="a">x < y'
                       '</parameter>\n</invoke>\n</minimax:tool_call>', '<invoke name="g">'],
        **PY_CANNED,
        # docs/design/markup.md classes F, G, H
        "seed-oss": ["<seed:think>q <seed:tool_call></seed:think>", "\n\n<seed:tool_call>\n"
                     "<function=f>\n<parameter=a>\nx < y\n</parameter>\n</function>\n"
                     "</seed:tool_call>"],
        "zaya": ["<zyphra_tool_call><function=f><parameter=a>1</parameter></function>"
                 "</zyphra_tool_call>"],
        "dots": ['<dots_function_call><invoke name="f"><parameter name="a">x < y</parameter>'
                 "</invoke></dots_function_call>"],
        "step3": ['<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke '
                  'name="f"><steptml:parameter name="a">x < y</steptml:parameter>'
                  "</steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜>"],
        "minicpm5": ["<function name='f'><param name=\"a\"><![CDATA[x</param>]]></param>"
                     "</function>", "<function=g>"],
        "gigachat35": ['\n\n<｜GCML｜tool_calls>\n<｜GCML｜invoke name="f">\n<｜GCML｜parameter '
                       'name="a" string="true">v<1</｜GCML｜parameter>\n</｜GCML｜invoke>\n'
                       "</｜GCML｜tool_calls>"],
        "iquest-q1": ["<iquest_tool_call>f<arg_key>a</arg_key><arg_value>[1]</arg_value>"
                      "</iquest_tool_call>"],
        "hunyuan": ["<tool_calls>\n<tool_call>f<tool_sep>\n<arg_key>a</arg_key>\n"
                    "<arg_value>x < y</arg_value>\n</tool_call>\n</tool_calls>"],
        "minimax-m3": ["]<]minimax[>[<tool_call>]<]minimax[>[<invoke name=\"f\">]<]minimax[>[<a>x < y"
                       "]<]minimax[>[</a>]<]minimax[>[</invoke>]<]minimax[>[</tool_call>"],
        "muse": ["<|start|>assistant to=self<|message|>t<|eom|>", "<|start|>assistant to=user"
                 '<|message|>a<atem:function_calls><atem:invoke name="f"><atem:parameter name="a">'
                 "x < y</atem:parameter></atem:invoke></atem:function_calls><|eom|>"],
        "kimi-k3": ["<|open|>think<|sep|>t<|close|>think<|sep|>", "<|open|>tools<|sep|><|open|>call "
                    'tool="f" index="1"<|sep|><|open|>argument key="a" type="string"<|sep|>x < y'
                    "<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>"],
        "k2-horizon": ["<ifm|think><ifm|tool_call></ifm|think>", "<ifm|tool_calls><ifm|tool_call>"
                       "f<ifm|arg_key>a</ifm|arg_key><ifm|arg_type>integer</ifm|arg_type>"
                       "<ifm|arg_value>1</ifm|arg_value></ifm|tool_call></ifm|tool_calls>"],
    }
    key = "dsml" if family.startswith("dsml") or family == "auto" else family
    # a family without canned pieces: what it renders, whole and with its closer misspelled
    own = canned.get(key) or [FAMILIES[family].render([_Canned("f", {"a": "x < y"})], broken)
                              for broken in (False, True)]
    pieces = [*own, "text ", "é🙂", "<", "\n", '<｜DSML｜bad>', "</parameter>"]
    return "".join(rng.choice(pieces) for _ in range(rng.randint(1, 8)))
