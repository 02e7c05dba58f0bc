"""Fold an Anthropic Messages stream into the final ``message``, as the anthropic SDK's ``MessageStream``
accumulates it. The delta table here is shared with the checker in ``messages.py``.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from typing import Any

from sseguard.core.contract.folding import Block, IdWatch, Joined


@dataclass(frozen=True, slots=True)
class Delta:
    """One kind of content-block delta: which field of it carries what, into which block type."""

    field: str  # the field of the delta holding the fragment
    block_types: frozenset[str]  # the block types it may stream into
    leak_field: str | None = None  # where leaked markup is looked for (None: not visible text)
    sets: str | None = None  # not joined: the block field it replaces (a thinking signature)
    appends: str | None = None  # not joined: the block list it extends (citations)
    #: Not joined: the delta's fields copied onto the block as they came, null included (the SDK
    #: sets a compaction block's ``content`` and ``encrypted_content`` from each delta).
    copies: tuple[str, ...] = ()

    def streams_into(self, block_type: str) -> bool:
        """Whether this delta may stream into a block of ``block_type``: a tool input
        (``input_json_delta``) into any tool-like block (``is_tool_like``), as the SDK folds it."""
        return block_type in self.block_types or (self.field == "partial_json"
                                                  and is_tool_like(block_type))


def is_tool_like(block_type: str) -> bool:
    """A block that carries a tool's input or result: ``tool_use``, ``server_tool_use``,
    ``mcp_tool_use`` and any later ``*_tool_use`` / ``*_tool_result`` kind."""
    return block_type.endswith(("tool_use", "_tool_result"))


#: Content-block deltas, by delta type: one engine, this table (docs/design/architecture.md principle 3).
DELTAS: dict[str, Delta] = {
    "text_delta": Delta("text", frozenset({"text"}), "text"),
    "thinking_delta": Delta("thinking", frozenset({"thinking"}), "thinking"),
    # A server tool's input (web search, code execution, MCP) streams like a client tool's, as the
    # SDK folds it; only client tool calls are checked against the request's tools.
    "input_json_delta": Delta("partial_json", frozenset({"tool_use"})),
    "signature_delta": Delta("signature", frozenset({"thinking"}), sets="signature"),
    "citations_delta": Delta("citation", frozenset({"text"}), appends="citations"),
    "compaction_delta": Delta("content", frozenset({"compaction"}),
                              copies=("content", "encrypted_content")),
}
#: Block types that are the model's calls of the request's tools: their input is checked.
TOOL_BLOCKS = frozenset({"tool_use"})


class MessagesAssembler:
    """Folds Messages events into the final ``message``, as the anthropic SDK's ``MessageStream`` does.

    The ``message_start`` object is the base; blocks come in index order with their streamed text and
    thinking filled in and a tool call's ``input`` parsed from its joined ``partial_json``;
    ``message_delta`` sets ``stop_reason``/``stop_sequence`` and overwrites the usage counts it carries.
    ``keep_text=False`` keeps no text (tool input is always kept: it is checked).
    """

    __slots__ = ("blocks", "ids", "keep_text", "message", "saw_token", "texts")

    def __init__(self, *, keep_text: bool = True) -> None:
        self.keep_text = keep_text
        self.message: dict[str, Any] | None = None
        self.blocks: dict[int, Block] = {}
        self.texts: dict[tuple[int, str], Joined] = {}
        self.ids = IdWatch()
        self.saw_token = False

    def start(self, message: dict[str, Any]) -> None:
        self.message = dict(message)
        self.ids.see(message.get("id"))

    def add_text(self, index: int, field: str, text: str) -> None:
        key = (index, field)
        joined = self.texts.get(key)
        if joined is None:
            joined = self.texts[key] = Joined(self.keep_text)
        joined.add(text)

    def delta(self, delta: dict[str, Any], usage: Any) -> None:
        message = self.message if self.message is not None else {}
        self.message = message
        for key in ("stop_reason", "stop_sequence", "stop_details", "container"):
            if key in delta:
                message[key] = delta[key]
        if isinstance(usage, dict):
            # Usage on message_delta is cumulative: counts overwrite; absent or null ones keep the
            # message_start value (as the SDK does).
            merged = dict(message["usage"]) if isinstance(message.get("usage"), dict) else {}
            merged.update({k: v for k, v in usage.items() if v is not None})
            message["usage"] = merged

    def _block(self, block: Block) -> dict[str, Any]:
        out = dict(block.snapshot)
        # A text block's streamed field is ``text``, a thinking block's ``thinking``.
        joined = self.texts.get((block.index, block.type))
        if joined is not None:
            start = out.get(block.type)
            out[block.type] = (start if isinstance(start, str) else "") + joined.text
        if block.arguments:
            # Unparseable input stays as it was opened: the checker reports the cut or the bad JSON.
            with contextlib.suppress(ValueError, RecursionError):
                out["input"] = json.loads("".join(block.arguments))
        return out

    def to_message(self) -> dict[str, Any]:
        """The final ``message`` object (an empty dict when neither a start nor a block came)."""
        if self.message is None and not self.blocks:
            return {}
        out = dict(self.message) if self.message is not None else {}
        out["content"] = [self._block(self.blocks[i]) for i in sorted(self.blocks)]
        return out
