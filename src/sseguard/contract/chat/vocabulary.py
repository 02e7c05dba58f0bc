"""Chat Completions' words (``contract.vocabulary``): its finish reasons in three classes, and the
delta fields and event names its checker knows. Every consumer reads them through ``CHAT``."""

from __future__ import annotations

from sseguard.contract.vocabulary import Kinds, ReasonClass, Reasons

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
)
