"""Old import paths of modules that moved, kept working with a ``DeprecationWarning``.

The sans-IO core moved into ``sseguard.core`` (docs/design/architecture.md "Layers"), so that its
folder shows the layer the layer test enforces. Code written against the old paths
(``from sseguard.errors import MarkupError``, a plugin's ``from sseguard.toolcalls.family import
Family``) must not break on upgrade: a finder at the front of ``sys.meta_path`` answers each old name
with the module object of its new one — the same object, so ``isinstance`` checks and module state hold
across both names — and warns once per name. One table here; nothing else spells the old paths.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType

#: Old dotted prefix → new one. A submodule follows its package (``sseguard.toolcalls.hermes``).
MOVED: dict[str, str] = {
    f"sseguard.{name}": f"sseguard.core.{name}"
    for name in ("sse", "jsonarray", "verdict", "policy", "record", "redact", "errors", "reasoning",
                 "contract", "toolcalls")
} | {
    # The proxy's rooms became folders (issue 46): the module that serves the app, which code outside
    # the package imported for ``serve_proxy``, and the worker the CLI runs. The proxy's other
    # modules were internals (docs/design/architecture.md "The path of one proxied streamed request").
    "sseguard.proxy.app": "sseguard.proxy.driver.app",
    "sseguard.proxy.worker": "sseguard.proxy.driver.worker",
    # "engine" names the serving engine only (docs/design/vocabulary.md "Names"): the probe's
    # per-request run and the analysis backends were renamed.
    "sseguard.probe.engine": "sseguard.probe.request",
    "sseguard.analyze.engines": "sseguard.analyze.backends",
}
# The markup families moved into toolcalls/vendors/ (their grammars into toolcalls/grammars/), and the
# JSON-array family builder into grammars/: a plugin or config may name the old module paths.
MOVED.update({f"sseguard.core.toolcalls.{name}": f"sseguard.core.toolcalls.vendors.{name}" for name in (
    "dsml", "deepseek_v3", "hermes", "glm", "qwen3_coder", "kimi_k2", "harmony", "minimax_m2",
    "llama3_json", "granite", "json_tags", "json_blocks", "xlam", "gigachat3", "pythonic", "name_json",
    "gemma", "qwen3_blocks", "kv_tags", "invoke_tags", "gigachat35", "kimi_k3", "minimax_m3", "muse")})
MOVED["sseguard.core.toolcalls.json_array"] = "sseguard.core.toolcalls.grammars.json_array_family"


def new_name(old: str) -> str | None:
    """The module's current dotted name, or None when ``old`` never moved."""
    for before, after in MOVED.items():
        if old == before or old.startswith(before + "."):
            return after + old[len(before):]
    return None


class _Alias(importlib.abc.Loader):
    """Hands the import system the already imported module of the new name."""

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(f"{spec.name} moved to {self.target}; import it from there (the old path is "
                      "deprecated and will be removed)", DeprecationWarning, stacklevel=2)
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module ran once, under its new name."""


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: object = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        moved = new_name(fullname)
        if moved is None:
            return None
        return importlib.util.spec_from_loader(fullname, _Alias(moved))


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder())
