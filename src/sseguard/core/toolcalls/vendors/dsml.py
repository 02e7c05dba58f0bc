"""DeepSeek DSML (V3.2, V4, V4.1): the DSML grammar (``grammars.dsml``) with each version's tag names.
"""

from __future__ import annotations

from functools import partial

from sseguard.core.toolcalls.auto import builtin_rank
from sseguard.core.toolcalls.family import Family
from sseguard.core.toolcalls.grammars.dsml import (
    CLOSE,
    MARK,
    OPEN,
    REASONING_EXITS,
    DSMLParser,
    claim,
    family_markers,
    render,
)

#: The names the engines register for each DSML family (docs/design/markup.md §3.1), SGLang
#: 0.5.23's ``deepseekv32`` included.
ALIASES = {"dsml-v32": ("deepseek_v32", "deepseekv32"), "dsml-v4": ("deepseek_v4", "deepseekv4"),
           "dsml-v41": ("deepseek_v41", "deepseekv41")}


def _family(name: str) -> Family:
    return Family(name=name, make=partial(DSMLParser, name), markers=tuple(family_markers(name)),
                  leak_markers=(MARK,), reasoning_exits=REASONING_EXITS, auto_markers=(OPEN, CLOSE),
                  claim=partial(claim, name), render=partial(render, name), malformable=True,
                  rank=builtin_rank(name),
                  aliases=ALIASES[name], grammar="G (DSML)")


DSML_V32 = _family("dsml-v32")
DSML_V4 = _family("dsml-v4")
DSML_V41 = _family("dsml-v41")
