"""The key/value-tag families that spell GLM's grammar with other tags (docs/design/markup.md class H):
``iquest-q1``, ``hunyuan``, ``k2-horizon``. One parser (``glm.GLMParser``), one table each.

```
iquest-q1:   <iquest_tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></iquest_tool_call>
hunyuan:     <tool_calls>\\n<tool_call>NAME<tool_sep>\\n<arg_key>K</arg_key>\\n
             <arg_value>V</arg_value>\\n</tool_call>\\n</tool_calls>
k2-horizon:  <ifm|tool_calls><ifm|tool_call>NAME<ifm|arg_key>K</ifm|arg_key>
             <ifm|arg_type>string</ifm|arg_type><ifm|arg_value>V</ifm|arg_value>
             </ifm|tool_call></ifm|tool_calls>          (one line each; the type tag optional)
```

Decisions (docs/design/markup.md §3.3, §3.4): GLM's rules throughout — values typed by the schema, untyped
values strict JSON if they parse else the raw string, byte-exact, no strip. Hunyuan's name ends at
``<tool_sep>`` (Hy3) or at the first ``<arg_key>``/closer (Hy4, no separator); its shipping tokenizer
appends one suffix to every token (``<tool_call:opensource>``): the suffix is a parameter of the
family (``hunyuan_tags``), never guessed. K2 Horizon's optional ``<ifm|arg_type>`` names the value's
type the way DSML's ``string=`` flag does, and its reasoning (``<ifm|think>`` …) keeps any call
markup written inside it as reasoning text (decision 3.9). Nothing here removes a separator: the
templates write none that the engines agree on, so visible text stays verbatim.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from sseguard.core.toolcalls._markers import first_non_ws
from sseguard.core.toolcalls._render import tag_values
from sseguard.core.toolcalls.family import CallLike, Claim, Family, claim_openers
from sseguard.core.toolcalls.glm import GLMParser, KVTags
from sseguard.core.toolcalls.schema import ToolSpec, type_of

IQUEST_TAGS = KVTags(call="<iquest_tool_call>", call_end="</iquest_tool_call>")


def hunyuan_tags(suffix: str = "") -> KVTags:
    """Hunyuan's tags; ``suffix`` is what its tokenizer appends to every token (``opensource`` for
    ``<tool_call:opensource>``; "" for the suffix-less preview tokenizer)."""
    s = f":{suffix}" if suffix else ""
    return KVTags(call=f"<tool_call{s}>", call_end=f"</tool_call{s}>", key=f"<arg_key{s}>",
                  key_end=f"</arg_key{s}>", value=f"<arg_value{s}>", value_end=f"</arg_value{s}>",
                  block=f"<tool_calls{s}>", block_end=f"</tool_calls{s}>",
                  name_end=f"<tool_sep{s}>", reserved=(f"<think{s}>", f"</think{s}>"))


HUNYUAN_TAGS = hunyuan_tags()

#: K2 Horizon's reasoning spans: ``<ifm|think>``, ``<ifm|think_fast>``, ``<ifm|think_faster>``, each
#: closed by its own closer (the closers' spelling is *unverified* against a tokenizer).
K2_THINK = tuple((f"<ifm|{w}>", f"</ifm|{w}>") for w in ("think", "think_fast", "think_faster"))
K2_TAGS = KVTags(call="<ifm|tool_call>", call_end="</ifm|tool_call>", key="<ifm|arg_key>",
                 key_end="</ifm|arg_key>", value="<ifm|arg_value>", value_end="</ifm|arg_value>",
                 block="<ifm|tool_calls>", block_end="</ifm|tool_calls>",
                 arg_type="<ifm|arg_type>", arg_type_end="</ifm|arg_type>", reserved=(),
                 think=K2_THINK, json_body=True)


def _make(name: str, tags: KVTags, tools: ToolSpec | None = None) -> GLMParser:
    return GLMParser(name, tools, tags=tags, separator="", frame=False)


def render(tags: KVTags, nl: str, calls: Sequence[CallLike], malformed: bool) -> str:
    """The calls as the template writes them (``nl`` between tags: Hunyuan writes newlines); with a
    block wrapper when the family has one, with ``<tool_sep>`` and the type tag where it has them.
    ``malformed`` misspells the first call's last value closer (no value: a stray key closer)."""
    out = [f"{tags.block}{nl}"] if tags.block else []
    for i, call in enumerate(calls):
        out.append(f"{tags.call}{call.name}{tags.name_end or ''}{nl}")
        broken = malformed and i == 0
        bad = tags.value_end.replace("value", "valu")
        for key, text, closer in tag_values(call, broken, tags.value_end, bad):
            typed = ""
            if tags.arg_type and tags.arg_type_end:
                typed = f"{tags.arg_type}{type_of(call.values[key])}{tags.arg_type_end}"
            out.append(f"{tags.key}{key}{tags.key_end}{typed}{tags.value}{text}{closer}{nl}")
        stray = tags.key_end if broken and not call.values else ""
        out.append(f"{stray}{tags.call_end}{nl}")
    if tags.block_end:
        out.append(tags.block_end)
    return "".join(out)


def _claim_block(tags: KVTags, held: str, final: bool) -> Claim:
    """The block opener, then (after whitespace) the call tag: ``<tool_calls>`` is also Jamba's
    and MiniMax-M1's opener, which write ``[`` or a JSON object after it (decision 3.3)."""
    assert tags.block is not None
    if not held.startswith(tags.block):
        return Claim.NO
    q = first_non_ws(held, len(tags.block), len(held))
    if q == -1:
        return Claim.NO if final else Claim.MORE
    after = held[q:]
    if after.startswith(tags.call):
        return Claim.YES
    return Claim.MORE if tags.call.startswith(after) and not final else Claim.NO


def family(name: str, tags: KVTags, nl: str = "", aliases: tuple[str, ...] = (),
           claim: Any = None, rank: int = 96) -> Family:
    """A class H family from its tag table. ``auto`` notices it by any of its tags (a stray one is
    reported by the first family that has it) and by its reasoning openers; ``claim`` (default: its
    openers) says which markup is its own."""
    markers = tags.family_markers
    reserved = tuple(t for pair in tags.think for t in pair)
    think_openers = tuple(pair[0] for pair in tags.think)
    openers = tuple(t for t in (tags.block, tags.call) if t)
    return Family(
        name=name, make=partial(_make, name, tags), markers=(*markers, *reserved),
        leak_markers=markers,
        # decision 3.9: K2 Horizon's reasoning keeps call markup; the others end it at an opener
        reasoning_exits=() if tags.think else openers,
        auto_markers=(*markers, *reserved), claim=claim or claim_openers(openers + think_openers),
        render=partial(render, tags, nl), malformable=True, rank=rank, aliases=aliases,
        grammar="H", reasoning_spans=tuple(tags.think))


IQUEST_Q1 = family("iquest-q1", IQUEST_TAGS, aliases=("iquest_q1",))
HUNYUAN = family("hunyuan", HUNYUAN_TAGS, "\n", aliases=("hy_v3", "hy_v4"),
                 claim=partial(_claim_block, HUNYUAN_TAGS))
K2_HORIZON = family("k2-horizon", K2_TAGS, aliases=("k2_horizon",))

__all__ = ["HUNYUAN", "IQUEST_Q1", "K2_HORIZON", "hunyuan_tags"]
