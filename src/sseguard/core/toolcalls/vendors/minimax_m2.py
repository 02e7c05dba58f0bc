"""MiniMax-M2 (``minimax-m2``): the invoke/parameter grammar (``grammars.invoke_parameters``) with its own
tags.
"""

from __future__ import annotations

from sseguard.core.toolcalls.auto import builtin_rank
from sseguard.core.toolcalls.family import Family, claim_openers
from sseguard.core.toolcalls.grammars.invoke_parameters import (
                BLOCK,
                BLOCK_END,
                FAMILY_MARKERS,
                REASONING_EXITS,
                TOKENIZER_MARKERS,
                MiniMaxM2Parser,
                render,
)

FAMILY = Family(name="minimax-m2", make=MiniMaxM2Parser, markers=TOKENIZER_MARKERS,
                # the block tokens are special; stripped, they leave the plain-text invoke tag
                leak_markers=(BLOCK, BLOCK_END, '<invoke name="'), reasoning_exits=REASONING_EXITS,
                auto_markers=FAMILY_MARKERS, claim=claim_openers((BLOCK,)), render=render,
                malformable=True, rank=builtin_rank("minimax-m2"), aliases=("minimax_m2",),
                grammar="G")
