"""The family registry: every markup family by name, built-ins and plugins loaded the same way.

Families are the objects named by the ``sseguard.families`` entry point group (name → ``Family``):
sseguard's own in its ``pyproject.toml``, a third party's in theirs (the simonw/llm pattern, so a
built-in and a plugin cannot drift apart). They are loaded once, on first use. A plugin that cannot
be imported, or names something that is not a ``Family`` of that name, is skipped with a one-line
warning naming its distribution; the built-ins keep working. Built-ins come first and win a name
clash, so a plugin cannot silently replace one. The registry is ordered by each family's ``rank``,
then its name (entry point metadata keeps no order).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from functools import partial
from types import MappingProxyType
from typing import Any

from sseguard.core.errors import UsageError
from sseguard.core.toolcalls.auto import AutoParser, Detector
from sseguard.core.toolcalls.events import Parser
from sseguard.core.toolcalls.family import Claim, Family, unknown
from sseguard.core.toolcalls.schema import ToolSpec

#: The entry point group families are registered in.
GROUP = "sseguard.families"
_SELF = "sseguard"
#: Not a family but a way to choose one: ``auto`` becomes the family whose marker it sees first.
AUTO = "auto"


class FamilyPluginWarning(UserWarning):
    """A third-party family could not be used (it is skipped; every other family still works)."""


class _Registry:
    __slots__ = ("aliases", "auto", "families")

    def __init__(self, families: dict[str, Family]) -> None:
        self.families = MappingProxyType(families)
        # an alias never shadows a family's own name; the first family (by rank) to claim one keeps it
        aliases: dict[str, str] = {}
        for fam in families.values():
            for alias in fam.aliases:
                if alias not in families and alias != AUTO:
                    aliases.setdefault(alias, fam.name)
        self.aliases = MappingProxyType(aliases)
        detector = Detector(families.values())
        self.auto = Family(
            name=AUTO, make=partial(AutoParser, detector=detector), markers=(),
            leak_markers=tuple(dict.fromkeys(m for f in families.values() for m in f.leak_markers)),
            reasoning_exits=detector.reasoning_exits, auto_markers=detector.markers.literals,
            claim=lambda held, final: Claim.NO, render=_no_render)


def _no_render(calls: Any, malformed: bool) -> str:
    raise UsageError("auto is not a markup family of its own: name one to render calls in")


_registry: _Registry | None = None


def _warn(message: str) -> None:
    # one line: no source line is shown for a warning attributed to the entry point group
    warnings.warn_explicit(message, FamilyPluginWarning, GROUP, 0)


def _load() -> _Registry:
    from importlib.metadata import entry_points  # reads installed metadata: only on first use

    points = list(entry_points(group=GROUP))
    dist = {id(ep): getattr(getattr(ep, "dist", None), "name", None) or "?" for ep in points}
    own = [ep for ep in points if dist[id(ep)] == _SELF]
    if not own:
        raise UsageError(f"sseguard's installed metadata registers no markup families (entry point "
                         f"group {GROUP}); reinstall sseguard (pip install -e . in a checkout)")
    found: dict[str, Family] = {}
    for ep in own:  # our own: a failure here is a bug, raised as it is
        obj = ep.load()
        assert isinstance(obj, Family) and obj.name == ep.name, ep
        found[ep.name] = obj
    for ep in points:
        if dist[id(ep)] == _SELF:
            continue
        where = f"markup family plugin {ep.name!r} ({ep.value}) from distribution {dist[id(ep)]!r}"
        try:
            obj = ep.load()
        except Exception as exc:  # any failure of third-party code: skip it, say so in one line
            reason = str(exc).splitlines()[0] if str(exc) else ""
            _warn(f"{where} is skipped: {type(exc).__name__}: {reason}".rstrip(": "))
            continue
        if not isinstance(obj, Family):
            _warn(f"{where} is skipped: it is a {type(obj).__name__}, not a sseguard Family")
        elif obj.name != ep.name:
            _warn(f"{where} is skipped: it names its family {obj.name!r}")
        elif ep.name in found or ep.name == AUTO:
            _warn(f"{where} is skipped: the name is taken")
        else:
            _warn_shared_openers(where, obj, sorted((found[e.name] for e in own),
                                                    key=lambda f: (f.rank, f.name)))
            found[ep.name] = obj
    return _Registry(dict(sorted(found.items(), key=lambda item: (item[1].rank, item[0]))))


def _warn_shared_openers(where: str, plugin: Family, builtins: list[Family]) -> None:
    """A plugin whose ``auto`` marker a built-in already has is loaded, but said so (naming the
    first such built-in ``auto`` asks): ``auto`` asks the families in rank order, so markup at that
    marker may be read as either family."""
    for builtin in builtins:
        shared = [m for m in plugin.auto_markers if m in builtin.auto_markers]
        if shared:
            _warn(f"{where} takes the auto marker {shared[0]!r} of built-in family "
                  f"{builtin.name!r}: auto may read that markup as either")
            return


def _get() -> _Registry:
    global _registry
    if _registry is None:
        _registry = _load()
    return _registry


def families() -> Mapping[str, Family]:
    """Every markup family by name, built-ins first, then plugins (``auto`` is not among them)."""
    return _get().families


def aliases() -> Mapping[str, str]:
    """Every engine alias → the name of the family it means (``qwen3_xml`` → ``qwen3-coder``)."""
    return _get().aliases


def canonical(name: str) -> str:
    """The family name ``name`` means: itself for a family (or ``auto``), the family for an alias;
    an unknown name is returned unchanged (``family()`` says what is wrong with it)."""
    return _get().aliases.get(name, name)


def family(name: str) -> Family:
    """The family called ``name`` (``auto`` and the engines' aliases included); an unknown name is a
    ``UsageError`` whose one-line message lists the known names."""
    reg = _get()
    if name == AUTO:
        return reg.auto
    found = reg.families.get(name) or reg.families.get(reg.aliases.get(name, ""))
    if found is None:
        raise unknown("markup family", name, [*reg.families, AUTO])
    return found


def parser_for(name: str, tools: list[dict[str, Any]] | None = None) -> Parser:
    """A fresh parser for one stream of family ``name``; ``tools`` is the OpenAI tool list offered.

    An unknown family or a malformed tool list is the caller's mistake: ``UsageError``.
    """
    return family(name).make(ToolSpec.from_openai(tools))


class AllFamilies(Mapping[str, Family]):
    """Read-only name → ``Family`` including ``auto``, loaded on first use (the old ``FAMILIES``)."""

    def __getitem__(self, name: str) -> Family:
        reg = _get()
        return reg.auto if name == AUTO else reg.families[name]

    def __iter__(self) -> Iterator[str]:
        return iter([*_get().families, AUTO])

    def __len__(self) -> int:
        return len(_get().families) + 1
