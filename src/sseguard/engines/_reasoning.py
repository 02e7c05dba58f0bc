"""One stream's reasoning split, as both engines' reasoning parsers need it: engine-free.

``ThinkSplitter`` separates ``<think>…</think>`` from the answer, reasoning ending implicitly at one
of the family's call openers (docs/design/markup.md decision 1.10). The engines stop asking the reasoning
parser once reasoning has ended and give the rest to the tool parser; at the end of a stream still in
reasoning, what the splitter held back (a partial call opener) is passed through the family's parser,
so that only its visible text reaches the client, as it would have after the switch.

Whether a stream starts inside reasoning is read off the end of its prompt (``reasoning_at_prompt_end``):
what the template's generation prompt wrote last, as text, whatever the tokenizer makes of the tags.
A tag anywhere else in the prompt belongs to something else: a template's tool instructions (Qwen3
shows the ``<tool_call>`` format in its system prompt), an earlier turn's call or ``</think>``.
"""

from __future__ import annotations

from sseguard.core.reasoning import END_THINK, THINK, AnswerText, ThinkSplitter
from sseguard.core.toolcalls import Reasoning, Text, parser_for

#: How many of a prompt's last tokens an adapter decodes for ``reasoning_at_prompt_end``: enough for
#: ``<think>`` and the blank lines after it even with a tokenizer that spends a token per character.
PROMPT_TAIL_TOKENS = 32


def reasoning_at_prompt_end(prompt_end: str) -> bool | None:
    """Where a prompt leaves its answer, from the prompt's last characters (trailing whitespace aside):
    ``True`` inside reasoning (it ends with an open ``<think>``: DeepSeek's, GLM-4.7's and MiniMax-M2's
    thinking prompts), ``False`` after it (it ends with ``</think>``: thinking switched off, Qwen3's
    and DeepSeek's way), ``None`` neither, and then the answer itself decides (a ``<think>`` at its
    very start opens reasoning: Qwen3, GLM-4.5, Kimi K2)."""
    end = prompt_end.rstrip()
    if end.endswith(THINK):
        return True
    if end.endswith(END_THINK):
        return False
    return None


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
            (answer if isinstance(ev, AnswerText) else reasoning).append(ev.text)
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
            if isinstance(ev, AnswerText) and not settle:
                answer.append(ev.text)
            elif isinstance(ev, AnswerText):
                parser = parser_for(self._family)
                tail = parser.feed(ev.text) + parser.close()
                answer.extend(t.text for t in tail if isinstance(t, Text))
                reasoning.extend(t.text for t in tail if isinstance(t, Reasoning))
            else:
                reasoning.append(ev.text)
        return "".join(reasoning), "".join(answer)
