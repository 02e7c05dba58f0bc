"""docs/design/markup.md class A′ (an opener, one call object, no closer: ``granite-20b-fc``, ``gigachat3``)
as literal tables, whole and in 1-, 2-, 3-, 7- and random-size chunks."""

from __future__ import annotations

from typing import Any

import pytest

from support.toolcalls_tables import check_case

Case = tuple[str, str, list[tuple[str, Any]], list[str]]

GRANITE_20B_FC: list[Case] = [
    ('Sure.\n<function_call> {"name": "f", "arguments": {"a": 1}}\n<function_call> '
     '{"name": "g", "arguments": {}}', "Sure.\n", [("f", {"a": 1}), ("g", {})], []),
    ('<function_call> {"name": "f", "arguments": {}} and then text', " and then text",
     [("f", {})], []),
    ('<function_call> {"name": "f", "arguments": {"a": ', "", [], ["unterminated"]),
    ("<function_call> not json", "not json", [], ["malformed_tag"]),
    ('<function_call> {"arguments": {"s": "}{"}, "name": "f"}', "", [("f", {"s": "}{"})], []),
    ('<function_call> {"name": "f", "arguments": [1]}', "", [], ["bad_param_json"]),
]

GIGACHAT3: list[Case] = [
    ('function call<|role_sep|>\n{"name": "f", "arguments": {"a": 1}}', "", [("f", {"a": 1})], []),
    ('Sure.<|function_call|>{"name": "f", "arguments": {}}</s>', "Sure.", [("f", {})], []),
    ("I call a function call now.", "I call a function call now.", [], []),
    ("Answer.<|message_sep|>", "Answer.", [], []),
    ('<|function_call|>{"name": "f", "arguments": {"s": "\\u0007"}}', "", [("f", {"s": "\x07"})],
     []),
    # strict JSON: a raw control character in a string is not (SGLang parses with strict=False)
    ('<|function_call|>{"name": "f", "arguments": {"s": "a\x07"}}', "", [], ["bad_param_json"]),
]

TABLES = {"granite-20b-fc": GRANITE_20B_FC, "gigachat3": GIGACHAT3}


@pytest.mark.parametrize("family,case", [(f, c) for f, cases in TABLES.items() for c in cases])
def test_markup3_examples_give_the_table_under_any_chunking(family: str, case: Case) -> None:
    check_case(family, *case)
