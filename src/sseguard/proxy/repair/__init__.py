"""``--repair-markup``: tool-call markup left in content becomes structured tool calls.

Servers without (or with the wrong) tool parser stream a model's raw markup — DeepSeek DSML, Hermes
``<tool_call>``, … — as visible text; agents then see no call and show the markup to the user. The
repair runs the content through one ``sseguard.toolcalls`` parser per choice (chat), message item
(Responses) or text block (Messages): text goes out as content, calls as the protocol's own calls
(``tool_calls`` deltas, ``function_call`` items, ``tool_use`` blocks; the model's own id where its
markup writes one — Kimi's ``functions.NAME:IDX``, which the client must send back), and reasoning a
family writes in its own markup (Harmony's ``analysis`` channel) as reasoning. Markup that cannot be
parsed is never shown as content: the stream ends with an error frame naming the ``MarkupError`` kind.

Frames without markup go out byte-identical; the only thing held back is a possible marker prefix at
the end of a delta (the parser's own hold-back), released as soon as the next delta settles it.

The rooms: ``engine.py`` (parsers, typed ``Out`` events, the leak scan, facts), one writer per protocol
(``chat.py``, ``responses.py``, ``messages.py``), and here the choice of writer for a stream. All of it
is pure: it depends on the ``Frames`` seam (``sseguard.proxy.frames``), never on aiohttp or the relay.
"""

from __future__ import annotations

from typing import Any

from sseguard.proxy.frames import Frames
from sseguard.proxy.repair.chat import RepairFrames
from sseguard.proxy.repair.engine import Repair, chat_tools, new_call_id
from sseguard.proxy.repair.messages import MessagesRepairFrames, new_tool_use_id
from sseguard.proxy.repair.responses import ResponsesRepairFrames
from sseguard.verdict import Api

__all__ = ["REPAIRED", "MessagesRepairFrames", "Repair", "RepairFrames", "ResponsesRepairFrames",
           "checker_markup", "frames_for", "new_call_id", "new_tool_use_id"]

#: The protocols whose streams ``--repair-markup`` rewrites.
REPAIRED = frozenset({Api.CHAT, Api.RESPONSES, Api.MESSAGES})


def checker_markup(mode: str, api: Api = Api.CHAT) -> str | list[str]:
    """Which markup the upstream checker looks for in content.

    Without repair: every family (markup in content reaches the client: a leak). With repair the
    upstream's markup is the repair's input, not a leak; the repair scans what it actually sends with
    the same ``LeakScanner`` instead.
    """
    return "all" if mode == "off" or api not in REPAIRED else []


def frames_for(mode: str, request: dict[str, Any], api: Api = Api.CHAT) -> Frames:
    """The frame transformer for one stream: unchanged frames, or a repair with fresh parsers."""
    if mode == "off" or api not in REPAIRED:
        return Frames()
    tools = request.get("tools")
    offered = tools if isinstance(tools, list) else None
    if api is Api.MESSAGES:
        return MessagesRepairFrames(mode, chat_tools(offered, "input_schema"))
    if api is Api.RESPONSES:
        return ResponsesRepairFrames(mode, chat_tools(offered, "parameters"))
    return RepairFrames(mode, offered)
