"""Reading the offered tools' schemas into the types a parameter allows (docs/design/markup.md decision 2.5),
and turning an untagged value into JSON by them — the rules GLM and MiniMax-M2 values follow."""

from __future__ import annotations

from typing import Any

import pytest

from sseguard.core.toolcalls import MarkupError, ToolCallEnd, parser_for
from sseguard.core.toolcalls.grammars.strict_json import JSONProblem
from sseguard.core.toolcalls.schema import ToolSpec, ValueTyping, declared_types


@pytest.mark.parametrize("schema,types", [
    ({"type": "string"}, {"string"}),
    ({"type": ["integer", "null"]}, {"integer", "null"}),
    ({"enum": ["a", 1, 2.5, None, True]}, {"string", "integer", "number", "null", "boolean"}),
    ({"anyOf": [{"type": "string"}, {"oneOf": [{"type": "array"}, {"enum": [{}]}]}]},
     {"string", "array", "object"}),
    ({"type": "string", "enum": [1]}, {"string", "integer"}),
    ({"type": "datetime"}, set()), ({"description": "no type"}, set()), ("string", set()),
    (None, set()),
])
def test_declared_types_come_from_type_enum_any_of_and_one_of(schema: Any,
                                                              types: set[str]) -> None:
    assert declared_types(schema) == types


def test_tool_spec_keeps_each_parameters_types_and_qwen_json_typing_follows_them() -> None:
    spec = ToolSpec.from_openai([{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"n": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                                         "s": {"enum": ["x", "y"]}, "m": {"type": ["string", "integer"]}}}}}])
    assert spec is not None
    assert spec.types_of("f", "n") == {"integer", "null"}
    assert spec.types_of("f", "zzz") == spec.types_of("g", "n") == frozenset()
    assert spec.json_typed("f", "n") and not spec.json_typed("f", "s")
    assert not spec.json_typed("f", "m")


GLM_UNTYPED = ValueTyping(frozenset({"string", "integer", "number", "boolean", "null", "object",
                                     "array"}), True)
MINIMAX_UNTYPED = ValueTyping(frozenset(), True, null_literal=True)


@pytest.mark.parametrize("types,raw,json_text", [
    ({"string"}, " 12 ", '" 12 "'),
    ({"integer"}, " 12\n", "12"),
    ({"number"}, "12", "12"),
    ({"number"}, "1e3", "1e3"),
    ({"integer", "null"}, "null", "null"),
    ({"string", "integer"}, "12", "12"),
    ({"string", "integer"}, "12 apples", '"12 apples"'),
    ({"string", "null"}, " null ", "null"),
    ({"string", "boolean"}, "True", '"True"'),
])
def test_glm_typing(types: set[str], raw: str, json_text: str) -> None:
    assert ValueTyping.of(frozenset(types), GLM_UNTYPED, False).encode(raw) == json_text


@pytest.mark.parametrize("types,raw", [({"integer"}, "1.5"), ({"integer"}, "true"),
                                       ({"boolean"}, "True"), ({"object"}, "[]"),
                                       ({"integer"}, "null"), ({"number"}, "Infinity")])
def test_glm_typing_failures_are_bad_param_json(types: set[str], raw: str) -> None:
    with pytest.raises(JSONProblem) as problem:
        ValueTyping.of(frozenset(types), GLM_UNTYPED, False).encode(raw)
    assert problem.value.kind == "bad_param_json"


@pytest.mark.parametrize("typing,raw,json_text", [
    (GLM_UNTYPED, ' {"a": 1} ', '{"a": 1}'), (GLM_UNTYPED, '"q"', '"q"'),
    (GLM_UNTYPED, "Paris", '"Paris"'), (GLM_UNTYPED, '{"a": 1, "a": 2}', '"{\\"a\\": 1, \\"a\\": 2}"'),
    (MINIMAX_UNTYPED, "12", '"12"'), (MINIMAX_UNTYPED, "null", "null"),
    (MINIMAX_UNTYPED, "null ", '"null "'), (MINIMAX_UNTYPED, "None", '"None"'),
])
def test_untyped_values(typing: ValueTyping, raw: str, json_text: str) -> None:
    assert typing.encode(raw) == json_text


