"""``auto``: the family is detected from the first marker and the stream parses as that family."""

from __future__ import annotations

from pathlib import Path

import pytest

from sseguard.core.toolcalls import Markup, Text, parser_for
from support.toolcalls import calls_of, check_invariants, errors_of, run, text_of

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "markup"
SAMPLES = {"dsml-v32.txt": "dsml-v32", "dsml-v4.txt": "dsml-v4", "dsml-v41.txt": "dsml-v41",
           "deepseek-v3.txt": "deepseek-v3", "deepseek-v31.txt": "deepseek-v31",
           "hermes.txt": "hermes", "qwen3-coder.txt": "qwen3-coder", "kimi-k2.txt": "kimi-k2",
           "harmony.txt": "harmony", "glm45.txt": "glm45", "glm47.txt": "glm47",
           "minimax-m2.txt": "minimax-m2"}


@pytest.mark.parametrize("sample,family", sorted(SAMPLES.items()))
def test_each_sample_is_detected_and_parsed_like_its_family(sample: str, family: str) -> None:
    text = (EXAMPLES / sample).read_text(encoding="utf-8")
    named = run(family, text)
    for size in (None, 1, 3):
        auto = run("auto", text, size=size)
        check_invariants(family, auto)
        assert auto.detected == family
        assert auto.joined == named.joined
    assert calls_of(named.events)


def test_text_before_any_marker_goes_out_at_once() -> None:
    p = parser_for("auto")
    assert p.feed("Hello there") == [Text("Hello there")]
    assert p.feed(", more.\n") == [Text(", more.")]  # the newline may be a separator
    assert getattr(p, "detected", None) is None


def test_the_family_waits_for_the_first_tag_then_sticks() -> None:
    p = parser_for("auto")
    assert p.feed("x\n<tool_call>\n") == [Text("x")]
    p.feed("<function=f>\n</function>\n</tool_call>")
    assert getattr(p, "detected", None) == "qwen3-coder"
    # another family's markup after that is that family's problem, not this one's: plain text
    assert p.feed("<｜tool▁sep｜>") == [Text("<｜tool▁sep｜>")]


def test_v3_and_v31_are_told_apart_by_the_call_header() -> None:
    v31_named_function = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>{}" \
                         "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
    result = run("auto", v31_named_function, size=1)
    assert result.detected == "deepseek-v31"
    assert calls_of(result.events) == [("function", {})]


def test_no_marker_at_all_is_just_text() -> None:
    result = run("auto", "plain answer\n\n")
    assert result.detected is None
    assert result.joined == [Text("plain answer\n\n")]


@pytest.mark.parametrize("cut,family", [("<｜DSML", "dsml-v4"), ("<｜tool▁ca", "deepseek-v3"),
                                        ("<tool_c", "hermes"), ("<paramet", "qwen3-coder"),
                                        ("<tool_call>\n", "hermes"),
                                        ("<|tool_calls_sect", "kimi-k2"), ("<|tool_call_beg", "kimi-k2"),
                                        ("<|chan", "harmony"), ("<|start|>assist", "harmony"),
                                        ("<arg_va", "glm45"), ("<minimax:tool", "minimax-m2"),
                                        ("<tool_call>get_weath", "glm45")])
def test_a_cut_marker_at_the_end_is_unterminated_in_the_family_it_resembles(cut: str,
                                                                          family: str) -> None:
    result = run("auto", "Answer.\n" + cut)
    assert result.detected == family
    assert errors_of(result.events) == [("unterminated", None)]
    assert text_of(result.events).startswith("Answer.")


def test_kimi_and_harmony_are_told_from_their_openers() -> None:
    kimi = run("auto", 'Sure.<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{}'
                       "<|tool_call_end|>", size=2)
    assert kimi.detected == "kimi-k2"
    assert calls_of(kimi.events) == [("f", {})]
    harmony = run("auto", "<|channel|>final<|message|>Hi<|return|>", size=2)
    assert harmony.detected == "harmony"
    assert text_of(harmony.events) == "Hi"


def test_leading_whitespace_waits_for_the_family_to_say_whether_it_frames_the_answer() -> None:
    # Kimi: whitespace at stream start is markup (docs/design/markup.md decision 2.2) ...
    result = run("auto", "\n\n<|tool_call_begin|>f:0<|tool_call_argument_begin|>{}<|tool_call_end|>")
    assert result.detected == "kimi-k2"
    assert result.joined[0] == Markup("\n\n")
    # ... for the older families it is text, as before
    assert text_of(run("auto", "  \n\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n"
                               "</tool_call>").events) == "  \n"
    # once text went out, a family chosen later sees no stream start
    result = run("auto", "Hi\n<|tool_call_begin|>f:0<|tool_call_argument_begin|>{}<|tool_call_end|>",
                 size=1)
    assert text_of(result.events) == "Hi\n"


