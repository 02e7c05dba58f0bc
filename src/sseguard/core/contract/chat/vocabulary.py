"""Chat Completions' words (``contract.vocabulary``): its finish reasons in three classes, and the
delta fields and event names its checker knows. Every consumer reads them through ``CHAT``."""

from __future__ import annotations

from sseguard.core.contract.vocabulary import Kinds, ReasonClass, Reasons

_F, _P = ReasonClass.FINISHED, ReasonClass.POLICY

REASONS = Reasons({
    "stop": _F,
    "length": _F,
    "tool_calls": _F,
    "function_call": _F,  # the legacy single call (``delta.function_call``), older servers
    "content_filter": _P,
})

KINDS = Kinds(
    # Chat names no events; ``message`` is SSE's default, ``error`` an error frame.
    events=frozenset({"message", "error"}),
    # The fields of ``choices[].delta`` the assembler folds (the openai SDK's ``ChoiceDelta``).
    deltas=frozenset({"role", "content", "reasoning_content", "reasoning", "tool_calls",
                      "function_call", "refusal", "audio"}),
    # The fields of a chunk and of its choices (the openai SDK's ``ChatCompletionChunk`` and
    # ``Choice``); ``chunk.error`` is an error chunk, ``choice.message`` the non-stream shape a few
    # servers repeat, ``choice.stop_reason`` vLLM's and ``choice.matched_stop`` SGLang's stop detail.
    fields=frozenset({
        "chunk.id", "chunk.object", "chunk.created", "chunk.model", "chunk.choices", "chunk.usage",
        "chunk.system_fingerprint", "chunk.service_tier", "chunk.obfuscation", "chunk.moderation",
        "chunk.error",
        "choice.index", "choice.delta", "choice.finish_reason", "choice.logprobs", "choice.message",
        "choice.stop_reason", "choice.matched_stop",
    }),
)
