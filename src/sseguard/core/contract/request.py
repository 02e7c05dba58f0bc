"""One conversation, any wire format: the neutral request vocabulary and the ``Format`` each protocol fills.

The probe's workloads are written once, as neutral turns — a user's text, an assistant's text and tool
calls, the results of those calls — with neutral tool definitions. Each protocol's ``Format`` (exported
by its ``contract/<protocol>/`` as part of its ``Protocol`` descriptor) renders them into its own
request (``docs/design/vocabulary.md``, request shapes), applies the run-wide settings in its own words, reads
the answer back out of the checker's assembled message, and tells whether a user's own ``--body`` is in its
format. One engine, one table of names per protocol.

Pure Python, no I/O library: the asyncio probe and the Locust user (gevent) share it.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sseguard.core._renamed import renamed
from sseguard.core.errors import ConfigError
from sseguard.core.verdict import Api, Verdict


@dataclass(frozen=True, slots=True)
class Tool:
    """A function the model may call: name, description and the JSON schema of its arguments."""

    name: str
    description: str
    parameters: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Call:
    """One tool call of an answer: its id, the function and the arguments as JSON text."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class Turn:
    """One turn of a conversation: ``user`` text, ``assistant`` text and calls, or ``tool`` results."""

    role: str  # user | assistant | tool
    text: str | None = None
    calls: tuple[Call, ...] = ()
    results: tuple[tuple[Call, str], ...] = ()  # (the call answered, the result's text)


@dataclass(frozen=True, slots=True)
class AssistantAnswer:
    """What an assistant said, whatever the protocol: its text and its tool calls."""

    text: str
    calls: tuple[Call, ...] = ()


@dataclass(frozen=True, slots=True)
class BodySettings:
    """The run-wide request settings every format applies in its own words."""

    max_tokens: int | None = None
    reasoning_effort: str | None = None
    include_usage: bool = True
    #: Deterministic sampling (the ``consistency`` workload): temperature 0, ``top_p`` 1 and this seed
    #: where the API takes one, each in the protocol's own words. None: the server's defaults.
    seed: int | None = None


def arguments_object(arguments: str) -> Any:
    """A call's JSON arguments as the object Messages (``input``) and Gemini (``args``) carry;
    unparsable ones are kept as a string field, a non-object value under ``value``."""
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return {"arguments": arguments}
    return value if isinstance(value, dict) else {"value": value}


def effort_budget(effort: str, budgets: Mapping[str, int], *, arm: str, least: int = 0) -> int:
    """The thinking budget (tokens) of a reasoning effort: a name of ``budgets``, or a token count of
    at least ``least``. Messages and Gemini take a budget where the OpenAI APIs take an effort name;
    ``arm`` names the protocol in the error."""
    if effort.isdigit():
        budget = int(effort)
        if budget < least:
            raise ConfigError(f"reasoning-effort {effort}: a thinking budget is at least "
                              f"{least} tokens")
        return budget
    try:
        return budgets[effort]
    except KeyError:
        raise ConfigError(f"reasoning-effort {effort!r} for a {arm} arm: give "
                          f"{', '.join(budgets)} or a thinking budget in tokens") from None


def first_dict(message: Mapping[str, Any], field: str) -> dict[str, Any] | None:
    """The first entry of a list ``field`` when it is an object (``choices``, ``candidates``)."""
    items = message.get(field)
    first = items[0] if isinstance(items, list) and items else None
    return first if isinstance(first, dict) else None


def no_list_misfit(body: Mapping[str, Any], field: str) -> str:
    """Why a body without its ``field`` list is not of this protocol: a Responses body's ``input``
    is the likeliest mistake, so it is named."""
    return "it has 'input' (a Responses body)" if "input" in body else f"it has no '{field}' list"


def json_arguments(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value if value is not None else {}, separators=(",", ":"))


def role_of(item: Any) -> str | None:
    return item.get("role") if isinstance(item, dict) else None


def blocks_of(message: Any) -> list[dict[str, Any]]:
    content = message.get("content") if isinstance(message, dict) else None
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


class Format(ABC):
    """The request shape of one protocol. Subclasses fill in the tables."""

    api: Api
    #: How a person would recognise this format; named in the error for a ``--body`` that does not fit.
    expected: str
    #: The body field holding the conversation's turns (``messages``, ``input``, ``contents``).
    turns_field: str
    #: The body field holding the output token limit.
    max_tokens_field: str
    #: Body fields that carry run-wide settings worth naming in evidence (reasoning, usage options).
    setting_fields: tuple[str, ...]

    @abstractmethod
    def render(self, system: str, turns: Sequence[Turn], tools: Sequence[Tool]) -> dict[str, Any]:
        """The request body (without model and settings) for a conversation so far."""

    @abstractmethod
    def finish(self, body: dict[str, Any], *, model: str, settings: BodySettings) -> dict[str, Any]:
        """Apply the model, streaming and the run-wide settings to ``body`` (in place) and return it."""

    @abstractmethod
    def answer(self, message: Mapping[str, Any]) -> AssistantAnswer | None:
        """The answer in the checker's assembled message, or None when there is none to read."""

    @abstractmethod
    def misfit(self, body: Mapping[str, Any]) -> str | None:
        """Why ``body`` is not a request of this protocol, or None when it is."""

    def check_settings(self, settings: BodySettings) -> None:
        """A ``ConfigError`` when the run-wide settings cannot be said in this format: a reasoning
        effort that is no thinking budget where the format takes one (any setting by default)."""
        if settings.reasoning_effort is not None:
            self.thinking_budget(settings.reasoning_effort)

    def thinking_budget(self, effort: str) -> int | None:
        """The thinking budget (tokens) this format sends for a reasoning effort; None where it
        sends the effort as it is (the OpenAI APIs)."""
        return None

    def stream_to(self, body: dict[str, Any], model: str, settings: BodySettings) -> None:
        """The model, streaming on and the output limit in ``max_tokens_field``: the start of
        ``finish`` where the body names the model and streaming (all but Gemini)."""
        body["model"] = model
        body["stream"] = True
        if settings.max_tokens is not None:
            body[self.max_tokens_field] = settings.max_tokens

    def answer_of(self, verdict: Verdict) -> AssistantAnswer | None:
        """The answer of a verdict's assembled message."""
        return self.answer(verdict.message)

#: Old names → new (docs/design/vocabulary.md "Names").
__getattr__ = renamed(__name__, {"Answer": "AssistantAnswer", "Settings": "BodySettings"})
