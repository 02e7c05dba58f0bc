"""``--repair-markup``: tool-call markup left in ``content`` becomes structured ``tool_calls`` deltas.

Servers without (or with the wrong) tool parser stream a model's raw markup — DeepSeek DSML, Hermes
``<tool_call>``, … — as visible text; agents then see no call and show the markup to the user. The
repair runs each choice's content through one ``sseguard.toolcalls`` parser for the stream: ``Text``
goes out as content, calls as ``tool_calls`` deltas (id ``call_…``, or the model's own where its markup
writes one — Kimi's ``functions.NAME:IDX``, which the client must send back; name, then argument
fragments as they arrive), and the choice's ``finish_reason`` becomes ``tool_calls``. Reasoning a
family writes in its own markup (Harmony's ``analysis`` channel) goes out as ``reasoning_content``.
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
from sseguard.verdict import Finding, FindingKind

_encode = msgspec.json.encode
_decode = msgspec.json.decode
_MARKERS = leak_markers("all")
_OVERLAP = max(len(m) for m in _MARKERS) - 1


def checker_markup(mode: str) -> str | list[str]:
    """Which markup the upstream checker looks for in content.

    Without repair: every family (markup in content reaches the client: a leak). With repair the
    upstream's markup is the repair's input, not a leak; ``RepairFrames`` looks for markers in what it
    actually sends instead.
    """
    return "all" if mode == "off" else []


def frames_for(mode: str, request: dict[str, Any]) -> Frames:
    """The frame transformer for one stream: unchanged frames, or a repair with fresh parsers."""
    if mode == "off":
        return Frames()
    tools = request.get("tools")
    return RepairFrames(mode, tools if isinstance(tools, list) else None)


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


class RepairFrames(Frames):
    """Rewrites content deltas through a tool-call parser, per choice."""

    def __init__(self, family: str, tools: list[dict[str, Any]] | None) -> None:
        self.family = family
        self.tools = tools
        self.failure: tuple[str, str] | None = None
        self._choices: dict[int, _ChoiceRepair] = {}
        self._template: dict[str, Any] = {}
        self._findings: list[Finding] = []
        self._leaked = False
        self.calls = 0

    # ── Frames protocol ────────────────────────────────────────────────────────────────────────
    def transform(self, event: SSEEvent) -> bytes:
        if event.event != "message" or self.failure is not None:
            return event.raw
        try:
            obj = _decode(event.data)
        except msgspec.DecodeError:
            return event.raw  # the checker reports it; nothing to repair in it
        if not isinstance(obj, dict):
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

    def findings(self) -> list[Finding]:
        return list(self._findings)

    def facts(self) -> dict[str, Any]:
        facts: dict[str, Any] = {"repair": self.family, "repaired_tool_calls": self.calls}
        # `auto` names the family it detected; record it, it is what an operator wants to know.
        detected = {getattr(c.parser, "detected", None) for c in self._choices.values()}
        names = sorted(d for d in detected if isinstance(d, str))
        if names:
            facts["repair_family"] = ",".join(names)
        return facts

    # ── one choice ─────────────────────────────────────────────────────────────────────────────
    def _state(self, index: int) -> _ChoiceRepair:
        state = self._choices.get(index)
        if state is None:
            state = self._choices[index] = _ChoiceRepair(self._parser())
        return state

    def _parser(self) -> Parser:
        try:
            return parser_for(self.family, self.tools)
        except UsageError:  # a malformed tools list is the upstream's to reject; parse without names
            return parser_for(self.family)

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
            self._scan(state, reasoning, "reasoning", keep_tail=False)
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
        deltas: list[dict[str, Any]] = []
        text: list[str] = []
        thought: list[str] = []
        calls: list[dict[str, Any]] = []

        def flush_text() -> None:
            if text:
                joined = "".join(text)
                self._scan(state, joined, "content")
                deltas.append({"content": joined})
                text.clear()
            if thought:
                joined = "".join(thought)
                self._scan(state, joined, "reasoning", keep_tail=False)
                deltas.append({"reasoning_content": joined})
                thought.clear()

        def flush_calls() -> None:
            if calls:
                deltas.append({"tool_calls": list(calls)})
                calls.clear()

        for ev in events:
            if isinstance(ev, Text):
                flush_calls()
                if thought:
                    flush_text()
                text.append(ev.text)
            elif isinstance(ev, Reasoning):  # Harmony's analysis channel: reasoning, never dropped
                flush_calls()
                if text:
                    flush_text()
                thought.append(ev.text)
            elif isinstance(ev, ToolCallStart):
                flush_text()
                if state.offset is None:
                    state.offset = state.upstream_calls
                out_index = state.offset + ev.index
                # the model's own id (Kimi's functions.NAME:IDX) is the one its client expects back
                call_id = state.ids[ev.index] = ev.id or new_call_id()
                calls.append({"index": out_index, "id": call_id, "type": "function",
                              "function": {"name": ev.name, "arguments": ""}})
            elif isinstance(ev, ToolArgsDelta):
                flush_text()
                out_index = (state.offset or 0) + ev.index
                if calls and calls[-1]["index"] == out_index:
                    calls[-1]["function"]["arguments"] += ev.fragment
                else:
                    calls.append({"index": out_index, "function": {"arguments": ev.fragment}})
            elif isinstance(ev, ToolCallEnd):
                state.calls += 1
                self.calls += 1
            elif isinstance(ev, MarkupError):
                if ev.kind is MarkupErrorKind.UNDEFINED_FUNCTION:
                    self._findings.append(Finding(
                        FindingKind.TOOL_UNDEFINED_FUNCTION,
                        f"choice {index}: repaired call to {ev.raw!r}, not among the offered tools"))
                    continue
                where = f" in call {ev.index}" if ev.index is not None else ""
                self.failure = (f"markup_{ev.kind}",
                                f"tool-call markup in the upstream's content could not be parsed "
                                f"({ev.kind}{where}); it is not shown as content")
                return []
            # Markup events (block openers, separators) carry nothing for the client.
        flush_text()
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

    def _scan(self, state: _ChoiceRepair, text: str, where: str, *, keep_tail: bool = True) -> None:
        """Markup of a family the repair does not parse still reaches the client: a leak."""
        if self._leaked:
            return
        window = state.seen_tail + text if keep_tail else text
        for marker in _MARKERS:
            if marker in window:
                self._leaked = True
                self._findings.append(Finding(FindingKind.MARKUP_LEAK,
                                              f"{marker!r} in {where} after repair"))
                return
        if keep_tail:
            state.seen_tail = window[-_OVERLAP:]

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
