"""Kimi K3 (``kimi-k3``): the XTML grammar (``grammars.xtml``).
"""

from __future__ import annotations

from sseguard.core.toolcalls.auto import builtin_rank
from sseguard.core.toolcalls.family import Family, claim_openers
from sseguard.core.toolcalls.grammars.xtml import CLOSE, OPEN, SEP, KimiK3Parser, render

FAMILY = Family(name="kimi-k3", make=KimiK3Parser,
                markers=(OPEN, CLOSE, SEP, f"{OPEN}tools{SEP}", f"{OPEN}call", f"{OPEN}argument"),
                leak_markers=(OPEN, CLOSE, SEP), reasoning_exits=(),
                auto_markers=(OPEN, CLOSE, SEP), claim=claim_openers((OPEN, CLOSE, SEP)),
                render=render, malformable=True,
                rank=builtin_rank("kimi-k3"), grammar="G+I", aliases=("kimi_k3",))
