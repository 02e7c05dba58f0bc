"""A pytest plugin that records every literal example the tool-call tests parse, for tests/engines.

Run as ``pytest tests/toolcalls -p support.engines_harvest`` with ``SSEGUARD_ENGINE_VECTORS=<file>``: each
``parser_for(family, tools)`` a test makes is followed, and when its parser is closed the whole text
it was fed goes to the file as one JSON line ``{"family", "text", "tools"}``. Property tests
(hypothesis, and the ``*properties*`` modules) are left out: their inputs are generated, not the
tables' examples. The engines' tests then drive each example through the real serving code and
compare with the parser itself, so the examples of families added later are covered without a list
kept here.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from hypothesis import is_hypothesis_test

import sseguard.core.toolcalls as toolcalls
from sseguard.core.toolcalls import registry

_PATH = os.environ.get("SSEGUARD_ENGINE_VECTORS", "")
_original = registry.parser_for


class _Recording:
    """A parser that remembers what it was fed and records it when closed."""

    def __init__(self, inner: Any, family: str, tools: Any) -> None:
        self._inner, self._family, self._tools, self._fed = inner, family, tools, []
        self.family = inner.family

    def feed(self, text: str) -> Any:
        self._fed.append(text)
        return self._inner.feed(text)

    def close(self) -> Any:
        events = self._inner.close()
        if _PATH:
            line = json.dumps({"family": self._family, "text": "".join(self._fed), "tools": self._tools},
                              ensure_ascii=False)
            with open(_PATH, "a", encoding="utf-8") as out:
                out.write(line + "\n")
        return events

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _recording_parser_for(name: str, tools: Any = None) -> Any:
    parser = _original(name, tools)
    family = registry.canonical(name)
    if family == registry.AUTO:
        return parser
    try:
        json.dumps(tools)
    except TypeError:  # not a JSON tools list: a test of the error, not an example
        return parser
    return _Recording(parser, family, tools)


def pytest_configure(config: pytest.Config) -> None:
    # before the test modules import ``parser_for`` by name
    registry.parser_for = _recording_parser_for  # type: ignore[assignment]
    toolcalls.parser_for = _recording_parser_for  # type: ignore[assignment]


def pytest_ignore_collect(collection_path: Any, config: pytest.Config) -> bool | None:
    """The property test modules generate their inputs: they hold no table of examples."""
    return True if "properties" in collection_path.name else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    kept = [item for item in items if not is_hypothesis_test(getattr(item, "obj", None))]
    config.hook.pytest_deselected(items=[item for item in items if item not in kept])
    items[:] = kept
