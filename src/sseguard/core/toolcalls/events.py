"""The events every tool-call parser emits and the parser protocol: the public vocabulary.

A parser's output is a list of small frozen events (h11's habit): visible ``Text``, ``Reasoning``,
structural ``Markup``, a call's ``ToolCallStart``/``ToolArgsDelta``/``ToolCallEnd``, and
``MarkupError`` for markup that is not a call. ``consumed_text`` states the accounting (every input
character is in exactly one event), ``join_events`` the chunking-invariance comparison.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol


class MarkupErrorKind(StrEnum):
    """Why markup could not become a call — the closed list of docs/design/markup.md §1."""

    UNTERMINATED = "unterminated"  # the stream ended inside markup (a partial opener included)
    MALFORMED_TAG = "malformed_tag"  # a tag or text that has no place where it stands
    INVALID_STRING_FLAG = "invalid_string_flag"  # DSML string="…" neither true nor false (or missing)
    BAD_PARAM_JSON = "bad_param_json"  # a JSON value or body that is not strict JSON of the right shape
    DUPLICATE_PARAMETER = "duplicate_parameter"  # a parameter name (or JSON key) given twice
    UNDEFINED_FUNCTION = "undefined_function"  # a call to a tool that was not offered (call kept)


@dataclass(frozen=True, slots=True)
class Text:
    """Visible text outside any tool-call markup, verbatim."""

    text: str


@dataclass(frozen=True, slots=True)
class Reasoning:
    """Reasoning text, verbatim: from ``ThinkSplitter`` (``<think>`` removed), or from a family whose
    reasoning is part of its own markup (Harmony's ``analysis`` channel)."""

    text: str


@dataclass(frozen=True, slots=True)
class Markup:
    """Tool-call structure that belongs to no single call: block openers and closers, the separator
    the encoder writes before a block, whitespace between calls.

    It carries no meaning for a client, but it proves that markup was there (an empty block is still
    markup in content) and lets every input character be accounted for.
    """

    raw: str


@dataclass(frozen=True, slots=True)
class ToolCallStart:
    """A call opened: its index (0, 1, … in stream order, void calls included) and tool name.

    ``id`` is the call id the model wrote itself, verbatim (Kimi's ``functions.NAME:IDX``); ``None``
    for families that write none.
    """

    index: int
    name: str
    id: str | None = None


@dataclass(frozen=True, slots=True)
class ToolArgsDelta:
    """The next piece of a call's arguments JSON; pieces are only ever appended, never retracted."""

    index: int
    fragment: str


@dataclass(frozen=True, slots=True)
class ToolCallEnd:
    """A call completed and valid: ``arguments`` is exactly the join of its ``ToolArgsDelta`` pieces.

    ``raw`` is the markup text of the call as received (excluded from equality: two calls are the same
    call whatever whitespace their tags had).
    """

    index: int
    name: str
    arguments: str
    raw: str = field(default="", compare=False, repr=False)
    id: str | None = None  # as on the call's ToolCallStart


@dataclass(frozen=True, slots=True)
class MarkupError:
    """Markup that is not a call, with the raw text it covered.

    With an ``index``, the call of that index is void (decision 1.4): a consumer that already
    forwarded its deltas learns here that they do not form a call. ``undefined_function`` is the one
    exception — a finding about a kept call; its ``raw`` is the tool name, not consumed input.
    """

    kind: MarkupErrorKind
    raw: str
    index: int | None = None


Event = Text | Reasoning | Markup | ToolCallStart | ToolArgsDelta | ToolCallEnd | MarkupError


class Parser(Protocol):
    """One stream's incremental tool-call parser: feed text in any chunking, then close once."""

    family: str

    def feed(self, text: str) -> list[Event]:
        """Parse more text; return the events it completes (possibly none)."""
        ...

    def close(self) -> list[Event]:
        """End of stream: report what the held-back or unfinished text means."""
        ...


def consumed_text(events: list[Event]) -> str:
    """The input the events account for, in order. After ``close()`` it equals the whole input.

    Before ``close()`` it is a prefix of what was fed; the rest is held back (a possible marker prefix
    or an unfinished call). ``undefined_function`` errors annotate a call and consume nothing.
    """
    parts: list[str] = []
    for ev in events:
        if isinstance(ev, Text | Reasoning):
            parts.append(ev.text)
        elif isinstance(ev, Markup | ToolCallEnd):
            parts.append(ev.raw)
        elif isinstance(ev, MarkupError):
            parts.append("" if ev.kind is MarkupErrorKind.UNDEFINED_FUNCTION else ev.raw)
    return "".join(parts)


def _piece(ev: Event) -> tuple[object, str] | None:
    """(merge key, text) of a mergeable event; None for the others."""
    if isinstance(ev, Text):
        return Text, ev.text
    if isinstance(ev, Reasoning):
        return Reasoning, ev.text
    if isinstance(ev, Markup):
        return Markup, ev.raw
    if isinstance(ev, ToolArgsDelta):
        return ev.index, ev.fragment
    return None


def _rebuilt(head: Event, text: str) -> Event:
    if isinstance(head, Text):
        return Text(text)
    if isinstance(head, Reasoning):
        return Reasoning(text)
    if isinstance(head, Markup):
        return Markup(text)
    assert isinstance(head, ToolArgsDelta)
    return ToolArgsDelta(head.index, text)


def join_events(events: list[Event]) -> list[Event]:
    """Merge adjacent ``Text``, ``Reasoning``, ``Markup`` and same-call ``ToolArgsDelta`` events.

    Two chunkings of the same input give equal joined event lists (the chunking-invariance guarantee).
    Each run is joined once, so this is linear however many pieces a run has.
    """
    out: list[Event] = []
    run: list[str] = []
    head: Event | None = None
    key: object = None
    for ev in events:
        piece = _piece(ev)
        if head is not None and piece is not None and piece[0] == key:
            run.append(piece[1])
            continue
        if head is not None:
            out.append(_rebuilt(head, "".join(run)))
            head = None
        if piece is None:
            out.append(ev)
        else:
            head, (key, text) = ev, piece
            run = [text]
    if head is not None:
        out.append(_rebuilt(head, "".join(run)))
    return out


def event_to_dict(ev: Event) -> dict[str, Any]:
    """A JSON-able dict for one event (``type`` is the class name)."""
    if isinstance(ev, Text):
        return {"type": "Text", "text": ev.text}
    if isinstance(ev, Reasoning):
        return {"type": "Reasoning", "text": ev.text}
    if isinstance(ev, Markup):
        return {"type": "Markup", "raw": ev.raw}
    ident = {} if isinstance(ev, ToolArgsDelta | MarkupError) or ev.id is None else {"id": ev.id}
    if isinstance(ev, ToolCallStart):
        return {"type": "ToolCallStart", "index": ev.index, "name": ev.name, **ident}
    if isinstance(ev, ToolArgsDelta):
        return {"type": "ToolArgsDelta", "index": ev.index, "fragment": ev.fragment}
    if isinstance(ev, ToolCallEnd):
        return {"type": "ToolCallEnd", "index": ev.index, "name": ev.name,
                "arguments": ev.arguments, "raw": ev.raw, **ident}
    return {"type": "MarkupError", "kind": str(ev.kind), "raw": ev.raw, "index": ev.index}
