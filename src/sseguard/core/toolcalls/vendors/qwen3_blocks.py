"""The Qwen3-Coder body in other blocks (docs/design/markup.md class F): ``seed-oss`` and ``zaya``.

```
seed-oss:  text\\n\\n<seed:tool_call>\\n<function=NAME>\\n<parameter=K>\\nV\\n</parameter>\\n</function>\\n
           </seed:tool_call>
zaya:      text\\n\\n<zyphra_tool_call>\\n<function=NAME>…</function>\\n</zyphra_tool_call>
```

One parser (``function_parameters.Qwen3CoderParser``) with the block's tags as parameters; every rule of
``qwen3-coder`` holds (values typed by the schema, ``null`` null, one wrapping newline removed,
``\\n\\n`` before the first block and ``\\n`` before later ones removed).

Seed-OSS reasons in ``<seed:think>`` … ``</seed:think>``, which its parser reads itself: a
``<seed:tool_call>`` written inside the reasoning is the model quoting the format and stays reasoning
text (decision 3.9; vLLM 0.34's Qwen3 engine would make it a call), and
``<seed:cot_budget_reflect>`` inside it is reasoning text too.
"""

from __future__ import annotations

from sseguard.core.toolcalls.auto import builtin_rank
from sseguard.core.toolcalls.grammars.function_parameters import block_family

SEED_THINK = (("<seed:think>", "</seed:think>"),)


SEED_OSS = block_family("seed-oss", "<seed:tool_call>", "</seed:tool_call>", ("seed_oss",), SEED_THINK,
                        rank=builtin_rank("seed-oss"))
ZAYA = block_family("zaya", "<zyphra_tool_call>", "</zyphra_tool_call>", ("zaya_xml",),
                    rank=builtin_rank("zaya"))
