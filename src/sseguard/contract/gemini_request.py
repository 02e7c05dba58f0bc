"""Gemini requests as the checker reads them: the function declarations a request offers, and
their parameter schemas as JSON Schema.

Gemini declares tools as ``tools[].functionDeclarations[]``, each with ``parametersJsonSchema`` (JSON
Schema as it is) or ``parameters`` in Gemini's OpenAPI subset (``"type": "OBJECT"``, ``nullable``),
which ``jsonschema`` cannot read as it is.
"""

from __future__ import annotations

from typing import Any

__all__ = ["function_declarations", "json_schema"]


def function_declarations(tools: Any) -> list[dict[str, Any]] | None:
    """The function declarations of a request's ``tools`` (None when it offered no tools at all)."""
    if not isinstance(tools, list):
        return None
    out: list[dict[str, Any]] = []
    for tool in tools:
        if isinstance(tool, dict):
            decls = tool.get("functionDeclarations", tool.get("function_declarations"))
            if isinstance(decls, list):
                out.extend(d for d in decls if isinstance(d, dict))
    return out


def json_schema(schema: Any) -> Any:
    """Gemini's OpenAPI-subset ``Schema`` as JSON Schema: ``"OBJECT"`` → ``"object"``, ``nullable``
    → a ``"null"`` type. Everything else is spelt alike."""
    if isinstance(schema, list):
        return [json_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type" and isinstance(value, str):
            if value.upper() != "TYPE_UNSPECIFIED":
                out["type"] = value.lower()
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: json_schema(sub) for name, sub in value.items()}
        elif key in ("items", "anyOf"):
            out[key] = json_schema(value)
        elif key != "nullable":
            out[key] = value
    if schema.get("nullable") is True and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out
