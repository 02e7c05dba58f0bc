"""The OpenAI Responses API (``POST …/responses``) streaming contract, checked over raw body bytes.

A Responses stream is a sequence of typed events, numbered by ``sequence_number``: ``response.created``,
output items opened and closed by ``output_index`` (``response.output_item.added``/``.done``), their
parts (``content_part``, ``reasoning_summary_part``), text and arguments streamed as ``*.delta`` and
repeated whole in ``*.done``, and one terminal event. ``complete`` is a last event
``response.completed`` or ``response.incomplete`` (a legitimate stop such as ``max_output_tokens``);
there is no sentinel, so a trailing ``data: [DONE]`` is tolerated, never required, and a ``[DONE]``
without a terminal event is ``no_finish``. ``response.failed`` and the ``error`` event (flat or nested)
are ``error_event``. The table is in ``PROTOCOLS.md``.

``ResponsesAssembler`` folds the events into the final ``response`` object with its ``output`` items, as
openai-python's ``ResponseStreamManager`` does; ``ResponsesChecker`` adds the contract.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sseguard.contract._base import (
    FINISHED,
    Block,
    CheckerBase,
    IdWatch,
    Joined,
    is_int,
)
from sseguard.sse import SSEEvent
from sseguard.verdict import Api, Ending, FindingKind

__all__ = ["ResponsesAssembler", "ResponsesChecker"]

#: Events that carry the response object itself.
_LIFECYCLE = frozenset({"response.created", "response.queued", "response.in_progress"})
#: A legitimate end: ``incomplete`` is a stop like chat's ``length`` (its reason is the finish).
_TERMINAL = frozenset({"response.completed", "response.incomplete"})
#: Markers a few servers send after (or instead of) the terminal event; neither ends a response.
_DONE_MARKERS = frozenset({"[DONE]", "response.done"})


@dataclass(frozen=True, slots=True)
class _TextStream:
    """One kind of streamed text: its ``.delta`` events are joined, its ``.done`` repeats it whole."""

    done_field: str  # where the ``.done`` event holds the full text
    part_index: str | None  # the field naming the part within the item, if any
    item_type: str  # the only output item type it may stream into
    needs_part: bool  # a ``content_part`` must be open first (the SDK indexes into it)
    leak_field: str | None  # where leaked markup is looked for (None: not visible text)


#: The text streams, by event-type prefix: one engine, this table (STYLE.md item 3).
_TEXT: dict[str, _TextStream] = {
    "response.output_text": _TextStream("text", "content_index", "message", True, "output_text"),
    "response.refusal": _TextStream("refusal", "content_index", "message", True, None),
    "response.reasoning_text": _TextStream("text", "content_index", "reasoning", False, "reasoning"),
    "response.reasoning_summary_text": _TextStream("text", "summary_index", "reasoning", False,
                                                   "reasoning"),
    "response.function_call_arguments": _TextStream("arguments", None, "function_call", False, None),
    "response.custom_tool_call_input": _TextStream("input", None, "custom_tool_call", False, None),
    "response.mcp_call_arguments": _TextStream("arguments", None, "mcp_call", False, None),
}
#: Parts of an item, opened by ``.added`` and closed by ``.done``: prefix → (index field, item field).
_PARTS: dict[str, tuple[str, str]] = {
    "response.content_part": ("content_index", "content"),
    "response.reasoning_summary_part": ("summary_index", "summary"),
}
#: Which text streams fill which part kind, and the field of the part they fill.
_PART_TEXT: dict[str, dict[str, str]] = {
    "response.content_part": {"response.output_text": "text", "response.refusal": "refusal",
                              "response.reasoning_text": "text"},
    "response.reasoning_summary_part": {"response.reasoning_summary_text": "text"},
}
_ARGUMENTS = "response.function_call_arguments"
_OUTPUT_TEXT = "response.output_text"
_OUTPUT_TEXT_DELTA = "response.output_text.delta"
_CONTENT_PART = "response.content_part"


@dataclass(slots=True)
class _Part:
    snapshot: dict[str, Any]
    open: bool = True


class ResponsesAssembler:
    """Folds Responses events into the final ``response`` object, as openai-python accumulates it.

    The last response object a lifecycle or terminal event carried is the base; when that carries no
    ``output`` (or the stream never ended), the output items come from the stream itself: an item as
    its ``output_item.done`` gave it, else as it was opened, with the streamed text and arguments
    filled in. ``keep_text=False`` keeps no text (arguments are always kept: they are checked).
    """

    __slots__ = ("ids", "items", "keep_text", "parts", "response", "saw_token", "texts")

    def __init__(self, *, keep_text: bool = True) -> None:
        self.keep_text = keep_text
        self.response: dict[str, Any] | None = None  # the last response object seen
        self.items: dict[int, Block] = {}
        self.parts: dict[tuple[int, str, int], _Part] = {}
        self.texts: dict[tuple[int, str, int], Joined] = {}
        self.ids = IdWatch()
        self.saw_token = False

    def note_response(self, response: dict[str, Any]) -> None:
        self.response = response
        self.ids.see(response.get("id"))

    def text(self, key: tuple[int, str, int]) -> Joined:
        joined = self.texts.get(key)
        if joined is None:
            joined = self.texts[key] = Joined(self.keep_text or key[1] == _ARGUMENTS)
        return joined

    def output(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for index in sorted(self.items):
            block = self.items[index]
            if not block.open:
                out.append(block.snapshot)
                continue
            item = dict(block.snapshot)
            if block.is_tool:
                item["arguments"] = "".join(block.arguments)
            for prefix, (_, field) in _PARTS.items():
                parts = sorted((k[2], p) for k, p in self.parts.items()
                               if k[0] == index and k[1] == prefix)
                if parts:
                    item[field] = [self._filled(index, prefix, sub, part) for sub, part in parts]
            out.append(item)
        return out

    def _filled(self, index: int, kind: str, sub: int, part: _Part) -> dict[str, Any]:
        if not part.open:
            return part.snapshot
        snapshot = dict(part.snapshot)
        for prefix, field in _PART_TEXT[kind].items():
            joined = self.texts.get((index, prefix, sub))
            if joined is not None and field in snapshot:
                snapshot[field] = joined.text
        return snapshot

    def to_response(self) -> dict[str, Any]:
        """The final ``response`` object (an empty dict when no response object came)."""
        out = dict(self.response) if self.response is not None else {}
        streaming = out.get("status") in (None, "in_progress", "queued")
        if (out.get("output") is None or streaming) and (self.items or self.response is not None):
            out["output"] = self.output()
        return out


class ResponsesChecker(CheckerBase):
    """Feed it one Responses stream body; ``close()`` returns the ``Verdict`` (``api="responses"``).

    ``request`` is the request body (``tools`` in the Responses format enable the tool checks);
    ``markup`` names the tool-call markup families looked for in ``output_text`` and reasoning deltas.
    """

    api = Api.RESPONSES
    _leak_place = "output item"

    def __init__(self, request: dict[str, Any] | None = None, *,
                 markup: str | Iterable[str] | None = "all", keep_text: bool = True) -> None:
        super().__init__(request, markup=markup, keep_text=keep_text)
        self._asm = ResponsesAssembler(keep_text=keep_text)
        self._terminal: dict[str, Any] | None = None  # the completed / incomplete response
        self._ended = False  # a terminal, failed or done-marker event came: nothing may follow
        self._done_marker = False
        self._next_seq: int | None = None
        self._handlers: dict[str, Callable[[str, dict[str, Any]], None]] = {
            "response.created": self._on_lifecycle,
            "response.queued": self._on_lifecycle,
            "response.in_progress": self._on_lifecycle,
            "response.completed": self._on_terminal,
            "response.incomplete": self._on_terminal,
            "response.failed": self._on_failed,
            "response.output_item.added": self._on_item_added,
            "response.output_item.done": self._on_item_done,
        }
        for prefix in _PARTS:
            self._handlers[prefix + ".added"] = self._on_part_added
            self._handlers[prefix + ".done"] = self._on_part_done
        for prefix in _TEXT:
            self._handlers[prefix + ".delta"] = self._on_delta
            self._handlers[prefix + ".done"] = self._on_text_done

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
        return self._terminal is not None

    # ── folding ───────────────────────────────────────────────────────────────────────────────
    def _on_event(self, event: SSEEvent) -> None:
        if event.data == "[DONE]":
            self._events += 1
            self._on_done_marker("[DONE]")
            return
        typed = self._typed_event(event, self._note_sequence)
        if typed is None:
            return
        etype, obj = typed
        if etype == "response.done":
            self._on_done_marker(etype)
            return
        handler = self._handlers.get(etype)
        if handler is None:
            return  # unknown types are ignored: OpenAI adds event types
        if self._ended:
            self._late(etype)
            return
        if self._asm.response is None and etype != "response.created":
            self._once("start", FindingKind.EVENT_ORDER, f"{etype} before response.created")
        handler(etype, obj)

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
            self._terminal = response
        else:
            self._terminal = {}

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
        name = item.get("name")
        block = Block(index, itype if isinstance(itype, str) else "", dict(item),
                      is_tool=itype == "function_call", name=name if isinstance(name, str) else "")
        self._asm.items[index] = block
        if block.is_tool:
            self._asm.saw_token = True
            args = item.get("arguments")
            if isinstance(args, str) and args:
                block.arguments.append(args)
                self._asm.text((index, _ARGUMENTS, 0)).add(args)

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
        sub = None if block is None else self._int_field(etype, obj, _PARTS[prefix][0])
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
        self._asm.parts[key] = _Part(dict(part) if isinstance(part, dict) else {})

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
                  ) -> tuple[Block, _TextStream, tuple[int, str, int]] | None:
        prefix = etype.rpartition(".")[0]
        spec = _TEXT[prefix]
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
                part = self._asm.parts.get((block.index, _CONTENT_PART, sub))
                if part is None or not part.open:
                    self._once(f"{etype}#{block.index}#{sub}", FindingKind.EVENT_ORDER,
                               f"{etype} for part {sub} of output item {block.index}, which is "
                               f"not open")
                    return None
        return block, spec, (block.index, prefix, sub)

    def _on_delta(self, etype: str, obj: dict[str, Any]) -> None:
        # Fast path for nearly every event of a long answer: text into an open part of an open
        # message; anything unusual takes the checked way below.
        if etype == _OUTPUT_TEXT_DELTA:
            index, sub, delta = obj.get("output_index"), obj.get("content_index"), obj.get("delta")
            if type(index) is int and type(sub) is int and type(delta) is str:
                block = self._asm.items.get(index)
                part = self._asm.parts.get((index, _CONTENT_PART, sub))
                if (block is not None and block.open and block.type == "message"
                        and part is not None and part.open):
                    if delta:
                        self._asm.text((index, _OUTPUT_TEXT, sub)).add(delta)
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
        if self._terminal is not None:
            return Ending.COMPLETE
        return Ending.NO_FINISH if self._done_marker else Ending.TRUNCATED

    def _final_findings(self, ending: Ending) -> None:
        self._check_tool_blocks(self._asm.items.values(), "output item")
        if ending in FINISHED and self._terminal is not None \
                and not isinstance(self._terminal.get("usage"), dict):
            self._find(FindingKind.MISSING_USAGE, "the terminal response carries no usage")

    def _ids(self) -> tuple[str | None, str | None, bool]:
        return self._asm.ids.facts()

    def _message(self) -> dict[str, Any]:
        return self._asm.to_response()
