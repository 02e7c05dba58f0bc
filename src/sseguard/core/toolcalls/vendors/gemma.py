"""FunctionGemma (``functiongemma``) and Gemma 4 (``gemma4``): ``call:NAME{…}`` (``grammars.call_braces``)
in each spelling.
"""

from __future__ import annotations

from sseguard.core.toolcalls.auto import builtin_rank
from sseguard.core.toolcalls.grammars.call_braces import GemmaParser, Syntax, gemma_family, gemma_value

FUNCTIONGEMMA = gemma_family("functiongemma", Syntax(
    "<start_function_call>", "<end_function_call>", "<escape>", typed_strings=True,
    quoted_keys=False, comma_optional=True), rank=builtin_rank("functiongemma"))
GEMMA4 = gemma_family("gemma4", Syntax(
    "<|tool_call>", "<tool_call|>", '<|"|>', typed_strings=False, quoted_keys=True,
    comma_optional=False, think=("<|channel>thought", "<channel|>")), rank=builtin_rank("gemma4"))

__all__ = ["FUNCTIONGEMMA", "GEMMA4", "GemmaParser", "Syntax", "gemma_family", "gemma_value"]
