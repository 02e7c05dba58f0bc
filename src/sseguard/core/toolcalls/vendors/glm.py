"""GLM-4.5/4.6 (``glm45``) and GLM-4.7/GLM-5.x (``glm47``): the key/value tag grammar
(``grammars.key_value_tags``) with each spacing.
"""

from __future__ import annotations

from functools import partial

from sseguard.core.toolcalls.auto import builtin_rank
from sseguard.core.toolcalls.family import Family
from sseguard.core.toolcalls.grammars.key_value_tags import (
    FAMILY_MARKERS,
    REASONING_EXITS,
    GLMParser,
    claim,
    render,
)

#: The engines' names for each family (docs/design/markup.md §3): SGLang's ``glm`` (GLM-4.5), and the grammars
#: that are GLM-4.5's with either spacing (``poolside_v1``, ``ling3``, ``spark25``), which ``glm45``
#: reads.
ALIASES = {"glm45": ("glm", "poolside_v1", "ling3", "spark25"), "glm47": ()}


def _family(name: str) -> Family:
    return Family(name=name, make=partial(GLMParser, name), markers=FAMILY_MARKERS,
                  leak_markers=FAMILY_MARKERS, reasoning_exits=REASONING_EXITS,
                  auto_markers=FAMILY_MARKERS, claim=partial(claim, name),
                  render=partial(render, name), malformable=True, rank=builtin_rank(name),
                  aliases=ALIASES[name], grammar="H")


GLM45 = _family("glm45")
GLM47 = _family("glm47")
