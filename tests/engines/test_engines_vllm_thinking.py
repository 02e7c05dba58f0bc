"""Thinking through vLLM's real chat server, with ``--tool-call-parser`` and ``--reasoning-parser
sseguard-<family>`` both selected, for every family whose call openers end reasoning: the same answer
gives the client the same reasoning, content and call at every chunking (1, 2, 3, 4 and 16
characters, and random splits), whether the prompt opened the reasoning or the answer did, with a
tokenizer that has the think tags and markers as tokens of their own and one where they are plain
byte-level text (so the prompt's ids alone cannot say that the prompt ended inside ``<think>``).

Only the engine's ``generate()`` is replaced (``support.engines_vllm``). Needs vLLM 0.33 (``.ci/engines``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sseguard.core.toolcalls import families
from support.engines import WEATHER_TOOLS, ThinkingCase, engine, thinking_cases, thinking_problem

engine("vllm")

from support.engines_model import build_model_dir  # noqa: E402
from support.engines_vllm import Script, Server, chat  # noqa: E402

REASONED = [name for name, fam in families().items() if fam.reasoning_exits]
SIZES = (1, 2, 3, 4, 16)
TOKENIZERS = {"tags as tokens": True, "tags as text": False}
pytestmark = pytest.mark.timeout(900)

_model_dirs: dict[bool, Path] = {}
_servers: dict[tuple[str, bool], Server] = {}


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, Path]:
    if not _model_dirs:
        for tags in TOKENIZERS.values():
            _model_dirs[tags] = build_model_dir(tmp_path_factory.mktemp(f"model-tags-{tags}"), tags=tags)
    return _model_dirs


async def server_for(model_dirs: dict[bool, Path], family: str, tags: bool) -> Server:
    """vLLM's app with both of the family's parsers, made once per family and tokenizer."""
    key = (family, tags)
    if key not in _servers:
        server = Server(model_dirs[tags], f"sseguard-{family}", f"sseguard-{family}")
        await server.start()
        _servers[key] = server
    return _servers[key]


async def answer(server: Server, case: ThinkingCase, script: Script) -> dict[str, Any]:
    extra = {"chat_template_kwargs": {"thinking": True}} if case.opened else {}
    return await chat(server, script, WEATHER_TOOLS, extra=extra)


@pytest.mark.parametrize("family", REASONED)
async def test_thinking_then_a_call_is_the_same_answer_at_every_delta_size(
        family: str, model_dirs: dict[bool, Path]) -> None:
    failures = []
    for tokenizer, tags in TOKENIZERS.items():
        server = await server_for(model_dirs, family, tags)
        for case in thinking_cases(family):
            for size in SIZES:
                got = await answer(server, case, (case.text, size, "stop"))
                problem = thinking_problem(got, case)
                if problem:
                    failures.append(f"{case.label}, {tokenizer}, {size}-char deltas: {problem}")
    assert not failures, f"{len(failures)} answers differ:\n" + "\n".join(failures[:8])


@pytest.mark.parametrize("family", REASONED)
async def test_thinking_answered_whole_is_the_same_answer(family: str,
                                                          model_dirs: dict[bool, Path]) -> None:
    failures = []
    for tokenizer, tags in TOKENIZERS.items():
        server = await server_for(model_dirs, family, tags)
        for case in thinking_cases(family):
            extra = {"chat_template_kwargs": {"thinking": True}} if case.opened else {}
            got = await chat(server, (case.text, 4, "stop"), WEATHER_TOOLS, stream=False, extra=extra)
            problem = thinking_problem(got, case)
            if problem:
                failures.append(f"{case.label}, {tokenizer}: {problem}")
    assert not failures, "\n".join(failures[:8])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(family=st.sampled_from(REASONED), tags=st.booleans(), which=st.integers(0, 3),
       lengths=st.lists(st.integers(1, 9), max_size=80))
async def test_thinking_split_anywhere_is_the_same_answer(model_dirs: dict[bool, Path], family: str,
                                                         tags: bool, which: int,
                                                         lengths: list[int]) -> None:
    case = thinking_cases(family)[which]
    got = await answer(await server_for(model_dirs, family, tags), case, (case.text, lengths, "stop"))
    assert thinking_problem(got, case) is None, (case.label, tags, lengths, thinking_problem(got, case))


@pytest.mark.parametrize("tags", list(TOKENIZERS.values()), ids=list(TOKENIZERS))
def test_the_prompts_end_decides_whichever_hook_vllm_calls(model_dirs: dict[bool, Path], tags: bool) -> None:
    """vLLM 0.33 calls ``set_prompt_token_ids`` and then ``adjust_initial_state_from_prompt``;
    0.32's streaming path calls only the latter. Tool instructions holding ``<tool_call>`` (one token
    with ``tags``) and an earlier ``</think>`` do not end a reasoning that has not begun."""
    from vllm.plugins import load_general_plugins
    from vllm.reasoning.abs_reasoning_parsers import ReasoningParserManager
    from vllm.tokenizers import get_tokenizer

    load_general_plugins()  # the entry point registers our names, as in ``vllm serve``
    tokenizer = get_tokenizer(str(model_dirs[tags]))
    parser_class = ReasoningParserManager.get_reasoning_parser("sseguard-hermes")
    earlier = ("<|system|>Answer with <tool_call>{...}</tool_call>\n<|assistant|><think>Hm.</think>"
               "<tool_call>{}</tool_call>\n<|user|>And now?\n")
    ids = {end: tokenizer.encode(earlier + end, add_special_tokens=False)
           for end in ("<|assistant|>", "<|assistant|><think>\n", "<|assistant|><think>\n\n</think>\n\n")}
    assert [parser_class(tokenizer).is_reasoning_end(i) for i in ids.values()] == [False, False, True]
    for end, starts_inside in (("<|assistant|>", False), ("<|assistant|><think>\n", True)):
        parser = parser_class(tokenizer)
        parser.adjust_initial_state_from_prompt(ids[end])
        got = parser.extract_reasoning_streaming("", "", "Let me check.</think>Hi", [], [], [])
        want = ("Let me check.", "Hi") if starts_inside else (None, "Let me check.</think>Hi")
        assert (got.reasoning, got.content) == want, end
