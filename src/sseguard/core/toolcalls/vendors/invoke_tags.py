"""The invoke/parameter families that spell MiniMax-M2's elements otherwise (docs/design/markup.md class G):
``dots``, ``step3``, ``minicpm5``. One parser (``invoke_parameters.MiniMaxM2Parser``), one table each.

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

from sseguard.core.toolcalls.auto import builtin_rank
from sseguard.core.toolcalls.grammars.invoke_parameters import InvokeTags, invoke_family

DOTS_TAGS = InvokeTags(block="<dots_function_call>", block_end="</dots_function_call>",
                       separator="", frame=False, json_body=True)
STEP3_TAGS = InvokeTags(block="<｜tool_calls_begin｜>", block_end="<｜tool_calls_end｜>",
                        invoke="steptml:invoke", parameter="steptml:parameter",
                        wrap=("<｜tool_call_begin｜>", "<｜tool_sep｜>", "<｜tool_call_end｜>"),
                        untyped_json=True, separator="", frame=False)
MINICPM5_TAGS = InvokeTags(block=None, block_end=None, invoke="function", parameter="param",
                           quotes="\"'", cdata=True, separator="", frame=False)


# the block tokens are special; stripped, they leave the plain-text invoke tag (as MiniMax-M2's)
DOTS = invoke_family("dots", DOTS_TAGS, ("<dots_function_call>",), ("dots3", "dots3_note"),
              ("<dots_function_call>", "</dots_function_call>", '<invoke name="'), rank=builtin_rank("dots"))
STEP3 = invoke_family("step3", STEP3_TAGS, ("<｜tool_calls_begin｜>",), (),
               ("<｜tool_calls_begin｜>", "<｜tool_calls_end｜>", "<｜tool_call_begin｜>",
                "<｜tool_call_end｜>", "<steptml:"), rank=builtin_rank("step3"))
MINICPM5 = invoke_family("minicpm5", MINICPM5_TAGS, ('<function name="', "<function name='"),
                  (), ('<function name="', "<function name='", "</param>"), rank=builtin_rank("minicpm5"))
