"""``--resume openai-background``: a Responses stream that broke after ``response.created`` is read
again from the stored response (``GET responses/{id}?stream=true&starting_after=N``) and spliced in,
sequence numbers continuing, nothing generated twice.

First the stream machine alone (no sockets): whatever the split and the cut points, a healed stream's
events are exactly the fault-free stream's. Then end to end, the real openai SDK through the proxy
against chaos, which keeps background responses and faults their readings too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from typing import Any

import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sseguard.chaos import ChaosConfig, Fault, FaultOptions, Pacing, run_chaos
from sseguard.core.contract import checker_for, protocol
from sseguard.core.errors import ConfigError
from sseguard.core.policy import AGENTS
from sseguard.core.redact import DEFAULT
from sseguard.core.verdict import Api, Ending
from sseguard.proxy import run_proxy
from sseguard.proxy.machines.actions import AskContinuation
from sseguard.proxy.machines.stream import StreamMachine
from sseguard.proxy.resume.background import BackgroundResume, upstream_request
from sseguard.proxy.resume.dialects import DIALECTS
from support.protocol_streams import Responses
from support.proxy import proxy_config
from support.proxy_heal import Step, heal_proxy
from support.proxy_machine import drive, frames_of, split

REQUEST = {"model": "m", "stream": True, "input": "hi", "background": True, "store": True}


def stored(words: list[str], rid: str = "resp_bg") -> bytes:
    """A background response's whole stream, as OpenAI numbers it (created says background)."""
    r = Responses(rid=rid)
    r.ev("response.created", response=r.response("queued", background=True))
    r.ev("response.in_progress", response=r.response("in_progress", background=True))
    return r.message(0, words).completed().body()


def machine(resume_max: int = 2) -> StreamMachine:
    dialect = DIALECTS["openai-background"]
    proto = protocol(Api.RESPONSES)
    return StreamMachine(
        api=proto.api, wire=proto.relay, policy=AGENTS,
        checker=checker_for(proto.api, REQUEST, keep_text=False), frames=dialect.frames(),
        redactor=DEFAULT, request_obj=REQUEST, resume=dialect.state(REQUEST, resume_max),
        continued_frames=dialect.frames)


def after(body: bytes, number: int) -> bytes:
    """The stored stream read again after sequence ``number``: its frames numbered above it."""
    frames = [f + b"\n\n" for f in body.split(b"\n\n") if f]
    return b"".join(f for f in frames if json.loads(f.split(b"data: ", 1)[1])["sequence_number"]
                    > number)


def ends_with_error(body: bytes) -> bool:
    checker = checker_for(Api.RESPONSES, REQUEST)
    checker.feed(body)
    return checker.close().ending is Ending.ERROR_EVENT


WORD = st.sampled_from(["Hello", " ", "world", "\n", "é", "你好", ".", " end"])


@settings(max_examples=120, deadline=None)
@given(words=st.lists(WORD, min_size=1, max_size=6), fault=st.sampled_from(["cut", "reset", "stall"]),
       at=st.integers(0, 10**6), again=st.one_of(st.none(), st.integers(0, 10**6)),
       cuts=st.lists(st.integers(0, 10**6), max_size=10), resume_max=st.integers(0, 2))
def test_a_background_stream_cut_anywhere_heals_into_exactly_the_fault_free_events(
        words: list[str], fault: str, at: int, again: int | None, cuts: list[int],
        resume_max: int) -> None:
    whole = stored(words)
    at %= len(whole) + 1
    end = {"cut": {}, "reset": {"broke": "upstream connection reset after 1 bytes"},
           "stall": {"stalled": True}}[fault]
    asked: list[AskContinuation] = []

    def read_again(ask: AskContinuation) -> list[bytes]:
        asked.append(ask)
        number = int(ask.path.rpartition("=")[2]) if ask.path else -1
        rest = after(whole, number)
        if again is not None and len(asked) == 1:
            rest = rest[:again % (len(rest) + 1)]  # the reading breaks too (a clean cut)
        return split(rest, cuts)

    run = drive(machine(resume_max), split(whole[:at], cuts), end, read_again=read_again)
    got = frames_of(bytes(run.body))
    want = frames_of(whole)
    numbers = [f["sequence_number"] for f in got]
    assert numbers == list(range(len(numbers)))  # strictly increasing by one, nothing twice
    if run.ended == "eof" and not ends_with_error(bytes(run.body)):
        assert got == want
    else:
        assert got[:-1] == want[:len(got) - 1] or got == want[:len(got)]
    for ask in asked:
        assert ask.method == "GET" and ask.body == b""
        assert ask.path is not None and ask.path.startswith(
            "responses/resp_bg?stream=true&starting_after=")
    assert len(run.records) - 1 == run.continuations


