"""The protocols the chaos upstream speaks, one line each (``contract/registry.py`` lists the rest).

A protocol's writer is its module here (``chaos/<protocol>.py``, exporting ``WRITER``); where it is
served and how its errors look are its contract descriptor's.
"""

from __future__ import annotations

from types import MappingProxyType

from sseguard.chaos import chat, gemini, messages, responses
from sseguard.chaos.writer import Writer
from sseguard.core.contract import protocol
from sseguard.core.verdict import Api

_WRITERS: MappingProxyType[Api, Writer] = MappingProxyType({w.api: w for w in (
    chat.WRITER,
    responses.WRITER,
    messages.WRITER,
    gemini.WRITER,
)})


def writers() -> tuple[Writer, ...]:
    """Every protocol's writer, in the order of the ``Api`` enum."""
    return tuple(_WRITERS[api] for api in Api)


def writer_for(api: str | Api) -> Writer:
    """One protocol's writer; an unknown name is a ``UsageError`` listing the known ones."""
    return _WRITERS[protocol(api).api]
