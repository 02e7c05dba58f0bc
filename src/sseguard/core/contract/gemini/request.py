"""Gemini requests: how the probe writes them (``GeminiFormat``), how they are read (``normal_request``:
every field in its camelCase spelling), the function declarations a request offers and their
parameter schemas as JSON Schema (what the checker reads), and the error bodies of Google's APIs.

Gemini declares tools as ``tools[].functionDeclarations[]``, each with ``parametersJsonSchema`` (JSON
Schema as it is) or ``parameters`` in Gemini's OpenAPI subset (``"type": "OBJECT"``, ``nullable``),
which ``jsonschema`` cannot read as it is.

Google's API takes every request field in either spelling (protocol-buffer JSON: ``includeThoughts``
or ``include_thoughts``), and clients use both: google-genai 3.6 (Python) writes
``parameters_json_schema``, ``thinkingConfig.include_thoughts`` and a ``Schema``'s ``max_length`` in
snake case, the rest in camelCase. So the core reads a request through ``normal_request`` (the
checker, chaos and the markup repair alike), which renames the fields the API defines and never a key
inside user data: a schema's property names, a call's ``args``, a tool result's ``response``, a JSON
Schema given as it is, ``labels`` stay byte for byte as they came.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sseguard.core.contract.request import (
    AssistantAnswer,
    BodySettings,
    Call,
    Format,
    Tool,
    Turn,
    arguments_object,
    effort_budget,
    first_dict,
    json_arguments,
    no_list_misfit,
)
from sseguard.core.verdict import Api

__all__ = ["STATUSES", "GeminiFormat", "error_body", "function_declarations", "json_schema",
           "normal_request", "parameters_schema", "status_error", "thinking_budget"]


class _Message:
    """One message type of the request: its fields (camelCase), each with the message its value is
    (a list of them for a repeated field), ``_Map`` for a map whose keys are the user's, or None for a
    value taken as it is (a scalar, or user data such as ``args``)."""

    __slots__ = ("fields", "names")

    def __init__(self, *leaves: str, **messages: _Message | _Map) -> None:
        self.fields: dict[str, _Message | _Map | None] = {}
        #: Both spellings of every field → its camelCase name.
        self.names: dict[str, str] = {}
        self.add(*leaves, **messages)

    def add(self, *leaves: str, **messages: _Message | _Map) -> None:
        """More fields (a message that contains itself, ``Schema``, gets those after it exists)."""
        self.fields.update(dict.fromkeys(leaves), **messages)
        self.names.update({spelt: name for name in (*leaves, *messages)
                           for spelt in (name, _snake(name))})


class _Map:
    """A map field (``Schema.properties``): the keys are the user's, each value a ``message``."""

    __slots__ = ("message",)

    def __init__(self, message: _Message) -> None:
        self.message = message


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


def _normal(value: Any, shape: _Message | _Map) -> Any:
    if isinstance(value, list):
        return [_normal(item, shape) for item in value]
    if not isinstance(value, dict):
        return value
    if isinstance(shape, _Map):
        return {key: _normal(item, shape.message) for key, item in value.items()}
    out: dict[str, Any] = {}
    names, fields = shape.names, shape.fields
    for key, item in value.items():
        name = names.get(key)
        if name is None:
            out.setdefault(key, item)  # not a field of this message: kept as it came
        elif name != key and name in out:
            continue  # both spellings: the camelCase one wins, wherever it stands
        else:
            child = fields[name]
            out[name] = item if child is None else _normal(item, child)
    return out


# The request's message types (Gemini API ``v1beta``, Vertex AI ``v1``), as far as anything here can
# read them; a field not listed is kept as it came.
_SCHEMA = _Message("type", "format", "title", "description", "nullable", "enum", "maxItems",
                   "minItems", "required", "minProperties", "maxProperties", "minLength",
                   "maxLength", "pattern", "example", "propertyOrdering", "default", "minimum",
                   "maximum")
_SCHEMA.add(properties=_Map(_SCHEMA), anyOf=_SCHEMA, items=_SCHEMA)
_BLOB = _Message("mimeType", "data", "fileUri", "displayName")
_PART = _Message(
    "text", "thought", "thoughtSignature", "partMetadata", "mediaResolution",
    inlineData=_BLOB, fileData=_BLOB,
    functionCall=_Message("id", "name", "args", "willContinue"),
    functionResponse=_Message("id", "name", "response", "willContinue", "scheduling",
                              parts=_Message(inlineData=_BLOB, fileData=_BLOB)),
    executableCode=_Message("language", "code"),
    codeExecutionResult=_Message("outcome", "output"),
    videoMetadata=_Message("startOffset", "endOffset", "fps"))
_CONTENT = _Message("role", parts=_PART)
_DECLARATION = _Message("name", "description", "behavior", "parametersJsonSchema",
                        "responseJsonSchema", parameters=_SCHEMA, response=_SCHEMA)
_TOOL = _Message("googleSearchRetrieval", "codeExecution", "googleSearch", "urlContext",
                 "computerUse", "fileSearch", "googleMaps", "retrieval", "enterpriseWebSearch",
                 functionDeclarations=_DECLARATION)
