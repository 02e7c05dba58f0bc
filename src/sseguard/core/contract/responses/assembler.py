"""Fold an OpenAI Responses stream into the final ``response`` object, as openai-python does.

The tables here (which event streams which text into which item or part) are shared with the
checker in ``responses.py``, which adds the contract on top of the folding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sseguard.core.contract.folding import Block, IdWatch, Joined


@dataclass(frozen=True, slots=True)
class TextStream:
    """One kind of streamed text: its ``.delta`` events are joined, its ``.done`` repeats it whole."""

    done_field: str  # where the ``.done`` event holds the full text
    part_index: str | None  # the field naming the part within the item, if any
    item_type: str  # the only output item type it may stream into
    needs_part: bool  # a ``content_part`` must be open first (the SDK indexes into it)
    leak_field: str | None  # where leaked markup is looked for (None: not visible text)


#: The text streams, by event-type prefix: one engine, this table (docs/design/architecture.md principle 3).
TEXT_STREAMS: dict[str, TextStream] = {
    "response.output_text": TextStream("text", "content_index", "message", True, "output_text"),
    "response.refusal": TextStream("refusal", "content_index", "message", True, None),
    "response.reasoning_text": TextStream("text", "content_index", "reasoning", False, "reasoning"),
    "response.reasoning_summary_text": TextStream("text", "summary_index", "reasoning", False,
                                                   "reasoning"),
    "response.function_call_arguments": TextStream("arguments", None, "function_call", False, None),
    "response.custom_tool_call_input": TextStream("input", None, "custom_tool_call", False, None),
    "response.mcp_call_arguments": TextStream("arguments", None, "mcp_call", False, None),
}
#: Parts of an item, opened by ``.added`` and closed by ``.done``: prefix → (index field, item field).
PARTS: dict[str, tuple[str, str]] = {
    "response.content_part": ("content_index", "content"),
    "response.reasoning_summary_part": ("summary_index", "summary"),
}
#: Which text streams fill which part kind, and the field of the part they fill.
PART_TEXT: dict[str, dict[str, str]] = {
    "response.content_part": {"response.output_text": "text", "response.refusal": "refusal",
                              "response.reasoning_text": "text"},
    "response.reasoning_summary_part": {"response.reasoning_summary_text": "text"},
}
ARGUMENTS = "response.function_call_arguments"
OUTPUT_TEXT = "response.output_text"
OUTPUT_TEXT_DELTA = "response.output_text.delta"
CONTENT_PART = "response.content_part"


@dataclass(slots=True)
class Part:
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
        self.parts: dict[tuple[int, str, int], Part] = {}
        self.texts: dict[tuple[int, str, int], Joined] = {}
        self.ids = IdWatch()
        self.saw_token = False

    def note_response(self, response: dict[str, Any]) -> None:
        self.response = response
        self.ids.see(response.get("id"))

    def text(self, key: tuple[int, str, int]) -> Joined:
        joined = self.texts.get(key)
        if joined is None:
            joined = self.texts[key] = Joined(self.keep_text or key[1] == ARGUMENTS)
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
            for prefix, (_, field) in PARTS.items():
                parts = sorted((k[2], p) for k, p in self.parts.items()
                               if k[0] == index and k[1] == prefix)
                if parts:
                    item[field] = [self._filled(index, prefix, sub, part) for sub, part in parts]
            out.append(item)
        return out

    def _filled(self, index: int, kind: str, sub: int, part: Part) -> dict[str, Any]:
        if not part.open:
            return part.snapshot
        snapshot = dict(part.snapshot)
        for prefix, field in PART_TEXT[kind].items():
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
