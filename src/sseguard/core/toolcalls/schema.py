"""What the offered tools say to a parser: names, and the types each parameter's schema allows.

``ToolSpec`` reduces an OpenAI ``tools`` list to what the families need; ``ValueTyping`` turns an
untagged parameter value into JSON as its declared types say (docs/design/markup.md decision 2.5).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from sseguard.core.errors import UsageError
from sseguard.core.toolcalls.events import MarkupErrorKind
from sseguard.core.toolcalls.grammars.strict_json import ASCII_WS, JSONProblem, json_string_body, strict_json

#: JSON Schema's type names; anything else in a schema's ``type`` says nothing a parser can use.
JSON_TYPES = frozenset({"string", "integer", "number", "boolean", "object", "array", "null"})
_JSON_VALUE_TYPES = frozenset({"integer", "number", "boolean", "object", "array"})


def type_of(value: Any) -> str:
    """The JSON Schema type name of a decoded JSON value (an integral float is a number)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


class _Unresolved(Exception):
    """A ``$ref`` that loops or points nowhere: the parameter is untyped."""


def declared_types(schema: Any, root: Any = None) -> frozenset[str]:
    """The types a parameter's schema allows (decision 2.5): its ``type`` (a name or a list),
    the types of its ``enum`` values, and those of its ``anyOf``/``oneOf`` members. Empty: untyped.

    A local ``$ref`` (``#/$defs/…``, ``#/definitions/…``, any JSON pointer into ``root``, the tool's
    ``parameters`` schema, where Pydantic and zod put them) is followed. A reference that loops back
    to one being followed, or that points nowhere (or outside the document), leaves the parameter
    untyped — the untyped rule is what a schema that says nothing usable gets — never an exception.
    """
    try:
        return _types(schema, root, ())
    except _Unresolved:
        return frozenset()


#: How deep a schema's references and ``anyOf``/``oneOf`` members are followed; deeper is untyped.
MAX_SCHEMA_DEPTH = 64


def _types(schema: Any, root: Any, following: tuple[str, ...], depth: int = 0) -> frozenset[str]:
    if not isinstance(schema, dict):
        return frozenset()
    if depth > MAX_SCHEMA_DEPTH:
        raise _Unresolved("too deep")
    found: set[str] = set()
    ref = schema.get("$ref")
    if isinstance(ref, str):
        if ref in following:
            raise _Unresolved(ref)
        found |= _types(_resolve(root, ref), root, (*following, ref), depth + 1)
    declared = schema.get("type")
    for name in declared if isinstance(declared, list) else [declared]:
        if name in JSON_TYPES:
            found.add(name)
    enum = schema.get("enum")
    if isinstance(enum, list):
        found.update(type_of(value) for value in enum)
    for key in ("anyOf", "oneOf"):
        members = schema.get(key)
        if isinstance(members, list):
            for member in members:
                found |= _types(member, root, following, depth + 1)
    return frozenset(found)


def _resolve(root: Any, ref: str) -> Any:
    """The schema a local reference (a JSON pointer after ``#``, RFC 6901) names in ``root``."""
    if not ref.startswith("#") or root is None:
        raise _Unresolved(ref)  # another document: nothing here says what it holds
    node = root
    pointer = ref[1:]
    if pointer and not pointer.startswith("/"):
        raise _Unresolved(ref)  # a plain-name fragment ("#foo", an $anchor): not followed
    for token in pointer.split("/")[1:]:
        key = unquote(token).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            raise _Unresolved(ref)
    return node


def type_allows(types: frozenset[str], value: Any) -> bool:
    """Whether a decoded JSON value has one of ``types`` (``number`` takes integers too)."""
    kind = type_of(value)
    return kind in types or (kind == "integer" and "number" in types)


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """The offered tools, reduced to what parsers need: the names and the types each parameter's
    schema allows (``declared_types``; empty when the schema says nothing usable)."""

    names: frozenset[str]
    param_types: dict[str, dict[str, frozenset[str]]] = field(default_factory=dict)

    @classmethod
    def from_openai(cls, tools: list[dict[str, Any]] | None) -> ToolSpec | None:
        """Read an OpenAI ``tools`` list; a list that is not one is the caller's error."""
        if tools is None:
            return None
        if not isinstance(tools, list):
            raise UsageError("tools must be a list of OpenAI tool objects")
        names: set[str] = set()
        types: dict[str, dict[str, frozenset[str]]] = {}
        for tool in tools:
            fn = tool.get("function") if isinstance(tool, dict) else None
            name = fn.get("name") if isinstance(fn, dict) else None
            if not isinstance(name, str):
                raise UsageError("each tool needs function.name (OpenAI tools format)")
            assert isinstance(fn, dict)
            names.add(name)
            params = fn.get("parameters")
            props = params.get("properties") if isinstance(params, dict) else None
            types[name] = {}
            if isinstance(props, dict):
                for pname, schema in props.items():
                    types[name][pname] = declared_types(schema, params)
        return cls(frozenset(names), types)

    def types_of(self, function: str, param: str) -> frozenset[str]:
        """The types the schema allows for one parameter; empty when untyped or unknown."""
        return self.param_types.get(function, {}).get(param, frozenset())

    def json_typed(self, function: str, param: str) -> bool:
        """True when the schema says the value is JSON (integer, number, boolean, object, array)."""
        kinds = self.types_of(function, param) - {"null"}
        return bool(kinds) and kinds <= _JSON_VALUE_TYPES


@dataclass(frozen=True, slots=True)
class ValueTyping:
    """How one untagged parameter value becomes JSON (decision 2.5).

    ``accept``: the types a strictly parsed (trimmed) value may have to be taken as JSON; ``raw``:
    whether the raw text, byte-exact, is the fallback string (else a failure is ``bad_param_json``);
    ``null_literal``: a value that is exactly ``null`` is null whatever the types (MiniMax).
    """

    accept: frozenset[str]
    raw: bool
    null_literal: bool = False

    @classmethod
    def of(cls, types: frozenset[str], untyped: ValueTyping, null_literal: bool) -> ValueTyping:
        """The typing for a parameter with declared ``types`` (``untyped`` when there are none)."""
        if not types:
            return untyped
        if "string" not in types:
            return cls(types, False, null_literal)
        return cls(types - {"string"}, True, null_literal)

    @property
    def plain_string(self) -> bool:
        """True when the value is surely the raw string: it can stream as it arrives."""
        return self.raw and not self.accept and not self.null_literal

    def may_be_json(self, first: str) -> bool:
        """Whether a value whose first non-blank character is ``first`` could be taken as JSON."""
        if self.null_literal and first == "n":
            return True
        return any(first in _JSON_STARTS[t] for t in self.accept)

    def encode(self, raw: str) -> str:
        """The value's JSON text; ``JSONProblem`` when it is not of an accepted type and no string
        may stand in for it."""
        if self.null_literal and raw == "null":
            return raw
        if self.accept:
            text = raw.strip(ASCII_WS)
            try:
                if type_allows(self.accept, strict_json(text)):
                    return text
            except JSONProblem:
                pass
        if not self.raw:
            raise JSONProblem(MarkupErrorKind.BAD_PARAM_JSON)
        return f'"{json_string_body(raw)}"'


#: The characters a JSON value of each type can start with.
_JSON_STARTS = {"string": '"', "integer": "-0123456789", "number": "-0123456789",
                "boolean": "tf", "null": "n", "object": "{", "array": "["}

#: Any JSON value is accepted (the untyped GLM rule, and DSML's ``string="false"``).
ANY_JSON = frozenset(JSON_TYPES)
STRICT_JSON = ValueTyping(ANY_JSON, False)
