"""The OpenAI Responses writer: markup in ``output_text`` becomes ``function_call`` output items.

Each upstream message item gets a parser. Its text goes out in a message item opened when the first
text comes; a call closes that item (``output_text.done``, ``content_part.done``, ``output_item.done``
with the text so far) and streams as a ``function_call`` item (``call_…``, name,
``function_call_arguments.delta`` fragments as they arrive, then its ``done`` events); text after it
opens a new message item; reasoning the family wrote in its markup goes out as a ``reasoning`` item.
Later items move up by the items inserted; ``sequence_number`` stays +1 from 0 over what the client
gets; the terminal event's ``output`` lists the items the client got. A stream without markup goes out
byte-identical.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

import msgspec

from sseguard.core.contract.responses.relay import TERMINAL_EVENTS
from sseguard.core.sse import SSEEvent
from sseguard.core.toolcalls import ToolArgsDelta, ToolCallEnd, ToolCallStart
from sseguard.proxy.repair.base import (
    BlockRepair,
    ChoiceRepair,
    chat_tools,
    json_object,
    new_call_id,
    plain,
    sse,
)

_encode = msgspec.json.encode


#: The terminal events are the protocol's own (spelt once, in ``contract/responses/``).
_RESPONSES_TERMINAL = TERMINAL_EVENTS
_REASONING_DELTAS = frozenset({"response.reasoning_summary_text.delta",
                               "response.reasoning_text.delta"})


def _frame(name: str, obj: dict[str, Any]) -> bytes:
    """One event, named as it came (an unnamed event stays unnamed)."""
    if name == "message":
        return b"data: " + _encode(obj) + b"\n\n"
    return sse(name, obj)


@dataclass(slots=True)
class _Segment:
    """One message item the repair sends: a run of text between calls."""

    index: int  # its output_index
    id: str
    text: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Call:
    index: int
    item: dict[str, Any]
    arguments: list[str] = field(default_factory=list)


class ResponsesRepairFrames(BlockRepair):
    """OpenAI Responses: markup in ``output_text`` becomes ``function_call`` items (see the module)."""

    def __init__(self, family: str, tools: list[dict[str, Any]] | None) -> None:
        super().__init__(family, tools)
        self._seq = 0  # the next sequence_number out
        self._next = 0  # the next output_index out
        self._map: dict[int, int] = {}  # upstream output_index → ours, for items passed through
        self._items: dict[int, Any] = {}  # our output_index → the item as it ended
        self._changed = False  # an event was made up: the terminal's output list must be ours
        self._message: int | None = None  # the upstream output_index of the message being repaired
        self._item: dict[str, Any] = {}  # that message as it was added
        self._state: ChoiceRepair | None = None
        self._held: list[SSEEvent] = []  # its output_item.added and content_part.added, until text
        self._segment: _Segment | None = None
        self._calls: dict[int, _Call] = {}  # the parser's call number → its item
        self._reasoning: _Segment | None = None  # a reasoning item the repair opened

    @staticmethod
    def tools_of(request: dict[str, Any]) -> list[Any] | None:
        """Responses tools (``name``, ``parameters``) in the chat shape."""
        tools = request.get("tools")
        return chat_tools(tools if isinstance(tools, list) else None, "parameters")

    def transform(self, event: SSEEvent) -> bytes:
        if self.failure is not None or event.data == "[DONE]":
            return event.raw
        obj = json_object(event)
        if obj is None:
            return event.raw
        kind = obj.get("type")
        index = obj.get("output_index")
        if kind == "response.output_item.added" and isinstance(index, int):
            item = obj.get("item")
            if isinstance(item, dict) and item.get("type") == "message":
                self._message, self._item, self._held = index, item, [event]
                self._state = self.new_state()
                self._segment, self._calls = None, {}
                return b""
            ours = self._map[index] = self._next
            self._next += 1
            return self._out(event, obj, output_index=ours)
        if self._message is not None and index == self._message and self._state is not None:
            return self._in_message(event, obj, kind, self._state)
        if kind in _RESPONSES_TERMINAL:
            response = obj.get("response")
            if self._changed and isinstance(response, dict):
                output = [self._items[i] for i in sorted(self._items)]
                return self._out(event, obj, response={**response, "output": output})
            return self._out(event, obj)
        if kind in _REASONING_DELTAS and isinstance(obj.get("delta"), str):
            self.scan(self.upstream_key(index), "reasoning", obj["delta"])
        if not isinstance(index, int):
            return self._out(event, obj)
        ours = self._map.get(index, index)
        if kind == "response.output_item.done":
            self._items[ours] = obj.get("item")
        return self._out(event, obj, output_index=ours)

    def flush(self) -> bytes:
        """A message the upstream never finished (a tolerated end): what its parser still holds."""
        if self._state is None:
            return b""
        state, self._state = self._state, None
        return self._emit(state, state.parser.close()) + self.end_reasoning()

    # ── the message being repaired ─────────────────────────────────────────────────────────────
    def _in_message(self, event: SSEEvent, obj: dict[str, Any], kind: Any,
                    state: ChoiceRepair) -> bytes:
        if kind == "response.content_part.added" and self._held:
            self._held.append(event)
            return b""
        if kind == "response.output_text.delta" and isinstance(obj.get("delta"), str):
            text = obj["delta"]
            events = state.parser.feed(text)
            if not plain(events, text):
                return self._emit(state, events)
            self.scan(state.key, "content", text)
            opened = self._open()
            assert self._segment is not None
            self._segment.text.append(text)
            return opened + self._out(event, obj, output_index=self._segment.index,
                                      item_id=self._segment.id)
        if kind == "response.output_text.done":
            out = self._emit(state, state.parser.close()) + self.end_reasoning()
            if self.failure is not None:
                return b""
            if self._segment is None and self._held and not state.calls:
                out += self._open()  # a message without text: as it came
            if self._segment is None:
                return out  # the message ended in a call: its text events have nothing to say
            return out + self._out(event, obj, output_index=self._segment.index,
                                   item_id=self._segment.id, text="".join(self._segment.text))
        # A message that got no text and no call (a refusal, say) goes out as it came.
        opened = self._open() if self._held and not state.calls else b""
        if kind in ("response.content_part.done", "response.output_item.done"):
            segment = self._segment
            if segment is None:
                if kind == "response.output_item.done":
                    self._message = self._state = None
                return b""
            text = "".join(segment.text)
            if kind == "response.content_part.done":
                part = obj.get("part")
                if isinstance(part, dict) and part.get("type") == "output_text":
                    part = {**part, "text": text}
                return opened + self._out(event, obj, output_index=segment.index,
                                          item_id=segment.id, part=part)
            item = obj.get("item")
            if isinstance(item, dict):
                content = item.get("content")
                parts = [{**c, "text": text} if isinstance(c, dict) and c.get("type") == "output_text"
                         else c for c in content] if isinstance(content, list) else content
                item = {**item, "id": segment.id, "content": parts}
            self._items[segment.index] = item
            self._segment = self._message = self._state = None
            return opened + self._out(event, obj, output_index=segment.index, item=item)
        if self._segment is not None:
            return opened + self._out(event, obj, output_index=self._segment.index,
                                      item_id=self._segment.id)
        return b""  # an event of a message whose text became calls: nothing to attach it to

    def _emit(self, state: ChoiceRepair, events: list[Any]) -> bytes:
        return self.emit(state, events, "message item")

    # ── BlockRepair ────────────────────────────────────────────────────────────────────────────
    def text(self, text: str) -> bytes:
        opened = self._open()
        assert self._segment is not None
        self._segment.text.append(text)
        return opened + self._new("response.output_text.delta", item_id=self._segment.id,
                                  output_index=self._segment.index, content_index=0,
                                  delta=text, logprobs=[])

    def call_start(self, call: ToolCallStart) -> bytes:
        closed = self._close()
        self._held = []  # a call before any text: the upstream's openers are not needed
        item = {"id": "fc_" + secrets.token_hex(12), "type": "function_call",
                "status": "in_progress", "arguments": "",
                "call_id": call.id or new_call_id(), "name": call.name}
        ours = self._calls[call.index] = _Call(self._next, item)
        self._next += 1
        return closed + self._new("response.output_item.added", output_index=ours.index, item=item)

    def call_args(self, args: ToolArgsDelta) -> bytes:
        call = self._calls[args.index]
        call.arguments.append(args.fragment)
        return self._new("response.function_call_arguments.delta", item_id=call.item["id"],
                         output_index=call.index, delta=args.fragment)

    def call_end(self, end: ToolCallEnd) -> bytes:
        call = self._calls[end.index]
        arguments = "".join(call.arguments)
        done = self._items[call.index] = {**call.item, "status": "completed", "arguments": arguments}
        return (self._new("response.function_call_arguments.done", item_id=call.item["id"],
                          output_index=call.index, arguments=arguments)
                + self._new("response.output_item.done", output_index=call.index, item=done))

    def _open(self) -> bytes:
        """Open a message item for the text that follows, unless one is open: the upstream's own
        (its held events, renumbered) if still held, else a new one."""
        if self._segment is not None:
            return b""
        index = self._next
        self._next += 1
        if self._held:
            held, self._held = self._held, []
            self._segment = _Segment(index, str(self._item.get("id", "")))
            return b"".join(self._out(event, json_object(event) or {}, output_index=index)
                            for event in held)
        segment = self._segment = _Segment(index, "msg_" + secrets.token_hex(12))
        item = {"id": segment.id, "type": "message", "status": "in_progress", "role": "assistant",
                "content": []}
        return (self._new("response.output_item.added", output_index=index, item=item)
                + self._new("response.content_part.added", item_id=segment.id, output_index=index,
                            content_index=0, part={"type": "output_text", "text": "",
                                                   "annotations": []}))

    def reasoning(self, text: str) -> bytes:
        """Reasoning the family wrote in its markup: a ``reasoning`` item of its own with the text as
        ``reasoning_text`` (the open message item ends first), kept open while reasoning follows."""
        out = b""
        if self._reasoning is None:
            out += self._close()
            self._held = []  # reasoning before any text: the upstream's openers are not needed
            segment = self._reasoning = _Segment(self._next, "rs_" + secrets.token_hex(12))
            self._next += 1
            out += self._new("response.output_item.added", output_index=segment.index, item={
                "id": segment.id, "type": "reasoning", "summary": [],
                "content": [{"type": "reasoning_text", "text": ""}]})
        segment = self._reasoning
        segment.text.append(text)
        return out + self._new("response.reasoning_text.delta", item_id=segment.id,
                               output_index=segment.index, content_index=0, delta=text)

    def end_reasoning(self) -> bytes:
        segment, self._reasoning = self._reasoning, None
        if segment is None:
            return b""
        text = "".join(segment.text)
        item = self._items[segment.index] = {
            "id": segment.id, "type": "reasoning", "summary": [],
            "content": [{"type": "reasoning_text", "text": text}]}
        return (self._new("response.reasoning_text.done", item_id=segment.id,
                          output_index=segment.index, content_index=0, text=text)
                + self._new("response.output_item.done", output_index=segment.index, item=item))

    def _close(self) -> bytes:
        """End the open message item with the text it got (a call comes next)."""
        segment, self._segment = self._segment, None
        if segment is None:
            return b""
        text = "".join(segment.text)
        part = {"type": "output_text", "text": text, "annotations": []}
        item = self._items[segment.index] = {"id": segment.id, "type": "message",
                                             "status": "completed", "role": "assistant",
                                             "content": [part]}
        return (self._new("response.output_text.done", item_id=segment.id,
                          output_index=segment.index, content_index=0, text=text, logprobs=[])
                + self._new("response.content_part.done", item_id=segment.id,
                            output_index=segment.index, content_index=0, part=part)
                + self._new("response.output_item.done", output_index=segment.index, item=item))

    # ── numbering ──────────────────────────────────────────────────────────────────────────────
    def _out(self, event: SSEEvent, obj: dict[str, Any], **changes: Any) -> bytes:
        """The upstream's event with the next sequence number and ``changes``; as it came when
        that changes nothing."""
        seq = self._seq
        self._seq += 1
        if "sequence_number" in obj and obj["sequence_number"] != seq:
            changes["sequence_number"] = seq
        if all(obj.get(k) == v for k, v in changes.items()):
            return event.raw
        return _frame(event.event, {**obj, **changes})

    def _new(self, kind: str, **fields: Any) -> bytes:
        """An event the repair makes up, numbered in sequence."""
        self._changed = True
        obj = {"type": kind, **fields, "sequence_number": self._seq}
        self._seq += 1
        return sse(kind, obj)
