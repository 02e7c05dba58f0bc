"""``--repair-markup``: tool-call markup left in content becomes structured tool calls.

Servers without (or with the wrong) tool parser stream a model's raw markup — DeepSeek DSML, Hermes
``<tool_call>``, … — as visible text; agents then see no call and show the markup to the user. The
repair runs the content through one ``sseguard.core.toolcalls`` parser per choice (chat), message item
(Responses), text block (Messages) or candidate (Gemini): text goes out as content, calls as the
protocol's own calls (``tool_calls`` deltas, ``function_call`` items, ``tool_use`` blocks, whole
``functionCall`` parts; the model's own id where its markup writes one — Kimi's ``functions.NAME:IDX``,
which the client must send back), and reasoning a
family writes in its own markup (Harmony's ``analysis`` channel) as reasoning. Markup that cannot be
parsed is never shown as content: the stream ends with an error frame naming the ``MarkupError`` kind.

Frames without markup go out byte-identical; the only thing held back is a possible marker prefix at
the end of a delta (the parser's own hold-back), released as soon as the next delta settles it.

The rooms: ``base.py`` (the protocol-neutral half every writer builds on: parsers, typed ``Out``
events, the leak scan, facts), one writer per protocol (``chat.py``, ``responses.py``,
``messages.py``, ``gemini.py``), and here the table that gives each protocol its writer. All of it is
pure: it depends on the ``Frames`` seam (``sseguard.proxy.machines.frames``), never on aiohttp or
the driver.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from sseguard.core.verdict import Api
from sseguard.proxy.machines.frames import Frames
from sseguard.proxy.repair.base import Repair, new_call_id
from sseguard.proxy.repair.chat import RepairFrames
from sseguard.proxy.repair.gemini import GeminiRepairFrames
from sseguard.proxy.repair.messages import MessagesRepairFrames, new_tool_use_id
from sseguard.proxy.repair.responses import ResponsesRepairFrames

__all__ = ["REPAIRED", "WRITERS", "GeminiRepairFrames", "MessagesRepairFrames", "Repair", "RepairFrames",
           "ResponsesRepairFrames", "checker_markup", "frames_for", "new_call_id",
           "new_tool_use_id"]

#: The writer of each protocol whose streams ``--repair-markup`` rewrites, by the registry's key.
WRITERS: Mapping[Api, type[Repair]] = MappingProxyType({
    Api.CHAT: RepairFrames,
    Api.RESPONSES: ResponsesRepairFrames,
    Api.MESSAGES: MessagesRepairFrames,
    Api.GEMINI: GeminiRepairFrames,
})

#: The protocols whose streams ``--repair-markup`` rewrites.
REPAIRED = frozenset(WRITERS)


def checker_markup(mode: str, api: Api = Api.CHAT) -> str | list[str]:
    """Which markup the upstream checker looks for in content.

    Without repair: every family (markup in content reaches the client: a leak). With repair the
    upstream's markup is the repair's input, not a leak; the repair scans what it actually sends with
    the same ``LeakScanner`` instead.
    """
    return "all" if mode == "off" or api not in REPAIRED else []


def frames_for(mode: str, request: dict[str, Any], api: Api = Api.CHAT) -> Frames:
    """The frame transformer for one stream: unchanged frames, or its protocol's repair with fresh
    parsers and the tools the request offered."""
    writer = WRITERS.get(api) if mode != "off" else None
    return Frames() if writer is None else writer.for_request(mode, request)
