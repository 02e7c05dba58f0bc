"""docs/design/markup.md class A (one JSON call object between an opener and a closer: ``internlm``,
``longcat``, ``ernie45``, ``inkling``) as literal tables, whole and in 1-, 2-, 3-, 7- and
random-size chunks."""

from __future__ import annotations

from typing import Any

import pytest

from support.toolcalls_tables import check_case

Case = tuple[str, str, list[tuple[str, Any]], list[str]]

INTERNLM: list[Case] = [
    ('Checking.<|action_start|><|plugin|>\n{"name": "get_weather", "parameters": '
     '{"city": "Paris"}}<|action_end|>', "Checking.", [("get_weather", {"city": "Paris"})], []),
    # SGLang writes a space between the two tokens, vLLM none; several calls are allowed
    ('<|action_start|> <|plugin|>\n{"name": "f", "parameters": {}}<|action_end|>'
     '<|action_start|><|plugin|>{"name": "g", "arguments": {"a": 1}}<|action_end|>', "",
     [("f", {}), ("g", {"a": 1})], []),
    # the code interpreter's block is no call: its text stays visible
    ("<|action_start|><|interpreter|>\nprint(1)<|action_end|>",
     "<|action_start|><|interpreter|>\nprint(1)<|action_end|>", [], []),
    ('<|action_start|><|plugin|>{"name": "f", "parameters": {}}', "", [], ["unterminated"]),
    ('<|action_start|><|plugin|>{"name": "f", "parameters": {}, "arguments": {}}<|action_end|>',
     "", [], ["bad_param_json"]),
]

LONGCAT: list[Case] = [
    ('<longcat_tool_call>{"name": "f", "arguments": {"a": "</longcat_tool_call>"}}'
     "</longcat_tool_call>", "", [("f", {"a": "</longcat_tool_call>"})], []),
    ('Hi<longcat_tool_call>{"name": "f", "arguments": {}}', "Hi", [], ["unterminated"]),
]

ERNIE45: list[Case] = [
    # vLLM's non-greedy \\{.*?\\} cuts nested arguments; the text after the call is kept
    ('Let me check.\n<tool_call>\n{"name": "f", "arguments": {"a": {"b": 1}}}\n</tool_call>\nmore',
     "Let me check.\nmore", [("f", {"a": {"b": 1}})], []),
    ('<tool_call>\n{"name": "f", "arguments": {"a": "}"}}\n</tool_call>', "", [("f", {"a": "}"})],
     []),
    # docs/design/markup.md §3.3: <response>…</response> is the answer's framing: the tags go, the text stays
    ("<response>\nIt is sunny.\n</response>", "\nIt is sunny.\n", [], []),
    ('<response>\nLet me check.\n<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>\n'
     "</response>", "\nLet me check.\n", [("f", {"a": 1})], []),
    # the template's separator goes with a call only; before </response> the newline is text
    ("<response>Hi\n</response>after", "Hi\nafter", [], []),
    # inside a call's JSON string the tags are string text
    ('<tool_call>{"name": "f", "arguments": {"a": "<response>x</response>"}}</tool_call>', "",
     [("f", {"a": "<response>x</response>"})], []),
    # outside a string they are junk in the call: the call is void, never text
    ('<tool_call>{"name": "f", "arguments": {}}<response></tool_call>ok', "ok", [],
     ["bad_param_json"]),
    # a framing tag cut off at the end of the stream is a cut marker (decision 3.3)
    ("<response>Hi</resp", "Hi", [], ["unterminated"]),
]

INKLING: list[Case | tuple[str, str, list[tuple[str, Any]], list[str], str]] = [
    ("<|message_model|><|content_thinking|>Need weather.<|end_message|><|message_model|>"
     "<|content_text|>Checking.<|end_message|><|message_model|><|content_invoke_tool_json|>"
     '{"name": "f", "args": {"a": 1}}<|end_message|>', "Checking.", [("f", {"a": 1})], [],
     "Need weather."),
    ('<|message_model|><|content_invoke_tool_json|>{"name": "f", "arguments": {}}'
     "<|content_model_end_sampling|>", "", [("f", {})], []),
    ('<|message_model|><|content_invoke_tool_json|>{"name": "f", "args": {"a": ', "", [],
     ["unterminated"]),
]

TABLES = {"internlm": INTERNLM, "longcat": LONGCAT, "ernie45": ERNIE45, "inkling": INKLING}


@pytest.mark.parametrize("family,case", [(f, c) for f, cases in TABLES.items() for c in cases])
def test_markup3_examples_give_the_table_under_any_chunking(family: str, case: tuple[Any, ...],
                                                           ) -> None:
    check_case(family, *case)


def test_inkling_thinking_messages_are_reasoning() -> None:
    check_case("inkling", "<|message_model|><|content_thinking|>hmm<|end_message|>ok", "ok", [], [],
               reasoning="hmm")
