"""docs/design/markup.md class B (a JSON array of calls, or objects separated by ``;`` or newlines) as literal
tables: input → visible text, calls, error kinds, whole and in 1-, 2-, 3-, 7- and random-size
chunks (``support.toolcalls_tables.check_case``)."""

from __future__ import annotations

from typing import Any

import pytest

from sseguard.core.toolcalls import ToolCallEnd, ToolCallStart
from support.toolcalls import calls_of, run
from support.toolcalls_tables import check_case

Case = tuple[str, str, list[tuple[str, Any]], list[str]]

LLAMA3: list[Case] = [
    ('{"name": "get_weather", "parameters": {"city": "Paris"}}', "",
     [("get_weather", {"city": "Paris"})], []),
    ('<|python_tag|>{"name": "f", "parameters": {"a": 1}}; {"name": "g", "arguments": {}}<|eom_id|>',
     "", [("f", {"a": 1}), ("g", {})], []),
    # the tag anywhere; text before it and after the last object is visible
    ('Sure.<|python_tag|>{"name": "f", "parameters": {}} Done.', "Sure. Done.", [("f", {})], []),
    # without the tag, only where the answer starts: a "{" elsewhere is text
    ('Sure: {"name": "f", "parameters": {}}', 'Sure: {"name": "f", "parameters": {}}', [], []),
    ('  {"name": "f", "parameters": {"x": "}"}}  Done.', "  Done.", [("f", {"x": "}"})], []),
    ("{curly} braces", "{curly} braces", [], []),
    # claimed by its {" at answer start, then no call: bad_param_json, not text
    ('{"a": 1} after', " after", [], ["bad_param_json"]),
    ('{"name": "f", "parameters": "{\\"a\\": 1}"}', "", [], ["bad_param_json"]),
    ('{"name": "f", "parameters": {}};', ";", [("f", {})], []),
    ('{"name": "f", "parameters": {"a": 1}', "", [], ["unterminated"]),
    ('{"name": "f", "parameters": {"a": NaN}}', "", [], ["bad_param_json"]),
    ('{"name": "f", "parameters": {"a": 1, "a": 2}}', "", [], ["duplicate_parameter"]),
]

GRANITE: list[Case] = [
    ('<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}]', "",
     [("get_weather", {"city": "Paris"})], []),
    ('Let me check.<tool_call>[{"name": "f", "arguments": {"a": [1, 2]}}, '
     '{"name": "g", "arguments": {}}] Done.', "Let me check. Done.",
     [("f", {"a": [1, 2]}), ("g", {})], []),
    # not an array after the marker (Hermes' shape in a Granite stream): not this format, the
    # object read whole into the error, nothing of it visible (issue 50)
    ('<tool_call>{"name": "f", "arguments": {}} after', " after", [], ["malformed_tag"]),
    ('<|tool_call|>[{"name": "f", "arguments": {}}', "", [("f", {})], ["unterminated"]),
    ('<|tool_call|>[{"name": "f", "arguments": {}} junk] after', " after", [("f", {})],
     ["malformed_tag"]),
    ('<|tool_call|>[{"arguments": {"a": 1}, "name": "f"}]', "", [("f", {"a": 1})], []),
    ("x <|tool_ca", "x ", [], ["unterminated"]),
]

JAMBA: list[Case] = [
    ('Hi <tool_calls>[{"name": "f", "arguments": {"a": 1}}, {"name": "g", "arguments": {}}]'
     "</tool_calls> after", "Hi  after", [("f", {"a": 1}), ("g", {})], []),
    ("<tool_calls>[]</tool_calls>", "", [], []),
    ('<tool_calls>[{"name": "f", "arguments": "{\\"a\\": 1}"}]</tool_calls>', "", [],
     ["bad_param_json"]),
    ('<tool_calls>[{"name": "f", "arguments": {}} {"name": "g", "arguments": {}}]</tool_calls>x',
     "x", [("f", {})], ["malformed_tag"]),
    ('<tool_calls>[{"name": "f", "arguments": {}, "parameters": {}}]</tool_calls>', "", [],
     ["bad_param_json"]),
    ('<tool_calls>[1, {"arguments": {"a": 1}, "name": "f"}]</tool_calls>', "", [("f", {"a": 1})],
     ["bad_param_json"]),
    ('<tool_calls>[{"name": "f"}, {"name": 3, "arguments": {}}]</tool_calls>', "", [],
     ["bad_param_json", "bad_param_json"]),
    ('<tool_calls>[{"name": "f", "arguments": {}}]', "", [("f", {})], ["unterminated"]),
    ('<tool_calls>[{"name": "f", "arguments": {"a": "</tool_calls>"}}]</tool_calls>', "",
     [("f", {"a": "</tool_calls>"})], []),
    ("a</tool_calls>b", "ab", [], ["malformed_tag"]),
    # Hunyuan's <tool_calls><tool_call> is not Jamba's array
    ("<tool_calls><tool_call>f</tool_call></tool_calls>", "", [], ["malformed_tag"]),
]

