"""The protocol-neutral half of the repair: parsers, what their events mean, findings, facts.

One engine, a writer per protocol (``chat.py``, ``responses.py``, ``messages.py``): a writer feeds the
text of its protocol's content to a ``ChoiceRepair``'s parser and turns what ``Repair.drive`` makes of
the parser's events — typed ``Out`` values — into its own frames. What goes out as text or reasoning
is scanned for leaked markup with the contract's ``LeakScanner``, the same scan (markers and the
stripped-token shapes of docs/design/markup.md decision 2.11) the checker runs on an unrepaired stream: the
repair turns the checker's content scan off, so it must not see less than the checker would have.

Pure: no aiohttp, no app state (``tests/proxy/test_proxy_layers.py`` imports it with aiohttp blocked).
"""

from __future__ import annotations

import itertools
import secrets
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Self

import msgspec

from sseguard.core.contract import leak_markers, leak_shapes
from sseguard.core.contract.leaks import LeakScanner, weakly
from sseguard.core.errors import UsageError
from sseguard.core.sse import SSEEvent
from sseguard.core.toolcalls import (
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
from sseguard.core.verdict import Finding, FindingKind
from sseguard.proxy.machines.frames import Frames, StopReason

_decode = msgspec.json.decode
_encode = msgspec.json.encode
#: Every family's markers and stripped-token shapes: markup of a family the repair does not parse
#: still reaches the client, and that is a leak.
_MARKERS = leak_markers("all")
_SHAPES = leak_shapes("all")


#: What ``Repair.drive`` gives a writer: the parser's own typed events, with errors handled (a finding,
#: or ``failure``), markup that carries nothing for the client dropped, and adjacent runs of text (or
#: of reasoning) joined into one. Calls are numbered by the parser (``index``).
Out = Text | Reasoning | ToolCallStart | ToolArgsDelta | ToolCallEnd


# ── helpers the writers share ────────────────────────────────────────────────────────────────────


def chat_tools(tools: list[Any] | None, schema: str) -> list[dict[str, Any]] | None:
    """Responses (``name``, ``parameters``) or Anthropic (``name``, ``input_schema``) tools in the
    Chat Completions shape the parsers read; tools without a name (built-in server tools such as web
    search) are left out."""
    if tools is None:
        return None
    return [{"type": "function", "function": {"name": t["name"], "parameters": t.get(schema) or {}}}
            for t in tools if isinstance(t, dict) and isinstance(t.get("name"), str)]


def plain(events: list[Any], content: Any) -> bool:
    """The parser gave back exactly the content as text (or nothing for no content)."""
    text = content if isinstance(content, str) else ""
    if not events:
        return text == ""
    return len(events) == 1 and isinstance(events[0], Text) and events[0].text == text


def new_call_id() -> str:
    """An id in the shape OpenAI's own tool calls have (``call_`` + 24 characters)."""
    return "call_" + secrets.token_urlsafe(18)


def json_object(event: SSEEvent) -> dict[str, Any] | None:
    """The event's data as a JSON object, or None: the checker reports what is not one, and there is
    nothing to repair in it."""
    try:
        obj = _decode(event.data)
    except msgspec.DecodeError:
        return None
    return obj if isinstance(obj, dict) else None


def sse(name: str, obj: dict[str, Any]) -> bytes:
    """One named event (Messages and Responses name every event)."""
    return b"event: " + name.encode() + b"\ndata: " + _encode(obj) + b"\n\n"


@dataclass(slots=True)
class ChoiceRepair:
    """One parser (a chat choice, a Responses message item, a Messages text block) and its calls."""

    parser: Parser
    key: int  # its stream in the leak scanner
    closed: bool = False
    calls: int = 0
    offset: int | None = None  # where repaired call indexes start (after the upstream's own calls)
    upstream_calls: int = 0  # structured tool calls the upstream sent itself (max index + 1)
    ids: dict[int, str] = field(default_factory=dict)


def _run(outs: list[Out], out: Text | Reasoning) -> None:
    """Append ``out``, joined to the run before it when that is of its kind."""
    last = outs[-1] if outs else None
    if isinstance(last, Text) and isinstance(out, Text):
        outs[-1] = Text(last.text + out.text)
    elif isinstance(last, Reasoning) and isinstance(out, Reasoning):
        outs[-1] = Reasoning(last.text + out.text)
    else:
        outs.append(out)


class Repair(Frames):
    """The engine every writer builds on: parsers for ``family``, ``drive``, the leak scan, facts."""

    def __init__(self, family: str, tools: list[Any] | None) -> None:
        self.family = family
        self.tools = tools
        self.failure: StopReason | None = None
        self.calls = 0
        self._findings: list[Finding] = []
        self._leaked = False
        self._parsers: list[Parser] = []
        self._keys = itertools.count()
        self._upstream_keys: dict[int, int] = {}
        self._leaks = LeakScanner(_MARKERS, weakly(self._on_leak), _SHAPES)  # no cycle: see weakly

    @classmethod
    def for_request(cls, family: str, request: dict[str, Any]) -> Self:
        """The repair of one stream of ``request``, with fresh parsers and the tools it offered."""
        return cls(family, cls.tools_of(request))

    @staticmethod
    def tools_of(request: dict[str, Any]) -> list[Any] | None:
        """The request's tools in the Chat Completions shape the parsers read: chat's own, as they
        are; the other writers translate theirs."""
        tools = request.get("tools")
        return tools if isinstance(tools, list) else None

    def findings(self) -> list[Finding]:
        return list(self._findings)

    def facts(self) -> dict[str, Any]:
        facts: dict[str, Any] = {"repair": self.family, "repaired_tool_calls": self.calls}
        # `auto` names the family it detected; record it, it is what an operator wants to know.
        detected = {getattr(p, "detected", None) for p in self._parsers}
        names = sorted(d for d in detected if isinstance(d, str))
        if names:
            facts["repair_family"] = ",".join(names)
        return facts

    def new_state(self) -> ChoiceRepair:
        """A fresh parser for one choice, item or block (a malformed tools list is the upstream's to
        reject: then it parses without names)."""
        try:
            parser = parser_for(self.family, self.tools)
        except UsageError:
            parser = parser_for(self.family)
        self._parsers.append(parser)
        return ChoiceRepair(parser, self.new_key())

    def new_key(self) -> int:
        """A stream of its own for the leak scanner (text is scanned across deltas per key)."""
        return next(self._keys)

    def upstream_key(self, index: Any) -> int:
        """The leak-scan stream of an upstream block or item the repair passes on as it is (its own
        reasoning or thinking reaches the client unchanged: a leak there is a leak)."""
        at = index if isinstance(index, int) else -1
        key = self._upstream_keys.get(at)
        if key is None:
            key = self._upstream_keys[at] = self.new_key()
        return key

    def drive(self, state: ChoiceRepair, events: list[Any], where: str) -> list[Out]:
        """Parser events → ``Out`` values; sets ``failure`` (and returns []) on unparseable markup."""
        outs: list[Out] = []
        for ev in events:
            if isinstance(ev, Text | Reasoning):  # Harmony's analysis channel: reasoning, never dropped
                _run(outs, ev)
            elif isinstance(ev, ToolCallStart | ToolArgsDelta):
                outs.append(ev)
            elif isinstance(ev, ToolCallEnd):
                state.calls += 1
                self.calls += 1
                outs.append(ev)
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
            if isinstance(out, Text):
                self.scan(state.key, "content", out.text)
            elif isinstance(out, Reasoning):
                self.scan(state.key, "reasoning", out.text)
        return outs

    def scan(self, key: int, where: str, text: str) -> None:
        """Look for leaked markup in text the client gets (one finding per stream is evidence enough)."""
        if not self._leaked:
            self._leaks.scan(key, where, text)

    def _on_leak(self, marker: str, index: int, where: str, pos: int) -> None:
        if not self._leaked:
            self._leaked = True
            self._findings.append(Finding(FindingKind.MARKUP_LEAK, f"{marker!r} in {where} after repair"))


class BlockRepair(Repair, ABC):
    """A writer whose calls and reasoning are blocks (Messages) or items (Responses) of their own.

    ``emit`` walks ``drive``'s output in order; each writer says how a run of text, a call's start, an
    argument fragment and a call's end look in its protocol, and how a reasoning block opens, grows and
    ends (anything but reasoning ends an open one).
    """

    def emit(self, state: ChoiceRepair, events: list[Any], where: str) -> bytes:
        parts: list[bytes] = []
        for out in self.drive(state, events, where):
            if isinstance(out, Reasoning):
                parts.append(self.reasoning(out.text))
                continue
            parts.append(self.end_reasoning())
            if isinstance(out, Text):
                parts.append(self.text(out.text))
            elif isinstance(out, ToolCallStart):
                parts.append(self.call_start(out))
            elif isinstance(out, ToolArgsDelta):
                parts.append(self.call_args(out))
            else:
                parts.append(self.call_end(out))
        return b"".join(parts)

    @abstractmethod
    def text(self, text: str) -> bytes:
        """A run of text for the open (or a new) text block or message item."""

    @abstractmethod
    def reasoning(self, text: str) -> bytes:
        """A run of reasoning for the open (or a new) reasoning block or item."""

    @abstractmethod
    def end_reasoning(self) -> bytes:
        """End the reasoning block or item the repair opened, if one is open."""

    @abstractmethod
    def call_start(self, call: ToolCallStart) -> bytes:
        """Close the open text, open the call's block or item."""

    @abstractmethod
    def call_args(self, args: ToolArgsDelta) -> bytes:
        """One fragment of the call's arguments."""

    @abstractmethod
    def call_end(self, end: ToolCallEnd) -> bytes:
        """The call's block or item ends."""
