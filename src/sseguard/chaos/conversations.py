"""``first_answer``: every conversation's first answer breaks, and only that one.

What a healing layer must be measured against (issue 38): an upstream that breaks each conversation
once — its first answer cut after half the text, or failed before the first byte — and answers every
later request of the same conversation whole: the proxy's retry, its continuation, the agent's own
re-ask and the conversation's next turns alike. Whether the agent then got the whole answer from its
one request is what a run shows; the upstream breaking again would measure something else.

A conversation is known by its first user message (``ChatRequest.first_user``, hashed with the
model): every turn of an agent's conversation repeats it, and a side request of the agent (a title,
a summary) starts with a message of its own and is another conversation. The first request of a
conversation that can carry the fault gets it; the fault strikes at half the answer (``Decision.at``
0.5). A fault that cuts the answer along its way (``ALONG_THE_TEXT``) waits for an answer in text:
an agent's first answer is usually a tool call, which chaos can only cut once the call is whole (a
cut inside it is ``tool_call_unterminated``), so "after half the text" means the conversation's first
text answer — the one after the tool's result. A non-streamed request cannot be cut mid-stream
either: it is answered whole and the conversation's next request is tried.

The log keeps, per conversation, its requests, the fault its first answer got and the text of its
latest answer made whole, which ``GET /chaos/conversations`` shows, so that a harness can tell
whether a client printed the whole answer.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from sseguard.chaos.faults import Decision, Fault
from sseguard.chaos.request import ChatRequest
from sseguard.core._renamed import renamed

#: Where along the answer the first answer's fault strikes: half of it.
FIRST_ANSWER_AT = 0.5
#: Faults that strike along the answer's text (after half of it): they wait for a text answer.
ALONG_THE_TEXT = frozenset({Fault.TRUNCATED, Fault.CUT_MID_FRAME, Fault.TRANSPORT_ERROR,
                            Fault.ERROR_EVENT, Fault.STALLED})
#: Conversations one chaos process remembers; the oldest is forgotten first (a bounded test server).
CONVERSATIONS_MAX = 4096


def conversation_key(req: ChatRequest) -> str:
    """The conversation ``req`` belongs to: a digest of its model and first user message."""
    return hashlib.blake2b(f"{req.model}\x00{req.first_user}".encode(),
                           digest_size=8).hexdigest()


@dataclass(slots=True)
class ServedConversation:
    """What one conversation got: its requests, the fault its first answer carried, and the text
    of its latest answer as it was made (whole, before any cut)."""

    requests: int = 0
    broken: str | None = None
    last_text: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"requests": self.requests, "broken": self.broken, "last_text": self.last_text}


@dataclass(slots=True)
class ConversationLog:
    """The conversations one chaos process has served, oldest first."""

    seen: dict[str, ServedConversation] = field(default_factory=dict)

    def arrive(self, req: ChatRequest) -> tuple[str, ServedConversation]:
        """``req`` arrived: its conversation (new or known), counted."""
        key = conversation_key(req)
        conv = self.seen.get(key)
        if conv is None:
            conv = self.seen[key] = ServedConversation()
            while len(self.seen) > CONVERSATIONS_MAX:
                del self.seen[next(iter(self.seen))]
        conv.requests += 1
        return key, conv

    def to_dict(self) -> dict[str, Any]:
        return {key: conv.to_dict() for key, conv in self.seen.items()}


def first_answer_decision(fault: Fault, conv: ServedConversation,
                          req: ChatRequest) -> tuple[Fault | None, float]:
    """The fault (and where it strikes) the conversation's next answer gets: ``fault`` at half the
    answer while its first answer has not been broken (a fault along the text: its first text
    answer, not one that calls a tool), none after."""
    if conv.broken is not None or (fault in ALONG_THE_TEXT and req.wants_tool_call):
        return None, FIRST_ANSWER_AT
    return fault, FIRST_ANSWER_AT


def settle(decision: Decision, conv: ServedConversation) -> None:
    """The decision that was applied: a fault it carries is the conversation's one break."""
    if decision.fault is not None and conv.broken is None:
        conv.broken = str(decision.fault)

#: Old names → new (docs/design/vocabulary.md "Names").
__getattr__ = renamed(__name__, {"Conversation": "ServedConversation"})
