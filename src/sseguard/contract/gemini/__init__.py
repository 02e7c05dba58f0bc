"""The gemini protocol's descriptor: every fact about it in one ``Protocol``, which every consumer reads.

Its parts are the sibling modules (checker, assembler, request, relay); their public names are
re-exported here so a consumer can import the protocol as one thing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sseguard.contract.gemini.assembler import GeminiAssembler
from sseguard.contract.gemini.checker import (
    GeminiChecker,
    GeminiFrames,
    looks_like_gemini,
)
from sseguard.contract.gemini.relay import ARRAY_CLOSE, RELAY
from sseguard.contract.gemini.request import (
    GeminiFormat,
    error_body,
    status_error,
)
from sseguard.contract.gemini.vocabulary import KINDS, REASONS
from sseguard.contract.protocol import (
    Auth,
    Framing,
    Protocol,
    Route,
)
from sseguard.verdict import Api

__all__ = [
    "ARRAY_CLOSE", "GEMINI", "GeminiAssembler", "GeminiChecker",
    "GeminiFormat", "GeminiFrames", "looks_like_gemini",
]


def finish_of(message: Mapping[str, Any]) -> list[str | None]:
    """One ``finishReason`` per candidate; a blocked prompt's ``blockReason`` when none came."""
    candidates = message.get("candidates")
    if isinstance(candidates, list) and candidates:
        return [c.get("finishReason") if isinstance(c, dict) else None for c in candidates]
    feedback = message.get("promptFeedback")
    reason = feedback.get("blockReason") if isinstance(feedback, dict) else None
    return [reason if isinstance(reason, str) else None]



GEMINI = Protocol(
    api=Api.GEMINI,
    title="Gemini generateContent",
    routes=(Route("/models/{model}:streamGenerateContent", streams=True),
            Route("/models/{model}:generateContent", streams=False),
            Route("/projects/{project}/locations/{location}/publishers/google/models/{model}"
                  ":streamGenerateContent", streams=True),
            Route("/projects/{project}/locations/{location}/publishers/google/models/{model}"
                  ":generateContent", streams=False)),
    mounts=("/v1beta", "/v1"),
    auth=Auth("x-goog-api-key", query="key"),
    claims=looks_like_gemini,
    format=GeminiFormat(),
    checker=GeminiChecker,
    assembler=GeminiAssembler,
    relay=RELAY,
    error_body=error_body,
    status_error=status_error,
    reasons=REASONS,
    kinds=KINDS,
    finish_of=finish_of,
    terminal_events=frozenset({"finishReason"}),
    bad_endings=("truncated", "cut_mid_frame", "transport_error", "error_event", "http_error",
                 "empty"),
    dialects=(),
    stream_field=None,
    model_field=None,
    framings=(Framing.SSE, Framing.JSON_ARRAY),
    sse_query=("alt", "sse"),
)
