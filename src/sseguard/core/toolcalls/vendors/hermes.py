"""Hermes / Qwen 2.5 / Qwen 3 (``hermes``): JSON in ``<tool_call>`` tags (``grammars.json_in_tags``).
"""

from __future__ import annotations

from sseguard.core.toolcalls.auto import builtin_rank
from sseguard.core.toolcalls.grammars.json_in_tags import SEPARATOR, TOOL_CALL, TOOL_CALL_END, json_in_tags

FAMILY = json_in_tags("hermes", TOOL_CALL, TOOL_CALL_END, separator=SEPARATOR, rank=builtin_rank("hermes"),
                      aliases=("qwen", "qwen25", "qwen3_json", "granite4", "ripple", "trinity"))
