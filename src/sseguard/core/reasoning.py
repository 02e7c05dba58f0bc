"""Separate ``<think>…</think>`` reasoning from the answer, incrementally, under any chunking.

DeepSeek's thinking mode ends the prompt with ``<think>``, so its stream *starts inside* reasoning
(``starts_in_reasoning=True``); Qwen3 and R1 write ``<think>`` themselves at the very start. Reasoning
ends at ``</think>`` or, implicitly, where a tool-call opener appears (docs/design/markup.md decision 1.10):
models open a call block before closing their thoughts, and that block belongs to the answer, where the
tool-call parser reads it. The text before the opener (its separator included) stays reasoning.

A family whose parser reads its own reasoning span (Seed-OSS's ``<seed:think>``…``</seed:think>``,
``Family.reasoning_spans``) writes that span's closer instead of ``</think>``: a stream that starts
inside reasoning ends it there too, the closer consumed like ``</think>``. Without that, a model that
quotes call markup in its reasoning (which such a family keeps as reasoning text) would never reach
its answer.

Only a ``<think>`` at the very start opens reasoning; after that, and once reasoning ended, the answer
is passed through verbatim — a ``<think>`` in the middle of an answer is the answer's text.
"""

from __future__ import annotations

from dataclasses import dataclass

from sseguard.core._renamed import renamed
from sseguard.core.errors import UsageError
from sseguard.core.toolcalls import FAMILIES, canonical
from sseguard.core.toolcalls.events import Reasoning
from sseguard.core.toolcalls.grammars.markers import MIN_PARTIAL, Markers

THINK = "<think>"
END_THINK = "</think>"


@dataclass(frozen=True, slots=True)
class AnswerText:
    """Answer text, verbatim (what is not reasoning): the input of the tool-call parser. (Was
    ``Answer``: the chaos upstream's generated answers and a protocol's assistant answer are others.)"""

    text: str


#: ``Reasoning`` is the tool-call parsers' event type too (Harmony emits its analysis channel as
#: one), so that a consumer handles reasoning from either source alike.
ReasoningEvent = Reasoning | AnswerText

_START, _REASONING, _ANSWER = range(3)


class ThinkSplitter:
    """One stream's reasoning/answer splitter.

    ``family`` narrows the tool-call openers that end reasoning to one family's (default: every
    family's, since an opener of any family inside reasoning is a call the model started).
    """

    def __init__(self, starts_in_reasoning: bool = False, *, family: str | None = None) -> None:
        if family is not None:
            family = canonical(family)  # an engine's name for the family
            if family not in FAMILIES:
                raise UsageError(f"unknown markup family {family!r}")
        fam = FAMILIES["auto" if family is None else family]
        exits = fam.reasoning_exits
        self._exits = frozenset(exits)
        #: closers consumed with the reasoning: ``</think>`` and the family's own spans' closers
        self._closers = frozenset((END_THINK, *(pair[1] for pair in fam.reasoning_spans)))
        self._markers = Markers(tuple(dict.fromkeys((*self._closers, *exits))))
        self._state = _REASONING if starts_in_reasoning else _START
        self._pend = ""
        self._closed = False
        self.ended_by: str | None = None  # "</think>", the opener that ended reasoning, or None

    @property
    def in_reasoning(self) -> bool:
        """True while the text being fed is reasoning."""
        return self._state == _REASONING

    def feed(self, text: str) -> list[ReasoningEvent]:
        """Split more text; return the pieces it completes."""
        if self._closed:
            raise UsageError("feed() after close()")
        if self._state == _ANSWER:
            return [AnswerText(text)] if text else []
        data = self._pend + text
        self._pend = ""
        out: list[ReasoningEvent] = []
        if self._state == _START:
            if len(data) < len(THINK) and THINK.startswith(data):
                self._pend = data
                return out
            if not data.startswith(THINK):
                self._state = _ANSWER
                return [AnswerText(data)] if data else []
            data = data[len(THINK):]
            self._state = _REASONING
        m, lit = self._markers.find(data, 0)
        if m == -1:
            k = self._markers.hold(data, 0)
            if k:
                out.append(Reasoning(data[:k]))
            self._pend = data[k:]
            return out
        if m:
            out.append(Reasoning(data[:m]))
        self._state = _ANSWER
        self.ended_by = lit
        rest = data[m + len(lit):] if lit in self._closers else data[m:]
        if rest:
            out.append(AnswerText(rest))
        return out

    def close(self) -> list[ReasoningEvent]:
        """End of stream: a held partial tool-call opener goes to the answer, where the tool-call
        parser reports it as unterminated; anything else held is what it was."""
        if self._closed:
            raise UsageError("close() called twice")
        self._closed = True
        rest, self._pend = self._pend, ""
        if not rest:
            return []
        if self._state == _START:
            return [AnswerText(rest)]
        if len(rest) >= MIN_PARTIAL and any(lit.startswith(rest) for lit in self._exits):
            return [AnswerText(rest)]
        return [Reasoning(rest)]


__all__ = ["END_THINK", "THINK", "AnswerText", "Reasoning", "ReasoningEvent", "ThinkSplitter"]

#: Old names → new (docs/design/vocabulary.md "Names").
__getattr__ = renamed(__name__, {"Answer": "AnswerText"})
