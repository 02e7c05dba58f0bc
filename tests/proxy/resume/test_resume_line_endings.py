"""``--resume`` reads frames by the SSE rules, whatever ends their lines: a stream (and its
continuation) with CR-only or CRLF line ends, split at every byte, heals into the same answer as one
with LF (the dialects once split on ``\\n\\n`` themselves: a CRLF continuation was never spliced and
the client's CRLF frames read as "not JSON", so the stream could not be continued at all).

Driven on the stream machine without sockets (``support.proxy_machine.drive``), for the chat dialect
(vLLM's ``continue_final_message``), Anthropic's prefill and OpenAI's background response read
again.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sseguard.core.contract import checker_for, protocol
from sseguard.core.policy import AGENTS
from sseguard.core.redact import DEFAULT
from sseguard.core.verdict import Api
from sseguard.proxy.machines.actions import AskContinuation
from sseguard.proxy.machines.stream import StreamMachine
from sseguard.proxy.resume.dialects import DIALECTS
from support.protocol_streams import Responses
from support.proxy_machine import (
    REQUESTS,
    chat_stream,
    client_text,
    continuation_for,
    drive,
    frames_of,
    machine_for,
    messages_stream,
    split,
)

WORDS = ["The", " sky", " is", " blue", " today", "."]
#: The answer, literally: what the client must show after the heal.
ANSWER = "The sky is blue today."
STREAMS = {"vllm": ("chat", chat_stream), "anthropic": ("messages", messages_stream)}
ENDINGS = {"cr": b"\r", "crlf": b"\r\n", "lf": b"\n"}


def _with(ending: bytes, body: bytes) -> bytes:
    return body.replace(b"\n", ending)


def _as_lf(body: bytes) -> bytes:
    """The client's body with every line end read as LF (it mixes the upstream's and the splice's)."""
    return body.replace(b"\r\n", b"\n").replace(b"\r", b"\n")


def _heal(resume: str, ending: bytes, cut_after: int, cuts: list[int]) -> tuple[bytes, int, str | None]:
    """The stream cut (a clean EOF) after ``cut_after`` bytes of its ``ending``-ended body, each
    read split at ``cuts``; the continuation in the same line ends. The client's body, the
    continuations asked, how its stream ended."""
    api, stream = STREAMS[resume]
    body = _with(ending, stream(WORDS))
    reads = split(body[:cut_after], cuts)

    def answer(ask: bytes) -> list[bytes]:
        return split(_with(ending, continuation_for(api, ask, WORDS, [2, 3])), cuts)

    run = drive(machine_for(api, resume=resume), reads, {}, continuation=answer)
    return bytes(run.body), run.continuations, run.ended


def _cut_points(resume: str, ending: bytes) -> list[int]:
    """Cuts inside the answer: after its third frame, and in the middle of its fourth."""
    stream = STREAMS[resume][1]
    body = _with(ending, stream(WORDS))
    blank = ending * 2
    third = body.index(blank, body.index(blank, body.index(blank) + 1) + 1) + len(blank)
    return [third, third + (body.index(blank, third) - third) // 2]


def _assert_healed(api: str, body: bytes, continuations: int, ended: str | None) -> None:
    """One continuation, a clean end, the whole answer in one block, and a stream the checker
    passes (one response id, one role, one finish: the splice's work, not only the text)."""
    assert (continuations, ended) == (1, "eof"), body
    assert client_text(api, _as_lf(body)) == (ANSWER, 1 if api == "messages" else 0)
    checker = checker_for(Api(api), REQUESTS[api])
    checker.feed(body)
    verdict = checker.close()
    assert AGENTS.failure(verdict) is None and verdict.findings == (), (verdict, body)


@pytest.mark.parametrize("ending", ["cr", "crlf"])
@pytest.mark.parametrize("resume", ["vllm", "anthropic"])
def test_a_cr_or_crlf_stream_cut_mid_answer_heals_into_the_whole_answer(resume: str,
                                                                         ending: str) -> None:
    api = STREAMS[resume][0]
    for cut in _cut_points(resume, ENDINGS[ending]):
        _assert_healed(api, *_heal(resume, ENDINGS[ending], cut, []))


@settings(max_examples=60, deadline=None)
@given(resume=st.sampled_from(["vllm", "anthropic"]), ending=st.sampled_from(["cr", "crlf", "lf"]),
       mid=st.booleans(), cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=12))
def test_every_line_ending_and_read_split_heals_into_the_same_answer(resume: str, ending: str,
                                                                     mid: bool,
                                                                     cuts: list[int]) -> None:
    api = STREAMS[resume][0]
    cut = _cut_points(resume, ENDINGS[ending])[mid]
    _assert_healed(api, *_heal(resume, ENDINGS[ending], cut, cuts))


def test_a_crlf_split_between_its_cr_and_lf_is_one_line_end() -> None:
    # Every read one byte: each CRLF arrives as a CR, then an LF in the next read.
    cut = _cut_points("vllm", b"\r\n")[0]
    _assert_healed("chat", *_heal("vllm", b"\r\n", cut, list(range(4000))))


#: A background response's stream as OpenAI numbers it (what ``--resume openai-background`` reads
#: again after the sequence number the client last got).
BACKGROUND = {"model": "m", "stream": True, "input": "hi", "background": True, "store": True}


def _stored() -> bytes:
    r = Responses(rid="resp_bg")
    r.ev("response.created", response=r.response("queued", background=True))
    r.ev("response.in_progress", response=r.response("in_progress", background=True))
    return r.message(0, WORDS).completed().body()


@pytest.mark.parametrize("ending", ["cr", "crlf"])
def test_a_cr_or_crlf_background_stream_read_again_heals_into_the_same_events(ending: str) -> None:

    lf = _stored()
    frames = [f + b"\n\n" for f in lf.split(b"\n\n") if f]
    cut = len(b"".join(frames[:4]))  # created, in_progress, the item and its part: then the cut

    def read_again(ask: AskContinuation) -> list[bytes]:
        assert ask.path is not None
        number = int(ask.path.rpartition("=")[2])
        rest = b"".join(f for f in frames
                        if json.loads(f.split(b"data: ", 1)[1])["sequence_number"] > number)
        return [_with(ENDINGS[ending], rest)]

    dialect = DIALECTS["openai-background"]
    proto = protocol(Api.RESPONSES)
    machine = StreamMachine(api=proto.api, wire=proto.relay, policy=AGENTS,
                            checker=checker_for(proto.api, BACKGROUND, keep_text=False),
                            frames=dialect.frames(), redactor=DEFAULT, request_obj=BACKGROUND,
                            resume=dialect.state(BACKGROUND, 2), continued_frames=dialect.frames)
    run = drive(machine, [_with(ENDINGS[ending], lf[:cut])], {}, read_again=read_again)
    assert (run.continuations, run.ended) == (1, "eof"), bytes(run.body)
    assert frames_of(_as_lf(bytes(run.body))) == frames_of(lf)
