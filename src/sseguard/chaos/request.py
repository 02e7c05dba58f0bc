"""A request as the chaos upstream reads it, whatever its protocol: the answer is generated from this.

Each protocol's writer (``chaos/<protocol>.py``) validates its own request shape into a ``ChatRequest``
(the name is historical: it carries Responses and Messages requests too) and answers a malformed one
with a ``BadRequest`` its server turns into a 400 in that API's error shape, as real servers do: a chaos
server that accepted anything would hide client bugs the real upstream will not. The helpers here are
the validation every protocol shares.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from sseguard.core.contract.protocol import Framing

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
    #: How a streamed answer is framed: what the request's URL asked for (``Protocol.framing_for``),
    #: set by the server from the query string, as the model and streaming are from the route.
    framing: Framing = Framing.SSE
    #: A continuation request (vLLM/SGLang ``continue_final_message``): the assistant text it continues.
    #: The conversation (and so ``fingerprint``) is the one without it: same answer, its rest sent.
    continued: str | None = None
    #: Prompt words the server "served from its prefix cache" (``chaos.cache``): reported in usage as
    #: each protocol reports cached tokens, 0 on a miss.
    cached_words: int = 0
    #: A Responses request with ``background: true`` (and ``store: true``, which the API requires):
    #: the server keeps the stream, so a client may read it again from any sequence number.
    background: bool = False
    #: Anthropic's ``thinking.display``: ``"omitted"`` sends thinking blocks without their text
    #: (the signature only), as Claude Code asks.
    reasoning_shown: bool = True
    #: The text of the conversation's first user message: what every request of one conversation
    #: shares (its retries, continuations and later turns), so ``first_answer`` can break it once.
    first_user: str = ""

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


def decode_object(body: bytes) -> dict[str, Any]:
    """The request body as a JSON object, or the ``BadRequest`` every protocol answers alike."""
    try:
        data = msgspec.json.decode(body)
    except msgspec.DecodeError:
        raise BadRequest("the request body is not valid JSON") from None
    if not isinstance(data, dict):
        raise BadRequest("the request body must be a JSON object")
    return data


def tools_of(raw: Any, *, not_a_list: str, read: Callable[[int, Any], Tool | None]
             ) -> tuple[Tool, ...]:
    """A request's ``tools``: none when absent, a ``BadRequest`` (``not_a_list``) when not a list,
    else each entry as the protocol's ``read`` takes it (its index, the entry): a ``Tool``, None for
    a hosted tool this server never calls, or the ``BadRequest`` in that API's words."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise BadRequest(not_a_list, "tools")
    return tuple(tool for i, entry in enumerate(raw) if (tool := read(i, entry)) is not None)
