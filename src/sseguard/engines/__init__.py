"""sseguard's parsers inside vLLM and SGLang: ``--tool-call-parser sseguard-<family>``.

Each engine loads plugins from installed packages: vLLM through the ``vllm.general_plugins`` entry
point (``vllm_plugin.register``), SGLang through ``sglang.srt.plugins`` (``sglang_plugin.register``).
The callables register, for every family of the registry (``sseguard.core.toolcalls.families()``, plugins'
families included):

- ``sseguard-<family>``: the tool parser that sends each call whole when the parser ends it, so a
  call the parser rejects never reaches a client as a call (the default, ``hold``);
- ``sseguard-<family>-stream``: the same parser streaming argument fragments as they arrive;
- ``sseguard-<family>`` as a reasoning parser too, for families whose openers end reasoning
  (``Family.reasoning_exits``): ``<think>…</think>`` split by ``sseguard.core.reasoning.ThinkSplitter``.

This package is the only place that imports either engine, and only in the modules the engines
import through those entry points (``vllm_*``, ``sglang_*``); ``pip install sseguard`` pulls in
neither. The names and what they mean live here, engine-free. docs/engines.md has the set-up.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, cast

#: Every name this package registers starts with this (no engine's built-in does).
PREFIX = "sseguard-"
#: The suffix of the streaming variant of a tool parser.
STREAM = "-stream"


@dataclass(frozen=True, slots=True)
class ParserName:
    """What a registered name means: the family, and whether calls stream (tool parsers only)."""

    family: str
    stream: bool = False


def tool_parser_names() -> Mapping[str, ParserName]:
    """Every tool parser name → what it means: ``sseguard-<family>`` and ``sseguard-<family>-stream``
    for each family of the registry, in the registry's order."""
    from sseguard.core.toolcalls import families

    names: dict[str, ParserName] = {}
    for fam in families():
        names[PREFIX + fam] = ParserName(fam)
        names[PREFIX + fam + STREAM] = ParserName(fam, stream=True)
    return names


def reasoning_parser_names() -> Mapping[str, ParserName]:
    """Every reasoning parser name → its family: the families whose markup ends reasoning."""
    from sseguard.core.toolcalls import families

    return {PREFIX + name: ParserName(name) for name, fam in families().items() if fam.reasoning_exits}


__all__ = ["PREFIX", "STREAM", "ParserName", "reasoning_parser_names", "tool_parser_names"]


_Base = TypeVar("_Base", bound=type)


def class_per_name(module: str, base: _Base, names: Callable[[], Mapping[str, ParserName]],
                   attributes: Callable[[str, ParserName], dict[str, Any]]) -> Callable[[str], _Base]:
    """The module ``__getattr__`` of an engine adapter: the class an engine asks for by a registered
    parser name, a subclass of ``base`` carrying what the name means (``sseguard``) and the
    ``attributes`` of that name, made once per name. vLLM imports parser classes by name, and the
    names come from the families' registry, so the classes cannot be written out."""
    made: dict[str, _Base] = {}

    def __getattr__(name: str) -> _Base:
        found = made.get(name)
        if found is None:
            meaning = names().get(name)
            if meaning is None:
                raise AttributeError(name)
            found = made[name] = cast(_Base, type(name, (base,), {
                "sseguard": meaning, "__module__": module, **attributes(name, meaning)}))
        return found

    return __getattr__
