"""OpenAI Responses' words (``contract.vocabulary``): why a response ended, in three classes, and
the event and output-item types its checker knows. Every consumer reads them through ``RESPONSES``.

A completed response has no finish field: its reason is the status ``completed``. An incomplete one
says why in ``incomplete_details.reason``; a failed one is ``failed``.
"""

from __future__ import annotations

from sseguard.core.contract.vocabulary import Kinds, ReasonClass, Reasons

_F, _P, _X = ReasonClass.FINISHED, ReasonClass.POLICY, ReasonClass.FAILED

REASONS = Reasons({
    "completed": _F,
    "max_output_tokens": _F,
    "max_messages": _F,  # a limit the request set, as max_output_tokens
    "steered": _F,  # the caller steered the response elsewhere: it ended as asked
    "content_filter": _P,
    "failed": _X,
    "cancelled": _X,
})

#: Output items whose streamed text has events of their own (``<prefix>.delta``/``.done``).
_SERVER_CALLS = ("code_interpreter_call", "file_search_call", "web_search_call",
                 "image_generation_call", "mcp_call", "mcp_list_tools")

KINDS = Kinds(
    events=frozenset({
        "response.created", "response.queued", "response.in_progress", "response.completed",
        "response.incomplete", "response.failed", "response.done", "error",
        "response.output_item.added", "response.output_item.done",
        "response.content_part.added", "response.content_part.done",
        "response.output_text.delta", "response.output_text.done",
        "response.output_text.annotation.added",
        "response.refusal.delta", "response.refusal.done",
        "response.function_call_arguments.delta", "response.function_call_arguments.done",
        "response.custom_tool_call_input.delta", "response.custom_tool_call_input.done",
        "response.mcp_call_arguments.delta", "response.mcp_call_arguments.done",
        "response.reasoning_summary_part.added", "response.reasoning_summary_part.done",
        "response.reasoning_summary_text.delta", "response.reasoning_summary_text.done",
        "response.reasoning_text.delta", "response.reasoning_text.done",
        "response.audio.delta", "response.audio.done",
        "response.audio.transcript.delta", "response.audio.transcript.done",
        "response.code_interpreter_call.interpreting",
        "response.code_interpreter_call_code.delta", "response.code_interpreter_call_code.done",
        "response.file_search_call.searching", "response.web_search_call.searching",
        "response.image_generation_call.generating", "response.image_generation_call.partial_image",
        "response.mcp_call.failed", "response.mcp_list_tools.failed",
        "response.compaction.compacting",
        "response.shell_call_command.added", "response.shell_call_command.delta",
        "response.shell_call_command.done",
        "response.shell_call_output_content.delta", "response.shell_call_output_content.done",
        *(f"response.{item}.{phase}" for item in _SERVER_CALLS
          for phase in ("in_progress", "completed")),
    }),
    blocks=frozenset({
        "message", "reasoning", "function_call", "function_call_output", "custom_tool_call",
        "custom_tool_call_output", "file_search_call", "web_search_call", "computer_call",
        "computer_call_output", "code_interpreter_call", "image_generation_call",
        "local_shell_call", "local_shell_call_output", "shell_call", "shell_call_output",
        "apply_patch_call", "apply_patch_call_output", "mcp_call", "mcp_list_tools",
        "mcp_approval_request", "mcp_approval_response", "compaction", "tool_search_call",
        "tool_search_output", "program", "program_output", "additional_tools",
    }),
)
