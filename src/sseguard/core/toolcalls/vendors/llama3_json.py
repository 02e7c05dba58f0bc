"""Llama 3.1/3.2 JSON tool calls and Llama 4's (``llama3-json``; vLLM ``llama3_json``,
``llama4_json``, SGLang ``llama3``), docs/design/markup.md class B.

``<|python_tag|>`` (optional), then ``{"name": …, "parameters"|"arguments": {…}}`` objects separated
by ``;``. Without the tag the objects are calls only where the answer starts with ``{"`` (after
whitespace; decision 3.2): a ``{`` anywhere else is text, and ``auto`` never claims an
untagged answer. Strict JSON only (no Python dicts). Whitespace after an object is held until a
``;``, the next ``{`` or other text decides; text after the last object is visible. The end-of-turn
tokens are markup wherever they stand.
"""

from __future__ import annotations

from sseguard.core.toolcalls.auto import builtin_rank
from sseguard.core.toolcalls.grammars.json_array_family import (
    NAME_PARAMETERS,
    Body,
    Opener,
    json_array_family,
)

PYTHON_TAG = "<|python_tag|>"
END_TOKENS = ("<|eom_id|>", "<|eot_id|>", "<|end_of_text|>")

FAMILY = json_array_family(
    "llama3-json", [Opener(PYTHON_TAG, Body.OBJECTS, separator=";")], shape=NAME_PARAMETERS,
    start=Body.OBJECTS, start_separator=";", framing=END_TOKENS, leak_markers=(PYTHON_TAG,),
    rank=builtin_rank("llama3-json"), aliases=("llama3_json", "llama4_json", "llama3"))