HUNYUAN_A13B: list[Case] = [
    # vLLM's streaming path reads one nesting level only
    ('<tool_calls>[{"name": "f", "arguments": {"a": {"b": {"c": [1, {"d": "]}"}]}}}}]</tool_calls>'
     " after", " after", [("f", {"a": {"b": {"c": [1, {"d": "]}"}]}}})], []),
    # docs/design/markup.md §3.3: <answer>…</answer> belongs to the reasoning split; to the tool parser the
    # tags are visible text like any other, before and after a block (issue 50)
    ("<answer>\nIt is sunny.\n</answer>", "<answer>\nIt is sunny.\n</answer>", [], []),
    ('<tool_calls>[{"name": "f", "arguments": {}}]</tool_calls></answer>', "</answer>",
     [("f", {})], []),
    ('<answer>\nChecking.<tool_calls>[{"name": "f", "arguments": {"a": 1}}]</tool_calls>\nDone.'
     "</answer>", "<answer>\nChecking.\nDone.</answer>", [("f", {"a": 1})], []),
    # inside a JSON string the tags are string text
    ('<tool_calls>[{"name": "f", "arguments": {"a": "</answer>"}}]</tool_calls>', "",
     [("f", {"a": "</answer>"})], []),
    # inside the open block </answer> is junk where "," or "]" is due: the rest of the block void
    ('<tool_calls>[{"name": "f", "arguments": {}}</answer>ok</tool_calls>', "", [("f", {})],
     ["malformed_tag"]),
    ("<answer>Hi</ans", "<answer>Hi</ans", [], []),
]

MINIMAX_M1: list[Case] = [
    ('<tool_calls>\n{"name": "f", "arguments": {"a": 1}}\n{"name": "g", "arguments": {}}\n'
     "</tool_calls>", "", [("f", {"a": 1}), ("g", {})], []),
    ('<tool_calls>\n{"name": "f", "arguments": {}}\nnot json\n{"name": "g", "arguments": {}}\n'
     "</tool_calls>\nok", "\nok", [("f", {}), ("g", {})], ["malformed_tag"]),
    ('<tool_calls>\n{"name": "f", "arguments": {}}\n', "", [("f", {})], ["unterminated"]),
]

PHI4_MINI: list[Case] = [
    # vLLM's non-greedy pattern cuts the array at the first "]"
    ('functools[{"name": "f", "arguments": {"s": "a]b"}}]', "", [("f", {"s": "a]b"})], []),
    ("Use functools.reduce here.", "Use functools.reduce here.", [], []),
    ("import functools", "import functools", [], []),
    ('Sure. functools[{"name": "f", "arguments": {}}] Done.', "Sure.  Done.", [("f", {})], []),
]

XLAM: list[Case] = [
    ('[{"name": "f", "arguments": {"a": 1}}]', "", [("f", {"a": 1})], []),
    ('Here:\n```json\n[{"name": "f", "arguments": {}}]\n```\nDone.', "Here:\n\nDone.",
     [("f", {})], []),
    ("```python\nprint(1)\n```", "```python\nprint(1)\n```", [], []),
    ('[TOOL_CALLS][{"name": "f", "arguments": {}}]', "", [("f", {})], []),
    ('<tool_call>[{"name": "f", "arguments": {}}]</tool_call>', "", [("f", {})], []),
    ("[1] is a footnote", "[1] is a footnote", [], []),
    ('Text then [{"name": "f", "arguments": {}}]', 'Text then [{"name": "f", "arguments": {}}]',
     [], []),
    (" []", "", [], []),
]

