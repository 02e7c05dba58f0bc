"""The key/value-tag families that spell GLM's grammar with other tags (docs/design/markup.md class H):
``iquest-q1``, ``hunyuan``, ``k2-horizon``. One parser (``key_value_tags.GLMParser``), one table each.

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

from functools import partial

from sseguard.core.toolcalls.auto import builtin_rank
from sseguard.core.toolcalls.grammars.key_value_tags import KVTags, claim_block, kv_family

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


IQUEST_Q1 = kv_family("iquest-q1", IQUEST_TAGS, aliases=("iquest_q1",), rank=builtin_rank("iquest-q1"))
HUNYUAN = kv_family("hunyuan", HUNYUAN_TAGS, "\n", aliases=("hy_v3", "hy_v4"),
                 claim=partial(claim_block, HUNYUAN_TAGS), rank=builtin_rank("hunyuan"))
K2_HORIZON = kv_family("k2-horizon", K2_TAGS, aliases=("k2_horizon",), rank=builtin_rank("k2-horizon"))

__all__ = ["HUNYUAN", "IQUEST_Q1", "K2_HORIZON", "hunyuan_tags"]
