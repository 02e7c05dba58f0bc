"""The messages protocol's descriptor: every fact about it in one ``Protocol``, which every consumer reads.

Its parts are the sibling modules (checker, assembler, request, relay); their public names are
re-exported here so a consumer can import the protocol as one thing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sseguard.core.contract.messages.assembler import MessagesAssembler
from sseguard.core.contract.messages.checker import MessagesChecker
from sseguard.core.contract.messages.relay import (
    ANTHROPIC_VERSION,
    EVENT_TYPES,
    MESSAGE_STOP,
    MESSAGE_STOP_FRAME,
    error_body,
    is_terminal,
    messages_error_frame,
    status_error,
    upstream_error_of,
)
from sseguard.core.contract.messages.request import MessagesFormat, thinking_budget
from sseguard.core.contract.messages.vocabulary import KINDS, REASONS
from sseguard.core.contract.protocol import SSE_ENDING_MESSAGES, Auth, Outline, Protocol, RelayTable, Route
from sseguard.core.contract.usage import UsageFacts, count, field
from sseguard.core.verdict import Api, Ending

__all__ = [
    "ANTHROPIC_VERSION", "MESSAGES", "MESSAGE_STOP", "MESSAGE_STOP_FRAME", "MessagesAssembler",
    "MessagesChecker", "MessagesFormat", "error_body", "messages_error_frame", "status_error",
    "thinking_budget",
]


def finish_of(message: Mapping[str, Any]) -> list[str | None]:
    """The ``stop_reason`` (None when the stream never gave one)."""
    stop = message.get("stop_reason")
    return [stop if isinstance(stop, str) else None]


def claims(obj: Mapping[str, Any]) -> bool:
    return obj.get("type") in EVENT_TYPES


def usage_of(message: Mapping[str, Any]) -> UsageFacts:
    """``usage.cache_read_input_tokens`` and ``cache_creation_input_tokens``: Anthropic counts both
    apart from ``input_tokens``, so the whole prompt is the three added."""
    usage = message.get("usage")
    read = count(field(usage, "cache_read_input_tokens"))
    written = count(field(usage, "cache_creation_input_tokens"))
    fresh = count(field(usage, "input_tokens"))
    prompt = None if fresh is None else fresh + (read or 0) + (written or 0)
    return UsageFacts(prompt_tokens=prompt, cached_tokens=read, cache_write_tokens=written,
                      output_tokens=count(field(usage, "output_tokens")))


MESSAGES = Protocol(
    api=Api.MESSAGES,
    genai_provider="anthropic",
    title="Anthropic Messages",
    routes=(Route("/messages"),),
    auth=Auth("x-api-key"),
    headers={"anthropic-version": ANTHROPIC_VERSION},
    claims=claims,
    format=MessagesFormat(),
    checker=MessagesChecker,
    assembler=MessagesAssembler,
    relay=RelayTable(
        terminal=is_terminal, upstream_error=upstream_error_of, error_frame=messages_error_frame,
        sentinel=MESSAGE_STOP_FRAME,
        messages={
            Ending.TRUNCATED: "the upstream stopped after content with neither a stop_reason nor "
                              "message_stop; the answer is incomplete",
            Ending.NO_FINISH: "the upstream sent message_stop without a stop_reason",
            Ending.NO_DONE: "the upstream gave a stop_reason but never sent message_stop",
            **SSE_ENDING_MESSAGES,
        }),
    error_body=error_body,
    status_error=status_error,
    reasons=REASONS,
    kinds=KINDS,
    finish_of=finish_of,
    usage_of=usage_of,
    terminal_events=frozenset({MESSAGE_STOP}),
    bad_endings=("truncated", "no_done", "no_finish", "cut_mid_frame", "transport_error",
                 "error_event", "http_error", "empty", "tool_call_unterminated"),
    dialects=("no_done",),
    outline=Outline(finish="stop_reason", blocks="content", block="block"),
)
