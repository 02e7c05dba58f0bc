"""Thinking through SGLang's chat serving steps, with ``--tool-call-parser`` and ``--reasoning-parser
sseguard-<family>`` both selected, for every family whose call openers end reasoning: the same answer
gives the client the same reasoning, content and call at every chunking (1, 2, 3, 4 and 16
characters, and random splits), whether the prompt opened the reasoning (the request's
``chat_template_kwargs: {"thinking": true}``, SGLang's toggle) or the answer's own ``<think>`` did.
SGLang hands its reasoning detector text only, never token ids, so no tokenizer takes part.

Needs SGLang 0.5.23 (``.ci/engines``); skipped without it.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sseguard.core.toolcalls import families
from support.engines import WEATHER_TOOLS, engine, thinking_cases, thinking_problem

engine("sglang.srt.entrypoints.openai.serving_chat")

from support.engines_sglang import serving, stream  # noqa: E402

REASONED = [name for name, fam in families().items() if fam.reasoning_exits]
SIZES = (1, 2, 3, 4, 16)
pytestmark = pytest.mark.timeout(900)


@pytest.mark.parametrize("family", REASONED)
async def test_thinking_then_a_call_is_the_same_answer_at_every_delta_size(family: str) -> None:
    chat = serving(f"sseguard-{family}", f"sseguard-{family}")
    failures = []
    for case in thinking_cases(family):
        for size in SIZES:
            got = await stream(chat, case.text, size, WEATHER_TOOLS, think=case.opened)
            problem = thinking_problem(got, case)
            if problem:
                failures.append(f"{case.label}, {size}-char deltas: {problem}")
    assert not failures, f"{len(failures)} answers differ:\n" + "\n".join(failures[:8])


@settings(max_examples=120, deadline=None)
@given(family=st.sampled_from(REASONED), which=st.integers(0, 3),
       lengths=st.lists(st.integers(1, 9), max_size=80))
async def test_thinking_split_anywhere_is_the_same_answer(family: str, which: int,
                                                         lengths: list[int]) -> None:
    case = thinking_cases(family)[which]
    pieces, at = [], 0
    for n in lengths:
        if at < len(case.text):
            pieces.append(case.text[at:at + n])
            at += n
    pieces.append(case.text[at:])
    got = await stream(serving(f"sseguard-{family}", f"sseguard-{family}"), case.text, 0, WEATHER_TOOLS,
                       think=case.opened, pieces=[p for p in pieces if p] or [""])
    assert thinking_problem(got, case) is None, (case.label, lengths, thinking_problem(got, case))
