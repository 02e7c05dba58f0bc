"""``--repair-markup``: tool-call markup left in ``content`` becomes structured ``tool_calls`` deltas.

Servers without (or with the wrong) tool parser stream a model's raw markup — DeepSeek DSML, Hermes
``<tool_call>``, … — as visible text; agents then see no call and show the markup to the user. The
repair runs each choice's content through one ``sseguard.toolcalls`` parser for the stream: ``Text``
goes out as content, calls as ``tool_calls`` deltas (id ``call_…``, or the model's own where its markup
writes one — Kimi's ``functions.NAME:IDX``, which the client must send back; name, then argument
fragments as they arrive), and the choice's ``finish_reason`` becomes ``tool_calls``. Reasoning a
family writes in its own markup (Harmony's ``analysis`` channel) goes out as reasoning
(``reasoning_content``; a ``thinking`` block or a ``reasoning`` item in the other protocols).
Markup that cannot be parsed is never shown as content: the stream ends with an error frame naming the
``MarkupError`` kind.

Frames without markup go out byte-identical; the only thing held back is a possible marker prefix at
the end of a delta (the parser's own hold-back), released as soon as the next delta settles it.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

import msgspec

from sseguard.contract import leak_markers
from sseguard.errors import UsageError
from sseguard.proxy.stream import Frames
from sseguard.sse import SSEEvent
from sseguard.toolcalls import (
    MarkupError,
    MarkupErrorKind,
    Parser,
    Reasoning,
    Text,
    ToolArgsDelta,
    ToolCallEnd,
    ToolCallStart,
    parser_for,
)
from sseguard.verdict import Api, Finding, FindingKind

_encode = msgspec.json.encode
_decode = msgspec.json.decode
_MARKERS = leak_markers("all")
_OVERLAP = max(len(m) for m in _MARKERS) - 1


#: The protocols whose streams ``--repair-markup`` rewrites.
REPAIRED = frozenset({Api.CHAT, Api.RESPONSES, Api.MESSAGES})


def checker_markup(mode: str, api: Api = Api.CHAT) -> str | list[str]:
    """Which markup the upstream checker looks for in content.

    Without repair: every family (markup in content reaches the client: a leak). With repair the
    upstream's markup is the repair's input, not a leak; ``RepairFrames`` looks for markers in what it
    actually sends instead.
    """
    return "all" if mode == "off" or api not in REPAIRED else []


def frames_for(mode: str, request: dict[str, Any], api: Api = Api.CHAT) -> Frames:
    """The frame transformer for one stream: unchanged frames, or a repair with fresh parsers."""
    if mode == "off" or api not in REPAIRED:
        return Frames()
    tools = request.get("tools")
    offered = tools if isinstance(tools, list) else None
    if api is Api.MESSAGES:
        return MessagesRepairFrames(mode, _chat_tools(offered, "input_schema"))
    if api is Api.RESPONSES:
        return ResponsesRepairFrames(mode, _chat_tools(offered, "parameters"))
    return RepairFrames(mode, offered)


def _chat_tools(tools: list[Any] | None, schema: str) -> list[dict[str, Any]] | None:
    """Responses (``name``, ``parameters``) or Anthropic (``name``, ``input_schema``) tools in the
    Chat Completions shape the parsers read; tools without a name (built-in server tools such as web
    search) are left out."""
    if tools is None:
        return None
    return [{"type": "function", "function": {"name": t["name"], "parameters": t.get(schema) or {}}}
            for t in tools if isinstance(t, dict) and isinstance(t.get("name"), str)]


def _plain(events: list[Any], content: Any) -> bool:
    """The parser gave back exactly the content as text (or nothing for no content)."""
    text = content if isinstance(content, str) else ""
    if not events:
        return text == ""
    return len(events) == 1 and isinstance(events[0], Text) and events[0].text == text


def new_call_id() -> str:
    """An id in the shape OpenAI's own tool calls have (``call_`` + 24 characters)."""
    return "call_" + secrets.token_urlsafe(18)


