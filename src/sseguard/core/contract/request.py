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

    def check_settings(self, settings: BodySettings) -> None:  # noqa: B027 - most formats take any
        """A ``ConfigError`` when the run-wide settings cannot be said in this format (none by default)."""

    def answer_of(self, verdict: Verdict) -> AssistantAnswer | None:
        """The answer of a verdict's assembled message."""
        return self.answer(verdict.message)

#: Old names → new (docs/design/vocabulary.md "Names").
__getattr__ = renamed(__name__, {"Answer": "AssistantAnswer", "Settings": "BodySettings"})
