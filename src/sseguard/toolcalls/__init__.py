"""Incremental, leak-free tool-call parsers for the markup families of MARKUP.md.

``parser_for(family, tools=None)`` returns a fresh parser for one stream; ``feed(text)`` and ``close()``
return events. The guarantees (chunking invariance, no leaks, linear cost, monotonic arguments, no
shared state) are the ones of DESIGN.md; ``consumed_text(events)`` states the accounting: every input
character is in exactly one event's text or raw.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sseguard.errors import UsageError
from sseguard.toolcalls import (
    _dsml,
    auto,
    deepseek_v3,
    glm,
    harmony,
    hermes,
    kimi_k2,
    minimax_m2,
    qwen3_coder,
)
from sseguard.toolcalls._base import (
    Event,
    Markup,
    MarkupError,
    MarkupErrorKind,
    Parser,
    Reasoning,
    Text,
    ToolArgsDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolSpec,
    consumed_text,
    event_to_dict,
    join_events,
)


@dataclass(frozen=True, slots=True)
class Family:
    """One markup family: how to make its parser, its marker texts, and what ends reasoning."""

    name: str
    make: Callable[[ToolSpec | None], Parser]
    markers: tuple[str, ...]
    reasoning_exits: tuple[str, ...]


def _dsml_family(name: str) -> Family:
    return Family(name, lambda tools: _dsml.DSMLParser(name, tools),
                  tuple(_dsml.family_markers(name)), _dsml.REASONING_EXITS)


def _glm_family(name: str) -> Family:
    return Family(name, lambda tools: glm.GLMParser(name, tools), glm.FAMILY_MARKERS,
                  glm.REASONING_EXITS)


def _v3_family(name: str) -> Family:
    return Family(name, lambda tools: deepseek_v3.DeepSeekV3Parser(name, tools),
                  deepseek_v3.FAMILY_MARKERS, deepseek_v3.REASONING_EXITS)


#: The registry: a new family is one module and one line here.
FAMILIES: dict[str, Family] = {
    "dsml-v32": _dsml_family("dsml-v32"),
    "dsml-v4": _dsml_family("dsml-v4"),
    "dsml-v41": _dsml_family("dsml-v41"),
    "deepseek-v3": _v3_family("deepseek-v3"),
    "deepseek-v31": _v3_family("deepseek-v31"),
    "hermes": Family("hermes", hermes.HermesParser, hermes.FAMILY_MARKERS,
                     hermes.REASONING_EXITS),
    "qwen3-coder": Family("qwen3-coder", qwen3_coder.Qwen3CoderParser,
                          qwen3_coder.FAMILY_MARKERS, qwen3_coder.REASONING_EXITS),
    "kimi-k2": Family("kimi-k2", kimi_k2.KimiK2Parser, kimi_k2.FAMILY_MARKERS,
                      kimi_k2.REASONING_EXITS),
    "harmony": Family("harmony", harmony.HarmonyParser, harmony.FAMILY_MARKERS,
                      harmony.REASONING_EXITS),
    "glm45": _glm_family("glm45"),
    "glm47": _glm_family("glm47"),
    "minimax-m2": Family("minimax-m2", minimax_m2.MiniMaxM2Parser, minimax_m2.TOKENIZER_MARKERS,
                         minimax_m2.REASONING_EXITS),
    "auto": Family("auto", auto.AutoParser, (), auto.REASONING_EXITS),
}


def parser_for(name: str, tools: list[dict[str, Any]] | None = None) -> Parser:
    """A fresh parser for one stream of family ``name``; ``tools`` is the OpenAI tool list offered.

    An unknown family or a malformed tool list is the caller's mistake: ``UsageError``.
    """
    family = FAMILIES.get(name)
    if family is None:
        raise UsageError(f"unknown markup family {name!r}; known: {', '.join(FAMILIES)}")
    return family.make(ToolSpec.from_openai(tools))


__all__ = [
    "FAMILIES",
    "Event",
    "Family",
    "Markup",
    "MarkupError",
    "MarkupErrorKind",
    "Parser",
    "Reasoning",
    "Text",
    "ToolArgsDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "consumed_text",
    "event_to_dict",
    "join_events",
    "parser_for",
]
