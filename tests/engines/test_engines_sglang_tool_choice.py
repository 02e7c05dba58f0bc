"""Every request shape through SGLang's chat serving steps with ``--tool-call-parser
sseguard-<family>``, for every family: a request that allows no call (``tool_choice: "none"``, or no
tools) whose answer is call markup anyway gets that answer whole as content, streamed and not;
``auto`` parses it; ``required`` and a named tool are parsed from the family's own markup where its
detector offers SGLang a call frame to constrain to (Hermes, Kimi K2), from SGLang's JSON array where
it does not (Qwen3-Coder, DSML).

Needs SGLang 0.5.23 (``.ci/engines``); skipped without it.
"""

from __future__ import annotations

from typing import Any

import pytest

from sseguard.core.toolcalls import families
from support.engines import WEATHER_TOOLS, call_markup, engine

engine("sglang.srt.entrypoints.openai.serving_chat")

from support.engines_sglang import serving, stream, whole  # noqa: E402

FAMILIES = list(families())
NAMED = {"type": "function", "function": {"name": "get_weather"}}
JSON_ARRAY = '[{"name": "get_weather", "parameters": {"city": "Paris"}}]'
pytestmark = pytest.mark.timeout(900)


@pytest.mark.parametrize("family", FAMILIES)
async def test_an_answer_that_allows_no_call_reaches_the_client_whole_as_content(family: str) -> None:
    chat = serving(f"sseguard-{family}")
    markup = call_markup(family)
    failures = []
    for text in (markup, "Sure, checking.\n" + markup):
        for shape, tools, choice in (("tool_choice none", WEATHER_TOOLS, "none"), ("no tools", None, None)):
            for size in (1, 16):
                got = await stream(chat, text, size, tools, tool_choice=choice)
                if (got["content"], got["calls"], got["finish"]) != (text, [], "stop"):
                    failures.append(f"{shape}, streamed in {size}: {got['content']!r} {got['calls']!r}")
            got = whole(chat, text, tools, choice)
            if (got["content"], got["calls"]) != (text, []):
                failures.append(f"{shape}, whole: {got['content']!r} {got['calls']!r}")
    got = await stream(chat, markup, 4, WEATHER_TOOLS, tool_choice="auto")
    if [(c[1], c[2]) for c in got["calls"]] != [("get_weather", '{"city": "Paris"}')]:
        failures.append(f"auto: calls {got['calls']!r}, content {got['content']!r}")
    assert not failures, "\n".join(failures[:8])


@pytest.mark.parametrize("choice", ["required", NAMED], ids=["required", "named"])
@pytest.mark.parametrize(("family", "native"), [("hermes", True), ("kimi-k2", True),
                                                ("qwen3-coder", False), ("dsml-v32", False)])
async def test_required_and_named_calls_reach_the_client(family: str, native: bool, choice: Any) -> None:
    chat = serving(f"sseguard-{family}")
    text = call_markup(family) if native else JSON_ARRAY
    for size in (1, 16):
        got = await stream(chat, text, size, WEATHER_TOOLS, tool_choice=choice)
        assert [(c[1], c[2]) for c in got["calls"]] == [("get_weather", '{"city": "Paris"}')], got
        assert got["content"] == "", got