@dataclass(slots=True)
class _ChoiceRepair:
    """One choice's parser and the calls it produced."""

    parser: Parser
    closed: bool = False
    calls: int = 0
    offset: int | None = None  # where repaired call indexes start (after the upstream's own calls)
    upstream_calls: int = 0  # structured tool calls the upstream sent itself (max index + 1)
    ids: dict[int, str] = field(default_factory=dict)
    seen_tail: str = ""  # the end of what went out as text, to find markers split across deltas


#: What the driver makes of parser events, for a protocol's writer: runs of text (``("text", s)``) and
#: of reasoning (``("reasoning", s)``), and calls as they open (``("call", n, name, id)``, ``id`` the
#: model's own or None), stream their arguments (``("args", n, fragment)``) and close (``("end", n)``);
#: ``n`` is the parser's own call number.
Out = tuple[Any, ...]


class _Repair(Frames):
    """The protocol-neutral half of a repair: parsers, what their events mean, findings, facts.

    One engine, a writer per protocol: ``RepairFrames`` (chat) and ``MessagesRepairFrames`` turn
    ``drive()``'s output into their own frames.
    """

    def __init__(self, family: str, tools: list[dict[str, Any]] | None) -> None:
        self.family = family
        self.tools = tools
        self.failure: tuple[str, str] | None = None
        self._findings: list[Finding] = []
        self._leaked = False
        self._parsers: list[Parser] = []
        self.calls = 0

    def findings(self) -> list[Finding]:
        return list(self._findings)

    @staticmethod
    def _object(event: SSEEvent) -> dict[str, Any] | None:
        """The event's data as a JSON object, or None: the checker reports what is not one, and
        there is nothing to repair in it."""
        try:
            obj = _decode(event.data)
        except msgspec.DecodeError:
            return None
        return obj if isinstance(obj, dict) else None

    def facts(self) -> dict[str, Any]:
        facts: dict[str, Any] = {"repair": self.family, "repaired_tool_calls": self.calls}
        # `auto` names the family it detected; record it, it is what an operator wants to know.
        detected = {getattr(p, "detected", None) for p in self._parsers}
        names = sorted(d for d in detected if isinstance(d, str))
        if names:
            facts["repair_family"] = ",".join(names)
        return facts

    def _parser(self) -> Parser:
        try:
            parser = parser_for(self.family, self.tools)
        except UsageError:  # a malformed tools list is the upstream's to reject; parse without names
            parser = parser_for(self.family)
        self._parsers.append(parser)
        return parser

    def drive(self, state: _ChoiceRepair, events: list[Any], where: str) -> list[Out]:
        """Parser events → ``Out`` items; sets ``failure`` (and returns []) on unparseable markup."""
        outs: list[Out] = []
        for ev in events:
            if isinstance(ev, Text | Reasoning):  # Harmony's analysis channel: reasoning, never dropped
                kind = "text" if isinstance(ev, Text) else "reasoning"
                if outs and outs[-1][0] == kind:
                    outs[-1] = (kind, outs[-1][1] + ev.text)
                else:
                    outs.append((kind, ev.text))
            elif isinstance(ev, ToolCallStart):
                outs.append(("call", ev.index, ev.name, ev.id))
            elif isinstance(ev, ToolArgsDelta):
                outs.append(("args", ev.index, ev.fragment))
            elif isinstance(ev, ToolCallEnd):
                state.calls += 1
                self.calls += 1
                outs.append(("end", ev.index))
            elif isinstance(ev, MarkupError):
                if ev.kind is MarkupErrorKind.UNDEFINED_FUNCTION:
                    self._findings.append(Finding(
                        FindingKind.TOOL_UNDEFINED_FUNCTION,
                        f"{where}: repaired call to {ev.raw!r}, not among the offered tools"))
                    continue
                at = f" in call {ev.index}" if ev.index is not None else ""
                self.failure = (f"markup_{ev.kind}",
                                f"tool-call markup in the upstream's content could not be parsed "
                                f"({ev.kind}{at}); it is not shown as content")
                return []
            # Markup events (block openers, separators) carry nothing for the client.
        for out in outs:
            if out[0] == "text":
                self._scan(state, out[1], "content")
            elif out[0] == "reasoning":
                self._scan(None, out[1], "reasoning")
        return outs

    def _scan(self, state: _ChoiceRepair | None, text: str, where: str) -> None:
        """Markup of a family the repair does not parse still reaches the client: a leak.

        ``state`` keeps the end of what went out, for markers split across deltas; None for text
        scanned one delta at a time (reasoning).
        """
        if self._leaked:
            return
        window = state.seen_tail + text if state is not None else text
        for marker in _MARKERS:
            if marker in window:
                self._leaked = True
                self._findings.append(Finding(FindingKind.MARKUP_LEAK,
                                              f"{marker!r} in {where} after repair"))
                return
        if state is not None:
            state.seen_tail = window[-_OVERLAP:]


