"""Salesforce xLAM-2 (``xlam``), docs/design/markup.md class B: one JSON array of ``{"name", "arguments"}``
objects in any of four shapes — the bare array where the answer starts, a ```` ```json ```` (or bare
```` ``` ````) fence whose body starts with ``[``, ``[TOOL_CALLS]`` and an array, ``<tool_call>``, an
array and ``</tool_call>``. A fence whose body is not an array is an ordinary code block (text).
Text outside the calls is verbatim. Every marker of xLAM is another family's too (Granite 3.1's
``<tool_call>[``, Mistral's ``[TOOL_CALLS]``), so ``auto`` never claims it: name it.
"""

from __future__ import annotations

from sseguard.core.toolcalls.auto import builtin_rank
from sseguard.core.toolcalls.grammars.json_array_family import Body, Opener, json_array_family

TAG, TAG_END = "<tool_call>", "</tool_call>"
TOOL_CALLS = "[TOOL_CALLS]"
FENCE_JSON, FENCE = "```json", "```"

FAMILY = json_array_family(
    "xlam", [Opener(TAG, closer=TAG_END), Opener(TOOL_CALLS),
             Opener(FENCE_JSON, closer=FENCE, soft=True), Opener(FENCE, closer=FENCE, soft=True)],
    start=Body.ARRAY, leak_markers=(TAG, TAG_END, TOOL_CALLS), auto=False, rank=builtin_rank("xlam"))