def test_the_continuation_reads_the_stored_response_after_the_last_number_the_client_got() -> None:
    whole = stored(["Hello", " world"])
    cut = whole.index(b'"delta": " world"')  # inside the second delta's frame
    asked: list[AskContinuation] = []

    def read_again(ask: AskContinuation) -> list[bytes]:
        asked.append(ask)
        return [after(whole, 4)]

    run = drive(machine(), [whole[:cut]], {"broke": "upstream connection reset after 9 bytes"},
                read_again=read_again)
    assert asked == [AskContinuation(b"", method="GET",
                                     path="responses/resp_bg?stream=true&starting_after=4")]
    assert frames_of(bytes(run.body)) == frames_of(whole)
    assert run.ended == "eof" and run.records[0].attempt and not run.records[1].attempt


def test_a_break_before_response_created_reached_the_client_is_not_read_again() -> None:
    asked: list[AskContinuation] = []
    run = drive(machine(), [stored(["Hi"])[:20]], {"stalled": True},
                read_again=lambda ask: asked.append(ask))
    assert asked == [] and run.ended == "eof"
    assert frames_of(bytes(run.body))[-1]["type"] == "error"


def test_a_reading_that_does_not_go_on_at_the_next_number_ends_in_an_error_not_a_gap() -> None:
    whole = stored(["Hello", " world"])
    cut = whole.index(b'"delta": " world"')

    run = drive(machine(), [whole[:cut]], {}, read_again=lambda ask: [after(whole, 5)])
    got = frames_of(bytes(run.body))
    assert [f["sequence_number"] for f in got[:-1]] == [0, 1, 2, 3, 4]
    assert got[-1]["type"] == "error" and got[-1]["code"] == "resume_mismatch"


def test_a_request_that_declined_storage_is_left_alone_unless_the_proxy_may_store_it() -> None:
    assert upstream_request({"model": "m", "input": "hi", "stream": True}, False) == \
        {"model": "m", "input": "hi", "stream": True, "background": True, "store": True}
    assert upstream_request({"model": "m", "input": "hi", "store": False}, False) is None
    assert upstream_request({"model": "m", "input": "hi", "store": False}, True) == \
        {"model": "m", "input": "hi", "store": True, "background": True}


# ── end to end: the openai SDK through the proxy against chaos ─────────────────────────────────

PACING = Pacing(ttft_ms=0, inter_token_ms=0, tokens=16, reasoning_tokens=0)
INPUT = "Tell me about the weather in Lisbon, at some length."


async def _events(base: str, **extra: Any) -> list[Any]:
    client = openai.AsyncOpenAI(base_url=base, api_key="sk-test", max_retries=0, timeout=30)
    async with client:
        stream = await client.responses.create(model="chaos-1", input=INPUT, stream=True, **extra)
        return [event async for event in stream]


def _text(events: list[Any]) -> str:
    return "".join(e.delta for e in events if e.type == "response.output_text.delta")


async def test_a_cut_responses_stream_is_read_again_and_the_sdk_gets_the_whole_answer() -> None:
    async with run_chaos(ChaosConfig(seed=5, pacing=PACING)) as up, \
            run_proxy(proxy_config(up.url, resume="openai-background")) as px:
        want = await _events(up.url)
        got = await _events(px.url, extra_headers={"x-sseguard-inject": str(Fault.TRUNCATED)})
        retrievals = up.stats.retrievals
        metrics = await _metrics(px.url)
    assert retrievals == 1
    assert [e.sequence_number for e in got] == list(range(len(got)))
    assert got[-1].type == "response.completed"
    assert _text(got) == _text(want) != ""
    assert got[0].response.background is True
    assert ('sseguard_proxy_healed_streams_total{api="responses",dialect="openai-background",'
            'how="resume",result="passed"} 1.0') in metrics


