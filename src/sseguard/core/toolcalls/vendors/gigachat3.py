"""GigaChat 3 (``gigachat3``), docs/design/markup.md class A′: ``function call<|role_sep|>\\n{…}`` or
``<|function_call|>{…}``, one call object and no closer — the call ends where its object closes.
``<|message_sep|>`` and ``</s>`` end the message: markup, not text. Strict JSON (SGLang accepts raw
control characters in strings; a consumer in another language would not).
"""

from __future__ import annotations

from sseguard.core.toolcalls.auto import builtin_rank
from sseguard.core.toolcalls.grammars.json_array_family import json_after_marker

TOKEN = "<|function_call|>"
ROLE = "function call<|role_sep|>"

FAMILY = json_after_marker("gigachat3", TOKEN, ROLE, framing=("<|message_sep|>", "</s>"),
                           rank=builtin_rank("gigachat3"))