def test_minimax_exact_null_is_null_even_where_null_is_not_declared() -> None:
    typing = ValueTyping.of(frozenset({"integer"}), MINIMAX_UNTYPED, True)
    assert typing.encode("null") == "null"
    with pytest.raises(JSONProblem):
        typing.encode(" null ")


REF_TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {
    "type": "object",
    "$defs": {"Code": {"type": "string"}, "Point": {"type": "object"},
              "Alias": {"$ref": "#/$defs/Code"},
              "Loop": {"$ref": "#/$defs/Loop2"}, "Loop2": {"anyOf": [{"$ref": "#/$defs/Loop"}]},
              "a/b": {"type": "integer"}},
    "definitions": {"Flag": {"type": "boolean"}},
    "properties": {"code": {"$ref": "#/$defs/Code"}, "point": {"$ref": "#/$defs/Point"},
                   "alias": {"$ref": "#/$defs/Alias"}, "flag": {"$ref": "#/definitions/Flag"},
                   "slash": {"$ref": "#/$defs/a~1b"}, "loop": {"$ref": "#/$defs/Loop"},
                   "missing": {"$ref": "#/$defs/Nope"}, "remote": {"$ref": "other.json#/x"},
                   "anchor": {"$ref": "#here"}, "bad": {"$ref": 3},
                   "either": {"anyOf": [{"$ref": "#/$defs/Code"}, {"type": "null"}]}}}}}]


def test_local_refs_are_followed_and_loops_or_missing_targets_are_untyped() -> None:
    spec = ToolSpec.from_openai(REF_TOOLS)
    assert spec is not None
    assert spec.types_of("f", "code") == {"string"}
    assert spec.types_of("f", "point") == {"object"}
    assert spec.types_of("f", "alias") == {"string"}
    assert spec.types_of("f", "flag") == {"boolean"}
    assert spec.types_of("f", "slash") == {"integer"}
    assert spec.types_of("f", "either") == {"string", "null"}
    for untyped in ("loop", "missing", "remote", "anchor", "bad"):
        assert spec.types_of("f", untyped) == frozenset(), untyped


def test_a_chain_of_refs_deeper_than_the_cap_is_untyped_not_an_error() -> None:
    defs = {f"D{i}": {"$ref": f"#/$defs/D{i + 1}"} for i in range(5000)}
    defs["D5000"] = {"type": "string"}
    params = {"$defs": defs, "properties": {"x": {"$ref": "#/$defs/D0"}}}
    spec = ToolSpec.from_openai([{"type": "function", "function": {"name": "f",
                                                                   "parameters": params}}])
    assert spec is not None
    assert spec.types_of("f", "x") == frozenset()


def _args(family: str, text: str) -> list[str]:
    parser = parser_for(family, REF_TOOLS)
    events = parser.feed(text) + parser.close()
    assert not [ev for ev in events if isinstance(ev, MarkupError)]
    return [ev.arguments for ev in events if isinstance(ev, ToolCallEnd)]


def test_k2_horizon_keeps_a_value_whose_referenced_type_is_string_as_the_raw_string() -> None:
    # issue 50: main typed "123" by the untyped GLM rule (123, a number)
    text = ("<ifm|tool_calls><ifm|tool_call>f<ifm|arg_key>code</ifm|arg_key><ifm|arg_value>123"
            "</ifm|arg_value><ifm|arg_key>loop</ifm|arg_key><ifm|arg_value>5</ifm|arg_value>"
            "</ifm|tool_call></ifm|tool_calls>")
    assert _args("k2-horizon", text) == ['{"code": "123", "loop": 5}']


def test_dots_parses_a_value_whose_referenced_type_is_object_as_json() -> None:
    # issue 50: main kept it as the raw string (MiniMax's untyped rule)
    text = ('<dots_function_call><invoke name="f"><parameter name="point">{"x": 1}</parameter>'
            '<parameter name="missing">{"x": 1}</parameter></invoke></dots_function_call>')
    assert _args("dots", text) == ['{"point": {"x": 1}, "missing": "{\\"x\\": 1}"}']
