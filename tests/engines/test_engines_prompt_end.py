"""Where a prompt leaves its answer (``sseguard.engines._reasoning.reasoning_at_prompt_end``), with no
engine installed: only what the prompt wrote last counts, never a tag earlier in it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sseguard.engines._reasoning import reasoning_at_prompt_end

QWEN3_TOOLS = ("<|im_start|>system\n# Tools\nFor each function call, return a json object within "
               "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>}\n</tool_call>"
               "<|im_end|>\n<|im_start|>user\nWeather?<|im_end|>\n")


def test_an_open_think_at_the_end_starts_the_answer_in_reasoning() -> None:
    assert reasoning_at_prompt_end("<｜User｜>Weather?<｜Assistant｜><think>") is True  # DeepSeek V3.2
    assert reasoning_at_prompt_end("[e~[\n]~b]ai\n<think>\n") is True  # MiniMax-M2


def test_a_closed_think_at_the_end_means_thinking_is_off() -> None:
    assert reasoning_at_prompt_end(QWEN3_TOOLS + "<|im_start|>assistant\n<think>\n\n</think>\n\n") is False
    assert reasoning_at_prompt_end("<|assistant|></think>") is False  # GLM-4.7


def test_tool_instructions_and_earlier_turns_say_nothing_about_this_answer() -> None:
    assert reasoning_at_prompt_end(QWEN3_TOOLS + "<|im_start|>assistant\n") is None
    earlier = ("<|im_assistant|>assistant<|im_middle|><think>I need it.</think>"
               "<|tool_calls_section_begin|>…<|tool_calls_section_end|><|im_end|>")
    assert reasoning_at_prompt_end(earlier + "<|im_assistant|>assistant<|im_middle|>") is None
    assert reasoning_at_prompt_end("") is None


TEXT = st.lists(st.sampled_from(["<think>", "</think>", "<tool_call>", "a", "\n", " ", "<|assistant|>"])).map(
    "".join)


@settings(max_examples=200, deadline=None)
@given(TEXT, st.sampled_from(["", "\n", "\n\n", " "]))
def test_only_the_end_of_the_prompt_counts(earlier: str, blank: str) -> None:
    assert reasoning_at_prompt_end(earlier + "<|assistant|><think>" + blank) is True
    assert reasoning_at_prompt_end(earlier + "<|assistant|></think>" + blank) is False
    assert reasoning_at_prompt_end(earlier + "<|assistant|>" + blank) is None
