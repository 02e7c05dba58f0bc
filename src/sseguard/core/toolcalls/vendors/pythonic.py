"""Python call lists (``pythonic``, ``olmo3``, ``lfm2``): the grammars of ``grammars.python_lists``.
"""

from __future__ import annotations

from sseguard.core.toolcalls.auto import builtin_rank
from sseguard.core.toolcalls.family import Family
from sseguard.core.toolcalls.grammars.python_lists import (
    FUNCTION_CALLS,
    FUNCTION_CALLS_END,
    PYTHON_END,
    PYTHON_START,
    TOOL_CALL_END,
    TOOL_CALL_START,
    Lfm2Parser,
    Olmo3Parser,
    PythonicParser,
    claim_block,
    claim_pythonic,
    py_call,
    py_literal,
    render_lfm2,
    render_olmo3,
    render_pythonic,
)

PYTHONIC = Family(
    name="pythonic", make=PythonicParser, markers=(PYTHON_START, PYTHON_END),
    leak_markers=(PYTHON_START, PYTHON_END), reasoning_exits=(PYTHON_START,),
    auto_markers=(PYTHON_START, PYTHON_END), claim=claim_pythonic, render=render_pythonic,
    rank=builtin_rank("pythonic"), aliases=("llama4_pythonic",), grammar="D")

OLMO3 = Family(
    name="olmo3", make=Olmo3Parser, markers=(FUNCTION_CALLS, FUNCTION_CALLS_END),
    leak_markers=(FUNCTION_CALLS, FUNCTION_CALLS_END), reasoning_exits=(FUNCTION_CALLS,),
    auto_markers=(FUNCTION_CALLS, FUNCTION_CALLS_END), claim=claim_block(FUNCTION_CALLS),
    render=render_olmo3, rank=builtin_rank("olmo3"), grammar="D")

LFM2 = Family(
    name="lfm2", make=Lfm2Parser, markers=(TOOL_CALL_START, TOOL_CALL_END),
    leak_markers=(TOOL_CALL_START, TOOL_CALL_END), reasoning_exits=(TOOL_CALL_START,),
    auto_markers=(TOOL_CALL_START, TOOL_CALL_END), claim=claim_block(TOOL_CALL_START),
    render=render_lfm2, rank=builtin_rank("lfm2"), grammar="D (+B)")

__all__ = ["LFM2", "OLMO3", "PYTHONIC", "py_call", "py_literal"]
