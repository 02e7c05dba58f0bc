"""Protocol and markup-family names as the command line shows and checks them, read from the registries.

No command keeps a list of its own: help texts and choice checks derive from ``sseguard.core.verdict.Api``
(the protocols) and ``sseguard.core.toolcalls.FAMILIES`` (the markup families), so a new protocol or family
appears in every ``--help`` and is accepted by every flag without an edit here.
"""

from __future__ import annotations

from collections.abc import Sequence

from sseguard.core.errors import ConfigError
from sseguard.core.toolcalls import FAMILIES, canonical
from sseguard.core.verdict import Api

#: What ``auto`` means wherever a family is asked for.
AUTO = "auto"


def protocol_names() -> list[str]:
    """Every protocol name, in the registry's order (the first is the default)."""
    return [api.value for api in Api]


def family_names() -> list[str]:
    """Every concrete markup family (``auto`` is a detector, not a family)."""
    return [name for name in FAMILIES if name != AUTO]


def listed(names: Sequence[str], last: str = "or") -> str:
    """``a, b or c``: a choice list for a help text."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {last} {names[-1]}"


def check_protocol(value: str | None, flag: str = "--api") -> str | None:
    """``value`` when it names a protocol (None passes: not given); else one line, exit 2."""
    if value is None or value in protocol_names():
        return value
    raise ConfigError(f"{flag} {value!r}: unknown protocol; known: {', '.join(protocol_names())}")


def check_family(value: str | None, flag: str, *, also: Sequence[str] = ()) -> str | None:
    """The family ``value`` names — itself, or the family an engine's alias means (``qwen3_xml`` →
    ``qwen3-coder``) — or ``value`` when it is one of ``also`` (auto, all, off); else one line,
    exit 2."""
    known = [*family_names(), *also]
    if value is None or value in also:
        return value
    if canonical(value) in known:
        return canonical(value)
    raise ConfigError(f"{flag} {value!r}: unknown markup family; known: {', '.join(known)}")


def protocol_help(subject: str) -> str:
    """``Protocol of …: chat (default), responses or messages.``"""
    names = protocol_names()
    return f"Protocol of {subject}: {listed([f'{names[0]} (default)', *names[1:]])}."
