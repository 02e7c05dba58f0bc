"""Gemini requests: how the probe writes them (``GeminiFormat``), the function declarations a
request offers and their parameter schemas as JSON Schema (what the checker reads), and the error
bodies of Google's APIs.

Gemini declares tools as ``tools[].functionDeclarations[]``, each with ``parametersJsonSchema`` (JSON
Schema as it is) or ``parameters`` in Gemini's OpenAPI subset (``"type": "OBJECT"``, ``nullable``),
which ``jsonschema`` cannot read as it is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sseguard.contract.request import Answer, Call, Format, Settings, Tool, Turn, json_arguments
from sseguard.errors import ConfigError
from sseguard.verdict import Api

__all__ = ["STATUSES", "GeminiFormat", "error_body", "function_declarations", "json_schema",
           "status_error", "thinking_budget"]


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


#: Reasoning effort → Gemini ``thinkingBudget`` (tokens); a number is taken as the budget itself.
THINKING_BUDGETS = {"none": 0, "minimal": 512, "low": 1024, "medium": 8192, "high": 24576}


def thinking_budget(effort: str) -> int:
    """The Gemini thinking budget for a reasoning effort (``low``…``high``, or a token count)."""
    if effort.isdigit():
        return int(effort)
    try:
        return THINKING_BUDGETS[effort]
    except KeyError:
        raise ConfigError(f"reasoning-effort {effort!r} for a gemini arm: give "
                          f"{', '.join(THINKING_BUDGETS)} or a thinking budget in tokens") from None


def _args_object(arguments: str) -> Any:
    """Gemini carries a call's arguments as an object; unparsable ones are kept as a string field."""
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return {"arguments": arguments}
    return value if isinstance(value, dict) else {"value": value}


class GeminiFormat(Format):
    """Gemini ``generateContent``: ``contents`` of ``user``/``model`` turns made of parts, the system
    prompt as ``systemInstruction``, tools as ``functionDeclarations``, a call's result as a
    ``functionResponse`` part of a user turn; settings under ``generationConfig``. The model is in the
    path and the path chooses streaming, so neither is in the body."""

    api = Api.GEMINI
    expected = ("a Gemini generateContent body (a JSON object with a 'contents' list of user/model "
                "turns made of 'parts')")
    turns_field = "contents"
    max_tokens_field = "generationConfig.maxOutputTokens"
    setting_fields = ("generationConfig",)

    def render(self, system: str, turns: Sequence[Turn], tools: Sequence[Tool]) -> dict[str, Any]:
        contents: list[dict[str, Any]] = []
        for turn in turns:
            if turn.role == "tool":
                contents.append({"role": "user", "parts": [
                    {"functionResponse": {"id": call.id, "name": call.name,
                                          "response": {"result": text}}}
                    for call, text in turn.results]})
            elif turn.role == "assistant":
                parts: list[dict[str, Any]] = [{"text": turn.text}] if turn.text else []
                parts.extend({"functionCall": {"id": c.id, "name": c.name,
                                               "args": _args_object(c.arguments)}}
                             for c in turn.calls)
                contents.append({"role": "model", "parts": parts})
            else:
                contents.append({"role": "user", "parts": [{"text": turn.text or ""}]})
        body: dict[str, Any] = {"contents": contents}
        if system:
            body["systemInstruction"] = {"parts": [{"text": system}]}
        if tools:
            body["tools"] = [{"functionDeclarations": [
                {"name": t.name, "description": t.description,
                 "parametersJsonSchema": dict(t.parameters)} for t in tools]}]
        return body

    def finish(self, body: dict[str, Any], *, model: str, settings: Settings) -> dict[str, Any]:
        # The model goes in the path (``Route.fill``) and usage always comes: nothing to ask for.
        config = body.get("generationConfig")
        config = dict(config) if isinstance(config, dict) else {}
        if settings.max_tokens is not None:
            config["maxOutputTokens"] = settings.max_tokens
        if settings.reasoning_effort is not None:
            config["thinkingConfig"] = {"thinkingBudget": thinking_budget(settings.reasoning_effort),
                                        "includeThoughts": True}
        if config:
            body["generationConfig"] = config
        return body

    def check_settings(self, settings: Settings) -> None:
        if settings.reasoning_effort is not None:
            thinking_budget(settings.reasoning_effort)

    def answer(self, message: Mapping[str, Any]) -> Answer | None:
        candidates = message.get("candidates")
        first = candidates[0] if isinstance(candidates, list) and candidates else None
        content = first.get("content") if isinstance(first, dict) else None
        parts = content.get("parts") if isinstance(content, dict) else None
        if not isinstance(parts, list):
            return None
        texts: list[str] = []
        calls: list[Call] = []
        for part in parts:
            if not isinstance(part, dict):
                continue
            call = part.get("functionCall")
            if isinstance(call, dict):
                calls.append(Call(str(call.get("id") or f"call_{len(calls)}"),
                                  str(call.get("name") or ""), json_arguments(call.get("args"))))
            elif isinstance(part.get("text"), str) and part.get("thought") is not True:
                texts.append(part["text"])
        return Answer("".join(texts), tuple(calls))

    def misfit(self, body: Mapping[str, Any]) -> str | None:
        if not isinstance(body.get("contents"), list):
            if isinstance(body.get("messages"), list):
                return "it has 'messages' (a Chat Completions or Anthropic Messages body)"
            return ("it has 'input' (a Responses body)" if "input" in body
                    else "it has no 'contents' list")
        if any(isinstance(c, dict) and "content" in c and "parts" not in c for c in body["contents"]):
            return "its turns have 'content', not 'parts' (a Chat Completions body)"
        return None


#: The ``status`` Google's APIs give each HTTP status (``UNKNOWN`` for the rest).
STATUSES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
            404: "NOT_FOUND", 409: "ABORTED", 429: "RESOURCE_EXHAUSTED", 499: "CANCELLED",
            500: "INTERNAL", 501: "NOT_IMPLEMENTED", 502: "UNAVAILABLE", 503: "UNAVAILABLE",
            504: "DEADLINE_EXCEEDED"}


def error_body(message: str, *, type_: str, code: str | int | None = None,
               param: str | None = None) -> dict[str, Any]:
    """Google's error shape ``{"error": {"code", "message", "status"}}``: ``type_`` is the status
    (``INVALID_ARGUMENT``), ``code`` the HTTP status it goes with; Google names no ``param``."""
    status = code if isinstance(code, int) else next(
        (s for s, name in STATUSES.items() if name == type_), 500)
    return {"error": {"code": status, "message": message, "status": type_}}


def status_error(status: int, message: str) -> dict[str, Any]:
    """The error body Gemini's API sends for an HTTP status."""
    return {"error": {"code": status, "message": message, "status": STATUSES.get(status, "UNKNOWN")}}