_REQUEST = _Message(
    "model", "cachedContent", "labels",
    contents=_CONTENT, systemInstruction=_CONTENT, tools=_TOOL,
    toolConfig=_Message(functionCallingConfig=_Message("mode", "allowedFunctionNames",
                                                        "streamFunctionCallArguments"),
                        retrievalConfig=_Message("latLng", "languageCode")),
    safetySettings=_Message("category", "threshold", "method"),
    generationConfig=_Message(
        "stopSequences", "responseMimeType", "responseJsonSchema", "responseModalities",
        "candidateCount", "maxOutputTokens", "temperature", "topP", "topK", "seed",
        "presencePenalty", "frequencyPenalty", "responseLogprobs", "logprobs",
        "enableEnhancedCivicAnswers", "speechConfig", "imageConfig", "mediaResolution",
        "routingConfig", "audioTimestamp",
        responseSchema=_SCHEMA,
        thinkingConfig=_Message("includeThoughts", "thinkingBudget", "thinkingLevel")))


def normal_request(body: Mapping[str, Any]) -> dict[str, Any]:
    """A ``generateContent`` request with every field the API defines spelt in camelCase, as the
    API's own JSON parser reads either spelling (``include_thoughts`` is ``includeThoughts``). Keys
    inside user data are left alone: a schema's property names, ``args``, ``response``, a JSON
    Schema given as it is. When a field comes in both spellings the camelCase one is read."""
    out: dict[str, Any] = _normal(dict(body), _REQUEST)
    return out


def function_declarations(tools: Any) -> list[dict[str, Any]] | None:
    """The function declarations of a request's ``tools`` (None when it offered no tools at all),
    their fields in camelCase (``normal_request``)."""
    if not isinstance(tools, list):
        return None
    out: list[dict[str, Any]] = []
    for tool in _normal(tools, _TOOL):
        if isinstance(tool, dict):
            decls = tool.get("functionDeclarations")
            if isinstance(decls, list):
                out.extend(d for d in decls if isinstance(d, dict))
    return out


def parameters_schema(declaration: Mapping[str, Any]) -> Any:
    """A function declaration's parameters as JSON Schema: its ``parametersJsonSchema`` as it is, or
    its ``parameters`` (Gemini's OpenAPI subset) translated (None when it declares neither)."""
    schema = declaration.get("parametersJsonSchema")
    return schema if isinstance(schema, dict) else json_schema(declaration.get("parameters"))


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
    return effort_budget(effort, THINKING_BUDGETS, arm="gemini")


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
                                               "args": arguments_object(c.arguments)}}
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

    def finish(self, body: dict[str, Any], *, model: str, settings: BodySettings) -> dict[str, Any]:
        # The model goes in the path (``Route.fill``) and usage always comes: nothing to ask for.
        config = body.get("generationConfig")
        config = dict(config) if isinstance(config, dict) else {}
        if settings.max_tokens is not None:
            config["maxOutputTokens"] = settings.max_tokens
        if settings.reasoning_effort is not None:
            config["thinkingConfig"] = {"thinkingBudget": self.thinking_budget(settings.reasoning_effort),
                                        "includeThoughts": True}
        if settings.seed is not None:  # as google-genai writes GenerateContentConfig(seed=…, …)
            config.update(temperature=0, topP=1, seed=settings.seed)
        if config:
            body["generationConfig"] = config
        return body

    def thinking_budget(self, effort: str) -> int:
        return thinking_budget(effort)

    def answer(self, message: Mapping[str, Any]) -> AssistantAnswer | None:
        first = first_dict(message, "candidates")
        content = first.get("content") if first is not None else None
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
        return AssistantAnswer("".join(texts), tuple(calls))

    def misfit(self, body: Mapping[str, Any]) -> str | None:
        if not isinstance(body.get("contents"), list):
            if isinstance(body.get("messages"), list):
                return "it has 'messages' (a Chat Completions or Anthropic Messages body)"
            return no_list_misfit(body, "contents")
        if any(isinstance(c, dict) and "content" in c and "parts" not in c for c in body["contents"]):
            return "its turns have 'content', not 'parts' (a Chat Completions body)"
        return None


#: The ``status`` Google's APIs give each HTTP status (``UNKNOWN`` for the rest).
#: ``google.rpc.Code`` has no code for 413; an over-size request is an invalid argument to Google's
#: APIs: they answer it ``400 INVALID_ARGUMENT`` "Request payload size exceeds the limit: N bytes"
#: (reported from the Gemini API in google-gemini/generative-ai-android#26). The proxy's own 413
#: (``--max-body``) keeps its HTTP status and takes that status name: not ``RESOURCE_EXHAUSTED``
#: (a quota, which clients retry) nor ``FAILED_PRECONDITION`` (the system's state, not the request).
STATUSES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
            404: "NOT_FOUND", 409: "ABORTED", 413: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED",
            499: "CANCELLED", 500: "INTERNAL", 501: "NOT_IMPLEMENTED", 502: "UNAVAILABLE",
            503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}


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
