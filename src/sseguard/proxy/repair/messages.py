"""The Anthropic Messages writer: markup in a text block becomes ``tool_use`` blocks.

Each upstream text block gets a parser. Its text goes out in a text block opened when the first text
comes (a block that turns out to hold only a call leaves no empty text block behind); a call closes the
open text block and streams as a ``tool_use`` block (``input_json_delta`` fragments as the arguments
arrive); text after it opens a new text block; reasoning the family wrote in its markup goes out as a
``thinking`` block. The indexes of later blocks move up by the blocks inserted, and ``end_turn`` becomes
``tool_use`` once a call was repaired. A block that stays plain text goes out byte-identical.
"""

from __future__ import annotations

import secrets
from typing import Any

from sseguard.core.sse import SSEEvent
from sseguard.core.toolcalls import ToolArgsDelta, ToolCallEnd, ToolCallStart
from sseguard.proxy.repair.base import (
    BlockRepair,
    ChoiceRepair,
    chat_tools,
    json_object,
    plain,
    sse,
)

_BLOCK_EVENTS = frozenset({"content_block_start", "content_block_delta", "content_block_stop"})


def new_tool_use_id() -> str:
    """An id in the shape Anthropic's ``tool_use`` blocks have (``toolu_`` + 24 characters)."""
    return "toolu_" + secrets.token_urlsafe(18)


def _stop(index: int) -> bytes:
    return sse("content_block_stop", {"type": "content_block_stop", "index": index})