async def _metrics(url: str) -> str:
    import aiohttp

    async with aiohttp.ClientSession() as session, \
            session.get(url.removesuffix("/v1") + "/metrics") as resp:
        return await resp.text()


async def test_a_client_that_asked_store_false_gets_its_request_forwarded_unchanged() -> None:
    body = {"model": "m", "input": "hi", "stream": True, "store": False}
    refused = Step(b'{"error":{"message":"no","type":"invalid_request_error"}}', status=400)
    async with heal_proxy([refused], resume="openai-background") as (up, px, _, _r):
        client = openai.AsyncOpenAI(base_url=px.url, api_key="sk-test", max_retries=0)
        with contextlib.suppress(openai.BadRequestError):
            await client.responses.create(**body)  # type: ignore[call-overload]
    assert json.loads(up.bodies[0]) == body


async def test_with_resume_store_ok_a_store_false_request_is_stored_and_healed() -> None:
    async with run_chaos(ChaosConfig(seed=7, pacing=PACING)) as up, \
            run_proxy(proxy_config(up.url, resume="openai-background",
                                   resume_store_ok=True)) as px:
        want = await _events(up.url)
        got = await _events(px.url, store=False,
                            extra_headers={"x-sseguard-inject": str(Fault.CUT_MID_FRAME)})
    assert [e.sequence_number for e in got] == list(range(len(got)))
    assert _text(got) == _text(want) and got[-1].type == "response.completed"


async def test_chaos_responses_streams_heal_to_the_fault_free_answer_for_the_openai_sdk() -> None:
    """The must-show at test scale: faults on the first request and on every reading."""
    faults = {Fault.TRUNCATED: 0.2, Fault.CUT_MID_FRAME: 0.1, Fault.TRANSPORT_ERROR: 0.05}
    inputs = [f"what is the weather in city {i}?" for i in range(40)]
    async with run_chaos(ChaosConfig(seed=3, pacing=PACING, faults=faults)) as bad, \
            run_chaos(ChaosConfig(seed=3, pacing=PACING)) as good, \
            run_proxy(proxy_config(bad.url, resume="openai-background", resume_max=20,
                                   retry=20)) as px:
        px.state.sleep = _no_wait

        async def answer(base: str, text: str) -> tuple[str, list[int], str]:
            client = openai.AsyncOpenAI(base_url=base, api_key="sk-test", max_retries=0, timeout=30)
            async with client:
                stream = await client.responses.create(model="chaos-1", input=text, stream=True)
                events = [event async for event in stream]
            return _text(events), [e.sequence_number for e in events], events[-1].type

        got = await asyncio.gather(*(answer(px.url, t) for t in inputs))
        want = await asyncio.gather(*(answer(good.url, t) for t in inputs))
        retrievals = bad.stats.retrievals
    assert [(text, end) for text, _, end in got] == [(text, end) for text, _, end in want]
    assert all(numbers == list(range(len(numbers))) for _, numbers, _ in got)
    assert retrievals > 0


async def _no_wait(seconds: float) -> None:
    return None


def test_resume_store_ok_without_the_background_dialect_is_a_one_line_error() -> None:
    with pytest.raises(ConfigError) as caught:
        proxy_config("http://127.0.0.1:9/v1", resume="vllm,anthropic", resume_store_ok=True)
    assert str(caught.value) == "--resume-store-ok is used only by --resume openai-background"
    config = proxy_config("http://127.0.0.1:9/v1", resume="vllm,anthropic,openai-background",
                          resume_store_ok=True)
    assert config.resume == "vllm,anthropic,openai-background" and config.resume_store_ok


def test_the_cli_takes_resume_store_ok() -> None:
    from typer.testing import CliRunner

    from sseguard.cli import app

    result = CliRunner().invoke(app, ["proxy", "--upstream", "http://127.0.0.1:9/v1", "--store", "none",
                                      "--resume", "anthropic", "--resume-store-ok"])
    assert result.exit_code == 2
    assert "--resume-store-ok is used only by --resume openai-background" in result.output


