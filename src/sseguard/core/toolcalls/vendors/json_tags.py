"""The class-A families of docs/design/markup.md §3: one JSON call object between an opener and a closer,
``json_in_tags`` with the options each needs.

- ``longcat`` (LongCat-Flash): ``<longcat_tool_call>{…}</longcat_tool_call>``.
- ``ernie45`` (ERNIE-4.5 Thinking): Hermes' grammar and separator (``\\n`` before ``<tool_call>``);
  ``auto`` reads that markup as ``hermes`` (asked first), with the same result. The
  ``<response>``…``</response>`` wrapper its template writes around the answer after the reasoning
  is framing (docs/design/markup.md §3.3, decision 3.1): the tags are ``Markup`` wherever they stand outside a
  call, the text between them visible verbatim (vLLM's parser drops the text after a call).
- ``internlm`` (InternLM2, Intern-S1): ``<|action_start|><|plugin|>\\n{…}<|action_end|>``, with any
  whitespace between the two opening tokens (SGLang writes a space, vLLM none); ``parameters`` is
  the template's key. ``<|action_start|>`` before anything but ``<|plugin|>`` (the code interpreter's
  ``<|interpreter|>``) is no call: it stays text, and so does its ``<|action_end|>``.
- ``inkling``: messages ``<|message_model|><|content_…|>…<|end_message|>``: a
  ``<|content_invoke_tool_json|>`` message is one call (arguments under ``args``, ``arguments`` or
  ``parameters``), a ``<|content_text|>`` message visible text, a ``<|content_thinking|>`` message
  reasoning; ``<|content_model_end_sampling|>`` ends a message like ``<|end_message|>``.
"""

from __future__ import annotations

from sseguard.core.toolcalls.auto import builtin_rank
from sseguard.core.toolcalls.grammars.json_in_tags import MARKUP, REASONING, TEXT, json_in_tags

LONGCAT = json_in_tags("longcat", "<longcat_tool_call>", "</longcat_tool_call>", rank=builtin_rank("longcat"),
                       malformable=True)
RESPONSE, RESPONSE_END = "<response>", "</response>"
ERNIE45 = json_in_tags("ernie45", "<tool_call>", "</tool_call>", separator="\n", rank=builtin_rank("ernie45"),
                       malformable=True, framing=(RESPONSE, RESPONSE_END))
INTERNLM = json_in_tags("internlm", "<|action_start|>", "<|action_end|>", follow="<|plugin|>",
                        keys=("parameters", "arguments"), stray=TEXT, leak_markers=("<|plugin|>",),
                        rank=builtin_rank("internlm"), aliases=("interns1",))
INKLING = json_in_tags(
    "inkling", "<|message_model|>", "<|end_message|>", follow="<|content_invoke_tool_json|>",
    channels={"<|content_text|>": TEXT, "<|content_thinking|>": REASONING},
    closers=("<|content_model_end_sampling|>",), keys=("args", "arguments", "parameters"),
    stray=MARKUP, reasoning_exits=(), rank=builtin_rank("inkling"), grammar="A (I)")
