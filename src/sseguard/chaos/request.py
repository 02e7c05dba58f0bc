"""Read a ``/v1/chat/completions`` request body the way an OpenAI-compatible server does.

Only what shapes the answer is kept. Malformed requests are a ``BadRequest`` the server answers with
400 and an OpenAI-style error object, as vLLM and SGLang do: a chaos server that accepted anything would
hide client bugs the real upstream will not.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import msgspec

#: reasoning_effort values the server knows, with how many reasoning chunks each asks for, relative to
#: ``Pacing.reasoning_tokens``. ``none`` (and no value) means no reasoning at all.
REASONING_SCALE = {"none": 0.0, "minimal": 0.25, "low": 0.5, "medium": 1.0, "high": 2.0,
                   "xhigh": 3.0}
MAX_N = 16


class BadRequest(Exception):
    """The request cannot be served; the message goes into the 400 body, ``param`` names the field."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    parameters: dict[str, Any]

    @property
    def typed(self) -> bool:
        """It has at least one property with a declared JSON type: a schema mismatch is possible."""
        props = self.parameters.get("properties")
        return isinstance(props, dict) and any(
            isinstance(s, dict) and isinstance(s.get("type"), str) for s in props.values())


@dataclass(frozen=True, slots=True)
class ChatRequest:
    model: str | None
    stream: bool
    include_usage: bool
    tools: tuple[Tool, ...]
    tool_choice: Any
    parallel_tool_calls: bool
    max_tokens: int | None
    n: int
    reasoning: float  # scale of Pacing.reasoning_tokens; 0 = no reasoning
    last_role: str
    last_text: str  # the text of the last message (for tool-name mentions)
    prompt_words: int
    fingerprint: bytes  # stable digest of model + messages: same request, same text

    @property
    def tools_offered(self) -> bool:
        return bool(self.tools)

    @property
    def typed_tool(self) -> bool:
        return any(t.typed for t in self.tools)

    def forced_tool(self) -> str | None:
        """The function named by ``tool_choice``, if it names one."""
        choice = self.tool_choice
        if isinstance(choice, dict):
            fn = choice.get("function")
            if isinstance(fn, dict) and isinstance(fn.get("name"), str):
                return str(fn["name"])
        return None

    @property
    def wants_tool_call(self) -> bool:
        """Tools offered and the turn is the user's: a model with tools acts; after a tool result it
        answers in text. ``tool_choice: "none"`` never calls, ``"required"`` or a name always does."""
        if not self.tools or self.tool_choice == "none":
            return False
        if self.tool_choice == "required" or self.forced_tool() is not None:
            return True
        return self.last_role != "tool"


def text_of(content: Any) -> str:
    """The words of a message's content: a string, or the ``text`` of its parts (every protocol)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def int_field(body: dict[str, Any], name: str, *, minimum: int, maximum: int | None = None
               ) -> int | None:
    """An optional integer field in range, or a ``BadRequest`` naming it."""
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum or (
            maximum is not None and value > maximum):
        bound = f" and at most {maximum}" if maximum is not None else ""
        raise BadRequest(f"{name} must be an integer of at least {minimum}{bound}", name)
    return value


def _tools(raw: Any) -> tuple[Tool, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise BadRequest("tools must be a list", "tools")
    tools = []
    for i, tool in enumerate(raw):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise BadRequest(f"tools[{i}] must be {{'type': 'function', 'function': {{'name': …}}}}",
                             f"tools[{i}]")
        params = fn.get("parameters")
        tools.append(Tool(fn["name"], params if isinstance(params, dict) else {}))
    return tuple(tools)


def decode_object(body: bytes) -> dict[str, Any]:
    """The request body as a JSON object, or the ``BadRequest`` every protocol answers alike."""
    try:
        data = msgspec.json.decode(body)
    except msgspec.DecodeError:
        raise BadRequest("the request body is not valid JSON") from None
    if not isinstance(data, dict):
        raise BadRequest("the request body must be a JSON object")
    return data


def parse_request(body: bytes) -> ChatRequest:
    """Decode and validate a request body; raises ``BadRequest`` with a client-facing message."""
    data = decode_object(body)
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list", "messages")
    words = 0
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or not isinstance(msg.get("role"), str):
            raise BadRequest(f"messages[{i}] must be an object with a role", f"messages[{i}]")
        words += len(text_of(msg.get("content")).split()) + 4
    stream = data.get("stream", False)
    if not isinstance(stream, bool):
        raise BadRequest("stream must be a boolean", "stream")
    opts = data.get("stream_options")
    if opts is not None and not isinstance(opts, dict):
        raise BadRequest("stream_options must be an object", "stream_options")
    model = data.get("model")
    if model is not None and not isinstance(model, str):
        raise BadRequest("model must be a string", "model")
    effort = data.get("reasoning_effort")
    if effort is not None and effort not in REASONING_SCALE:
        raise BadRequest(f"reasoning_effort must be one of {', '.join(REASONING_SCALE)}",
                         "reasoning_effort")
    max_tokens = int_field(data, "max_completion_tokens", minimum=1)
    if max_tokens is None:
        max_tokens = int_field(data, "max_tokens", minimum=1)
    tools = _tools(data.get("tools"))
    tool_choice = data.get("tool_choice", "auto")
    fn = tool_choice.get("function") if isinstance(tool_choice, dict) else None
    forced = fn.get("name") if isinstance(fn, dict) else None
    if forced is not None and forced not in {t.name for t in tools}:
        raise BadRequest(f"tool_choice names {forced!r}, which is not among the tools",
                         "tool_choice")
    last = messages[-1]
    digest = hashlib.blake2b(msgspec.json.encode([model, messages]), digest_size=16).digest()
    return ChatRequest(
        model=model,
        stream=stream,
        include_usage=bool(opts and opts.get("include_usage")),
        tools=tools,
        tool_choice=tool_choice,
        parallel_tool_calls=data.get("parallel_tool_calls", True) is not False,
        max_tokens=max_tokens,
        n=int_field(data, "n", minimum=1, maximum=MAX_N) or 1,
        reasoning=REASONING_SCALE[effort] if effort is not None else 0.0,
        last_role=str(last["role"]),
        last_text=text_of(last.get("content")),
        prompt_words=words,
        fingerprint=digest,
    )


def openai_bad_request(exc: BadRequest) -> dict[str, Any]:
    """OpenAI's 400 body (chat and Responses): ``invalid_request_error`` naming the field."""
    return {"error": {"message": str(exc), "type": "invalid_request_error", "param": exc.param,
                      "code": None}}
