"""The values chaos puts in a healthy tool call satisfy the schema's bounds, exclusive ones included:
opencode's ``bash`` tool declares ``timeout`` as zod's ``positive()`` (``exclusiveMinimum: 0`` beside
``minimum: -9007199254740991``), and a negative value there made a healthy stream fail the proxy's
``tool_args_schema_mismatch`` check."""

from __future__ import annotations

import random
from typing import Any

import jsonschema
from hypothesis import given
from hypothesis import strategies as st

from sseguard.chaos.generate import schema_value

SAFE = 9007199254740991
ZOD_POSITIVE_INT: dict[str, Any] = {"type": "integer", "minimum": -SAFE, "exclusiveMinimum": 0,
                                    "maximum": SAFE}


@given(st.integers(0, 2**32))
def test_an_exclusive_minimum_is_respected(seed: int) -> None:
    value = schema_value(random.Random(seed), ZOD_POSITIVE_INT, 0)
    assert type(value) is int and 0 < value <= SAFE


@given(st.integers(0, 2**32))
def test_exclusive_bounds_of_a_number_are_respected(seed: int) -> None:
    value = schema_value(random.Random(seed), {"type": "number", "exclusiveMinimum": 0,
                                               "exclusiveMaximum": 1}, 0)
    assert 0 < value < 1


@given(st.integers(0, 2**32))
def test_an_exclusive_maximum_alone_gives_a_value_below_it(seed: int) -> None:
    value = schema_value(random.Random(seed), {"type": "integer", "exclusiveMaximum": 0}, 0)
    assert type(value) is int and value < 0


@given(st.integers(0, 2**32))
def test_inclusive_bounds_still_hold(seed: int) -> None:
    value = schema_value(random.Random(seed), {"type": "integer", "minimum": 3, "maximum": 5}, 0)
    assert value in (3, 4, 5)
    number = schema_value(random.Random(seed), {"type": "number", "minimum": 10, "maximum": 11}, 0)
    assert 10 <= number <= 11


#: Codex CLI 0.171's ``request_user_input`` parameters, as it sends them (required kept, texts cut).
REQUEST_USER_INPUT: dict[str, Any] = {
    "type": "object", "required": ["questions"], "additionalProperties": False,
    "properties": {"questions": {"type": "array", "items": {
        "type": "object", "required": ["id", "header", "question", "options"],
        "additionalProperties": False,
        "properties": {
            "id": {"type": "string"}, "header": {"type": "string"},
            "question": {"type": "string"},
            "options": {"type": "array", "items": {
                "type": "object", "required": ["label", "description"],
                "additionalProperties": False,
                "properties": {"label": {"type": "string"},
                               "description": {"type": "string"}}}}}}}}}


@given(st.integers(0, 2**32))
def test_a_deeply_nested_tool_schema_gets_every_required_property(seed: int) -> None:
    value = schema_value(random.Random(seed), REQUEST_USER_INPUT, 0)
    jsonschema.validate(value, REQUEST_USER_INPUT)
