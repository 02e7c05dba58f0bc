"""What a protocol's words mean: its finish reasons in three classes, and the kinds its tables know.

Providers add stream event types, content blocks, deltas and finish reasons every few weeks, and
their SDKs know them first (``docs/design/guarantees.md`` guarantee 6, "Unknown is not broken"). Two rules
follow, and this module is where each protocol states them as data (``contract/<protocol>/vocabulary.py``,
read through ``Protocol.reasons`` and ``Protocol.kinds``):

- A finish reason is *classified*, never listed: ``finished`` (the answer ended as the model meant),
  ``policy`` (ended by the model's or the provider's policy: a content filter, safety, a refusal,
  passed on as it came) or ``failed`` (the model or the server broke). A reason missing from the table
  is ``failed``: a new reason is loud until someone classifies it, never silently a finished answer.
- An event, block or delta *kind* missing from the tables is not a fault: it passes through byte for
  byte and is recorded (``Verdict.unknown_kinds``) so an operator sees it, and only the terminal
  grammar stays strict. The kinds named here are also what the SDK drift check compares against.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum


class ReasonClass(StrEnum):
    """What a finish (stop) reason says about the answer."""

    FINISHED = "finished"  # ended as the model meant: stop, end_turn, STOP, MAX_TOKENS, …
    POLICY = "policy"  # ended by policy (content filter, safety, refusal): passed on as it came
    FAILED = "failed"  # the model or the server broke; also every reason the table does not know

    @property
    def ends_well(self) -> bool:
        """Whether a stream that ends with a reason of this class is a finished answer."""
        return self is not ReasonClass.FAILED


@dataclass(frozen=True, slots=True)
class Reasons:
    """One protocol's finish reasons, each with its class (``table``); ``blocked`` classifies the
    reasons a whole prompt is refused for (Gemini's ``promptFeedback.blockReason``), where a
    protocol has them."""

    table: Mapping[str, ReasonClass]
    blocked: Mapping[str, ReasonClass] = field(default_factory=dict)

    def classify(self, reason: str, *, blocked: bool = False) -> ReasonClass:
        """The class of ``reason``; one the table does not name is ``FAILED``."""
        return (self.blocked if blocked else self.table).get(reason, ReasonClass.FAILED)

    def named(self, cls: ReasonClass) -> tuple[str, ...]:
        """The finish reasons of one class, in the table's order (the docs list them)."""
        return tuple(name for name, c in self.table.items() if c is cls)


@dataclass(frozen=True, slots=True)
class Kinds:
    """The kinds of things a protocol's stream is made of that its checker knows by name.

    ``events``: event types (``response.output_text.delta``, ``message_start``); ``blocks``: content
    block / output item types / part fields (``tool_use``, ``function_call``, ``functionCall``);
    ``deltas``: delta types or delta fields (``input_json_delta``, ``tool_calls``); ``fields``: the
    other fields of a protocol's frames, as ``<object>.<field>``, where a new field is how the
    protocol grows (Chat Completions names no events: ``chunk.service_tier``, ``choice.logprobs``).
    A kind outside them passes through and is recorded, never judged.
    """

    events: frozenset[str] = frozenset()
    blocks: frozenset[str] = frozenset()
    deltas: frozenset[str] = frozenset()
    fields: frozenset[str] = frozenset()

    def knows(self, kind: str) -> bool:
        """Whether ``kind`` is a name of any of the tables."""
        return (kind in self.events or kind in self.blocks or kind in self.deltas
                or kind in self.fields)
