"""The forced answers of the side-by-side, checked without an engine: each family's text, as
written out in ``support.real_forcing``, holds exactly the case's calls, text and reasoning when our parser
reads it whole. A failure through the real server is then the server path's, not the table's.
Runs in the main venv (no vLLM needed)."""

from __future__ import annotations

import json

import pytest

from sseguard.core.reasoning import AnswerText, ThinkSplitter
from sseguard.core.toolcalls import Reasoning, Text, ToolCallEnd, parser_for
from support.real_forcing import FAMILIES, TOOLS, Case, Family

CASES = [pytest.param(fam, case, id=f"{name}-{case.name}")
         for name, fam in FAMILIES.items() for case in fam.cases()]


@pytest.mark.parametrize(("family", "case"), CASES)
def test_forced_answer_holds_the_case(family: Family, case: Case) -> None:
    parser = parser_for(family.name, TOOLS)
    text = family.answer(case)
    events = []
    reasoning = ""
    if family.think and family.ours_reasoning:
        splitter = ThinkSplitter(family.prompt_opens(case), family=family.name)
        for ev in splitter.feed(text) + splitter.close():
            if isinstance(ev, AnswerText):
                events += parser.feed(ev.text)
            else:
                reasoning += ev.text
        events += parser.close()
    else:
        events = parser.feed(text) + parser.close()
    calls = [(ev.name, json.loads(ev.arguments)) for ev in events if isinstance(ev, ToolCallEnd)]
    reasoning += "".join(ev.text for ev in events if isinstance(ev, Reasoning))
    assert calls == list(case.calls)
    assert "".join(ev.text for ev in events if isinstance(ev, Text)).strip() == case.text
    assert reasoning.strip() == (case.thinking if family.think else "")


def test_forced_answers_are_the_formats_as_models_write_them() -> None:
    one = next(c for c in FAMILIES["hermes"].cases() if c.name == "one_call")
    assert FAMILIES["hermes"].answer(one) == (
        '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Paris", "days": 2}}\n</tool_call>')
    think = next(c for c in FAMILIES["dsml-v4"].cases() if c.name == "thinking_first")
    assert FAMILIES["dsml-v4"].answer(think) == (  # DeepSeek's prompt opened reasoning: no <think>
        "The user wants the weather in Paris.</think><｜DSML｜tool_calls>\n"
        '<｜DSML｜invoke name="get_weather">\n'
        '<｜DSML｜parameter name="location" string="true">Paris</｜DSML｜parameter>\n'
        '<｜DSML｜parameter name="days" string="false">2</｜DSML｜parameter>\n'
        "</｜DSML｜invoke>\n</｜DSML｜tool_calls>")
