"""Public names of a package imported from their module on first use (PEP 562).

A package's ``__init__`` names its whole public face, but importing it must not load what only some
of those names need: the aiohttp servers, Locust, LiteLLM. So the package answers those names
through its module ``__getattr__``, which imports the name's home module when the name is first
asked for; one function makes that ``__getattr__`` for every such package.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that answers each name of ``homes`` (name → its
    module, relative to ``package``) from that module, imported then; any other missing name is an
    AttributeError."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{home}"), name)

    return __getattr__
