"""What a serving engine may show its client of one stream's parser events: engine-free.

A serving engine's stream cannot take anything back and has no error channel (docs/design/engine-facts.md): a
call whose name or arguments went out stays with the client. So by default (``hold``) a call goes out
whole, in one piece, when the parser ends it (``ToolCallEnd``): a call the parser voids
(``MarkupError`` with an index) never reaches the client as a call. ``stream`` sends the name at
``ToolCallStart`` and each argument fragment as it arrives, for those who want progress over that
guarantee; a voided call is then remembered in ``void`` so that an engine able to say so (SGLang's
``incomplete_tool_call_indices``) keeps ``finish_reason`` honest.

Visible text is exactly the parser's ``Text``; ``Reasoning`` (Harmony's analysis channel) is
reasoning; ``Markup`` and ``MarkupError`` raw text are never shown (the error is kept in ``errors``
for the adapter to log). Client indexes count the calls the client sees, 0, 1, 2…, so a voided
call in ``hold`` mode leaves no gap.

Both engines' adapters translate ``Step`` into their own delta types; nothing here imports either.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sseguard.core.toolcalls import (
    Event,
    MarkupError,
    MarkupErrorKind,
    Parser,
    Reasoning,
    Text,
    ToolArgsDelta,
    ToolCallEnd,
    ToolCallStart,
)


@dataclass(frozen=True, slots=True)
class CallPiece:
    """One piece of a call for the client. The first piece of a call carries its ``id`` and
    ``name`` (``None`` on later pieces); ``arguments`` is the next part of its arguments JSON."""

    index: int
    arguments: str
    name: str | None = None
    id: str | None = None


@dataclass(slots=True)
class Step:
    """What one feed (or the close) gives the client: text, reasoning and call pieces, in the
    parser's order within each kind. Empty strings mean nothing of that kind."""

    content: str = ""
    reasoning: str = ""
    calls: list[CallPiece] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.content or self.reasoning or self.calls)


class ClientGate:
    """One stream's parser, with what its client may see (``hold`` or ``stream``, see the module).
    A gate, not a relay: the proxy's relay is another thing (docs/design/vocabulary.md "Names").

    ``new_id()`` makes a call id where the markup has none (the engine's own format: vLLM's
    ``chatcmpl-tool-…``); a call that carries its own (Kimi's ``functions.NAME:IDX``) keeps it.
    """

    __slots__ = ("_ids", "_new_id", "_next", "_parser", "_stream", "errors", "sent", "void")

    def __init__(self, parser: Parser, *, stream: bool, new_id: Callable[[], str]) -> None:
        self._parser = parser
        self._stream = stream
        self._new_id = new_id
        self._next = 0  # the client index of the next call
        self._ids: dict[int, int] = {}  # parser index → client index (stream mode)
        #: client indexes of calls that went out whole and valid (``hold``) or started (``stream``)
        self.sent: list[int] = []
        #: client indexes of streamed calls the parser then voided (``stream`` mode only)
        self.void: set[int] = set()
        #: every markup error, for the adapter's log (their raw text is never shown to the client)
        self.errors: list[MarkupError] = []

    @property
    def valid_calls(self) -> int:
        """How many calls reached the client and stayed valid."""
        return len(self.sent) - len(self.void)

    def feed(self, text: str) -> Step:
        """Parse one delta of model output."""
        return self._step(self._parser.feed(text) if text else [])

    def close(self) -> Step:
        """End of the stream: what the parser held back, settled."""
        return self._step(self._parser.close())

    def _step(self, events: list[Event]) -> Step:
        content: list[str] = []
        reasoning: list[str] = []
        calls: list[CallPiece] = []
        for ev in events:
            if isinstance(ev, Text):
                content.append(ev.text)
            elif isinstance(ev, Reasoning):
                reasoning.append(ev.text)
            elif isinstance(ev, ToolCallEnd):
                if not self._stream:
                    calls.append(CallPiece(self._take(), ev.arguments, ev.name, ev.id or self._new_id()))
            elif isinstance(ev, ToolCallStart):
                if self._stream:
                    at = self._ids[ev.index] = self._take()
                    calls.append(CallPiece(at, "", ev.name, ev.id or self._new_id()))
            elif isinstance(ev, ToolArgsDelta):
                if self._stream and ev.fragment:
                    _append(calls, CallPiece(self._ids[ev.index], ev.fragment))
            elif isinstance(ev, MarkupError):
                self.errors.append(ev)
                if (self._stream and ev.index is not None and ev.index in self._ids
                        and ev.kind is not MarkupErrorKind.UNDEFINED_FUNCTION):
                    self.void.add(self._ids[ev.index])
            # Markup (block openers, separators) carries nothing for the client.
        return Step("".join(content), "".join(reasoning), calls)

    def _take(self) -> int:
        at = self._next
        self._next += 1
        self.sent.append(at)
        return at


def _append(calls: list[CallPiece], piece: CallPiece) -> None:
    """Add an argument fragment, merged into the previous piece of the same call (one delta object
    per call per step, whatever the number of fragments the parser gave)."""
    if calls and calls[-1].index == piece.index:
        last = calls[-1]
        calls[-1] = CallPiece(last.index, last.arguments + piece.arguments, last.name, last.id)
    else:
        calls.append(piece)


def calls_allowed(tools: object, tool_choice: object) -> bool:
    """Whether a request lets the model call a tool: it offers tools, and ``tool_choice`` is not
    ``"none"``. A request that allows no call gets its answer verbatim as content, call markup and
    all: the model wrote it anyway, it is the only answer there is, and the engines drop the calls of
    such a request (vLLM 0.32 and 0.33 run an engine-based tool parser for ``tool_choice: "none"``
    and then discard its calls, so a parser that took them out of the text would lose them)."""
    return bool(tools) and tool_choice != "none"


def parse_whole(parser: Parser, text: str, new_id: Callable[[], str]) -> tuple[Step, ClientGate]:
    """A whole completion at once (the engines' non-streaming path): always ``hold``, so only
    valid calls, each whole."""
    gate = ClientGate(parser, stream=False, new_id=new_id)
    first = gate.feed(text)
    last = gate.close()
    return Step(first.content + last.content, first.reasoning + last.reasoning,
                first.calls + last.calls), gate
