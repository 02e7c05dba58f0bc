"""Thinking through vLLM's real chat server with the real chat template of each thinking family: the
template renders the tools (Qwen3, GLM, DeepSeek V4, MiniMax-M2 and Seed-OSS show the call format in
the system prompt), a first turn and a follow-up after a tool result (an earlier call and its
``</think>`` in the prompt), thinking on and off. Whether the answer starts inside reasoning is read
off what the generation prompt wrote last, so the thought reaches the client as reasoning, never a
character of it as content, with the think tags and markers as tokens of their own and as text.

Only the engine's ``generate()`` is replaced (``support.engines_vllm``). Needs vLLM 0.33 and the templates
(``.ci/engines`` provides both).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from sseguard.core.toolcalls import families
from support.engines import THOUGHT, WEATHER_TOOLS, call_markup, chat_templates, engine

engine("vllm")

from support.engines_model import build_model_dir  # noqa: E402
from support.engines_vllm import Server, chat  # noqa: E402

pytestmark = pytest.mark.timeout(900)

QUESTION = [{"role": "user", "content": "What is the weather in Paris?"}]
FOLLOW_UP = [*QUESTION,
             {"role": "assistant", "content": "", "reasoning_content": "I need the weather.",
              "tool_calls": [{"id": "functions.get_weather:0", "type": "function",
                              "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
             {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "Sunny, 22 C"}]
REPLY = "It is sunny in Paris, 22 C."


@dataclass(frozen=True)
class Template:
    """A thinking family's real template. ``on``/``off``: the request's ``chat_template_kwargs``
    for thinking on and off (``off`` None: the template cannot switch it off); ``opens``: its
    thinking generation prompt ends with ``<think>`` (else the model writes ``think`` itself);
    ``follow_up``: it renders a conversation with an earlier call."""

    family: str
    file: str
    on: dict[str, Any]
    off: dict[str, Any] | None
    opens: bool
    follow_up: bool = True
    think: tuple[str, str] = ("<think>", "</think>")


TEMPLATES = [
    Template("hermes", "Qwen-Qwen3-0.6B", {"enable_thinking": True}, {"enable_thinking": False}, False),
    Template("dsml-v32", "deepseek-ai-DeepSeek-V3.2", {"thinking": True}, {"thinking": False}, True),
    Template("dsml-v4", "deepseek-ai-DeepSeek-V4", {"thinking": True}, {"thinking": False}, True),
    Template("glm45", "GLM-4.6", {"enable_thinking": True}, {"enable_thinking": False}, False),
    Template("glm47", "GLM-4.7-Flash", {"enable_thinking": True}, {"enable_thinking": False}, True),
    # K2-Thinking's template does not render an earlier call in a sandbox (it calls list.append):
    # the conversation with one is K2-Instruct's, whose prompt ends the same way
    Template("kimi-k2", "Kimi-K2-Thinking", {}, None, False, follow_up=False),
    Template("kimi-k2", "moonshotai-Kimi-K2", {}, None, False),
    Template("minimax-m2", "MiniMax-M2", {}, None, True),
    Template("seed-oss", "ByteDance-Seed-OSS", {}, {"thinking_budget": 0}, False,
             think=("<seed:think>", "</seed:think>")),
]
TOKENIZERS = {"tags as tokens": True, "tags as text": False}

_servers: dict[tuple[str, bool], Server] = {}


async def server_for(tmp_path_factory: pytest.TempPathFactory, template: Template, tags: bool) -> Server:
    """vLLM's app serving ``template`` with the family's tool parser, and its reasoning parser where
    it has one (Seed-OSS's tool parser reads its reasoning itself)."""
    key = (template.file, tags)
    if key not in _servers:
        path = chat_templates() / f"{template.file}.jinja"
        model = build_model_dir(tmp_path_factory.mktemp(f"{template.file}-{tags}"), tags=tags,
                                template=path.read_text(encoding="utf-8"))
        name = f"sseguard-{template.family}"
        reasoning = name if families()[template.family].reasoning_exits else None
        server = Server(model, name, reasoning)
        await server.start()
        _servers[key] = server
    return _servers[key]


def answer(template: Template, thinking: bool, follow_up: bool) -> str:
    """What a model of the family writes: its thought (after the ``<think>`` the prompt wrote, or
    its own), then a call in the first turn or the reply after the tool result."""
    rest = REPLY if follow_up else "\n\n" + call_markup(template.family)
    if not thinking:
        return rest
    start, end = template.think
    return ("" if template.opens else start) + THOUGHT + end + rest


CASES = [(t, thinking, follow_up) for t in TEMPLATES for thinking in (True, False)
         for follow_up in (False, True) if (thinking or t.off is not None) and (t.follow_up or not follow_up)]


IDS = [f"{t.file}-{'thinking' if on else 'no thinking'}-{'follow-up' if f else 'first turn'}"
       for t, on, f in CASES]


@pytest.mark.parametrize(("template", "thinking", "follow_up"), CASES, ids=IDS)
async def test_the_thought_is_reasoning_and_not_one_character_of_it_content(
        tmp_path_factory: pytest.TempPathFactory, template: Template, thinking: bool,
        follow_up: bool) -> None:
    failures = []
    kwargs = template.on if thinking else template.off
    text = answer(template, thinking, follow_up)
    for tokenizer, tags in TOKENIZERS.items():
        server = await server_for(tmp_path_factory, template, tags)
        for stream, size in ((True, 1), (True, 16), (False, 16)):
            got = await chat(server, (text, size, "stop"), WEATHER_TOOLS, stream=stream,
                             extra={"messages": FOLLOW_UP if follow_up else QUESTION,
                                    "chat_template_kwargs": kwargs})
            calls = [(c[1], c[2]) for c in got["calls"]]
            # reasoning a tool parser reads itself (Seed-OSS) has no field in vLLM's whole answer:
            # dropped there, never content (docs/engines.md, limits)
            shown = thinking and (stream or families()[template.family].reasoning_exits != ())
            want = ((THOUGHT if shown else ""), (REPLY if follow_up else ""),
                    [] if follow_up else [("get_weather", '{"city": "Paris"}')])
            if (got["reasoning"], got["content"].strip(), calls) != want or THOUGHT[:8] in got["content"]:
                failures.append(f"{tokenizer}, {'streamed' if stream else 'whole'} in {size}: reasoning "
                                f"{got['reasoning']!r}, content {got['content']!r}, calls {calls!r}")
    assert not failures, "\n".join(failures)