def test_a_reading_framed_with_crlf_is_spliced_frame_by_frame() -> None:
    whole = stored(["Hello", " world"])
    cut = whole.index(b'"delta": " world"')
    run = drive(machine(), [whole[:cut]], {},
                read_again=lambda ask: [after(whole, 2).replace(b"\n", b"\r\n")])
    assert frames_of(bytes(run.body)) == frames_of(whole)
    assert run.ended == "eof"


# ── an abandoned background response is cancelled ──────────────────────────────────────────────

def test_an_abandoned_stream_asks_to_cancel_its_stored_response_once() -> None:
    resume = BackgroundResume(REQUEST, 2)
    assert resume.abandoned() is None  # no id reached the client
    resume.note(stored(["a", "b"], rid="resp_x/1").split(b"\n\n", 1)[0] + b"\n\n")
    assert resume.abandoned() == AskContinuation(
        b"", method="POST", path="responses/resp_x%2F1/cancel")
    assert resume.abandoned() is None


def test_the_machine_asks_the_cancel_with_the_record_of_a_stream_the_client_left() -> None:
    whole = stored(["a", "b", "c"], rid="resp_gone")
    frames = [f + b"\n\n" for f in whole.split(b"\n\n") if f]
    left = drive(machine(), frames, {}, gone_at=3)  # created, in_progress, item added: then gone
    assert left.ended == "gone" and len(left.records) == 1
    assert left.records[0].cancel == AskContinuation(b"", method="POST",
                                                     path="responses/resp_gone/cancel")
    whole_run = drive(machine(), frames, {})
    assert whole_run.ended == "eof" and [r.cancel for r in whole_run.records] == [None]


async def _until(predicate: Callable[[], bool]) -> None:
    """Wait (bounded by the test's timeout) for the proxy's detached cancel task to land."""
    while not predicate():
        await asyncio.sleep(0.01)


async def test_a_client_that_leaves_mid_answer_gets_its_background_response_cancelled() -> None:
    options = FaultOptions(stall_ms=600_000, stall_then="hang")
    async with run_chaos(ChaosConfig(seed=5, pacing=PACING, options=options)) as up, \
            run_proxy(proxy_config(up.url, resume="openai-background")) as px:
        client = openai.AsyncOpenAI(base_url=px.url, api_key="sk-test", max_retries=0, timeout=30)
        stream = await client.responses.create(
            model="chaos-1", input=INPUT, stream=True,
            extra_headers={"x-sseguard-inject": str(Fault.STALLED)})
        seen = []
        async for event in stream:  # chaos stalls half-way: the client leaves after a delta
            seen.append(event)
            if event.type == "response.output_text.delta":
                break
        await stream.close()
        await _until(lambda: up.stats.cancels == 1)
        stored_response = await openai.AsyncOpenAI(
            base_url=up.url, api_key="sk-test").responses.retrieve(seen[0].response.id)
        await client.close()
    assert stored_response.status == "cancelled"
    assert up.stats.cancels == 1 and up.stats.retrievals == 1  # the read above, no resume


async def test_a_stream_the_proxy_gives_up_on_gets_its_background_response_cancelled() -> None:
    faults = {Fault.TRUNCATED: 1.0}  # the answer and every reading of it are cut
    async with run_chaos(ChaosConfig(seed=5, pacing=PACING, faults=faults)) as up, \
            run_proxy(proxy_config(up.url, resume="openai-background", resume_max=1)) as px:
        with pytest.raises(openai.APIError):
            await _events(px.url)
        await _until(lambda: up.stats.cancels == 1)
    assert up.stats.retrievals == 1 and up.stats.cancels == 1


async def test_a_whole_or_healed_background_stream_is_not_cancelled() -> None:
    async with run_chaos(ChaosConfig(seed=5, pacing=PACING)) as up, \
            run_proxy(proxy_config(up.url, resume="openai-background")) as px:
        whole = await _events(px.url)
        healed = await _events(px.url, extra_headers={"x-sseguard-inject": str(Fault.TRUNCATED)})
        metrics = await _metrics(px.url)  # after both records: a cancel would have been sent
    assert whole[-1].type == healed[-1].type == "response.completed"
    assert up.stats.retrievals == 1 and up.stats.cancels == 0
    assert 'sseguard_proxy_streams_total{api="responses",ending="complete"} 2.0' in metrics
