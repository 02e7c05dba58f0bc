"""Decision 2.11 for Mistral's and Gemma's families (docs/design/markup.md §3): what a call leaves in
content when the server strips the family's special tokens is a ``markup_leak`` wherever the deltas
split it — Gemma's ``call:NAME{`` anywhere, Mistral's ``NAME{"k": …`` and `` [{"name": …`` only
where the answer starts (elsewhere a name glued to a JSON object is ordinary code)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sseguard.core.contract import StreamChecker
from sseguard.core.verdict import Finding, FindingKind
from support.streams import text_stream

# (markup, content, the leaked text reported, where it starts)
STRIPPED = [
    # Mistral v11+: [TOOL_CALLS]get_weather[ARGS]{"city": "Paris"} with both control tokens stripped
    ("mistral", 'get_weather{"city": "Paris"}', 'get_weather{"city":', 0),
    ("mistral", 'get_weather{"city": "Paris"}get_time{"tz": "UTC"}', 'get_weather{"city":', 0),
    ("mistral", "get_time{}", "get_time{}", 0),
    # pre-v11: [TOOL_CALLS] [{"name": …}] with the token stripped (its space stays)
    ("mistral", ' [{"name": "get_weather", "arguments": {"city": "Paris"}}]', '[{"name":', 1),
    # Gemma 4: <|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|>, all three stripped
    ("gemma4", "Let me check. call:get_weather{city:Paris}", "call:get_weather{", 14),
    # FunctionGemma: <start_function_call>call:…{location:<escape>Paris<escape>}<end_function_call>
    ("functiongemma", "call:get_current_weather{location:Paris}",
     "call:get_current_weather{", 0),
    ("all", 'fs.read-file{"path": "a"}', 'fs.read-file{"path":', 0),
    ("all", "I will look.\ncall:web.search{q:sseguard}", "call:web.search{", 13),
]


def _leaks(deltas: list[str], markup: str) -> list[Finding]:
    checker = StreamChecker(markup=markup)
    checker.feed(text_stream(deltas))
    return [f for f in checker.close().findings if f.kind is FindingKind.MARKUP_LEAK]


@pytest.mark.parametrize("markup,content,leaked,at", STRIPPED)
def test_a_stripped_call_is_one_leak_whole_and_by_characters(markup: str, content: str,
                                                             leaked: str, at: int) -> None:
    for deltas in ([content], list(content), [content[i:i + 3] for i in range(0, len(content), 3)]):
        (leak,) = _leaks(deltas, markup)
        assert leak.detail == f"{leaked!r} in content of choice 0 at {at}"


@settings(max_examples=60, deadline=None)
@given(case=st.sampled_from(STRIPPED), cuts=st.lists(st.integers(0, 80), max_size=8))
def test_a_stripped_call_is_a_leak_wherever_the_deltas_split_it(
        case: tuple[str, str, str, int], cuts: list[int]) -> None:
    markup, content, leaked, at = case
    bounds = sorted({min(c, len(content)) for c in cuts} | {0, len(content)})
    (leak,) = _leaks([content[a:b] for a, b in itertools.pairwise(bounds)], markup)
    assert leak.detail == f"{leaked!r} in content of choice 0 at {at}"


@pytest.mark.parametrize("content", [
    'Hello there, get_weather{"city": "Paris"}',  # Mistral's shape after text: code, not a call
    'm := map[string]int{"a": 1}',                # Go's composite literal
    'map[string]int{"a": 1}',                     # even where the answer starts: "[" breaks the name
    'Person{"Bob", 3}',                           # no key
    'get weather{"a": 1}',                        # a blank before the brace
    "recall:x{",                                  # call: inside a word
    "call: get_weather{",                         # a blank after call:
    "You can call:\n- get_weather",
    '[{"id": 1}]',                                # an array of objects that are no calls
])
def test_text_that_only_looks_like_a_stripped_call_is_no_leak(content: str) -> None:
    assert _leaks([content], "all") == []
    assert _leaks(list(content), "all") == []


def test_the_shapes_are_looked_for_only_for_their_families() -> None:
    assert _leaks(['get_weather{"city": "Paris"}'], "hermes") == []
    assert _leaks(["call:get_weather{city:Paris}"], "mistral") == []
    assert len(_leaks(["call:get_weather{city:Paris}"], "gemma4")) == 1
    assert len(_leaks(['get_weather{"city": "Paris"}'], "mistral")) == 1


def test_an_answer_that_starts_with_prose_is_not_kept_whole() -> None:
    """The start is kept only while it may still be a stripped call: a blank ends that, so prose
    goes through the common path after its first word."""
    checker = StreamChecker(markup="mistral")
    scanner = checker._leaks
    for word in ["Hello", " there", ", how", " are", " you"]:
        scanner.scan(0, "content", word)
    assert scanner._state[(0, "content")][0] == ""