class RepairFrames(_Repair):
    """Chat completions: rewrites content deltas through a tool-call parser, per choice."""

    def __init__(self, family: str, tools: list[dict[str, Any]] | None) -> None:
        super().__init__(family, tools)
        self._choices: dict[int, _ChoiceRepair] = {}
        self._template: dict[str, Any] = {}

    # ── Frames protocol ────────────────────────────────────────────────────────────────────────
    def transform(self, event: SSEEvent) -> bytes:
        if event.event != "message" or self.failure is not None:
            return event.raw
        obj = self._object(event)
        if obj is None:
            return event.raw
        choices = obj.get("choices")
        if not isinstance(choices, list) or not choices:
            return event.raw
        self._template = {k: v for k, v in obj.items() if k not in ("choices", "usage")}
        changed = False
        out_choices: list[list[dict[str, Any]]] = []
        for raw_choice in choices:
            pieces, was_changed = self._choice(raw_choice)
            changed = changed or was_changed
            out_choices.append(pieces)
            if self.failure is not None:
                return b""
        if not changed:
            return event.raw
        return self._frames(out_choices, obj.get("usage"))

    def flush(self) -> bytes:
        """Close the parsers of choices that never got a ``finish_reason`` (tolerated dialects)."""
        out_choices: list[list[dict[str, Any]]] = []
        for index, state in sorted(self._choices.items()):
            if state.closed:
                continue
            state.closed = True
            pieces = self._pieces(index, state, state.parser.close(), {}, {}, None)
            if self.failure is not None:
                return b""
            out_choices.append(pieces)
        return self._frames(out_choices, None) if any(out_choices) else b""

    # ── one choice ─────────────────────────────────────────────────────────────────────────────
    def _state(self, index: int) -> _ChoiceRepair:
        state = self._choices.get(index)
        if state is None:
            state = self._choices[index] = _ChoiceRepair(self._parser())
        return state

    def _choice(self, raw: Any) -> tuple[list[dict[str, Any]], bool]:
        """The choice's output pieces (each a choice object) and whether it differs from the input."""
        if not isinstance(raw, dict):
            return [raw], False
        index = raw.get("index", 0)
        delta = raw.get("delta")
        if not isinstance(index, int) or not isinstance(delta, dict):
            return [raw], False
        state = self._state(index)
        self._note_upstream_calls(state, delta)
        reasoning = delta.get("reasoning_content", delta.get("reasoning"))
        if isinstance(reasoning, str) and reasoning:
            self._scan(None, reasoning, "reasoning")
        content = delta.get("content")
        finish = raw.get("finish_reason")
        finish = finish if isinstance(finish, str) and finish else None
        events: list[Any] = []
        if isinstance(content, str) and content and not state.closed:
            events = state.parser.feed(content)
        if finish is not None and not state.closed:
            state.closed = True
            events = [*events, *state.parser.close()]
        if (finish is None or self._finish(state, finish) == finish) and _plain(events, content):
            if isinstance(content, str) and content:
                self._scan(state, content, "content")
            return [raw], False  # plain text, settled at once: the frame goes out unchanged
        rest = {k: v for k, v in delta.items() if k != "content"}
        extra = {k: v for k, v in raw.items() if k not in ("index", "delta", "finish_reason")}
        return self._pieces(index, state, events, rest, extra, finish), True

    def _note_upstream_calls(self, state: _ChoiceRepair, delta: dict[str, Any]) -> None:
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            for call in calls:
                idx = call.get("index") if isinstance(call, dict) else None
                if isinstance(idx, int):
                    state.upstream_calls = max(state.upstream_calls, idx + 1)

    def _pieces(self, index: int, state: _ChoiceRepair, events: list[Any], rest: dict[str, Any],
                extra: dict[str, Any], finish: str | None) -> list[dict[str, Any]]:
        """Turn parser events into choice objects: runs of text, runs of tool-call deltas."""
        outs = self.drive(state, events, f"choice {index}")
        if self.failure is not None:
            return []
        deltas: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []

        def flush_calls() -> None:
            if calls:
                deltas.append({"tool_calls": list(calls)})
                calls.clear()

        for out in outs:
            if out[0] == "text":
                flush_calls()
                deltas.append({"content": out[1]})
            elif out[0] == "reasoning":
                flush_calls()
                deltas.append({"reasoning_content": out[1]})
            elif out[0] == "call":
                if state.offset is None:
                    state.offset = state.upstream_calls
                # the model's own id (Kimi's functions.NAME:IDX) is the one it expects back
                call_id = state.ids[out[1]] = out[3] or new_call_id()
                calls.append({"index": state.offset + out[1], "id": call_id, "type": "function",
                              "function": {"name": out[2], "arguments": ""}})
            elif out[0] == "args":
                out_index = (state.offset or 0) + out[1]
                if calls and calls[-1]["index"] == out_index:
                    calls[-1]["function"]["arguments"] += out[2]
                else:
                    calls.append({"index": out_index, "function": {"arguments": out[2]}})
        flush_calls()
        if rest:
            if deltas:
                deltas[0] = {**rest, **deltas[0]}
            else:
                deltas.append(dict(rest))
        if finish is not None and not deltas:
            deltas.append({})
        pieces: list[dict[str, Any]] = []
        for i, delta in enumerate(deltas):
            piece: dict[str, Any] = {"index": index, "delta": delta}
            if i == 0:
                piece.update(extra)
            is_last = i == len(deltas) - 1
            piece["finish_reason"] = (self._finish(state, finish) if is_last and finish is not None
                                      else None)
            pieces.append(piece)
        return pieces

    def _finish(self, state: _ChoiceRepair, finish: str) -> str:
        # A text answer that turned out to be tool calls ends as one; "length" and the like stay.
        return "tool_calls" if state.calls and finish == "stop" else finish

    # ── output ─────────────────────────────────────────────────────────────────────────────────
    def _frames(self, out_choices: list[list[dict[str, Any]]], usage: Any) -> bytes:
        frames: list[bytes] = []
        template = self._template
        for pieces in out_choices:
            for piece in pieces:
                frames.append(b"data: " + _encode({**template, "choices": [piece]}) + b"\n\n")
        if usage is not None:
            frames.append(b"data: " + _encode({**template, "choices": [], "usage": usage}) + b"\n\n")
        return b"".join(frames)


