"""The OpenAI Responses API (``POST …/responses``) streaming contract, checked over raw body bytes.

A Responses stream is a sequence of typed events, numbered by ``sequence_number``: ``response.created``,
output items opened and closed by ``output_index`` (``response.output_item.added``/``.done``), their
parts (``content_part``, ``reasoning_summary_part``), text and arguments streamed as ``*.delta`` and
repeated whole in ``*.done``, and one terminal event. ``complete`` is a last event
``response.completed`` or ``response.incomplete`` (a legitimate stop such as ``max_output_tokens``);
there is no sentinel, so a trailing ``data: [DONE]`` is tolerated, never required, and a ``[DONE]``
without a terminal event is ``no_finish``. ``response.failed`` and the ``error`` event (flat or nested)
are ``error_event``, and so is a terminal response whose reason (``incomplete_details.reason``) the
reason table (``vocabulary.py``) classes as failed or does not name. Event and output-item types the
tables do not know pass and are recorded, never judged. The table is in ``docs/design/vocabulary.md``.

``ResponsesAssembler`` folds the events into the final ``response`` object with its ``output`` items, as
openai-python's ``ResponseStreamManager`` does; ``ResponsesChecker`` adds the contract.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Literal

import msgspec

from sseguard.core.contract._base import FINISHED, JSON_ERRORS, CheckerBase
from sseguard.core.contract.folding import Block, Joined, is_int
from sseguard.core.contract.responses.assembler import (
    ARGUMENTS,
    CONTENT_PART,
    OUTPUT_TEXT,
    OUTPUT_TEXT_DELTA,
    PARTS,
    TEXT_STREAMS,
    Part,
    ResponsesAssembler,
    TextStream,
)
from sseguard.core.contract.responses.vocabulary import KINDS, REASONS
from sseguard.core.sse import SSEEvent
from sseguard.core.verdict import Api, Ending, FindingKind

#: Events that carry the response object itself.
_LIFECYCLE = frozenset({"response.created", "response.queued", "response.in_progress"})
#: Markers a few servers send after (or instead of) the terminal event; neither ends a response.
_DONE_MARKERS = frozenset({"[DONE]", "response.done"})


class _TextDelta(msgspec.Struct, gc=False):
    """``response.output_text.delta`` with the fields the checker reads, typed (``item_id``,
    ``logprobs``, ``obfuscation`` are skipped unread); any other event fails to decode into it at
    its ``type`` and takes the general way. Decoded JSON holds no cycle: no GC tracking."""

    type: Literal["response.output_text.delta"]
    sequence_number: int
    output_index: int
    content_index: int
    delta: str


_decode_text_delta = msgspec.json.Decoder(_TextDelta).decode
_TYPED_MISS = (msgspec.ValidationError, *JSON_ERRORS)


class ResponsesChecker(CheckerBase):
    """Feed it one Responses stream body; ``close()`` returns the ``Verdict`` (``api="responses"``).

    ``request`` is the request body (``tools`` in the Responses format enable the tool checks);
    ``markup`` names the tool-call markup families looked for in ``output_text`` and reasoning deltas.
    """

    api = Api.RESPONSES
    reasons = REASONS
    kinds = KINDS
    _leak_place = "output item"

    def __init__(self, request: dict[str, Any] | None = None, *,
                 markup: str | Iterable[str] | None = "all", keep_text: bool = True) -> None:
        super().__init__(request, markup=markup, keep_text=keep_text)
        self._asm = ResponsesAssembler(keep_text=keep_text)
        self.is_terminal: dict[str, Any] | None = None  # the completed / incomplete response
        self._ended = False  # a terminal, failed or done-marker event came: nothing may follow
        self._done_marker = False
        # The lane's message item and its text part, where its deltas go (``_lane_fold``).
        self._lane_item: Block | None = None
        self._lane_part: Part | None = None
        self._lane_key: tuple[int, str, int] = (0, OUTPUT_TEXT, 0)
        # The assembler's joined text of that part, once the lane's first text made it (the
        # general way makes it at the first non-empty delta only; the assembler never replaces it).
        self._lane_text: Joined | None = None

    @staticmethod
    def _tool_entry(tool: dict[str, Any]) -> tuple[Any, Any]:
        """A Responses tool is flat: ``{"type": "function", "name", "parameters"}``; built-in tools
        (web search, file search, …) come back as their own item types, never as function calls."""
        if tool.get("type", "function") in ("function", "custom"):
            return tool.get("name"), tool.get("parameters")
        return None, None

    @property
    def saw_content(self) -> bool:
        return self._asm.saw_token

    @property
    def saw_done(self) -> bool:
        """``response.completed`` or ``response.incomplete`` arrived."""
        return self.is_terminal is not None

    # ── folding ───────────────────────────────────────────────────────────────────────────────
    def _on_event(self, event: SSEEvent) -> None:
        data = event.data
        if data == "[DONE]":
            self._events += 1
            self._on_done_marker("[DONE]")
            return
        try:
            fast = _decode_text_delta(data)
        except _TYPED_MISS:
            pass  # any other event, or not quite this one: the general way below
        else:
            # Nearly every event of a long answer: the next text delta into an open part of an
            # open message. Folded here as the general way (``_typed_event``, ``_note_sequence``,
            # ``_on_delta``) would; anything else about it takes that way, untouched.
            seq, index, sub = fast.sequence_number, fast.output_index, fast.content_index
            if ((seq == self._next_seq or self._next_seq is None) and event.event != "error"
                    and not self._ended and self._asm.response is not None):
                block = self._asm.items.get(index)
                part = self._asm.parts.get((index, CONTENT_PART, sub))
                if (block is not None and block.open and block.type == "message"
                        and part is not None and part.open):
                    self._events += 1
                    self._chunks += 1
                    self._next_seq = seq + 1
                    delta = fast.delta
                    if delta:
                        self._asm.text((index, OUTPUT_TEXT, sub)).add(delta)
                        self._asm.saw_token = True
                        self._leaks.scan(index, "output_text", delta)
                    if self._may_learn and self._learn_lane(
                            event, delta, ("delta",), number=seq, number_key="sequence_number",
                            number_path=("sequence_number",)):
                        self._lane_item, self._lane_part = block, part
                        self._lane_key = (index, OUTPUT_TEXT, sub)
                        self._lane_text = self._asm.texts.get(self._lane_key)
                    return
        typed = self._typed_event(event, self._note_sequence)
        if typed is None:
            return
        etype, obj = typed
        if etype == "response.done":
            self._on_done_marker(etype)
            return
        handler = _HANDLERS.get(etype)
        if handler is None:
            if etype not in self.kinds.events:
                self._unknown_kind(etype)  # OpenAI adds event types: passed, recorded
            return
        if self._ended:
            self._late(etype)
            return
        if self._asm.response is None and etype != "response.created":
            self._once("start", FindingKind.EVENT_ORDER, f"{etype} before response.created")
        handler(self, etype, obj)

    def _lane_state(self) -> bool:
        item, part = self._lane_item, self._lane_part
        if (item is None or part is None or self._next_seq is None or self._ended
                or self._asm.response is None):
            return False
        index, _, sub = self._lane_key
        return (item.open and part.open and self._asm.items.get(index) is item
                and self._asm.parts.get((index, CONTENT_PART, sub)) is part)

    def _lane_fold(self, text: str) -> None:
        """The lane's ``output_text.delta`` with ``text`` and the next number, folded as
        ``_on_event``'s common case (``_lane_state`` said the number is known)."""
        self._events += 1
        self._chunks += 1
        self._next_seq = (self._next_seq or 0) + 1
        if text:
            joined = self._lane_text
            if joined is None:
                joined = self._lane_text = self._asm.text(self._lane_key)
            joined.add(text)
            self._asm.saw_token = True
            self._leaks.scan(self._lane_key[0], "output_text", text)

    def _note_sequence(self, obj: dict[str, Any]) -> None:
        seq = obj.get("sequence_number")
        if not is_int(seq):
            return
        if self._next_seq is not None and seq != self._next_seq:
            self._once("sequence", FindingKind.SEQUENCE_GAP,
                       f"sequence_number {seq} where {self._next_seq} was next")
        self._next_seq = seq + 1

    def _on_done_marker(self, what: str) -> None:
        # After the terminal event a [DONE] is a harmless habit of some servers; a second one, or
        # anything after it, is not.
        if self._done_marker:
            self._late(what)
            return
        self._done_marker = True
        self._ended = True

    def _late(self, what: str) -> None:
        self._once("end", FindingKind.EVENT_ORDER, f"{what} after the end of the response")

    def _response_of(self, etype: str, obj: dict[str, Any]) -> dict[str, Any] | None:
        response = obj.get("response")
        if isinstance(response, dict):
            return response
        self._find(FindingKind.CHUNK_SCHEMA, f"{etype} without a response object")
        return None

    def _on_lifecycle(self, etype: str, obj: dict[str, Any]) -> None:
        if etype == "response.created" and self._asm.response is not None:
            self._find(FindingKind.EVENT_ORDER, "a second response.created")
        response = self._response_of(etype, obj)
        if response is not None:
            self._asm.note_response(response)

    def _on_terminal(self, etype: str, obj: dict[str, Any]) -> None:
        response = self._response_of(etype, obj)
        self._flag_open(self._asm.items.values(), "output item")
        self._ended = True
        if response is not None:
            self._asm.note_response(response)
            self.is_terminal = response
        else:
            self.is_terminal = {}
        if etype == "response.incomplete":
            details = self.is_terminal.get("incomplete_details")
            reason = details.get("reason") if isinstance(details, dict) else None
            self._finish_reason(reason if isinstance(reason, str) else "incomplete",
                                "response.incomplete, incomplete_details.reason")

    def _on_failed(self, etype: str, obj: dict[str, Any]) -> None:
        # ``response.failed`` is an error ending; its ``response.error`` says why.
        self._ended = True
        message = ""
        response = obj.get("response")
        if isinstance(response, dict):
            self._asm.note_response(response)
            err = response.get("error")
            if isinstance(err, dict):
                message = str(err.get("message") or err.get("code") or "")
        if self._error is None:
            self._error = message or etype

    def _open_item(self, etype: str, obj: dict[str, Any]) -> Block | None:
        index = self._int_field(etype, obj, "output_index")
        return None if index is None else self._open_block(etype, index, self._asm.items,
                                                           "output item")

    def _on_item_added(self, etype: str, obj: dict[str, Any]) -> None:
        index = self._int_field(etype, obj, "output_index")
        item = obj.get("item")
        if index is None:
            return
        if not isinstance(item, dict):
            self._find(FindingKind.CHUNK_SCHEMA, f"{etype}: item is not an object")
            return
        if index in self._asm.items:
            self._find(FindingKind.EVENT_ORDER, f"output item {index} opened twice")
            return
        itype = item.get("type")
        if not isinstance(itype, str) or itype not in self.kinds.blocks:
            self._unknown_kind(f"item:{itype if isinstance(itype, str) else ''}")
        name = item.get("name")
        block = Block(index, itype if isinstance(itype, str) else "", dict(item),
                      is_tool=itype == "function_call", name=name if isinstance(name, str) else "")
        self._asm.items[index] = block
        if block.is_tool:
            self._asm.saw_token = True
            args = item.get("arguments")
            if isinstance(args, str) and args:
                block.arguments.append(args)
                self._asm.text((index, ARGUMENTS, 0)).add(args)

    def _on_item_done(self, etype: str, obj: dict[str, Any]) -> None:
        block = self._open_item(etype, obj)
        if block is None:
            return
        block.open = False
        item = obj.get("item")
        if not isinstance(item, dict):
            self._find(FindingKind.CHUNK_SCHEMA, f"{etype}: item is not an object")
            return
        block.snapshot = item
        if block.is_tool:
            name = item.get("name")
            if isinstance(name, str) and name and not block.name:
                block.name = name
            args = item.get("arguments")
            if isinstance(args, str) and args != "".join(block.arguments):
                self._find(FindingKind.DONE_MISMATCH,
                           f"output item {block.index}: arguments in output_item.done differ from "
                           f"the {len(block.arguments)} streamed fragment(s)")

    def _part_key(self, etype: str, obj: dict[str, Any]) -> tuple[int, str, int] | None:
        """(output index, part kind, part index) of a part event, when its item is open."""
        prefix = etype.rpartition(".")[0]
        block = self._open_item(etype, obj)
        sub = None if block is None else self._int_field(etype, obj, PARTS[prefix][0])
        return None if block is None or sub is None else (block.index, prefix, sub)

    def _on_part_added(self, etype: str, obj: dict[str, Any]) -> None:
        key = self._part_key(etype, obj)
        if key is None:
            return
        if key in self._asm.parts:
            self._find(FindingKind.EVENT_ORDER, f"{etype}: part {key[2]} of output item {key[0]} "
                                                f"opened twice")
            return
        part = obj.get("part")
        self._asm.parts[key] = Part(dict(part) if isinstance(part, dict) else {})

    def _on_part_done(self, etype: str, obj: dict[str, Any]) -> None:
        key = self._part_key(etype, obj)
        if key is None:
            return
        part = self._asm.parts.get(key)
        if part is None or not part.open:
            self._find(FindingKind.EVENT_ORDER, f"{etype}: part {key[2]} of output item {key[0]} "
                                                f"is not open")
            return
        part.open = False
        done = obj.get("part")
        if isinstance(done, dict):
            part.snapshot = done

    def _text_key(self, etype: str, obj: dict[str, Any],
                  ) -> tuple[Block, TextStream, tuple[int, str, int]] | None:
        prefix = etype.rpartition(".")[0]
        spec = TEXT_STREAMS[prefix]
        block = self._open_item(etype, obj)
        if block is None:
            return None
        if block.type != spec.item_type:
            self._once(f"{etype}#{block.index}", FindingKind.EVENT_ORDER,
                       f"{etype} for output item {block.index}, a {block.type or 'untyped'} item")
            return None
        sub = 0
        if spec.part_index is not None:
            got = self._int_field(etype, obj, spec.part_index)
            if got is None:
                return None
            sub = got
            if spec.needs_part:
                part = self._asm.parts.get((block.index, CONTENT_PART, sub))
                if part is None or not part.open:
                    self._once(f"{etype}#{block.index}#{sub}", FindingKind.EVENT_ORDER,
                               f"{etype} for part {sub} of output item {block.index}, which is "
                               f"not open")
                    return None
        return block, spec, (block.index, prefix, sub)

    def _on_delta(self, etype: str, obj: dict[str, Any]) -> None:
        # Fast path for nearly every event of a long answer: text into an open part of an open
        # message; anything unusual takes the checked way below.
        if etype == OUTPUT_TEXT_DELTA:
            index, sub, delta = obj.get("output_index"), obj.get("content_index"), obj.get("delta")
            if type(index) is int and type(sub) is int and type(delta) is str:
                block = self._asm.items.get(index)
                part = self._asm.parts.get((index, CONTENT_PART, sub))
                if (block is not None and block.open and block.type == "message"
                        and part is not None and part.open):
                    if delta:
                        self._asm.text((index, OUTPUT_TEXT, sub)).add(delta)
                        self._asm.saw_token = True
                        self._leaks.scan(index, "output_text", delta)
                    return
        found = self._text_key(etype, obj)
        if found is None:
            return
        block, spec, key = found
        delta = obj.get("delta")
        if not isinstance(delta, str):
            self._find(FindingKind.CHUNK_SCHEMA, f"{etype}: delta is not a string")
            return
        if not delta:
            return
        self._asm.text(key).add(delta)
        self._asm.saw_token = True
        if block.is_tool:
            block.arguments.append(delta)
        if spec.leak_field is not None:
            self._leaks.scan(block.index, spec.leak_field, delta)

    def _on_text_done(self, etype: str, obj: dict[str, Any]) -> None:
        found = self._text_key(etype, obj)
        if found is None:
            return
        block, spec, key = found
        full = obj.get(spec.done_field)
        if not isinstance(full, str):
            self._find(FindingKind.CHUNK_SCHEMA, f"{etype}: {spec.done_field} is not a string")
            return
        joined = self._asm.texts.get(key)
        if not (joined.equals(full) if joined is not None else full == ""):
            self._find(FindingKind.DONE_MISMATCH,
                       f"{etype}: the full {spec.done_field} of output item {block.index} differs "
                       f"from the joined deltas")

    # ── the verdict ───────────────────────────────────────────────────────────────────────────
    def _clean_ending(self) -> Ending:
        if self.is_terminal is not None:
            return Ending.COMPLETE
        return Ending.NO_FINISH if self._done_marker else Ending.TRUNCATED

    def _final_findings(self, ending: Ending) -> None:
        self._check_tool_blocks(self._asm.items.values(), "output item")
        if ending in FINISHED and self.is_terminal is not None \
                and not isinstance(self.is_terminal.get("usage"), dict):
            self._find(FindingKind.MISSING_USAGE, "the terminal response carries no usage")

    def _ids(self) -> tuple[str | None, str | None, bool]:
        return self._asm.ids.facts()

    def _message(self) -> dict[str, Any]:
        return self._asm.to_response()


# ── the protocol's other facts: requests, relay, errors, sniffing, the descriptor ─────────────────


#: Each event type's fold, by type: a table of the class's functions, not of one checker's bound
#: methods (those would tie every checker in a reference cycle, freed only by the cyclic GC).
_HANDLERS: dict[str, Callable[[ResponsesChecker, str, dict[str, Any]], None]] = {
    "response.created": ResponsesChecker._on_lifecycle,
    "response.queued": ResponsesChecker._on_lifecycle,
    "response.in_progress": ResponsesChecker._on_lifecycle,
    "response.completed": ResponsesChecker._on_terminal,
    "response.incomplete": ResponsesChecker._on_terminal,
    "response.failed": ResponsesChecker._on_failed,
    "response.output_item.added": ResponsesChecker._on_item_added,
    "response.output_item.done": ResponsesChecker._on_item_done,
    **{prefix + ".added": ResponsesChecker._on_part_added for prefix in PARTS},
    **{prefix + ".done": ResponsesChecker._on_part_done for prefix in PARTS},
    **{prefix + ".delta": ResponsesChecker._on_delta for prefix in TEXT_STREAMS},
    **{prefix + ".done": ResponsesChecker._on_text_done for prefix in TEXT_STREAMS},
}
