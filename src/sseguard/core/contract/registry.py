"""The protocols sseguard speaks, one line each: every consumer reads this, none keeps a list.

A fifth protocol is its folder ``contract/<protocol>/`` (descriptor in its ``__init__.py``), its
chaos writer in ``chaos/<protocol>.py``, one ``Api`` member and one line here and in ``chaos/registry.py``
(``docs/protocols.md``, "Adding a protocol").
"""

from __future__ import annotations

from types import MappingProxyType

from sseguard.core.contract.chat import CHAT
from sseguard.core.contract.gemini import GEMINI
from sseguard.core.contract.messages import MESSAGES
from sseguard.core.contract.protocol import Protocol
from sseguard.core.contract.responses import RESPONSES
from sseguard.core.errors import UsageError
from sseguard.core.verdict import Api

_PROTOCOLS: MappingProxyType[Api, Protocol] = MappingProxyType({p.api: p for p in (
    CHAT,
    RESPONSES,
    MESSAGES,
    GEMINI,
)})


#: A protocol without a descriptor fails here, at import, not at its first request.
_ORDERED: tuple[Protocol, ...] = tuple(_PROTOCOLS[api] for api in Api)


def protocols() -> tuple[Protocol, ...]:
    """Every protocol, in the order of the ``Api`` enum."""
    return _ORDERED


def protocol(api: str | Api) -> Protocol:
    """The descriptor of one protocol; an unknown name is a ``UsageError`` listing the known ones."""
    try:
        return _PROTOCOLS[Api(api)]
    except (ValueError, KeyError):
        raise UsageError(f"unknown api {api!r} (known: {api_names()})") from None


def api_names() -> str:
    """The known protocol names, comma-separated, for error messages and help texts."""
    return ", ".join(a.value for a in Api)
