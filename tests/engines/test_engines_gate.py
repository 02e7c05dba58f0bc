"""What the engine adapters show a client of a parser's events (``sseguard.engines._gate``), with no
engine installed: calls held until the parser ends them, voided calls never sent, client indexes
without gaps, visible text exactly the parser's, under any chunking."""

from __future__ import annotations

import itertools
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from sseguard.core.toolcalls import ToolCallEnd, join_events, parser_for
from sseguard.engines._gate import CallPiece, ClientGate, Step, parse_whole
from support.toolcalls import DOCS, SOUP, pieces

PROPS = settings(max_examples=60, deadline=None)
CUTS = st.lists(st.integers(0, 3000), max_size=40)

TC, TCE = "<tool_call>", "</tool_call>"
PARIS = TC + '\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n' + TCE
BROKEN = TC + '\n{"name": "get_weather", "arguments": {"city": "Ro",}}\n' + TCE  # a trailing comma
ROME = TC + '\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n' + TCE


def ids() -> itertools.count[int]:
    return itertools.count()


def gate(family: str, stream: bool = False) -> ClientGate:
    counter = ids()
    return ClientGate(parser_for(family), stream=stream, new_id=lambda: f"id{next(counter)}")


def drive(r: ClientGate, chunks: list[str]) -> list[Step]:
    return [r.feed(c) for c in chunks] + [r.close()]


def joined(steps: list[Step]) -> tuple[str, str, dict[int, list[str | None]]]:
    """Content, reasoning, and per client index [id, name, arguments] as a client assembles them."""
    calls: dict[int, list[str | None]] = {}
    for step in steps:
        for p in step.calls:
            slot = calls.setdefault(p.index, [None, None, ""])
            if p.name is not None:
                assert slot[1] is None, "a call opened twice"
                slot[0], slot[1] = p.id, p.name
            slot[2] = f"{slot[2]}{p.arguments}"
    return ("".join(s.content for s in steps), "".join(s.reasoning for s in steps), calls)


def test_hold_sends_each_call_whole_when_it_ends_and_never_a_voided_one() -> None:
    r = gate("hermes")
    steps = drive(r, ["Sure.\n", PARIS[:20], PARIS[20:], "\n" + BROKEN, "\n" + ROME, " Done."])
    assert [s.calls for s in steps[:2]] == [[], []]  # nothing of a call before it ends
    assert [p for s in steps for p in s.calls] == [
        CallPiece(0, '{"city": "Paris"}', "get_weather", "id0"),
        CallPiece(1, '{"city": "Rome"}', "get_weather", "id1")]
    assert "".join(s.content for s in steps) == "Sure. Done."
    assert r.sent == [0, 1] and r.void == set() and r.valid_calls == 2
    assert [(str(e.kind), e.index) for e in r.errors] == [("bad_param_json", 1)]


def test_stream_sends_name_then_fragments_and_remembers_the_void_call() -> None:
    r = gate("hermes", stream=True)
    steps = drive(r, [PARIS, BROKEN])
    # the name and the fragments of one step travel as one piece
    assert steps[0].calls == [CallPiece(0, '{"city": "Paris"}', "get_weather", "id0")]
    content, _, calls = joined(steps)
    assert calls[0] == ["id0", "get_weather", '{"city": "Paris"}']
    assert calls[1][:2] == ["id1", "get_weather"]  # already out: a stream cannot take it back
    assert r.void == {1} and r.valid_calls == 1 and content == ""


def test_kimi_keeps_the_call_id_its_markup_wrote() -> None:
    text = ('<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:7'
            '<|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|>')
    step, _ = parse_whole(parser_for("kimi-k2"), text, lambda: "minted")
    assert step.calls == [CallPiece(0, '{"city": "Paris"}', "get_weather", "functions.get_weather:7")]


def test_harmony_analysis_is_reasoning_never_content() -> None:
    text = ("<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>final"
            "<|message|>It is sunny.<|return|>")
    step, _ = parse_whole(parser_for("harmony"), text, lambda: "x")
    assert (step.reasoning, step.content, step.calls) == ("Need the weather.", "It is sunny.", [])


def test_an_unterminated_call_at_the_end_is_not_sent_and_its_markup_not_shown() -> None:
    r = gate("hermes")
    steps = drive(r, ["Hi", TC + '\n{"name": "f", "arguments": {"a": '])
    assert joined(steps) == ("Hi", "", {})
    assert [str(e.kind) for e in r.errors] == ["unterminated"]


@PROPS
@given(st.data(), st.sampled_from(sorted(DOCS)), CUTS, st.booleans())
def test_any_chunking_gives_the_documents_text_and_calls(data: st.DataObject, family: str,
                                                         cuts: list[int], stream: bool) -> None:
    doc = data.draw(DOCS[family])
    content, reasoning, calls = joined(drive(gate(family, stream), pieces(doc.text, cuts)))
    assert content == doc.visible
    assert reasoning == doc.reasoning
    assert sorted(calls) == list(range(len(doc.calls)))
    assert [(c[1], json.loads(c[2] or "")) for c in calls.values()] == doc.calls
    if family not in ("kimi-k2", "kimi-k3"):  # Kimi's calls carry the id its markup wrote (K3: index=)
        assert [c[0] for c in calls.values()] == [f"id{i}" for i in range(len(doc.calls))]


@PROPS
@given(st.sampled_from(sorted(DOCS)), SOUP, CUTS)
def test_hold_sends_exactly_the_calls_the_parser_ended_and_its_text(family: str, text: str,
                                                                    cuts: list[int]) -> None:
    content, _, calls = joined(drive(gate(family), pieces(text, cuts)))
    parser = parser_for(family)
    events = join_events(parser.feed(text) + parser.close())
    ended = [(e.name, e.arguments) for e in events if isinstance(e, ToolCallEnd)]
    assert [(c[1], c[2]) for c in calls.values()] == ended
    assert content == "".join(e.text for e in events if type(e).__name__ == "Text")
