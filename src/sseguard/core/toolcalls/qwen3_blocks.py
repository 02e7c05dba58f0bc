"""The Qwen3-Coder body in other blocks (docs/design/markup.md class F): ``seed-oss`` and ``zaya``.

```
seed-oss:  text\\n\\n<seed:tool_call>\\n<function=NAME>\\n<parameter=K>\\nV\\n</parameter>\\n</function>\\n
           </seed:tool_call>
zaya:      text\\n\\n<zyphra_tool_call>\\n<function=NAME>…</function>\\n</zyphra_tool_call>
```

One parser (``qwen3_coder.Qwen3CoderParser``) with the block's tags as parameters; every rule of
``qwen3-coder`` holds (values typed by the schema, ``null`` null, one wrapping newline removed,
``\\n\\n`` before the first block and ``\\n`` before later ones removed).

Seed-OSS reasons in ``<seed:think>`` … ``</seed:think>``, which its parser reads itself: a
``<seed:tool_call>`` written inside the reasoning is the model quoting the format and stays reasoning
text (decision 3.9; vLLM 0.34's Qwen3 engine would make it a call), and
``<seed:cot_budget_reflect>`` inside it is reasoning text too.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from sseguard.core.toolcalls.family import CallLike, Family, claim_openers
from sseguard.core.toolcalls.qwen3_coder import (
    FUNCTION,
    FUNCTION_END,
    PARAMETER,
    PARAMETER_END,
    Qwen3CoderParser,
    render,
)
from sseguard.core.toolcalls.schema import ToolSpec

SEED_THINK = (("<seed:think>", "</seed:think>"),)


def _make(name: str, opener: str, closer: str, think: tuple[tuple[str, str], ...],
          tools: ToolSpec | None = None) -> Qwen3CoderParser:
    return Qwen3CoderParser(tools, family=name, opener=opener, closer=closer, think=think)


def family(name: str, opener: str, closer: str, aliases: tuple[str, ...],
           think: tuple[tuple[str, str], ...] = ()) -> Family:
    """A class F family: the Qwen3-Coder body inside ``opener`` … ``closer``. A family that reads its
    own reasoning span is noticed by its opener too (``auto`` hands the reasoning to it), and no
    call opener ends that reasoning (decision 3.9)."""
    think_tags = tuple(t for pair in think for t in pair)
    markers = (opener, closer, FUNCTION, FUNCTION_END, PARAMETER, PARAMETER_END)
    openers = (opener, *(pair[0] for pair in think))
    return Family(name=name, make=partial(_make, name, opener, closer, think),
                  # the block tokens are special; stripped, they leave Qwen3-Coder's plain tags
                  markers=(*markers, *think_tags),
                  leak_markers=(opener, closer, FUNCTION, FUNCTION_END, PARAMETER),
                  reasoning_exits=() if think else (opener,), auto_markers=(*markers, *think_tags),
                  claim=claim_openers(openers),
                  render=partial(_render, opener, closer), rank=96, aliases=aliases,
                  grammar="F", reasoning_spans=think)


def _render(opener: str, closer: str, calls: Sequence[CallLike], malformed: bool) -> str:
    return render(calls, malformed, opener, closer)


SEED_OSS = family("seed-oss", "<seed:tool_call>", "</seed:tool_call>", ("seed_oss",), SEED_THINK)
ZAYA = family("zaya", "<zyphra_tool_call>", "</zyphra_tool_call>", ("zaya_xml",))