def test_a_completion_opening_with_the_harmony_recipient_is_held_for_the_family() -> None:
    text = ' to=functions.f<|channel|>commentary json<|message|>{"a": 1}<|call|>'
    for size in (None, 1, 4):
        result = run("auto", text, size=size)
        assert result.detected == "harmony"
        assert calls_of(result.events) == [("f", {"a": 1})]
        assert text_of(result.events) == ""
    # text that only starts like one goes out as text once it cannot be one
    p = parser_for("auto")
    assert p.feed("to") == []
    assert p.feed("ken count") == [Text("token count")]
@pytest.mark.parametrize("text,family", [
    ('<tool_call>{"name": "f", "arguments": {}}</tool_call>', "hermes"),
    ('<tool_call>\n \t{"name": "f", "arguments": {}}\n</tool_call>', "hermes"),
    ("<tool_call>\n<function=f>\n</function>\n</tool_call>", "qwen3-coder"),
    ("<tool_call><function=f></function></tool_call>", "qwen3-coder"),
    ("<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n</tool_call>", "glm45"),
    ("<tool_call> f \n</tool_call>", "glm45"),
    ("<tool_call>f<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>", "glm47"),
    ("<tool_call>f</tool_call>", "glm47"),
    ("<tool_call><arg_key>a</arg_key><arg_value>1</arg_value></tool_call>", "glm47"),
    ("<tool_call>\n<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>", "glm45"),
    ('<minimax:tool_call>\n<invoke name="f">\n</invoke>\n</minimax:tool_call>', "minimax-m2"),
    ("stray <arg_key> tag", "glm45"),
])
def test_the_tool_call_collision_is_resolved_under_any_chunking(text: str, family: str) -> None:
    named = run(family, "Sure.\n" + text)
    for size in (None, 1, 2, 5):
        auto = run("auto", "Sure.\n" + text, size=size)
        check_invariants(family, auto)
        assert auto.detected == family
        assert auto.joined == named.joined


def test_glm45_and_glm47_differ_in_the_newline_before_the_call() -> None:
    glm45 = run("auto", "Sure.\n<tool_call>f\n</tool_call>", size=1)
    glm47 = run("auto", "Sure.\n<tool_call>f</tool_call>", size=1)
    assert text_of(glm45.events) == "Sure."
    assert text_of(glm47.events) == "Sure.\n"
    assert calls_of(glm45.events) == calls_of(glm47.events) == [("f", {})]


@pytest.mark.parametrize("family,call", [("glm45", "<tool_call>f\n</tool_call>"),
                                         ("glm47", "<tool_call>f</tool_call>"),
                                         ("minimax-m2", '<minimax:tool_call><invoke name="f">'
                                                        "</invoke></minimax:tool_call>")])
def test_whitespace_at_stream_start_waits_for_the_family_that_may_take_it_as_framing(
        family: str, call: str) -> None:
    for size in (None, 1, 3):
        framed = run("auto", " \n\n" + call + "\nok", size=size)
        assert framed.detected == family
        assert framed.joined == run(family, " \n\n" + call + "\nok").joined
        assert text_of(framed.events) == "\nok"
        # once text went out, the family's parser starts mid-stream: nothing left to frame
        spoke = run("auto", "\n\nHi." + call, size=size)
        assert text_of(spoke.events) == "\n\nHi."


def test_whitespace_alone_is_text_when_no_family_shows_up() -> None:
    assert run("auto", "\n \n", size=1).joined == [Text("\n \n")]


def test_an_opening_that_may_be_harmonys_header_lead_waits_then_goes_out_as_text() -> None:
    # A Harmony completion may open with ``to=R<|channel|>`` (its first header's lead): ``auto``
    # holds what may still become one and lets it out as text as soon as it cannot.
    parser = parser_for("auto")
    assert parser.feed("t") == [] and parser.feed("o") == []
    assert parser.feed("day") == [Text("today")]
    parser = parser_for("auto")
    assert parser.feed(" to=x") == [] and parser.feed(" is") == [Text(" to=x is")]
    parser = parser_for("auto")
    assert parser.feed("tx") == [Text("tx")]
    parser = parser_for("auto")
    assert parser.feed("t") == [] and parser.close() == [Text("t")]
