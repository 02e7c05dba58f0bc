"""IBM Granite tool calls, docs/design/markup.md §3: ``granite`` (class B) and ``granite-20b-fc`` (class A′).

Granite 3.0 writes the special token ``<|tool_call|>``, Granite 3.1 the plain text ``<tool_call>``,
then a JSON array of ``{"name", "arguments"}`` objects, and no closer: the calls end where the array
closes (decision 3.8). ``<tool_call>`` is Hermes' opener too, so ``auto`` takes it for
Granite only when ``[`` follows; a named ``granite`` parser reports anything else after its marker
as ``malformed_tag``. Granite-20B-FunctionCalling writes ``<function_call> {…}`` per call, no closer;
whitespace between calls is markup, text before the first one is visible verbatim.
"""

from __future__ import annotations

from sseguard.core.toolcalls.auto import builtin_rank
from sseguard.core.toolcalls.grammars.json_array_family import Opener, json_after_marker, json_array_family

TOKEN = "<|tool_call|>"  # Granite 3.0, special
TAG = "<tool_call>"  # Granite 3.1, plain text
FUNCTION_CALL = "<function_call>"

GRANITE = json_array_family("granite", [Opener(TOKEN), Opener(TAG)], rank=builtin_rank("granite"))
GRANITE_20B_FC = json_after_marker("granite-20b-fc", FUNCTION_CALL, rank=builtin_rank("granite-20b-fc"))
