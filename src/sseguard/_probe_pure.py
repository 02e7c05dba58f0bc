"""Make ``sseguard.probe``'s pure submodules importable without running the package's ``__init__``.

The Locust user runs under gevent and reuses only the probe's ``config``, ``workloads``, ``measure``
and ``sink``, which import no I/O library; the package ``__init__`` re-exports the aiohttp engine and
runner, so importing any submodule would load aiohttp and asyncio into a gevent process. Import this
module first: it registers the package without executing ``__init__``, and executes it on the first
attribute that only ``__init__`` defines, so ``from sseguard.probe import run_probe`` still works.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType
from typing import Any

PACKAGE = "sseguard.probe"


def install() -> None:
    """Register ``sseguard.probe`` unexecuted, unless it is imported already."""
    if PACKAGE in sys.modules:
        return
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return
    module = importlib.util.module_from_spec(spec)
    loader = spec.loader

    def complete(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        del module.__getattr__
        loader.exec_module(module)
        return getattr(module, name)

    module.__getattr__ = complete  # type: ignore[method-assign]  # PEP 562 module __getattr__
    sys.modules[PACKAGE] = module
    parent: ModuleType = sys.modules["sseguard"]
    parent.probe = module  # type: ignore[attr-defined]  # what `import` would set on the parent


install()
