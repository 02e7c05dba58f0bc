"""Muse Spark / Muse Glimmer (``muse``): ATEM messages with invoke blocks (``grammars.atem_messages``).
"""

from __future__ import annotations

from sseguard.core.toolcalls.auto import builtin_rank
from sseguard.core.toolcalls.family import Family, claim_openers
from sseguard.core.toolcalls.grammars.atem_messages import EOM, MESSAGE, START, MuseParser, render

FAMILY = Family(name="muse", make=MuseParser,
                markers=(START, MESSAGE, EOM, "<atem:function_calls>", "</atem:function_calls>",
                         '<atem:invoke name="', "</atem:invoke>", '<atem:parameter name="',
                         "</atem:parameter>"),
                leak_markers=(START, MESSAGE, EOM, "<atem:function_calls>", '<atem:invoke name="'),
                reasoning_exits=(), auto_markers=("<atem:function_calls>", "</atem:function_calls>"),
                claim=claim_openers(("<atem:function_calls>",)), render=render, malformable=True,
                rank=builtin_rank("muse"), grammar="G+I",
                aliases=("muse_glimmer", "musespark", "musespark1x"))
