"""One stream's reasoning split, as both engines' reasoning parsers need it: engine-free.

``ThinkSplitter`` separates ``<think>…</think>`` from the answer, reasoning ending implicitly at one
of the family's call openers (docs/design/markup.md decision 1.10). The engines stop asking the reasoning
parser once reasoning has ended and give the rest to the tool parser; at the end of a stream still in
reasoning, what the splitter held back (a partial call opener) is passed through the family's parser,
so that only its visible text reaches the client, as it would have after the switch.
"""

from __future__ import annotations

from sseguard.reasoning import Answer, ThinkSplitter
from sseguard.toolcalls import Reasoning, Text, parser_for


class ReasoningSplit:
    """``feed`` returns (reasoning, answer) text; ``ended`` turns true once the answer began."""

    __slots__ = ("_family", "_splitter", "ended")

    def __init__(self, family: str, *, starts_in_reasoning: bool = False) -> None:
        self._family = family
        self._splitter = ThinkSplitter(starts_in_reasoning, family=family)
        self.ended = False

    def restart(self, *, starts_in_reasoning: bool) -> None:
        """Before the first feed: where the prompt left the stream (the prompt ends inside
        ``<think>`` for DeepSeek's thinking mode)."""
        self._splitter = ThinkSplitter(starts_in_reasoning, family=self._family)

    def feed(self, text: str) -> tuple[str, str]:
        """Split one delta."""
        reasoning: list[str] = []
        answer: list[str] = []
        for ev in self._splitter.feed(text) if text else []:
            (answer if isinstance(ev, Answer) else reasoning).append(ev.text)
        if answer or self._splitter.ended_by is not None:
            self.ended = True
        return "".join(reasoning), "".join(answer)

    def close(self, *, settle: bool) -> tuple[str, str]:
        """End of stream while still in reasoning: the held-back rest. ``settle``: its answer part
        goes through the family's parser and only visible text comes back (vLLM, whose tool parser
        never sees it); otherwise it is returned as it is (SGLang passes it on to the tool parser)."""
        reasoning: list[str] = []
        answer: list[str] = []
        for ev in self._splitter.close():
            if isinstance(ev, Answer) and not settle:
                answer.append(ev.text)
            elif isinstance(ev, Answer):
                parser = parser_for(self._family)
                tail = parser.feed(ev.text) + parser.close()
                answer.extend(t.text for t in tail if isinstance(t, Text))
                reasoning.extend(t.text for t in tail if isinstance(t, Reasoning))
            else:
                reasoning.append(ev.text)
        return "".join(reasoning), "".join(answer)
