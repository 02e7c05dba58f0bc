"""Anthropic Messages' words (``contract.vocabulary``): its stop reasons in three classes, and the
event, content-block and delta types its checker knows. Every consumer reads them through
``MESSAGES``; the delta table (what each delta folds into) is ``assembler.DELTAS``."""

from __future__ import annotations

from sseguard.core.contract.vocabulary import Kinds, ReasonClass, Reasons

_F, _P = ReasonClass.FINISHED, ReasonClass.POLICY

REASONS = Reasons({
    "end_turn": _F,
    "max_tokens": _F,
    "stop_sequence": _F,
    "tool_use": _F,
    "pause_turn": _F,  # a server tool loop paused: the client continues the turn
    "model_context_window_exceeded": _F,  # the window, not ``max_tokens``, bounded the answer
    "compaction": _F,  # the context was compacted (a ``compaction`` block): the client continues
    "refusal": _P,
})

KINDS = Kinds(
    events=frozenset({"message_start", "content_block_start", "content_block_delta",
                      "content_block_stop", "message_delta", "message_stop", "ping", "error"}),
    blocks=frozenset({
        "text", "thinking", "redacted_thinking", "tool_use", "server_tool_use", "mcp_tool_use",
        "mcp_tool_result", "mcp_tool_listing", "web_search_tool_result", "web_fetch_tool_result",
        "code_execution_tool_result", "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result", "tool_search_tool_result",
        "advisor_tool_result", "container_upload", "compaction", "fallback",
    }),
    deltas=frozenset({"text_delta", "thinking_delta", "input_json_delta", "signature_delta",
                      "citations_delta", "compaction_delta"}),
)
