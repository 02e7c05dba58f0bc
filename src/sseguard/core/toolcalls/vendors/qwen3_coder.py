"""Qwen3-Coder (``qwen3-coder``): the function/parameter tag grammar (``grammars.function_parameters``).
"""

from __future__ import annotations

from sseguard.core.toolcalls.auto import builtin_rank
from sseguard.core.toolcalls.family import Family
from sseguard.core.toolcalls.grammars.function_parameters import (
                FAMILY_MARKERS,
                FUNCTION,
                FUNCTION_END,
                PARAMETER,
                REASONING_EXITS,
                Qwen3CoderParser,
                claim,
                render,
)

FAMILY = Family(name="qwen3-coder", make=Qwen3CoderParser, markers=FAMILY_MARKERS,
                leak_markers=(FUNCTION, FUNCTION_END, PARAMETER), reasoning_exits=REASONING_EXITS,
                auto_markers=FAMILY_MARKERS, claim=claim, render=render, rank=builtin_rank("qwen3-coder"),
                # the engines' names for this grammar (docs/design/markup.md §3.1)
                aliases=("qwen3_coder", "qwen3_xml", "step3p5", "nanbeige", "mimo",
                         "granite_toolcall_parser", "step5"), grammar="F")
