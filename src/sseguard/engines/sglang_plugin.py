"""The ``sglang.srt.plugins`` entry point: adds sseguard's detectors to SGLang's parser maps.

SGLang runs every general plugin once per process, ``sglang serve`` before it parses its arguments
(docs/design/engine-facts.md). ``--tool-call-parser`` takes its argparse choices from
``FunctionCallParser.ToolCallParserEnum`` only when ``function_call_parser`` is already imported, so
this imports it before adding the names; ``--reasoning-parser`` likewise reads
``ReasoningParser.DetectorMap``. The maps hold classes, so one small subclass per name is made here.

The hook on ``OpenAIServingChat._process_tool_call_id`` keeps a call id the markup wrote itself
(Kimi's ``functions.NAME:IDX``): SGLang otherwise makes one, and keeps the model's own only for its
built-in ``kimi_k2`` parser. A failure here is logged; SGLang's own parsers keep working.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

_log = logging.getLogger(__name__)

ID_MAKER = "sglang.srt.entrypoints.openai.serving_chat.OpenAIServingChat._process_tool_call_id"


def keep_markup_id(original: Callable[..., str], self: Any, call_item: Any, *args: Any,
                   **kwargs: Any) -> str:
    """The call id the markup wrote, where it wrote one; SGLang's own otherwise."""
    own = getattr(call_item, "call_id", None)
    return own if isinstance(own, str) and own else original(self, call_item, *args, **kwargs)


def register() -> None:
    """Add ``sseguard-<family>`` (and ``-stream``) tool detectors and ``sseguard-<family>`` reasoning
    detectors to SGLang's maps (idempotent: the same names map to equal classes again)."""
    try:
        from sglang.srt.function_call.function_call_parser import FunctionCallParser
        from sglang.srt.parser.reasoning_parser import ReasoningParser
        from sglang.srt.plugins.hook_registry import HookRegistry, HookType

        from sseguard.engines import reasoning_parser_names, tool_parser_names
        from sseguard.engines.sglang_detector import SseguardDetector, SseguardReasoningDetector

        tools = FunctionCallParser.ToolCallParserEnum
        for name, meaning in tool_parser_names().items():
            if name not in tools:
                tools[name] = type(name, (SseguardDetector,), {
                    "sseguard": meaning, "registered_as": name, "__module__": SseguardDetector.__module__})
        detectors = ReasoningParser.DetectorMap
        for name, meaning in reasoning_parser_names().items():
            if name not in detectors:
                detectors[name] = type(name, (SseguardReasoningDetector,), {
                    "sseguard": meaning, "__module__": SseguardReasoningDetector.__module__})
        if ID_MAKER not in HookRegistry._hooks:
            HookRegistry.register(ID_MAKER, keep_markup_id, HookType.AROUND)
    except Exception:  # never stop the engine: its own parsers still work
        _log.exception("sseguard: registering the sseguard-* parsers with SGLang failed")
