"""The invoke/parameter families that spell MiniMax-M2's elements otherwise (docs/design/markup.md class G):
``dots``, ``step3``, ``minicpm5``. One parser (``minimax_m2.MiniMaxM2Parser``), one table each.

```
dots:      <dots_function_call><invoke name="N"><parameter name="K">V</parameter></invoke>
           </dots_function_call>
step3:     <｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="N">
           <steptml:parameter name="K">V</steptml:parameter></steptml:invoke><｜tool_call_end｜>
           <｜tool_calls_end｜>
minicpm5:  <function name="N"><param name='K'>V</param></function>       (no block)
```

Decisions (docs/design/markup.md §3.3, §3.4): values byte-exact, typed by the schema; untyped values are the
raw string (MiniMax's rule) for ``dots`` and ``minicpm5``, strict JSON if they parse else the raw string
(GLM's rule) for ``step3``. Step-3's markers use the fullwidth ``｜`` and no ``▁`` (they are not
DeepSeek's); its type word must be ``function`` (else ``malformed_tag``); a ``<`` in a value is
value text (SGLang drops such a parameter). MiniCPM's ``name=`` takes single or double quotes, a
value may be one CDATA section whose inside is taken as is (no entity decoding anywhere), and its
``<function`` is a call only when `` name=`` follows: ``<function=`` (Qwen3-Coder),
``<function_call>`` and ``<function_calls>`` are other families' (decision 3.3). Visible text is
verbatim: no separator removed, no answer framing.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from sseguard.core.toolcalls._render import tag_values
from sseguard.core.toolcalls.family import CallLike, Family, claim_openers
from sseguard.core.toolcalls.minimax_m2 import InvokeTags, MiniMaxM2Parser
from sseguard.core.toolcalls.schema import ToolSpec

DOTS_TAGS = InvokeTags(block="<dots_function_call>", block_end="</dots_function_call>",
                       separator="", frame=False, json_body=True)
STEP3_TAGS = InvokeTags(block="<｜tool_calls_begin｜>", block_end="<｜tool_calls_end｜>",
                        invoke="steptml:invoke", parameter="steptml:parameter",
                        wrap=("<｜tool_call_begin｜>", "<｜tool_sep｜>", "<｜tool_call_end｜>"),
                        untyped_json=True, separator="", frame=False)
MINICPM5_TAGS = InvokeTags(block=None, block_end=None, invoke="function", parameter="param",
                           quotes="\"'", cdata=True, separator="", frame=False)


def _make(name: str, tags: InvokeTags, tools: ToolSpec | None = None) -> MiniMaxM2Parser:
    return MiniMaxM2Parser(tools, family=name, tags=tags)


def render(tags: InvokeTags, calls: Sequence[CallLike], malformed: bool) -> str:
    """The calls as the family's template writes them; ``malformed`` misspells the first call's last
    value closer (no value: its invoke closer)."""
    out = [tags.block] if tags.block else []
    misspelt = f"</{tags.parameter[:-1]}>"
    for i, call in enumerate(calls):
        broken = malformed and i == 0
        if tags.wrap:
            out.append(f"{tags.wrap[0]}function{tags.wrap[1]}")
        out.append(f'<{tags.invoke} name="{call.name}">')
        out.extend(f'<{tags.parameter} name="{key}">{text}{closer}'
                   for key, text, closer in tag_values(call, broken, tags.param_end, misspelt))
        out.append(f"</{tags.invoke[:-1]}>" if broken and not call.values else tags.invoke_end)
        if tags.wrap:
            out.append(tags.wrap[2])
    if tags.block_end:
        out.append(tags.block_end)
    return "".join(out)


def family(name: str, tags: InvokeTags, openers: tuple[str, ...], aliases: tuple[str, ...],
           leak: tuple[str, ...]) -> Family:
    """A class G family from its tag table: ``openers`` start its markup (what ``auto`` looks for
    and what ends reasoning), ``leak`` what in visible text means its markup leaked."""
    tokens = tuple(t for t in (tags.block, tags.block_end, *(tags.wrap or ())) if t)
    markers = (*tokens, f'<{tags.invoke} name="', tags.invoke_end, f'<{tags.parameter} name="',
               tags.param_end)
    return Family(name=name, make=partial(_make, name, tags), markers=markers, leak_markers=leak,
                  reasoning_exits=openers, auto_markers=tokens or openers,
                  claim=claim_openers(openers), render=partial(render, tags), malformable=True,
                  rank=96, aliases=aliases, grammar="G")


# the block tokens are special; stripped, they leave the plain-text invoke tag (as MiniMax-M2's)
DOTS = family("dots", DOTS_TAGS, ("<dots_function_call>",), ("dots3", "dots3_note"),
              ("<dots_function_call>", "</dots_function_call>", '<invoke name="'))
STEP3 = family("step3", STEP3_TAGS, ("<｜tool_calls_begin｜>",), (),
               ("<｜tool_calls_begin｜>", "<｜tool_calls_end｜>", "<｜tool_call_begin｜>",
                "<｜tool_call_end｜>", "<steptml:"))
MINICPM5 = family("minicpm5", MINICPM5_TAGS, ('<function name="', "<function name='"),
                  (), ('<function name="', "<function name='", "</param>"))