# ── messages ─────────────────────────────────────────────────────────────────────────────────────

_BLOCK_EVENTS = frozenset({"content_block_start", "content_block_delta", "content_block_stop"})


def new_tool_use_id() -> str:
    """An id in the shape Anthropic's ``tool_use`` blocks have (``toolu_`` + 24 characters)."""
    return "toolu_" + secrets.token_urlsafe(18)


def _sse(name: str, obj: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + _encode(obj) + b"\n\n"


class MessagesRepairFrames(_Repair):
    """Anthropic Messages: markup in a text block becomes ``tool_use`` blocks.

    Each upstream text block gets a parser. Its text goes out in a text block opened when the first
    text comes (a block that turns out to hold only a call leaves no empty text block behind); a call
    closes the open text block and streams as a ``tool_use`` block (``input_json_delta`` fragments as
    the arguments arrive); text after it opens a new text block. The indexes of later blocks move up
    by the blocks inserted, and ``end_turn`` becomes ``tool_use`` once a call was repaired. A block that
    stays plain text goes out byte-identical.
    """

    def __init__(self, family: str, tools: list[dict[str, Any]] | None) -> None:
        super().__init__(family, tools)
        self._next = 0  # the next output block index
        self._map: dict[int, int] = {}  # upstream index → output index, for blocks passed through
        self._text: _ChoiceRepair | None = None  # the upstream text block being repaired
        self._text_index: int | None = None  # its upstream index
        self._held: SSEEvent | None = None  # its content_block_start, until its first text
        self._open: int | None = None  # the output index of the text block open now
        self._blocks: dict[int, int] = {}  # the parser's call number → its tool_use block's index
        self._thinking: int | None = None  # the output index of a thinking block the repair opened

    def transform(self, event: SSEEvent) -> bytes:
        name = event.event
        if self.failure is not None or (name not in _BLOCK_EVENTS and name != "message_delta"):
            return event.raw
        obj = self._object(event)
        if obj is None:
            return event.raw
        if name == "message_delta":
            delta = obj.get("delta")
            if self.calls and isinstance(delta, dict) and delta.get("stop_reason") == "end_turn":
                # A text answer that turned out to be tool calls ends as one.
                return _sse(name, {**obj, "delta": {**delta, "stop_reason": "tool_use"}})
            return event.raw
        index = obj.get("index")
        if not isinstance(index, int):
            return event.raw
        if name == "content_block_start":
            return self._start(event, obj, index)
        if index != self._text_index or self._text is None:
            return self._reindexed(event, obj, self._map.get(index, index))
        if name == "content_block_stop":
            return self._stop(event, obj, self._text)
        delta = obj.get("delta")
        text = delta.get("text") if isinstance(delta, dict) else None
        if not isinstance(delta, dict) or delta.get("type") != "text_delta" or not isinstance(text, str):
            return self._reindexed(event, obj, self._open if self._open is not None else index)
        events = self._text.parser.feed(text)
        if _plain(events, text):
            self._scan(self._text, text, "content")
            opened = self._open_text()
            return opened + self._reindexed(event, obj, self._open)
        return self._emit(self._text, events)

    def flush(self) -> bytes:
        """A text block the upstream never stopped (a tolerated end): what its parser still holds."""
        if self._text is None:
            return b""
        state, self._text = self._text, None
        return self._emit(state, state.parser.close()) + self._close_thinking()

    def _start(self, event: SSEEvent, obj: dict[str, Any], index: int) -> bytes:
        block = obj.get("content_block")
        if isinstance(block, dict) and block.get("type") == "text":
            self._text = _ChoiceRepair(self._parser())
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
                self._scan(None, thinking, "thinking")
        return self._reindexed(event, obj, out)

    def _stop(self, event: SSEEvent, obj: dict[str, Any], state: _ChoiceRepair) -> bytes:
        out = self._emit(state, state.parser.close()) + self._close_thinking()
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
        return _sse("content_block_start", {"type": "content_block_start", "index": self._open,
                                            "content_block": {"type": "text", "text": ""}})

    def _emit(self, state: _ChoiceRepair, events: list[Any]) -> bytes:
        outs = self.drive(state, events, "text block")
        parts: list[bytes] = []
        for out in outs:
            if out[0] != "reasoning":
                parts.append(self._close_thinking())
            if out[0] == "reasoning":
                parts.append(self._thinking_delta(out[1]))
            elif out[0] == "text":
                parts.append(self._open_text())
                parts.append(_sse("content_block_delta", {
                    "type": "content_block_delta", "index": self._open,
                    "delta": {"type": "text_delta", "text": out[1]}}))
            elif out[0] == "call":
                if self._open is not None:
                    parts.append(_sse("content_block_stop", {"type": "content_block_stop",
                                                             "index": self._open}))
                    self._open = None
                self._held = None  # a call before any text: the upstream's opener is not needed
                block = self._blocks[out[1]] = self._next
                self._next += 1
                parts.append(_sse("content_block_start", {
                    "type": "content_block_start", "index": block,
                    "content_block": {"type": "tool_use", "id": out[3] or new_tool_use_id(),
                                      "name": out[2], "input": {}}}))
            elif out[0] == "args":
                parts.append(_sse("content_block_delta", {
                    "type": "content_block_delta", "index": self._blocks[out[1]],
                    "delta": {"type": "input_json_delta", "partial_json": out[2]}}))
            elif out[0] == "end":
                parts.append(_sse("content_block_stop", {"type": "content_block_stop",
                                                         "index": self._blocks[out[1]]}))
        return b"".join(parts)

    def _thinking_delta(self, text: str) -> bytes:
        """Reasoning the family wrote in its markup: a ``thinking`` block of its own (the open text
        block ends first), kept open while reasoning follows."""
        out = b""
        if self._thinking is None:
            self._held = None  # reasoning before any text: the upstream's opener is not needed
            if self._open is not None:
                out += _sse("content_block_stop", {"type": "content_block_stop", "index": self._open})
                self._open = None
            self._thinking = self._next
            self._next += 1
            out += _sse("content_block_start", {
                "type": "content_block_start", "index": self._thinking,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""}})
        return out + _sse("content_block_delta", {
            "type": "content_block_delta", "index": self._thinking,
            "delta": {"type": "thinking_delta", "thinking": text}})

    def _close_thinking(self) -> bytes:
        if self._thinking is None:
            return b""
        index, self._thinking = self._thinking, None
        return _sse("content_block_stop", {"type": "content_block_stop", "index": index})

    def _reindexed(self, event: SSEEvent, obj: dict[str, Any] | None, index: int | None) -> bytes:
        """The event as it came when its block keeps its index; renumbered otherwise."""
        obj = obj if obj is not None else self._object(event)
        if obj is None or index is None or obj.get("index") == index:
            return event.raw
        return _sse(event.event, {**obj, "index": index})