APERTUS: list[Case] = [
    ('<|tools_prefix|>[{"get_weather": {"city": "Paris"}}]<|tools_suffix|>', "",
     [("get_weather", {"city": "Paris"})], []),
    ('A<|tools_prefix|>[{"f": {}, "g": {}}]<|tools_suffix|>B', "AB", [], ["bad_param_json"]),
    ('<|tools_prefix|>[{"f": "x"}]<|tools_suffix|>', "", [], ["bad_param_json"]),
]

COHERE: list[Case] = [
    ("<|START_RESPONSE|>Let me look.<|END_RESPONSE|><|START_ACTION|>[{\"tool_call_id\": \"0\", "
     '"tool_name": "f", "parameters": {"a": 1}}, {"tool_call_id": "1", "tool_name": "g", '
     '"parameters": {}}]<|END_ACTION|>', "Let me look.", [("f", {"a": 1}), ("g", {})], []),
    ('<|START_ACTION|>[{"tool_name": "f", "parameters": {}, "tool_call_id": "7"}]<|END_ACTION|>',
     "", [("f", {})], []),
    ('<|START_ACTION|>[{"tool_name": "f"}]<|END_ACTION|>', "", [], ["bad_param_json"]),
]

TABLES = {"llama3-json": LLAMA3, "granite": GRANITE, "jamba": JAMBA, "hunyuan-a13b": HUNYUAN_A13B,
          "minimax-m1": MINIMAX_M1, "phi4-mini": PHI4_MINI, "xlam": XLAM, "apertus": APERTUS,
          "cohere-command": COHERE}


@pytest.mark.parametrize("family,case", [(f, c) for f, cases in TABLES.items() for c in cases])
def test_markup3_examples_give_the_table_under_any_chunking(family: str, case: Case) -> None:
    check_case(family, *case)


def test_cohere_keeps_the_models_call_ids() -> None:
    events = run("cohere-command", COHERE[0][0]).events
    assert [(e.index, e.name, e.id) for e in events if isinstance(e, ToolCallStart)] == [
        (0, "f", "0"), (1, "g", "1")]
    assert [e.id for e in events if isinstance(e, ToolCallEnd)] == ["0", "1"]


def test_arguments_in_the_template_order_stream_before_the_element_closes() -> None:
    """The call is announced at its name, its arguments go out as they arrive (docs/design/markup.md,
    class B)."""
    from sseguard.core.toolcalls import ToolArgsDelta, parser_for
    p = parser_for("jamba")
    out = p.feed('<tool_calls>[{"name": "write", "arguments": {"content": "abc')
    assert out[-2:] == [ToolCallStart(0, "write"), ToolArgsDelta(0, '{"content": "abc')]
    assert p.feed("def") == [ToolArgsDelta(0, "def")]


def test_a_tool_not_offered_keeps_the_call_and_says_so() -> None:
    tools = [{"type": "function", "function": {"name": "g", "parameters": {"type": "object"}}}]
    check_case("jamba", '<tool_calls>[{"name": "f", "arguments": {}}]</tool_calls>', "",
               [("f", {})], ["undefined_function"], tools=tools)


@pytest.mark.parametrize("text,detected", [
    ('<tool_call>[{"name": "f", "arguments": {}}]', "granite"),
    ('<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>', "hermes"),
    ("<tool_call>f\n</tool_call>", "glm45"),
    ("<tool_call>\n<function=f>\n</function>\n</tool_call>", "qwen3-coder"),
    ('<tool_calls>[{"name": "f", "arguments": {}}]</tool_calls>', "jamba"),
    ('<tool_calls>\n{"name": "f", "arguments": {}}\n</tool_calls>', "minimax-m1"),
    ('<function_call> {"name": "f", "arguments": {}}', "granite-20b-fc"),
    ('<|tool_call|>[{"name": "f", "arguments": {}}]', "granite"),
    ('<|python_tag|>{"name": "f", "parameters": {}}', "llama3-json"),
    ('functools[{"name": "f", "arguments": {}}]', "phi4-mini"),
    ('function call<|role_sep|>\n{"name": "f", "arguments": {}}', "gigachat3"),
])
def test_auto_resolves_shared_markers_by_what_follows_whole_and_char_by_char(
        text: str, detected: str) -> None:
    """Decision 3.3: a marker that starts another family's is decided by what follows,
    never by the chunking."""
    whole = run("auto", "Text. " + text)
    assert whole.detected == detected
    assert calls_of(whole.events) == [("f", {})]
    single = run("auto", "Text. " + text, size=1)
    assert single.detected == detected and single.joined == whole.joined
