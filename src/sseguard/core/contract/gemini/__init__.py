"""The gemini protocol's descriptor: every fact about it in one ``Protocol``, which every consumer reads.

Its parts are the sibling modules (checker, assembler, request, relay); their public names are
re-exported here so a consumer can import the protocol as one thing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sseguard.core.contract.gemini.assembler import GeminiAssembler
from sseguard.core.contract.gemini.checker import (
    GeminiChecker,
    GeminiFrames,
    looks_like_gemini,
)
from sseguard.core.contract.gemini.relay import ARRAY_CLOSE, RELAY
from sseguard.core.contract.gemini.request import (
    GeminiFormat,
    error_body,
    status_error,
)
from sseguard.core.contract.gemini.vocabulary import KINDS, REASONS
from sseguard.core.contract.protocol import (
    Auth,
    Framing,
    Outline,
    Protocol,
    Route,
)
from sseguard.core.contract.usage import UsageFacts, count, field, text
from sseguard.core.verdict import Api

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



def usage_of(message: Mapping[str, Any]) -> UsageFacts:
    """``usageMetadata.cachedContentTokenCount`` of ``promptTokenCount`` (which includes it), and the
    ``modelVersion`` of the serving build. A record without the cached count used no cache."""
    usage = message.get("usageMetadata")
    prompt = count(field(usage, "promptTokenCount"))
    cached = count(field(usage, "cachedContentTokenCount"))
    if cached is None and prompt is not None:
        cached = 0  # (Gemini omits zero counts from usageMetadata)
    return UsageFacts(prompt_tokens=prompt, cached_tokens=cached,
                      fingerprint=text(message.get("modelVersion")),
                      output_tokens=count(field(usage, "candidatesTokenCount")))


GEMINI = Protocol(
    api=Api.GEMINI,
    genai_provider="gcp.gemini",
    genai_operation="generate_content",
    response_model_field="modelVersion",
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
    usage_of=usage_of,
    terminal_events=frozenset({"finishReason"}),
    bad_endings=("truncated", "cut_mid_frame", "transport_error", "error_event", "http_error",
                 "empty"),
    dialects=(),
    outline=Outline(candidates="candidates", candidate="candidate", candidate_finish="finishReason",
                    unanswered=("promptFeedback", "blockReason")),
    stream_field=None,
    model_field=None,
    framings=(Framing.SSE, Framing.JSON_ARRAY),
    sse_query=("alt", "sse"),
)
