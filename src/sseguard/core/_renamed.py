"""Old names of renamed public classes and functions, kept working with a ``DeprecationWarning``.

Some names said the wrong thing (an "engine" that was the probe's per-request loop, two ``Dialect``
classes of different rooms: docs/design/vocabulary.md "Names"). Code written against an old name must
not break on upgrade, so a module that renamed a public name answers the old one through its module
``__getattr__`` (PEP 562) with the very object of the new name, and warns. Module moves are the other
half (``sseguard._moved``); this is for names inside a module.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Mapping


def old_name(module: str, old: str, new: str) -> object:
    """The object ``module`` now calls ``new``, asked for by its ``old`` name: warns, from the line
    that asked (called from the module's ``__getattr__``)."""
    warnings.warn(f"{module}.{old} was renamed {new}; use the new name (the old one is deprecated and "
                  "will be removed)", DeprecationWarning, stacklevel=3)
    return getattr(sys.modules[module], new)


def renamed(module: str, names: Mapping[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``module`` that answers each old name of ``names`` (old → new)
    with the module's object of the new name, warning; any other missing name is an AttributeError."""

    def __getattr__(name: str) -> object:
        new = names.get(name)
        if new is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        return old_name(module, name, new)

    return __getattr__
