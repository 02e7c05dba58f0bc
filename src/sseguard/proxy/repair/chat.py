"""The chat completions writer: content deltas through a tool-call parser, per choice.

Text goes out as ``content``, reasoning as ``reasoning_content``, calls as ``tool_calls`` deltas (id
``call_…`` or the model's own; the name, then argument fragments as they arrive, indexed after the
upstream's own calls), and a choice's ``stop`` becomes ``tool_calls`` once it made a call. A frame
whose content the parser gives back unchanged goes out byte-identical.
"""

from __future__ import annotations

from typing import Any

import msgspec

from sseguard.core.sse import SSEEvent
from sseguard.core.toolcalls import Reasoning, Text, ToolArgsDelta, ToolCallStart
from sseguard.proxy.repair.base import ChoiceRepair, Repair, json_object, new_call_id, plain

_encode = msgspec.json.encode


class RepairFrames(Repair):
    """Chat completions: rewrites content deltas through a tool-call parser, per choice."""

    def __init__(self, family: str, tools: list[dict[str, Any]] | None) -> None:
        super().__init__(family, tools)
        self._choices: dict[int, ChoiceRepair] = {}
        self._template: dict[str, Any] = {}

    # ── Frames ─────────────────────────────────────────────────────────────────────────────────
    def transform(self, event: SSEEvent) -> bytes:
        if event.event != "message" or self.failure is not None:
            return event.raw
        obj = json_object(event)
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
    def _state(self, index: int) -> ChoiceRepair:
        state = self._choices.get(index)
        if state is None:
            state = self._choices[index] = self.new_state()
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
        _note_upstream_calls(state, delta)
        reasoning = delta.get("reasoning_content", delta.get("reasoning"))
        if isinstance(reasoning, str) and reasoning:
            self.scan(state.key, "reasoning", reasoning)
        content = delta.get("content")
        finish = raw.get("finish_reason")
        finish = finish if isinstance(finish, str) and finish else None
        events: list[Any] = []
        if isinstance(content, str) and content and not state.closed:
            events = state.parser.feed(content)
        if finish is not None and not state.closed:
            state.closed = True
            events = [*events, *state.parser.close()]
        if (finish is None or _finish(state, finish) == finish) and plain(events, content):
            if isinstance(content, str) and content:
                self.scan(state.key, "content", content)
            return [raw], False  # plain text, settled at once: the frame goes out unchanged
        rest = {k: v for k, v in delta.items() if k != "content"}
        extra = {k: v for k, v in raw.items() if k not in ("index", "delta", "finish_reason")}
        return self._pieces(index, state, events, rest, extra, finish), True

    def _pieces(self, index: int, state: ChoiceRepair, events: list[Any], rest: dict[str, Any],
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
            if isinstance(out, Text):
                flush_calls()
                deltas.append({"content": out.text})
            elif isinstance(out, Reasoning):
                flush_calls()
                deltas.append({"reasoning_content": out.text})
            elif isinstance(out, ToolCallStart):
                if state.offset is None:
                    state.offset = state.upstream_calls
                # the model's own id (Kimi's functions.NAME:IDX) is the one it expects back
                call_id = state.ids[out.index] = out.id or new_call_id()
                calls.append({"index": state.offset + out.index, "id": call_id, "type": "function",
                              "function": {"name": out.name, "arguments": ""}})
            elif isinstance(out, ToolArgsDelta):
                out_index = (state.offset or 0) + out.index
                if calls and calls[-1]["index"] == out_index:
                    calls[-1]["function"]["arguments"] += out.fragment
                else:
                    calls.append({"index": out_index, "function": {"arguments": out.fragment}})
            # ToolCallEnd: chat has no frame for a call's end; the next call or the finish says it.
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
            piece["finish_reason"] = (_finish(state, finish) if is_last and finish is not None
                                      else None)
            pieces.append(piece)
        return pieces

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


def _note_upstream_calls(state: ChoiceRepair, delta: dict[str, Any]) -> None:
    calls = delta.get("tool_calls")
    if isinstance(calls, list):
        for call in calls:
            idx = call.get("index") if isinstance(call, dict) else None
            if isinstance(idx, int):
                state.upstream_calls = max(state.upstream_calls, idx + 1)


def _finish(state: ChoiceRepair, finish: str) -> str:
    # A text answer that turned out to be tool calls ends as one; "length" and the like stay.
    return "tool_calls" if state.calls and finish == "stop" else finish