# ── responses ────────────────────────────────────────────────────────────────────────────────────

_RESPONSES_TERMINAL = frozenset({"response.completed", "response.incomplete"})
_REASONING_DELTAS = frozenset({"response.reasoning_summary_text.delta",
                               "response.reasoning_text.delta"})


def _frame(name: str, obj: dict[str, Any]) -> bytes:
    """One event, named as it came (an unnamed event stays unnamed)."""
    if name == "message":
        return b"data: " + _encode(obj) + b"\n\n"
    return _sse(name, obj)


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


class ResponsesRepairFrames(_Repair):
    """OpenAI Responses: markup in ``output_text`` becomes ``function_call`` output items.

    Each upstream message item gets a parser. Its text goes out in a message item opened when the
    first text comes; a call closes that item (``output_text.done``, ``content_part.done``,
    ``output_item.done`` with the text so far) and streams as a ``function_call`` item (``call_…``,
    name, ``function_call_arguments.delta`` fragments as they arrive, then its ``done`` events); text
    after it opens a new message item. Later items move up by the items inserted; ``sequence_number``
    stays +1 from 0 over what the client gets; the terminal event's ``output`` lists the items the
    client got. A stream without markup goes out byte-identical.
    """

    def __init__(self, family: str, tools: list[dict[str, Any]] | None) -> None:
        super().__init__(family, tools)
        self._seq = 0  # the next sequence_number out
        self._next = 0  # the next output_index out
        self._map: dict[int, int] = {}  # upstream output_index → ours, for items passed through
        self._items: dict[int, Any] = {}  # our output_index → the item as it ended
        self._changed = False  # an event was made up: the terminal's output list must be ours
        self._message: int | None = None  # the upstream output_index of the message being repaired
        self._item: dict[str, Any] = {}  # that message as it was added
        self._state: _ChoiceRepair | None = None
        self._held: list[SSEEvent] = []  # its output_item.added and content_part.added, until text
        self._segment: _Segment | None = None
        self._calls: dict[int, _Call] = {}  # the parser's call number → its item
        self._reasoning: _Segment | None = None  # a reasoning item the repair opened

    def transform(self, event: SSEEvent) -> bytes:
        if self.failure is not None or event.data == "[DONE]":
            return event.raw
        obj = self._object(event)
        if obj is None:
            return event.raw
        kind = obj.get("type")
        index = obj.get("output_index")
        if kind == "response.output_item.added" and isinstance(index, int):
            item = obj.get("item")
            if isinstance(item, dict) and item.get("type") == "message":
                self._message, self._item, self._held = index, item, [event]
                self._state = _ChoiceRepair(self._parser())
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
            self._scan(None, obj["delta"], "reasoning")
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
        return self._emit(state, state.parser.close()) + self._end_reasoning()

    # ── the message being repaired ─────────────────────────────────────────────────────────────
    def _in_message(self, event: SSEEvent, obj: dict[str, Any], kind: Any,
                    state: _ChoiceRepair) -> bytes:
        if kind == "response.content_part.added" and self._held:
            self._held.append(event)
            return b""
        if kind == "response.output_text.delta" and isinstance(obj.get("delta"), str):
            text = obj["delta"]
            events = state.parser.feed(text)
            if not _plain(events, text):
                return self._emit(state, events)
            self._scan(state, text, "content")
            opened = self._open()
            assert self._segment is not None
            self._segment.text.append(text)
            return opened + self._out(event, obj, output_index=self._segment.index,
                                      item_id=self._segment.id)
        if kind == "response.output_text.done":
            out = self._emit(state, state.parser.close()) + self._end_reasoning()
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

    def _emit(self, state: _ChoiceRepair, events: list[Any]) -> bytes:
        parts: list[bytes] = []
        for out in self.drive(state, events, "message item"):
            if out[0] != "reasoning":
                parts.append(self._end_reasoning())
            if out[0] == "reasoning":
                parts.append(self._reasoning_delta(out[1]))
            elif out[0] == "text":
                parts.append(self._open())
                assert self._segment is not None
                self._segment.text.append(out[1])
                parts.append(self._new("response.output_text.delta", item_id=self._segment.id,
                                       output_index=self._segment.index, content_index=0,
                                       delta=out[1], logprobs=[]))
            elif out[0] == "call":
                parts.append(self._close())
                self._held = []  # a call before any text: the upstream's openers are not needed
                item = {"id": "fc_" + secrets.token_hex(12), "type": "function_call",
                        "status": "in_progress", "arguments": "",
                        "call_id": out[3] or new_call_id(), "name": out[2]}
                call = self._calls[out[1]] = _Call(self._next, item)
                self._next += 1
                parts.append(self._new("response.output_item.added", output_index=call.index,
                                       item=item))
            elif out[0] == "args":
                call = self._calls[out[1]]
                call.arguments.append(out[2])
                parts.append(self._new("response.function_call_arguments.delta",
                                       item_id=call.item["id"], output_index=call.index,
                                       delta=out[2]))
            elif out[0] == "end":
                call = self._calls[out[1]]
                arguments = "".join(call.arguments)
                done = self._items[call.index] = {**call.item, "status": "completed",
                                                  "arguments": arguments}
                parts.append(self._new("response.function_call_arguments.done",
                                       item_id=call.item["id"], output_index=call.index,
                                       arguments=arguments))
                parts.append(self._new("response.output_item.done", output_index=call.index,
                                       item=done))
        return b"".join(parts)

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
            return b"".join(self._out(event, self._object(event) or {}, output_index=index)
                            for event in held)
        segment = self._segment = _Segment(index, "msg_" + secrets.token_hex(12))
        item = {"id": segment.id, "type": "message", "status": "in_progress", "role": "assistant",
                "content": []}
        return (self._new("response.output_item.added", output_index=index, item=item)
                + self._new("response.content_part.added", item_id=segment.id, output_index=index,
                            content_index=0, part={"type": "output_text", "text": "",
                                                   "annotations": []}))

    def _reasoning_delta(self, text: str) -> bytes:
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

    def _end_reasoning(self) -> bytes:
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
        return _sse(kind, obj)
