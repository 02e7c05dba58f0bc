"""MiniMax-M3 (``minimax-m3``): nested parameter elements (``grammars.nested_elements``).
"""

from __future__ import annotations

from sseguard.core.toolcalls.auto import builtin_rank
from sseguard.core.toolcalls.family import Family, claim_openers
from sseguard.core.toolcalls.grammars.nested_elements import NS, MiniMaxM3Parser, render

FAMILY = Family(name="minimax-m3", make=MiniMaxM3Parser,
                markers=(NS, f"{NS}<tool_call>", f"{NS}</tool_call>", f"{NS}<invoke name=\"",
                         f"{NS}</invoke>"),
                # "<]minimax[>[" is in every leaked token and starts with "<", the lead every other
                # leak marker has: the checker's scan stays on its two-lead fast path
                leak_markers=(NS[1:],), reasoning_exits=(NS,), auto_markers=(NS,),
                claim=claim_openers((NS,)), render=render, malformable=True,
                rank=builtin_rank("minimax-m3"), grammar="G′",
                aliases=("minimax_m3",))
