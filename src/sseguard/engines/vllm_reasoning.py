"""vLLM ``ReasoningParser`` adapters: ``<think>…</think>`` split by ``ThinkSplitter``, one class per
registered name (``sseguard-<family>``), made on first use by the module ``__getattr__``.

The chat server decides on text: the parser is ``engine_based_streaming``, so the switch to the tool
parser happens when ``has_engine_confirmed_reasoning_end()`` says the answer began (after
``</think>`` or at one of the family's call openers, docs/design/markup.md decision 1.10), and the answer part
of that delta is the tool parser's first text.

Whether the answer starts inside reasoning is a question about the prompt, asked twice: by the chat
server (``is_reasoning_end(prompt ids)``: true skips the reasoning parser; ``set_prompt_token_ids``)
and by the engine core for structured outputs. Both are answered from the prompt's last characters,
decoded (``reasoning_at_prompt_end``): an open ``<think>`` there starts the answer in reasoning, a
``</think>`` there means thinking is off, anything else leaves it to the answer's first characters.
Never from the last think tag or call opener anywhere in the prompt's ids: the tool instructions of
a template, or an earlier turn's call or ``</think>``, would end a reasoning that has not begun; and
never from ids alone, so a tokenizer that splits ``<think>`` into pieces gives the same answer.

The engine core's other questions are about generated ids (``is_reasoning_end_streaming``,
``extract_content_ids``): they are answered from the tokenizer's ids of ``<think>``, ``</think>``
and those call openers that are single tokens in its vocabulary; a tokenizer without them cannot
tell from ids, and the answers are then "still in reasoning" (docs/engines.md, limits).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from vllm.entrypoints.generate.base.protocol import DeltaMessage
from vllm.reasoning.abs_reasoning_parsers import ReasoningParser

from sseguard.core.reasoning import END_THINK, THINK
from sseguard.core.toolcalls import family
from sseguard.engines import ParserName, class_per_name, reasoning_parser_names
from sseguard.engines._reasoning import PROMPT_TAIL_TOKENS, ReasoningSplit, reasoning_at_prompt_end


class SseguardReasoningParser(ReasoningParser):
    """sseguard's reasoning split for one family behind vLLM's ``ReasoningParser`` interface."""

    engine_based_streaming = True
    sseguard: ParserName = ParserName("hermes")

    def __init__(self, tokenizer: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(tokenizer, *args, **kwargs)
        vocab = self.vocab if tokenizer is not None else {}
        self._start_id: int | None = vocab.get(THINK)
        end = vocab.get(END_THINK)
        self._end_id: int | None = end
        exits = {vocab[m] for m in family(self.sseguard.family).reasoning_exits if m in vocab}
        #: ids after which the answer has begun: ``</think>``, and single-token call openers
        self._exit_ids = frozenset(exits)
        self._end_ids = frozenset(exits | ({end} if end is not None else set()))
        self._starts_in_reasoning = False
        self._split = ReasoningSplit(self.sseguard.family)

    @property
    def reasoning_start_str(self) -> str:
        return THINK

    @property
    def reasoning_end_str(self) -> str:
        return END_THINK

    def _last_tag(self, ids: Sequence[int]) -> int | None:
        """Position of the last ``<think>``, ``</think>`` or single-token opener in ``ids``."""
        for i in range(len(ids) - 1, -1, -1):
            if ids[i] in self._end_ids or ids[i] == self._start_id:
                return i
        return None

    def _prompt_end(self, prompt_ids: Sequence[int]) -> str:
        """The prompt's last characters, special tokens written out."""
        if not prompt_ids or self.model_tokenizer is None:
            return ""
        try:
            text: str = self.model_tokenizer.decode(list(prompt_ids[-PROMPT_TAIL_TOKENS:]),
                                                    skip_special_tokens=False)
        except Exception:  # a tokenizer that cannot decode these ids: the answer decides
            return ""
        return text

    def is_reasoning_end(self, input_ids: Sequence[int]) -> bool:
        """Asked of a prompt: whether it ends after reasoning (its last text is ``</think>``)."""
        return reasoning_at_prompt_end(self._prompt_end(input_ids)) is False

    def is_reasoning_end_streaming(self, input_ids: Sequence[int], delta_ids: Iterable[int]) -> bool:
        return any(token in self._end_ids for token in delta_ids)

    def extract_content_ids(self, input_ids: list[int]) -> list[int]:
        at = self._last_tag(input_ids)
        if at is None or input_ids[at] == self._start_id:
            return []
        # an opener that ended reasoning belongs to the answer; ``</think>`` does not
        return input_ids[at:] if input_ids[at] in self._exit_ids else input_ids[at + 1:]

    def set_prompt_token_ids(self, prompt_token_ids: Sequence[int]) -> None:
        """A prompt that ends with an open ``<think>`` (DeepSeek's thinking mode) starts the output
        inside reasoning."""
        self._starts_in_reasoning = reasoning_at_prompt_end(self._prompt_end(prompt_token_ids)) is True
        self._split.restart(starts_in_reasoning=self._starts_in_reasoning)

    def adjust_initial_state_from_prompt(self, prompt_token_ids: Sequence[int]) -> None:
        """The streaming path's hook (vLLM 0.32 calls only this one when the prompt did not end
        reasoning; 0.33 calls ``set_prompt_token_ids`` first): the same decision."""
        self.set_prompt_token_ids(prompt_token_ids)

    def extract_reasoning(self, model_output: str, request: Any) -> tuple[str | None, str | None]:
        split = ReasoningSplit(self.sseguard.family, starts_in_reasoning=self._starts_in_reasoning)
        reasoning, answer = split.feed(model_output)
        more_reasoning, more_answer = split.close(settle=False)  # the tool parser reads the answer
        return (reasoning + more_reasoning) or None, (answer + more_answer) or None

    def extract_reasoning_streaming(self, previous_text: str, current_text: str, delta_text: str,
                                    previous_token_ids: Sequence[int], current_token_ids: Sequence[int],
                                    delta_token_ids: Sequence[int]) -> Any:
        return _delta(*self._split.feed(delta_text))

    def has_engine_confirmed_reasoning_end(self) -> bool:
        return self._split.ended

    def finish_streaming(self) -> Any:
        """The stream ended in reasoning: what the splitter held back (vLLM calls this only then)."""
        return _delta(*self._split.close(settle=True))


def _delta(reasoning: str, content: str) -> Any:
    fields = {k: v for k, v in (("reasoning", reasoning), ("content", content)) if v}
    return DeltaMessage(**fields) if fields else None


#: The reasoning parser class registered as ``name`` (``sseguard-<family>``), made once.
__getattr__ = class_per_name(__name__, SseguardReasoningParser, reasoning_parser_names,
                             lambda name, meaning: {
                                 "__doc__": f"sseguard's reasoning split for {meaning.family}."})
