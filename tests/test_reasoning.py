"""``ThinkSplitter``: reasoning apart from the answer, under any chunking, with implicit ends."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sseguard.core.errors import UsageError
from sseguard.core.reasoning import AnswerText, Reasoning, ThinkSplitter
from sseguard.core.toolcalls import join_events, parser_for
from sseguard.core.toolcalls.events import Markup, MarkupError, Text, ToolCallEnd

CALL = ('\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="f">\n</｜DSML｜invoke>\n'
        '</｜DSML｜function_calls>')


def split(text: str, sizes: list[int] | None = None, starts_in_reasoning: bool = False,
          family: str | None = None) -> tuple[str, str]:
    s = ThinkSplitter(starts_in_reasoning, family=family)
    events: list = []
    pos = 0
    for size in sizes or [len(text) or 1]:
        events += s.feed(text[pos:pos + size])
        pos += size
    events += s.feed(text[pos:]) + s.close()
    reasoning = "".join(e.text for e in events if isinstance(e, Reasoning))
    answer = "".join(e.text for e in events if isinstance(e, AnswerText))
    return reasoning, answer


def test_think_block_at_the_start_is_reasoning() -> None:
    assert split("<think>\nhmm\n</think>\n\nThe answer.") == ("\nhmm\n", "\n\nThe answer.")


def test_a_stream_may_start_inside_reasoning() -> None:
    assert split("hmm</think>answer", starts_in_reasoning=True) == ("hmm", "answer")


def test_without_think_everything_is_answer_and_a_later_think_is_text() -> None:
    assert split("answer <think>x</think>") == ("", "answer <think>x</think>")


def test_a_tool_call_block_before_the_closer_ends_reasoning_and_is_parsed() -> None:
    reasoning, answer = split("I should call f." + CALL + "</think>", starts_in_reasoning=True)
    assert reasoning == "I should call f.\n\n"
    p = parser_for("dsml-v32")
    events = p.feed(answer) + p.close()
    assert [e.name for e in events if isinstance(e, ToolCallEnd)] == ["f"]
    # the stray </think> after the block is the answer's text
    assert "".join(e.text for e in events if isinstance(e, Text)) == "</think>"


def test_family_narrows_the_openers_that_end_reasoning() -> None:
    text = "think about <tool_call> tags</think>ok"
    assert split(text, starts_in_reasoning=True, family="dsml-v4") == (
        "think about <tool_call> tags", "ok")
    assert split(text, starts_in_reasoning=True)[0] == "think about "


def test_a_cut_opener_at_the_end_goes_to_the_answer_a_cut_closer_stays_reasoning() -> None:
    assert split("hmm <｜DSML｜func", starts_in_reasoning=True) == ("hmm ", "<｜DSML｜func")
    assert split("hmm </thi", starts_in_reasoning=True) == ("hmm </thi", "")
    assert split("<thi") == ("", "<thi")


def test_misuse_raises() -> None:
    s = ThinkSplitter()
    s.close()
    with pytest.raises(UsageError):
        s.feed("x")
    with pytest.raises(UsageError):
        ThinkSplitter(family="nope")


PIECES = st.sampled_from(["<think>", "</think>", "<", "</", "think>", "\n", "a", "é", "<｜DSML｜",
                          "<tool_call>", "<｜tool▁calls▁begin｜>", "</thi", " "])


@settings(max_examples=200, deadline=None)
@given(text=st.lists(PIECES, max_size=20).map("".join), start=st.booleans(),
       sizes=st.lists(st.integers(1, 6), max_size=30))
def test_any_chunking_gives_the_same_split_and_loses_nothing(text: str, start: bool,
                                                             sizes: list[int]) -> None:
    whole = split(text, starts_in_reasoning=start)
    assert split(text, sizes, starts_in_reasoning=start) == whole
    assert split(text, [1] * len(text), starts_in_reasoning=start) == whole
    reasoning, answer = whole
    opened = "" if start or not text.startswith("<think>") else "<think>"
    closed = "</think>" if (opened or start) and text[len(opened) + len(reasoning):].startswith(
        "</think>") else ""
    assert opened + reasoning + closed + answer == text  # every character accounted for
    assert "</think>" not in reasoning


@pytest.mark.parametrize("family", ["kimi-k2", None])
@pytest.mark.parametrize("opener", ["<|tool_calls_section_begin|>", "<|tool_call_section_begin|>",
                                    "<|tool_call_begin|>"])
def test_a_kimi_call_opener_ends_reasoning(family: str | None, opener: str) -> None:
    text = f"<think>I need the weather.{opener}rest"
    for sizes in (None, [1] * len(text)):
        assert split(text, sizes, family=family) == ("I need the weather.", f"{opener}rest")


def test_harmony_markers_do_not_end_think_reasoning() -> None:
    # Harmony's reasoning is its analysis channel, read by its parser, not by the splitter
    text = "hmm <|channel|>final<|message|>x</think>answer"
    assert split(text, starts_in_reasoning=True, family="harmony") == (
        "hmm <|channel|>final<|message|>x", "answer")
# docs/design/markup.md §2 families: a call opened inside reasoning ends it (decision 2.10) ------------------

MINIMAX_CALL = ('\n<minimax:tool_call>\n<invoke name="f">\n<parameter name="a">1</parameter>\n'
                "</invoke>\n</minimax:tool_call>")


def test_a_minimax_block_inside_think_ends_reasoning_and_is_not_swallowed() -> None:
    text = "<think>\nI need f." + MINIMAX_CALL + "\n</think>\n\n"
    for family in ("minimax-m2", None):
        for sizes in (None, [1] * len(text)):
            reasoning, answer = split(text, sizes, family=family)
            assert reasoning == "\nI need f.\n"
            assert answer == MINIMAX_CALL[1:] + "\n</think>\n\n"
    p = parser_for("minimax-m2")
    events = p.feed(answer) + p.close()
    assert [(e.name, e.arguments) for e in events if isinstance(e, ToolCallEnd)] == [
        ("f", '{"a": "1"}')]
    # the </think> written after the block is a stray reserved marker (decision 2.1), not text
    assert [(e.kind, e.raw) for e in events if isinstance(e, MarkupError)] == [
        ("malformed_tag", "</think>")]
    assert "".join(e.text for e in events if isinstance(e, Text)) == "\n\n\n"  # text around it


@pytest.mark.parametrize("family", ["glm45", "glm47", None])
def test_a_glm_call_inside_reasoning_ends_it(family: str | None) -> None:
    text = "hmm<tool_call>get_weather<arg_key>city</arg_key><arg_value>x</arg_value></tool_call>"
    assert split(text, starts_in_reasoning=True, family=family) == ("hmm", text[3:])


@pytest.mark.parametrize("family", ["glm45", "minimax-m2"])
def test_the_answer_framing_after_think_is_markup_for_the_family_parser(family: str) -> None:
    # decision 2.2: the splitter passes the answer on verbatim; the family's parser takes the
    # whitespace that frames it as markup, not text
    reasoning, answer = split("<think>\nhmm\n</think>\n\nThe answer.\n\nMore.", family=family)
    assert (reasoning, answer) == ("\nhmm\n", "\n\nThe answer.\n\nMore.")
    p = parser_for(family)
    assert join_events(p.feed(answer) + p.close()) == [Markup("\n\n"),
                                                       Text("The answer.\n\nMore.")]


SEED_QUOTING = ("I could write <seed:tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n"
                "</function>\n</seed:tool_call> but not yet.</seed:think>"
                "<seed:tool_call>\n<function=f>\n<parameter=a>\n2\n</parameter>\n</function>\n"
                "</seed:tool_call>")


@pytest.mark.parametrize("size", [1, 2, 3, 7, 10_000])
def test_seed_reasoning_quoting_a_call_then_its_closer_gives_the_real_call_only(size: int) -> None:
    # issue 50: the prompt opened <seed:think>; the family's own closer ends the reasoning (before,
    # only </think> did, so everything stayed reasoning and no call came out)
    splitter = ThinkSplitter(starts_in_reasoning=True, family="seed-oss")
    parser = parser_for("seed-oss")
    thought: list[str] = []
    events = []
    pieces = [SEED_QUOTING[i:i + size] for i in range(0, len(SEED_QUOTING), size)]
    for piece in [*(ev for p in pieces for ev in splitter.feed(p)), *splitter.close()]:
        if isinstance(piece, AnswerText):
            events.extend(parser.feed(piece.text))
        else:
            thought.append(piece.text)
    events.extend(parser.close())
    calls = [ev for ev in join_events(events) if isinstance(ev, ToolCallEnd)]
    assert [(c.name, c.arguments) for c in calls] == [("f", '{"a": "2"}')]
    assert "".join(thought) == ("I could write <seed:tool_call>\n<function=f>\n<parameter=a>\n1\n"
                                "</parameter>\n</function>\n</seed:tool_call> but not yet.")
    assert not [ev for ev in events if isinstance(ev, MarkupError | Text)]
    assert splitter.ended_by == "</seed:think>"


@pytest.mark.parametrize("family,text,thought,answer", [
    ("mistral", "weighing it[/THINK]Paris.", "weighing it", "Paris."),
    ("k2-horizon", "hmm</ifm|think_fast>Yes.", "hmm", "Yes."),
    ("gemma4", "plan<channel|>Done.", "plan", "Done."),
])
def test_a_family_s_own_reasoning_closer_ends_reasoning_the_prompt_opened(
        family: str, text: str, thought: str, answer: str) -> None:
    splitter = ThinkSplitter(starts_in_reasoning=True, family=family)
    pieces = [*splitter.feed(text), *splitter.close()]
    assert "".join(p.text for p in pieces if isinstance(p, Reasoning)) == thought
    assert "".join(p.text for p in pieces if isinstance(p, AnswerText)) == answer
