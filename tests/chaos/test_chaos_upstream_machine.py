"""The fault machine of ``chaos --upstream``, alone: scripted upstream bodies of the four protocols in,
the broken stream out, judged by the real strict checkers. Where the fault strikes (after the target
content delta, or before the finish of a shorter answer, never inside a tool call), what the
garbled span holds, and that any chunking of the upstream's bytes gives the same output."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sseguard.chaos import ChaosConfig, Pacing
from sseguard.chaos.config import FaultOptions
from sseguard.chaos.faults import Decision, Fault, ServerDialect
from sseguard.chaos.frames import End
from sseguard.chaos.upstream import Pause, Send, Stop, UpstreamFaults
from sseguard.chaos.upstream_garble import Garbler
from sseguard.core.contract import checker_for
from sseguard.core.verdict import Api, Ending
from support.protocol_streams import messages_text, responses_text
from support.streams import DONE, chunk, frame, text_stream

WORDS = ["Alpha", " beta", " gamma", " delta", " epsilon", " zeta"]
WHOLE = "Alpha beta gamma delta epsilon zeta"
CHAT_REQ: dict[str, Any] = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "x"}]}
GEMINI_REQ: dict[str, Any] = {"contents": [{"role": "user", "parts": [{"text": "x"}]}]}
# With ``tokens = 4``, ``at = 0.5`` strikes after content delta 1 + int(0.5 × 4) = 3.
CONFIG = ChaosConfig(pacing=Pacing(tokens=4))


def _gemini(words: list[str]) -> bytes:
    body = b"".join(b"data: " + json.dumps({"candidates": [{"content": {
        "parts": [{"text": w}], "role": "model"}, "index": 0}]}).encode() + b"\r\n\r\n" for w in words)
    return body + b"data: " + json.dumps({"candidates": [{"content": {"parts": [{"text": ""}],
                                                                       "role": "model"},
                                                           "finishReason": "STOP", "index": 0}],
                                          "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 6,
                                                            "totalTokenCount": 7}}).encode() + \
        b"\r\n\r\n"


BODIES: dict[Api, tuple[bytes, dict[str, Any] | None]] = {
    Api.CHAT: (text_stream(WORDS), CHAT_REQ),
    Api.RESPONSES: (responses_text(WORDS), {"model": "m", "stream": True, "input": "x"}),
    Api.MESSAGES: (messages_text(WORDS), {"model": "m", "stream": True, "max_tokens": 9,
                                          "messages": [{"role": "user", "content": "x"}]}),
    Api.GEMINI: (_gemini(WORDS), GEMINI_REQ),
}


def _run(api: Api, fault: Fault | None, *, at: float = 0.5, config: ChaosConfig = CONFIG,
         sizes: list[int] | None = None, garbler: Garbler | None = None,
         body: bytes | None = None) -> tuple[bytes, list[Any]]:
    data, req = BODIES[api]
    data = data if body is None else body
    machine = UpstreamFaults(api, Decision(fault, at=at), config, req, garbler=garbler)
    steps: list[Any] = []
    pos, i = 0, 0
    while pos < len(data):
        step = (sizes[i % len(sizes)] if sizes else len(data)) or 1
        steps += machine.feed(data[pos:pos + step])
        pos, i = pos + step, i + 1
        if machine.stopped:
            break
    steps += machine.close()
    out = b"".join(s.data for s in steps if isinstance(s, Send))
    return out, steps


def _verdict(api: Api, out: bytes) -> Any:
    checker = checker_for(api, BODIES[api][1])
    checker.feed(out)
    return checker.close()


def _text(api: Api, verdict: Any) -> str:
    message = verdict.message
    if api is Api.CHAT:
        return str(message["choices"][0]["message"]["content"] or "")
    if api is Api.RESPONSES:
        return "".join(p["text"] for item in message.get("output", []) for p in item.get("content", []))
    if api is Api.MESSAGES:
        return "".join(b.get("text", "") for b in message.get("content", []))
    return "".join(p.get("text", "") for c in message.get("candidates", [])
                   for p in c["content"]["parts"])


@pytest.mark.parametrize("api", list(BODIES))
def test_a_healthy_stream_passes_byte_for_byte(api: Api) -> None:
    out, steps = _run(api, None)
    assert out == BODIES[api][0]
    assert steps[-1] == Stop(End.EOF)


@pytest.mark.parametrize("api", list(BODIES))
@pytest.mark.parametrize("fault", [Fault.TRUNCATED, Fault.CUT_MID_FRAME, Fault.ERROR_EVENT])
def test_a_cut_strikes_after_the_target_delta(api: Api, fault: Fault) -> None:
    out, steps = _run(api, fault)
    verdict = _verdict(api, out)
    expected = {Fault.TRUNCATED: Ending.TRUNCATED, Fault.CUT_MID_FRAME: Ending.CUT_MID_FRAME,
                Fault.ERROR_EVENT: Ending.ERROR_EVENT}[fault]
    assert verdict.ending is expected
    assert steps[-1] == Stop(End.EOF)
    if fault is not Fault.ERROR_EVENT:
        assert _text(api, verdict) == "Alpha beta gamma"


@pytest.mark.parametrize("api", list(BODIES))
def test_a_shorter_answer_is_cut_before_its_finish(api: Api) -> None:
    # at 0.99 with tokens 40 targets delta 40, which a six-word answer never reaches: the cut falls
    # before the finish, after all the text.
    out, _ = _run(api, Fault.TRUNCATED, at=0.99, config=ChaosConfig(pacing=Pacing(tokens=40)))
    verdict = _verdict(api, out)
    assert verdict.ending is Ending.TRUNCATED
    assert _text(api, verdict) == WHOLE


@pytest.mark.parametrize("api", list(BODIES))
def test_transport_error_resets_after_content(api: Api) -> None:
    out, steps = _run(api, Fault.TRANSPORT_ERROR)
    assert steps[-1] == Stop(End.ABORT)
    assert _text(api, _verdict(api, out)) == "Alpha beta gamma"


@pytest.mark.parametrize("api", list(BODIES))
def test_a_stall_pauses_then_finishes_or_hangs(api: Api) -> None:
    config = ChaosConfig(pacing=Pacing(tokens=4), options=FaultOptions(stall_ms=2500.0))
    out, steps = _run(api, Fault.STALLED, config=config)
    assert [type(s).__name__ for s in steps] == ["Send", "Pause", "Send", "Stop"]
    assert steps[1] == Pause(2.5)
    assert out == BODIES[api][0]
    hang = ChaosConfig(pacing=Pacing(tokens=4), options=FaultOptions(stall_then="hang"))
    out, steps = _run(api, Fault.STALLED, config=hang)
    assert steps[-1] == Stop(End.HANG)
    assert _text(api, _verdict(api, out)) == "Alpha beta gamma"


@pytest.mark.parametrize(("api", "ending"), [(Api.CHAT, Ending.NO_FINISH),
                                             (Api.RESPONSES, Ending.NO_FINISH),
                                             (Api.MESSAGES, Ending.NO_FINISH)])
def test_no_finish(api: Api, ending: Ending) -> None:
    out, _ = _run(api, Fault.NO_FINISH)
    verdict = _verdict(api, out)
    assert verdict.ending is ending
    assert _text(api, verdict) == WHOLE


@pytest.mark.parametrize("api", [Api.CHAT, Api.MESSAGES])
def test_no_done(api: Api) -> None:
    out, _ = _run(api, Fault.NO_DONE)
    assert _verdict(api, out).ending is Ending.NO_DONE


def test_a_tool_call_is_never_split() -> None:
    body = chunk({"role": "assistant", "content": ""}) + chunk({"content": "Sure"}) + chunk(
        {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                         "function": {"name": "get_weather", "arguments": ""}}]})
    body += b"".join(chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
                     for piece in ['{"loc', 'ation"', ': "Oslo"}'])
    body += chunk({}, "tool_calls") + DONE
    out, _ = _run(Api.CHAT, Fault.TRUNCATED, at=0.0, body=body,
                  config=ChaosConfig(pacing=Pacing(tokens=1)))
    # The target (delta 1, "Sure") is reached before the call: the cut falls right after it.
    assert _verdict(Api.CHAT, out).ending is Ending.TRUNCATED
    assert b"get_weather" not in out
    out, _ = _run(Api.CHAT, Fault.TRUNCATED, at=0.5, body=body,
                  config=ChaosConfig(pacing=Pacing(tokens=4)))
    verdict = _verdict(Api.CHAT, out)
    assert verdict.ending is Ending.TRUNCATED and not verdict.findings
    assert verdict.message["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] == \
        '{"location": "Oslo"}'


def test_chat_dialects() -> None:
    usage = frame({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [],
                   "usage": {"prompt_tokens": 1, "completion_tokens": 6, "total_tokens": 7}})
    body = text_stream(WORDS, done=False) + usage + DONE
    config = ChaosConfig(dialects=frozenset({ServerDialect.NO_FINISH_REASON,
                                             ServerDialect.USAGE_CHOICES_NULL}))
    out, _ = _run(Api.CHAT, None, body=body, config=config)
    assert b'"choices":null' in out and b'"finish_reason":"stop"' not in out
    assert _verdict(Api.CHAT, out).ending is Ending.NO_FINISH
    out, _ = _run(Api.CHAT, None, body=body,
                  config=ChaosConfig(dialects=frozenset({ServerDialect.EMPTY_FINISH_REASON})))
    assert out.count(b'"finish_reason":""') == 7  # the role chunk and the six words
    out, _ = _run(Api.CHAT, None, body=body, config=ChaosConfig(dialects=frozenset({ServerDialect.NO_DONE})))
    assert not out.endswith(DONE) and _verdict(Api.CHAT, out).ending is Ending.NO_DONE


def test_responses_trailing_done() -> None:
    out, _ = _run(Api.RESPONSES, None,
                  config=ChaosConfig(dialects=frozenset({ServerDialect.TRAILING_DONE})))
    assert out == BODIES[Api.RESPONSES][0] + DONE
    assert _verdict(Api.RESPONSES, out).ending is Ending.COMPLETE


def test_garbler_overwrites_one_span_position_by_position() -> None:
    donor = Garbler(1, after=6, span=10, donor="0123456789ABCDEF")
    assert donor.piece(WHOLE, 0) == "Alpha 0123456789 delta epsilon zeta"
    # Deltas give what the whole text gives, wherever they are split.
    pieces = [WHOLE[:4], WHOLE[4:9], WHOLE[9:17], WHOLE[17:]]
    starts = [0, 4, 9, 17]
    assert "".join(donor.piece(p, s) for p, s in zip(pieces, starts, strict=True)) == \
        donor.piece(WHOLE, 0)
    scrambled = Garbler(1, after=6, span=10).piece(WHOLE, 0)
    assert scrambled[:6] == "Alpha " and scrambled[16:] == WHOLE[16:]
    assert scrambled[6:16] != WHOLE[6:16] and scrambled[10] == " "  # letters moved, spaces kept


@pytest.mark.parametrize("api", list(BODIES))
def test_garbled_answer_is_a_complete_stream_with_its_span_replaced(api: Api) -> None:
    garbler = Garbler(3, after=6, span=10, donor="0123456789")
    out, _ = _run(api, Fault.GARBLED, garbler=garbler)
    verdict = _verdict(api, out)
    # A complete stream, no finding (Responses' done events agree with the deltas): only comparing
    # answers can see it.
    assert verdict.ending is Ending.COMPLETE and not verdict.findings
    assert _text(api, verdict) == "Alpha 0123456789 delta epsilon zeta"


@settings(max_examples=60, deadline=None)
@given(api=st.sampled_from(list(BODIES)),
       fault=st.sampled_from([None, Fault.TRUNCATED, Fault.CUT_MID_FRAME, Fault.ERROR_EVENT,
                              Fault.NO_FINISH, Fault.GARBLED, Fault.TRANSPORT_ERROR]),
       at=st.floats(min_value=0.0, max_value=0.999),
       sizes=st.lists(st.integers(min_value=1, max_value=64), min_size=1, max_size=8))
def test_any_chunking_gives_the_same_stream(api: Api, fault: Fault | None, at: float,
                                            sizes: list[int]) -> None:
    if fault is Fault.NO_FINISH and api is Api.GEMINI:
        fault = None
    whole, whole_steps = _run(api, fault, at=at, garbler=Garbler(5, after=3, span=7))
    split, split_steps = _run(api, fault, at=at, sizes=sizes, garbler=Garbler(5, after=3, span=7))
    assert split == whole
    assert split_steps[-1] == whole_steps[-1]