class MessagesRepairFrames(BlockRepair):
    """Anthropic Messages: markup in a text block becomes ``tool_use`` blocks (see the module)."""

    def __init__(self, family: str, tools: list[dict[str, Any]] | None) -> None:
        super().__init__(family, tools)
        self._next = 0  # the next output block index
        self._map: dict[int, int] = {}  # upstream index → output index, for blocks passed through
        self._text: ChoiceRepair | None = None  # the upstream text block being repaired
        self._text_index: int | None = None  # its upstream index
        self._held: SSEEvent | None = None  # its content_block_start, until its first text
        self._open: int | None = None  # the output index of the text block open now
        self._blocks: dict[int, int] = {}  # the parser's call number → its tool_use block's index
        self._thinking: int | None = None  # the output index of a thinking block the repair opened

    @staticmethod
    def tools_of(request: dict[str, Any]) -> list[Any] | None:
        """Anthropic tools (``name``, ``input_schema``) in the chat shape."""
        tools = request.get("tools")
        return chat_tools(tools if isinstance(tools, list) else None, "input_schema")

    def transform(self, event: SSEEvent) -> bytes:
        name = event.event
        if self.failure is not None or (name not in _BLOCK_EVENTS and name != "message_delta"):
            return event.raw
        obj = json_object(event)
        if obj is None:
            return event.raw
        if name == "message_delta":
            delta = obj.get("delta")
            if self.calls and isinstance(delta, dict) and delta.get("stop_reason") == "end_turn":
                # A text answer that turned out to be tool calls ends as one.
                return sse(name, {**obj, "delta": {**delta, "stop_reason": "tool_use"}})
            return event.raw
        index = obj.get("index")
        if not isinstance(index, int):
            return event.raw
        if name == "content_block_start":
            return self._start(event, obj, index)
        if index != self._text_index or self._text is None:
            self._scan_thinking(index, obj)
            return self._reindexed(event, obj, self._map.get(index, index))
        if name == "content_block_stop":
            return self._stop(event, obj, self._text)
        delta = obj.get("delta")
        text = delta.get("text") if isinstance(delta, dict) else None
        if not isinstance(delta, dict) or delta.get("type") != "text_delta" or not isinstance(text, str):
            return self._reindexed(event, obj, self._open if self._open is not None else index)
        events = self._text.parser.feed(text)
        if plain(events, text):
            self.scan(self._text.key, "content", text)
            opened = self._open_text()
            return opened + self._reindexed(event, obj, self._open)
        return self._emit(self._text, events)

    def flush(self) -> bytes:
        """A text block the upstream never stopped (a tolerated end): what its parser still holds."""
        if self._text is None:
            return b""
        state, self._text = self._text, None
        return self._emit(state, state.parser.close()) + self.end_reasoning()

    def _scan_thinking(self, index: int, obj: dict[str, Any]) -> None:
        """The upstream's own thinking reaches the client as it is: a leak there is a leak."""
        delta = obj.get("delta")
        if isinstance(delta, dict) and delta.get("type") == "thinking_delta":
            thinking = delta.get("thinking")
            if isinstance(thinking, str) and thinking:
                self.scan(self.upstream_key(index), "thinking", thinking)

    def _start(self, event: SSEEvent, obj: dict[str, Any], index: int) -> bytes:
        block = obj.get("content_block")
        if isinstance(block, dict) and block.get("type") == "text":
            self._text = self.new_state()
            self._text_index, self._held, self._open = index, event, None
            self._blocks = {}
            initial = block.get("text")
            if isinstance(initial, str) and initial:  # text in the opener itself (rare)
                self._held = None
                return self._emit(self._text, self._text.parser.feed(initial))
            return b""
        out = self._map[index] = self._next
        self._next += 1
        if isinstance(block, dict) and block.get("type") == "thinking":
            thinking = block.get("thinking")
            if isinstance(thinking, str) and thinking:
                self.scan(self.upstream_key(index), "thinking", thinking)
        return self._reindexed(event, obj, out)

    def _stop(self, event: SSEEvent, obj: dict[str, Any], state: ChoiceRepair) -> bytes:
        out = self._emit(state, state.parser.close()) + self.end_reasoning()
        if self.failure is not None:
            return b""
        if self._open is None and self._held is not None:
            out += self._open_text()  # an empty text block: as it came
        if self._open is not None:
            out += self._reindexed(event, obj, self._open)
        self._text = self._text_index = self._held = self._open = None
        return out

    def _open_text(self) -> bytes:
        """Open a text block for what follows, unless one is open: the upstream's opener if it is
        still held, else a new one."""
        if self._open is not None:
            return b""
        self._open = self._next
        self._next += 1
        if self._held is not None:
            held, self._held = self._held, None
            return self._reindexed(held, None, self._open)
        return sse("content_block_start", {"type": "content_block_start", "index": self._open,
                                           "content_block": {"type": "text", "text": ""}})

    def _emit(self, state: ChoiceRepair, events: list[Any]) -> bytes:
        return self.emit(state, events, "text block")

    # ── BlockRepair ────────────────────────────────────────────────────────────────────────────
    def text(self, text: str) -> bytes:
        opened = self._open_text()
        return opened + sse("content_block_delta", {
            "type": "content_block_delta", "index": self._open,
            "delta": {"type": "text_delta", "text": text}})

    def call_start(self, call: ToolCallStart) -> bytes:
        out = b""
        if self._open is not None:
            out = _stop(self._open)
            self._open = None
        self._held = None  # a call before any text: the upstream's opener is not needed
        block = self._blocks[call.index] = self._next
        self._next += 1
        return out + sse("content_block_start", {
            "type": "content_block_start", "index": block,
            "content_block": {"type": "tool_use", "id": call.id or new_tool_use_id(),
                              "name": call.name, "input": {}}})

    def call_args(self, args: ToolArgsDelta) -> bytes:
        return sse("content_block_delta", {
            "type": "content_block_delta", "index": self._blocks[args.index],
            "delta": {"type": "input_json_delta", "partial_json": args.fragment}})

    def call_end(self, end: ToolCallEnd) -> bytes:
        return _stop(self._blocks[end.index])

    def reasoning(self, text: str) -> bytes:
        """Reasoning the family wrote in its markup: a ``thinking`` block of its own (the open text
        block ends first), kept open while reasoning follows."""
        out = b""
        if self._thinking is None:
            self._held = None  # reasoning before any text: the upstream's opener is not needed
            if self._open is not None:
                out += _stop(self._open)
                self._open = None
            self._thinking = self._next
            self._next += 1
            out += sse("content_block_start", {
                "type": "content_block_start", "index": self._thinking,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""}})
        return out + sse("content_block_delta", {
            "type": "content_block_delta", "index": self._thinking,
            "delta": {"type": "thinking_delta", "thinking": text}})

    def end_reasoning(self) -> bytes:
        if self._thinking is None:
            return b""
        index, self._thinking = self._thinking, None
        return _stop(index)

    def _reindexed(self, event: SSEEvent, obj: dict[str, Any] | None, index: int | None) -> bytes:
        """The event as it came when its block keeps its index; renumbered otherwise."""
        obj = obj if obj is not None else json_object(event)
        if obj is None or index is None or obj.get("index") == index:
            return event.raw
        return sse(event.event, {**obj, "index": index})
