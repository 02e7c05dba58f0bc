"""Kimi K2 / K2-Thinking / K2.5 (``kimi-k2``, docs/design/markup.md §2): sections of calls headed
by the model's call id (``grammars.call_id_json``).
"""

from __future__ import annotations

from sseguard.core.toolcalls.auto import builtin_rank
from sseguard.core.toolcalls.family import Family, claim_openers
from sseguard.core.toolcalls.grammars.call_id_json import (
    ARG_BEGIN,
    CALL_BEGIN,
    CALL_END,
    FAMILY_MARKERS,
    REASONING_EXITS,
    SECTION_BEGIN,
    SECTION_BEGIN_1,
    SECTION_END,
    SECTION_END_1,
    KimiK2Parser,
    render,
)

FAMILY = Family(
    name="kimi-k2", make=KimiK2Parser, markers=FAMILY_MARKERS,
    leak_markers=(SECTION_BEGIN, SECTION_BEGIN_1, CALL_BEGIN, ARG_BEGIN, CALL_END, SECTION_END,
                  SECTION_END_1),
    reasoning_exits=REASONING_EXITS, auto_markers=FAMILY_MARKERS,
    claim=claim_openers((SECTION_BEGIN, SECTION_BEGIN_1, CALL_BEGIN)), render=render,
    # decision 2.11: the special tokens stripped, a call leaves ``functions.NAME:IDX{…}``
    leak_shape=r"functions\.[^\s{}]{1,64}?:[0-9]{1,9}\s{0,4}\{", malformable=True,
    rank=builtin_rank("kimi-k2"),
    aliases=("kimi_k2",), grammar="C")
