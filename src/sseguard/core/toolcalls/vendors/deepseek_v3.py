"""DeepSeek V3 / R1 (``deepseek-v3``) and V3.1 (``deepseek-v31``): the tool-separator grammar
(``grammars.tool_sep_json``).
"""

from __future__ import annotations

from functools import partial

from sseguard.core.toolcalls.auto import builtin_rank
from sseguard.core.toolcalls.family import Family, Render
from sseguard.core.toolcalls.grammars.tool_sep_json import (
    FAMILY_MARKERS,
    REASONING_EXITS,
    DeepSeekV3Parser,
    claim,
    render_v3,
    render_v31,
)

#: The names the engines register for each family (docs/design/markup.md §3.1; SGLang 0.5.23's
#: ``deepseekv31`` was found by bench/engines/bench_engines.py).
ALIASES = {"deepseek-v3": ("deepseek_v3", "deepseekv3"),
           "deepseek-v31": ("deepseek_v31", "deepseekv31")}


def _family(name: str, render: Render) -> Family:
    return Family(name=name, make=partial(DeepSeekV3Parser, name), markers=FAMILY_MARKERS,
                  leak_markers=FAMILY_MARKERS, reasoning_exits=REASONING_EXITS,
                  auto_markers=FAMILY_MARKERS, claim=partial(claim, name), render=render,
                  rank=builtin_rank(name),
                  aliases=ALIASES[name], grammar="C")


DEEPSEEK_V3 = _family("deepseek-v3", render_v3)
DEEPSEEK_V31 = _family("deepseek-v31", render_v31)
