"""The ``vllm.general_plugins`` entry point: registers sseguard's parsers by name, lazily.

vLLM runs every general plugin once per process, in the API server (twice: while building its
argument parser and in ``EngineArgs``), the engine core and each worker (docs/design/engine-facts.md). So this
is idempotent and cheap: one ``register_lazy_module`` call per name, no parser class built. The
classes come into being on the first ``get_tool_parser``/``get_reasoning_parser`` of their name,
from ``vllm_tool`` and ``vllm_reasoning`` (whose module ``__getattr__`` makes one per name).

An exception raised here would stop vLLM (the plugin loader does not catch what the callable
raises), so a failure is logged and leaves vLLM's own parsers working.
"""

from __future__ import annotations

import logging

_log = logging.getLogger(__name__)

TOOL_MODULE = "sseguard.engines.vllm_tool"
REASONING_MODULE = "sseguard.engines.vllm_reasoning"


def register() -> None:
    """Register ``sseguard-<family>`` (and ``-stream``) tool parsers and ``sseguard-<family>``
    reasoning parsers with vLLM's managers (the class name is the registered name)."""
    try:
        from vllm.reasoning.abs_reasoning_parsers import ReasoningParserManager
        from vllm.tool_parsers.abstract_tool_parser import ToolParserManager

        from sseguard.engines import reasoning_parser_names, tool_parser_names

        for name in tool_parser_names():
            ToolParserManager.register_lazy_module(name, TOOL_MODULE, name)
        for name in reasoning_parser_names():
            ReasoningParserManager.register_lazy_module(name, REASONING_MODULE, name)
    except Exception:  # never stop the engine: its own parsers still work
        _log.exception("sseguard: registering the sseguard-* parsers with vLLM failed")
