"""The chat protocol's descriptor: every fact about it in one ``Protocol``, which every consumer reads.

Its parts are the sibling modules (checker, assembler, request, relay); their public names are
re-exported here so a consumer can import the protocol as one thing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sseguard.core.contract._base import (
    TAIL_BYTES,
)
from sseguard.core.contract.chat.assembler import ChatAssembler
from sseguard.core.contract.chat.checker import StreamChecker
from sseguard.core.contract.chat.relay import (
    DONE,
    DONE_FRAME,
    chat_error_frame,
    error_body,
    is_terminal,
    status_error,
    upstream_error_of,
)
from sseguard.core.contract.chat.request import ChatFormat
from sseguard.core.contract.chat.vocabulary import KINDS, REASONS
from sseguard.core.contract.leaks import LEAK_MARKERS, leak_markers
from sseguard.core.contract.protocol import SSE_ENDING_MESSAGES, Auth, Outline, Protocol, RelayTable, Route
from sseguard.core.contract.usage import UsageFacts, count, field, text
from sseguard.core.verdict import Api, Ending

__all__ = [
    "CHAT", "DONE", "DONE_FRAME", "LEAK_MARKERS", "TAIL_BYTES", "ChatFormat", "StreamChecker",
    "chat_error_frame", "error_body", "leak_markers", "status_error",
]


def finish_of(message: Mapping[str, Any]) -> list[str | None]:
    """One ``finish_reason`` per choice."""
    choices = message.get("choices") or []
    return [c.get("finish_reason") for c in choices if isinstance(c, dict)]


def claims(obj: Mapping[str, Any]) -> bool:
    return obj.get("object") == "chat.completion.chunk" or isinstance(obj.get("choices"), list)

def usage_of(message: Mapping[str, Any]) -> UsageFacts:
    """``usage.prompt_tokens_details.cached_tokens`` of the prompt's ``usage.prompt_tokens``, and the
    ``system_fingerprint`` of the serving build."""
    usage = message.get("usage")
    return UsageFacts(prompt_tokens=count(field(usage, "prompt_tokens")),
                      cached_tokens=count(field(usage, "prompt_tokens_details", "cached_tokens")),
                      fingerprint=text(message.get("system_fingerprint")),
                      output_tokens=count(field(usage, "completion_tokens")))


CHAT = Protocol(
    api=Api.CHAT,
    title="OpenAI Chat Completions",
    routes=(Route("/chat/completions"),),
    auth=Auth("authorization", scheme="Bearer"),
    claims=claims,
    format=ChatFormat(),
    checker=StreamChecker,
    assembler=ChatAssembler,
    relay=RelayTable(
        terminal=is_terminal, upstream_error=upstream_error_of, error_frame=chat_error_frame,
        sentinel=DONE_FRAME,
        messages={
            Ending.TRUNCATED: "the upstream stopped after content with neither a finish_reason nor "
                              "data: [DONE]; the answer is incomplete",
            Ending.NO_FINISH: "the upstream sent data: [DONE] without a finish_reason for every choice",
            Ending.NO_DONE: "the upstream finished the answer but never sent data: [DONE]",
            **SSE_ENDING_MESSAGES,
        }),
    error_body=error_body,
    status_error=status_error,
    reasons=REASONS,
    kinds=KINDS,
    finish_of=finish_of,
    usage_of=usage_of,
    terminal_events=frozenset({DONE}),
    bad_endings=("truncated", "no_done", "no_finish", "cut_mid_frame", "transport_error",
                 "error_event", "http_error", "empty", "tool_call_unterminated"),
    dialects=("no_finish_reason", "no_done", "empty_finish_reason", "usage_choices_null"),
    outline=Outline(candidates="choices", candidate="choice", candidate_finish="finish_reason"),
)
