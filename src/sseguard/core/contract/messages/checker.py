"""The Anthropic Messages (``POST …/messages``) streaming contract, checked over raw body bytes.

A Messages stream is ``message_start``, content blocks opened, streamed and closed by ``index``
(``content_block_start``/``_delta``/``_stop``), a ``message_delta`` that carries the ``stop_reason`` and
the output usage, then ``message_stop``. ``complete`` needs both: a non-null ``stop_reason`` *and*
``message_stop``. A ``stop_reason`` without ``message_stop`` is ``no_done`` (a gateway dialect), a
``message_stop`` without any ``stop_reason`` is ``no_finish`` (what the opencode gateway's Anthropic
path was reported to send). ``event: error`` is ``error_event``; ``ping`` is a keep-alive. Event,
block and delta types the tables (``vocabulary.py``) do not know pass and are recorded, never judged;
a ``stop_reason`` the reason table classes as failed, or does not name, is ``error_event``. The table
is in ``docs/design/vocabulary.md``.

``MessagesAssembler`` folds the events into the final ``message`` with its content blocks, as the
anthropic SDK's ``MessageStream`` accumulates it; ``MessagesChecker`` adds the contract.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from sseguard.core.contract._base import FINISHED, JSON_ERRORS, CheckerBase, decode_json
from sseguard.core.contract.folding import Block
from sseguard.core.contract.messages.assembler import DELTAS, TOOL_BLOCKS, MessagesAssembler
from sseguard.core.contract.messages.vocabulary import KINDS, REASONS
from sseguard.core.sse import SSEEvent
from sseguard.core.verdict import Api, Ending, FindingKind


class MessagesChecker(CheckerBase):
    """Feed it one Messages stream body; ``close()`` returns the ``Verdict`` (``api="messages"``).

    ``request`` is the request body (``tools`` in Anthropic's format enable the tool checks);
    ``markup`` names the tool-call markup families looked for in ``text_delta`` and ``thinking_delta``.
    """

    api = Api.MESSAGES
    reasons = REASONS
    kinds = KINDS
    _leak_place = "content block"

    def __init__(self, request: dict[str, Any] | None = None, *,
                 markup: str | Iterable[str] | None = "all", keep_text: bool = True) -> None:
        super().__init__(request, markup=markup, keep_text=keep_text)
        self._asm = MessagesAssembler(keep_text=keep_text)
        self._stop_reason: str | None = None
        self._stopped = False  # message_stop came
        self._usage_seen = False
        self._input_at_start: set[int] = set()  # tool blocks whose input came whole at the start
        self._lane_block: Block | None = None  # the text block of the lane's deltas
        self._lane_index = 0

    @staticmethod
    def _tool_entry(tool: dict[str, Any]) -> tuple[Any, Any]:
        """An Anthropic tool is ``{"name", "description", "input_schema"}`` (server tools: none)."""
        return tool.get("name"), tool.get("input_schema")

    @property
    def saw_content(self) -> bool:
        return self._asm.saw_token

    @property
    def saw_done(self) -> bool:
        """``message_stop`` arrived."""
        return self._stopped

    # ── folding ───────────────────────────────────────────────────────────────────────────────
    def _on_event(self, event: SSEEvent) -> None:
        data = event.data
        if event.event == "ping" or data == "[DONE]":
            # Keep-alives; a few gateways also append chat's [DONE] to an Anthropic stream. Neither
            # is content nor an ending.
            return
        try:
            obj = decode_json(data)
        except JSON_ERRORS:
            obj = None  # the general way below says what is wrong
        if type(obj) is dict and obj.get("type") == "content_block_delta":
            # Nearly every event of a long answer: text into an open text block, in order. Folded
            # here as the general way (``_typed_event``, ``_on_block_delta``) would fold it.
            index = obj.get("index")
            delta = obj.get("delta")
            block = self._asm.blocks.get(index) if type(index) is int else None
            if (block is not None and block.open and block.type == "text" and type(delta) is dict
                    and delta.get("type") == "text_delta" and event.event != "error"
                    and not self._stopped and self._stop_reason is None
                    and self._asm.message is not None):
                text = delta.get("text")
                if type(text) is str:
                    self._events += 1
                    self._chunks += 1
                    if text:
                        self._asm.add_text(block.index, "text", text)
                        self._asm.saw_token = True
                        self._leaks.scan(block.index, "text", text)
                    if self._may_learn and self._learn_lane(event, text, ("delta", "text")):
                        self._lane_block, self._lane_index = block, block.index
                    return
        typed = self._typed_event(event, decoded=obj)
        if typed is None:
            return
        etype, obj = typed
        if etype == "ping":
            self._events -= 1  # a keep-alive, whatever the SSE event name said: not an event
            self._chunks -= 1
            return
        handler = _HANDLERS.get(etype)
        if handler is None:
            if etype not in self.kinds.events:
                self._unknown_kind(etype)  # Anthropic adds event types: passed, recorded
            return
        if self._stopped:
            self._late(f"{etype} after message_stop")
            return
        if self._asm.message is None and etype != "message_start":
            self._once("start", FindingKind.EVENT_ORDER, f"{etype} before message_start")
        handler(self, etype, obj)

    def _lane_state(self) -> bool:
        block = self._lane_block
        return (block is not None and block.open and self._asm.blocks.get(block.index) is block
                and not self._stopped and self._stop_reason is None
                and self._asm.message is not None)

    def _lane_fold(self, text: str) -> None:
        """The lane's ``text_delta`` with ``text``, folded as ``_on_event``'s common case."""
        self._events += 1
        self._chunks += 1
        if text:
            index = self._lane_index
            self._asm.add_text(index, "text", text)
            self._asm.saw_token = True
            self._leaks.scan(index, "text", text)

    def _late(self, what: str) -> None:
        self._once("end", FindingKind.EVENT_ORDER, what)

    def _on_start(self, etype: str, obj: dict[str, Any]) -> None:
        message = obj.get("message")
        if not isinstance(message, dict):
            self._find(FindingKind.CHUNK_SCHEMA, f"{etype} without a message object")
            return
        if self._asm.message is not None:
            self._find(FindingKind.EVENT_ORDER, "a second message_start")
        self._asm.start(message)

    def _content_allowed(self, etype: str) -> bool:
        if self._stop_reason is not None:
            self._late(f"{etype} after the stop_reason")
            return False
        return True

    def _block_of(self, etype: str, obj: dict[str, Any]) -> Block | None:
        index = self._int_field(etype, obj, "index")
        if index is None or not self._content_allowed(etype):
            return None
        return self._open_block(etype, index, self._asm.blocks, "content block")

    def _on_block_start(self, etype: str, obj: dict[str, Any]) -> None:
        index = self._int_field(etype, obj, "index")
        if index is None or not self._content_allowed(etype):
            return
        content = obj.get("content_block")
        if not isinstance(content, dict):
            self._find(FindingKind.CHUNK_SCHEMA, f"{etype}: content_block is not an object")
            return
        if index in self._asm.blocks:
            self._find(FindingKind.EVENT_ORDER, f"content block {index} opened twice")
            return
        btype = content.get("type")
        btype = btype if isinstance(btype, str) else ""
        if btype not in self.kinds.blocks:
            self._unknown_kind(f"block:{btype}")
        name = content.get("name")
        block = Block(index, btype, dict(content), is_tool=btype in TOOL_BLOCKS,
                      name=name if isinstance(name, str) else "")
        self._asm.blocks[index] = block
        if block.is_tool:
            self._asm.saw_token = True
            start_input = content.get("input")
            if isinstance(start_input, dict) and start_input:
                # A server that sends the whole input at the start and no deltas: check that.
                block.arguments.append(json.dumps(start_input))
                self._input_at_start.add(index)

    def _on_block_delta(self, etype: str, obj: dict[str, Any]) -> None:
        # Fast path for nearly every event of a long answer: text into an open text block.
        index = obj.get("index")
        block = self._asm.blocks.get(index) if type(index) is int else None
        delta = obj.get("delta")
        if (block is not None and block.open and block.type == "text" and self._stop_reason is None
                and type(delta) is dict and delta.get("type") == "text_delta"):
            text = delta.get("text")
            if type(text) is str:
                if text:
                    self._asm.add_text(block.index, "text", text)
                    self._asm.saw_token = True
                    self._leaks.scan(block.index, "text", text)
                return
        block = self._block_of(etype, obj)
        if block is None:
            return
        delta = obj.get("delta")
        if not isinstance(delta, dict):
            self._find(FindingKind.CHUNK_SCHEMA, f"{etype}: delta is not an object")
            return
        dtype = delta.get("type")
        spec = DELTAS.get(dtype) if isinstance(dtype, str) else None
        if spec is None:
            # Delta types added later carry nothing this checker knows: passed, recorded.
            self._unknown_kind(f"delta:{dtype if isinstance(dtype, str) else ''}")
            return
        if spec.copies:
            if not spec.streams_into(block.type):
                self._find(FindingKind.CHUNK_SCHEMA, f"{etype}: {dtype} for content block "
                                                     f"{block.index}, a {block.type or 'untyped'} "
                                                     "block")
                return
            for name in spec.copies:
                if name in delta:
                    block.snapshot[name] = delta[name]
            return
        fragment = delta.get(spec.field)
        wanted = dict if spec.appends else str
        if not isinstance(fragment, wanted):
            self._find(FindingKind.CHUNK_SCHEMA, f"{etype}: {dtype}.{spec.field} is not a "
                                                 f"{'object' if spec.appends else 'string'}")
            return
        if not spec.streams_into(block.type):
            self._find(FindingKind.CHUNK_SCHEMA, f"{etype}: {dtype} for content block "
                                                 f"{block.index}, a {block.type or 'untyped'} block")
            return
        if isinstance(fragment, dict):
            assert spec.appends is not None  # only an appending delta carries an object
            listed = block.snapshot.get(spec.appends)
            block.snapshot[spec.appends] = [*(listed if isinstance(listed, list) else ()), fragment]
        elif spec.sets is not None:
            block.snapshot[spec.sets] = fragment
        elif spec.field == "partial_json":
            if block.index in self._input_at_start:
                self._input_at_start.discard(block.index)
                block.arguments.clear()  # the deltas are the input, not what the start showed
            block.arguments.append(fragment)
        elif fragment:
            self._asm.add_text(block.index, spec.field, fragment)
            self._asm.saw_token = True
            if spec.leak_field is not None:
                self._leaks.scan(block.index, spec.leak_field, fragment)

    def _on_block_stop(self, etype: str, obj: dict[str, Any]) -> None:
        block = self._block_of(etype, obj)
        if block is not None:
            block.open = False

    def _on_message_delta(self, etype: str, obj: dict[str, Any]) -> None:
        delta = obj.get("delta")
        if not isinstance(delta, dict):
            self._find(FindingKind.CHUNK_SCHEMA, f"{etype}: delta is not an object")
            return
        stop = delta.get("stop_reason")
        if stop is not None and not isinstance(stop, str):
            self._find(FindingKind.CHUNK_SCHEMA, f"{etype}: stop_reason is not a string")
            stop = None
        usage = obj.get("usage")
        if isinstance(usage, dict):
            self._usage_seen = True
        elif usage is not None:
            self._find(FindingKind.CHUNK_SCHEMA, f"{etype}: usage is not an object")
        if stop and self._stop_reason is None:
            self._flag_open(self._asm.blocks.values(), "content block")
            self._stop_reason = stop
            self._finish_reason(stop, "stop_reason")
        self._asm.delta(delta, usage)

    def _on_message_stop(self, etype: str, obj: dict[str, Any]) -> None:
        self._flag_open(self._asm.blocks.values(), "content block")
        self._stopped = True

    # ── the verdict ───────────────────────────────────────────────────────────────────────────
    def _clean_ending(self) -> Ending:
        if self._stop_reason is not None:
            return Ending.COMPLETE if self._stopped else Ending.NO_DONE
        return Ending.NO_FINISH if self._stopped else Ending.TRUNCATED

    def _final_findings(self, ending: Ending) -> None:
        self._check_tool_blocks(self._asm.blocks.values(), "content block")
        if ending in FINISHED and not self._usage_seen:
            self._find(FindingKind.MISSING_USAGE, "no message_delta carried usage")

    def _ids(self) -> tuple[str | None, str | None, bool]:
        return self._asm.ids.facts()

    def _message(self) -> dict[str, Any]:
        return self._asm.to_message()


#: Each event type's fold, by type: a table of the class's functions, not of one checker's bound
#: methods (those would tie every checker in a reference cycle, freed only by the cyclic GC).
_HANDLERS: dict[str, Callable[[MessagesChecker, str, dict[str, Any]], None]] = {
    "message_start": MessagesChecker._on_start,
    "content_block_start": MessagesChecker._on_block_start,
    "content_block_delta": MessagesChecker._on_block_delta,
    "content_block_stop": MessagesChecker._on_block_stop,
    "message_delta": MessagesChecker._on_message_delta,
    "message_stop": MessagesChecker._on_message_stop,
}
