"""GigaChat 3.5 (``gigachat35``): the DSML grammar with the ``｜GCML｜`` marker (``grammars.dsml_gcml``).
"""

from __future__ import annotations

from sseguard.core.toolcalls.auto import builtin_rank
from sseguard.core.toolcalls.family import Family, claim_openers
from sseguard.core.toolcalls.grammars.dsml_gcml import BLOCK, CLOSE, GCML, OPEN, GigaChat35Parser, render

FAMILY = Family(name="gigachat35", make=GigaChat35Parser,
                markers=(GCML, f"{OPEN}{BLOCK}>", f"{CLOSE}{BLOCK}>", f"{OPEN}invoke",
                         f"{CLOSE}invoke>", f"{OPEN}parameter", f"{CLOSE}parameter>"),
                leak_markers=(GCML,), reasoning_exits=(OPEN,), auto_markers=(OPEN, CLOSE),
                claim=claim_openers((OPEN, CLOSE)), render=render, malformable=True,
                rank=builtin_rank("gigachat35"),
                grammar="G (DSML)")
