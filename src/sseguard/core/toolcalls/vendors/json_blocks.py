"""The class-B families that differ only in their tables (docs/design/markup.md §3.1, §3.3): a JSON array (or
objects one per line) between an opener and a closer, or after a token with no closer.

- ``jamba`` (AI21 Jamba) and ``hunyuan-a13b``: ``<tool_calls>[{…}]</tool_calls>``; Hunyuan-A13B
  writes call blocks inside its reasoning as thinking, so its opener does not end reasoning. It
  wraps its answer in ``<answer>``…``</answer>`` after the reasoning; those tags belong to its
  reasoning split, not to this parser (docs/design/markup.md §3.3): here they are visible text like any other,
  before or after a block.
- ``minimax-m1`` (MiniMax-Text-01/M1, class B′): ``<tool_calls>`` then one object per line; a line
  that is not an object is ``malformed_tag`` for that line only.
- ``phi4-mini``: ``functools[{…}]``; ``functools`` is a Python module name in prose, so only
  ``functools[`` is the marker.
- ``apertus``: ``<|tools_prefix|>[{"NAME": {args}}]<|tools_suffix|>``.
- ``cohere-command`` (Command A): ``<|START_ACTION|>[{"tool_call_id", "tool_name",
  "parameters"}]<|END_ACTION|>``, the id kept as the call id; the response wrappers are markup.

``auto`` tells ``jamba`` (asked first, so it takes ``hunyuan-a13b``'s identical markup) from
``minimax-m1`` by what follows ``<tool_calls>``: ``[`` or a newline and ``{`` (docs/design/markup.md
decision 3.3); Hunyuan's ``<tool_calls><tool_call>`` is neither.
"""

from __future__ import annotations

from sseguard.core.toolcalls.auto import builtin_rank
from sseguard.core.toolcalls.grammars.json_array_family import (
    COHERE,
    NAME_KEY,
    Body,
    Opener,
    json_array_family,
)

TOOL_CALLS, TOOL_CALLS_END = "<tool_calls>", "</tool_calls>"
_BLOCK = Opener(TOOL_CALLS, closer=TOOL_CALLS_END)
COHERE_FRAMING = ("<|START_RESPONSE|>", "<|END_RESPONSE|>", "<|START_TEXT|>", "<|END_TEXT|>")

JAMBA = json_array_family("jamba", [_BLOCK], rank=builtin_rank("jamba"))
HUNYUAN_A13B = json_array_family("hunyuan-a13b", [_BLOCK], reasoning_exits=(),
                                 rank=builtin_rank("hunyuan-a13b"),
                                 aliases=("hunyuan_a13b",))
MINIMAX_M1 = json_array_family(
    "minimax-m1", [Opener(TOOL_CALLS, Body.OBJECTS, TOOL_CALLS_END, separator="\n")],
    rank=builtin_rank("minimax-m1"),
    aliases=("minimax",), grammar="B′")
PHI4_MINI = json_array_family("phi4-mini", [Opener("functools[", opened=True)],
                              rank=builtin_rank("phi4-mini"),
                              aliases=("phi4_mini_json",))
APERTUS = json_array_family("apertus", [Opener("<|tools_prefix|>", closer="<|tools_suffix|>")],
                            shape=NAME_KEY, rank=builtin_rank("apertus"), aliases=("apertus2509",))
COHERE_COMMAND = json_array_family(
    "cohere-command", [Opener("<|START_ACTION|>", closer="<|END_ACTION|>")], shape=COHERE,
    framing=COHERE_FRAMING,
    rank=builtin_rank("cohere-command"), aliases=("cohere_command3", "cohere_command4"))
