"""The responses protocol's descriptor: every fact about it in one ``Protocol``, which every consumer reads.

Its parts are the sibling modules (checker, assembler, request, relay); their public names are
re-exported here so a consumer can import the protocol as one thing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sseguard.core.contract.chat import error_body, status_error
from sseguard.core.contract.protocol import Auth, Outline, Protocol, Route
from sseguard.core.contract.responses.assembler import (
    ResponsesAssembler,
)
from sseguard.core.contract.responses.checker import ResponsesChecker
from sseguard.core.contract.responses.relay import RELAY, TERMINAL_EVENTS
from sseguard.core.contract.responses.request import ResponsesFormat
from sseguard.core.contract.responses.vocabulary import KINDS, REASONS
from sseguard.core.contract.usage import UsageFacts, count, field
from sseguard.core.verdict import Api

#: Statuses of a response object that has not ended.
_UNFINISHED = frozenset({"in_progress", "queued"})

__all__ = [
    "RESPONSES", "ResponsesAssembler", "ResponsesChecker", "ResponsesFormat",
]


def finish_of(message: Mapping[str, Any]) -> list[str | None]:
    """The terminal status, or the ``incomplete_details.reason`` of an incomplete response."""
    status = message.get("status")
    if status == "incomplete":
        details = message.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        return [reason if isinstance(reason, str) else "incomplete"]
    return [status if isinstance(status, str) and status not in _UNFINISHED else None]


def claims(obj: Mapping[str, Any]) -> bool:
    etype = obj.get("type")
    return isinstance(etype, str) and etype.startswith("response.") and "sequence_number" in obj


def usage_of(message: Mapping[str, Any]) -> UsageFacts:
    """``usage.input_tokens_details.cached_tokens`` of the terminal response's ``usage.input_tokens``
    (the Responses API sends no fingerprint; the model snapshot is the record's ``model``)."""
    usage = message.get("usage")
    return UsageFacts(prompt_tokens=count(field(usage, "input_tokens")),
                      cached_tokens=count(field(usage, "input_tokens_details", "cached_tokens")),
                      output_tokens=count(field(usage, "output_tokens")))


RESPONSES = Protocol(
    api=Api.RESPONSES,
    title="OpenAI Responses",
    routes=(Route("/responses"),),
    auth=Auth("authorization", scheme="Bearer"),
    claims=claims,
    format=ResponsesFormat(),
    checker=ResponsesChecker,
    assembler=ResponsesAssembler,
    relay=RELAY,
    error_body=error_body,
    status_error=status_error,
    reasons=REASONS,
    kinds=KINDS,
    finish_of=finish_of,
    usage_of=usage_of,
    terminal_events=TERMINAL_EVENTS,
    bad_endings=("truncated", "no_finish", "cut_mid_frame", "transport_error", "error_event",
                 "http_error", "empty", "tool_call_unterminated"),
    dialects=("trailing_done",),
    outline=Outline(finish="status", finish_detail="incomplete_details", blocks="output",
                    block="output"),
)
