"""The stream machine, without sockets: every protocol's stream, split anywhere, broken anywhere.

A small driver in this file plays the sockets: it feeds the machine the upstream's bytes in any split,
a fault at any point (a cut, a reset, a stall, an upstream error event, a frame that is not JSON),
the client leaving and the stall timer firing in any order, and with ``--resume`` answers a
continuation the way the dialect's server would (continuing the text the continuation request
carries). The guarantees asserted (docs/design/guarantees.md guarantees 8 and 10):
the client never gets a silent bad ending; a healed stream's text is the fault-free answer, byte for
byte, in one block; nothing is forwarded twice (the client's text is always a prefix of the answer);
every attempt is recorded exactly once. Before the first byte, the attempts' machine
(``attempts.py``) is driven the same way — any failure of any attempt, any ``--retry``, the retry
budget spent or not — and hands a 2xx to the stream machine: the client gets the whole answer, the
relay's explicit error, or one error answer whose ``x-should-retry`` follows the header table.
"""

from __future__ import annotations

import json
import random
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from sseguard.core.contract import checker_for
from sseguard.core.verdict import Api, Ending
from sseguard.proxy.machines.actions import (
    CloseUpstream,
    EndBody,
    RecordVerdict,
    ShortenStall,
    Write,
)
from sseguard.proxy.machines.attempts import (
    Attempts,
    BadStart,
    ErrorAnswer,
    HttpError,
    RecordAttempt,
    RecordGone,
    RetryAfter,
    TimedOut,
    Unreachable,
)
from sseguard.proxy.machines.retry import RetryBudget
from sseguard.proxy.resume.dialects import DIALECTS
from support.proxy_machine import (
    BAD_JSON,
    ERROR_FRAMES,
    REQUESTS,
    STREAMS,
    Run,
    _sse,
    assert_honest,
    chat_stream,
    client_text,
    continuation_for,
    drive,
    frames_of,
    machine_for,
    split,
)

WORD = st.sampled_from(["Hello", " ", "world", "\n", "  ", "é", "你好", ".", " end", "\t"])
FAULTS = st.sampled_from(["none", "cut", "reset", "stall", "error_event", "bad_json"])


def _faulty(api: str, body: bytes, fault: str, at: int) -> tuple[bytes, dict[str, Any]]:
    """``body`` with ``fault`` at byte ``at`` (an inserted frame goes at the frame boundary before)."""
    at %= len(body) + 1
    if fault == "none":
        return body, {}
    if fault in ("error_event", "bad_json"):
        cut = body.rfind(b"\n\n", 0, at)
        cut = 0 if cut == -1 else cut + 2
        frame = ERROR_FRAMES[api] if fault == "error_event" else BAD_JSON
        return body[:cut] + frame + (b"" if fault == "error_event" else body[cut:]), {}
    end = {"cut": {}, "reset": {"broke": "upstream connection reset after 1 bytes"},
           "stall": {"stalled": True}}[fault]
    return body[:at], end


@settings(max_examples=150, deadline=None)
@given(api=st.sampled_from(["chat", "responses", "messages", "gemini"]),
       words=st.lists(WORD, min_size=1, max_size=8), fault=FAULTS, at=st.integers(0, 10**6),
       cuts=st.lists(st.integers(0, 10**6), max_size=12),
       on_bad_end=st.sampled_from(["error-event", "abort"]),
       gone=st.one_of(st.none(), st.integers(0, 12)))
def test_no_protocol_stream_ends_silently_badly_whatever_the_split_and_fault(
        api: str, words: list[str], fault: str, at: int, cuts: list[int], on_bad_end: str,
        gone: int | None) -> None:
    body, end = _faulty(api, STREAMS[api](words), fault, at)
    run = drive(machine_for(api, on_bad_end=on_bad_end), split(body, cuts), end, gone_at=gone)
    assert_honest(api, run, words)
    if fault == "none" and gone is None:
        assert run.ended == "eof" and client_text(api, bytes(run.body))[0] == "".join(words)


@settings(max_examples=150, deadline=None)
@given(resume=st.sampled_from(["vllm", "anthropic"]), words=st.lists(WORD, min_size=1, max_size=8),
       fault=st.sampled_from(["cut", "reset", "stall"]), at=st.integers(0, 10**6),
       cuts=st.lists(st.integers(0, 10**6), max_size=12),
       sizes=st.lists(st.integers(1, 6), max_size=6),
       answered=st.booleans(), resume_max=st.integers(0, 2))
# found by this test: a Messages answer cut after its stop_reason was continued into a second answer
@example(resume="anthropic", words=["\n"], fault="cut", at=304112, cuts=[], sizes=[], answered=True,
         resume_max=1)
def test_a_healed_stream_is_the_fault_free_answer_byte_for_byte(
        resume: str, words: list[str], fault: str, at: int, cuts: list[int], sizes: list[int],
        answered: bool, resume_max: int) -> None:
    api = str(DIALECTS[resume].api)
    body, end = _faulty(api, STREAMS[api](words), fault, at)
    reads = split(body, cuts)

    def answer(ask: bytes) -> list[bytes] | None:
        return split(continuation_for(api, ask, words, sizes), cuts) if answered else None

    run = drive(machine_for(api, resume=resume, resume_max=resume_max), reads, end,
                continuation=answer)
    assert_honest(api, run, words)  # a healed stream that ends well is the whole answer
    if run.continuations and not _ends_with_error(api, bytes(run.body)):
        text, blocks = client_text(api, bytes(run.body))
        assert run.ended == "eof" and text == "".join(words)
        assert blocks == (1 if api == "messages" else 0)


def _ends_with_error(api: str, body: bytes) -> bool:
    checker = checker_for(Api(api), REQUESTS[api])
    checker.feed(body)
    return checker.close().ending is Ending.ERROR_EVENT


# ── the shapes that broke before, literally ────────────────────────────────────────────────────

MSG_START = (b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":'
             b'"message","role":"assistant","content":[],"model":"m","stop_reason":null,'
             b'"usage":{"input_tokens":3,"output_tokens":1}}}\n\n')
BLOCK = b'event: content_block_start\ndata: {"type":"content_block_start","index":0,' \
        b'"content_block":{"type":"text","text":""}}\n\n'


def _text(index: int, text: str) -> bytes:
    return (b'event: content_block_delta\ndata: {"type":"content_block_delta","index":%d,'
            b'"delta":{"type":"text_delta","text":%s}}\n\n' % (index, json.dumps(text).encode()))


BLOCK_STOP = b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
CONTINUATION = (MSG_START.replace(b"msg_1", b"msg_2") + BLOCK + _text(0, " half.") + BLOCK_STOP
                + b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":'
                  b'"end_turn"},"usage":{"output_tokens":2}}\n\n'
                + b'event: message_stop\ndata: {"type":"message_stop"}\n\n')


def test_a_messages_text_block_closed_then_no_stop_reason_heals_into_one_block() -> None:
    """Claude Code printed only the second half of such a healed answer: never again."""
    broken = MSG_START + BLOCK + _text(0, "First") + BLOCK_STOP
    asked: list[dict[str, Any]] = []

    def answer(ask: bytes) -> list[bytes]:
        asked.append(json.loads(ask))
        return [CONTINUATION]

    run = drive(machine_for("messages", resume="anthropic"), [broken], {}, continuation=answer)
    assert asked[0]["messages"][-1] == {"role": "assistant", "content": "First"}
    got = frames_of(bytes(run.body))
    assert [f["type"] for f in got] == [
        "message_start", "content_block_start", "content_block_delta", "content_block_delta",
        "content_block_stop", "message_delta", "message_stop"]
    assert [f["delta"]["text"] for f in got if f["type"] == "content_block_delta"] == \
        ["First", " half."]
    assert {f["index"] for f in got if "index" in f} == {0}
    assert run.ended == "eof" and len(run.records) == 2 and run.records[0].attempt


def _chunk(delta: dict[str, Any], finish: str | None = None, cid: str = "c1") -> bytes:
    return _sse({"id": cid, "object": "chat.completion.chunk", "created": 1, "model": "m",
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def test_chat_done_after_cut_content_with_no_finish_heals_into_one_answer() -> None:
    broken = _chunk({"role": "assistant", "content": ""}) + _chunk({"content": "Half"}) \
        + b"data: [DONE]\n\n"
    rest = (_chunk({"role": "assistant", "content": ""}, cid="c2") + _chunk({"content": " done."},
                                                                           cid="c2")
            + _chunk({}, "stop", cid="c2") + b"data: [DONE]\n\n")
    asked: list[dict[str, Any]] = []

    def answer(ask: bytes) -> list[bytes]:
        asked.append(json.loads(ask))
        return [rest]

    run = drive(machine_for("chat", resume="vllm"), [broken], {}, continuation=answer)
    assert asked[0]["messages"][-1] == {"role": "assistant", "content": "Half"}
    assert asked[0]["continue_final_message"] is True
    assert bytes(run.body) == (
        b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":'
        b'[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n'
        b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":'
        b'[{"index":0,"delta":{"content":"Half"},"finish_reason":null}]}\n\n'
        b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":'
        b'[{"index":0,"delta":{"content":" done."},"finish_reason":null}]}\n\n'
        b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":'
        b'[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
        b"data: [DONE]\n\n")
    assert run.ended == "eof" and [r.attempt for r in run.records] == [True, False]


def test_a_chat_rest_that_begins_with_sent_is_taken_as_its_echo() -> None:
    """The one ambiguous chat continuation (see ``continuation_for``): the answer "haha!" cut after
    "ha"; the server's continuation text "ha!" is read as an echo of "ha" then "!". The client gets
    one well-formed answer, "ha!" — one copy of "ha" short of the upstream's — ended with [DONE]."""
    broken = _chunk({"role": "assistant", "content": ""}) + _chunk({"content": "ha"})
    rest = (_chunk({"role": "assistant", "content": ""}, cid="c2") + _chunk({"content": "ha!"},
                                                                           cid="c2")
            + _chunk({}, "stop", cid="c2") + b"data: [DONE]\n\n")
    run = drive(machine_for("chat", resume="vllm"), [broken],
                {"broke": "upstream connection reset after 200 bytes"},
                continuation=lambda ask: [rest])
    assert bytes(run.body) == (
        b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":'
        b'[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n'
        b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":'
        b'[{"index":0,"delta":{"content":"ha"},"finish_reason":null}]}\n\n'
        b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":'
        b'[{"index":0,"delta":{"content":"!"},"finish_reason":null}]}\n\n'
        b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":'
        b'[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
        b"data: [DONE]\n\n")
    assert run.ended == "eof" and [r.attempt for r in run.records] == [True, False]


def test_a_cut_right_after_a_whitespace_only_delta_heals_into_one_answer() -> None:
    broken = MSG_START + BLOCK + _text(0, "Two words") + _text(0, " ")
    rest = (MSG_START.replace(b"msg_1", b"msg_2") + BLOCK + _text(0, " more")
            + BLOCK_STOP
            + b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":'
              b'"end_turn"},"usage":{"output_tokens":2}}\n\n'
            + b'event: message_stop\ndata: {"type":"message_stop"}\n\n')
    asked: list[dict[str, Any]] = []

    def answer(ask: bytes) -> list[bytes]:
        asked.append(json.loads(ask))
        return [rest]

    run = drive(machine_for("messages", resume="anthropic"), [broken],
                {"broke": "upstream connection reset after 200 bytes"}, continuation=answer)
    # Anthropic refuses a prefill ending in whitespace: it is dropped, and its repeat trimmed.
    assert asked[0]["messages"][-1] == {"role": "assistant", "content": "Two words"}
    text, blocks = client_text("messages", bytes(run.body))
    assert text == "Two words more" and blocks == 1
    assert run.ended == "eof"


def test_a_stall_after_the_terminal_event_is_a_whole_answer_not_a_stall() -> None:
    body = chat_stream(["Hi"])
    machine = machine_for("chat")
    assert machine.receive(body) == body[: -len(b"data: [DONE]\n\n")]
    assert machine.wants == [ShortenStall(1.0)]
    actions = machine.upstream_ended(stalled=True)
    assert [type(a) for a in actions] == [CloseUpstream, Write, EndBody, RecordVerdict]
    assert actions[1] == Write(b"data: [DONE]\n\n")
    record = actions[-1]
    assert isinstance(record, RecordVerdict) and record.outcome.extra == {"lingered_after_done": True}


# ── before the first byte: the attempts' machine, then the stream machine ─────────────────────────

#: How an upstream attempt goes. The first-event failures (``empty``, ``error_first``, ``stall_first``,
#: ``reset_first``) are a 2xx whose beginning failed; relayed as they come when no retry can follow.
OUTCOMES = st.sampled_from(["ok", "unreachable", "timeout", "http_503", "http_429_wait_2",
                            "http_429_wait_60", "http_400", "empty", "error_first", "stall_first",
                            "reset_first"])
FIRST_FAILURES = {"empty": {}, "error_first": {}, "stall_first": {"stalled": True},
                  "reset_first": {"broke": "upstream connection reset after 0 bytes"}}


def _failure(outcome: str, api: str) -> Any:
    """The driver's report of a failed attempt, as ``guarded.py`` words it."""
    if outcome == "unreachable":
        return Unreachable("the upstream http://127.0.0.1:9/v1 is unreachable: refused")
    if outcome == "timeout":
        return TimedOut("the upstream sent no response within 600 s (--timeout)")
    if outcome.startswith("http_"):
        status, _, wait = outcome[5:].partition("_wait_")
        headers = {"retry-after": wait} if wait else {}
        return HttpError(int(status), headers, b'{"error": {"message": "no"}}')
    checker = checker_for(Api(api), REQUESTS[api], keep_text=False)
    if outcome == "error_first":
        checker.feed(ERROR_FRAMES[api])
    verdict = checker.close(stalled=outcome == "stall_first",
                            transport_error="reset" if outcome == "reset_first" else None)
    return BadStart(str(verdict.ending), verdict.error)


def _expected_header(outcome: str, *, retried: bool, retry: int, spent: bool) -> str:
    """The header table (docs/proxy.md), written out for the outcomes this test draws."""
    if outcome == "http_400" or retried:
        return "false"  # the request itself, or the proxy spent retries on it
    if outcome == "http_429_wait_60":
        return "true"  # asked to wait beyond --retry-max-wait: the client may, after it
    if outcome == "http_429_wait_2" and spent and retry:
        return "true"  # the budget refused, and the upstream asked to wait
    return "true" if retry == 0 else "false"


@settings(max_examples=200, deadline=None)
@given(api=st.sampled_from(["chat", "responses", "messages", "gemini"]),
       words=st.lists(WORD, min_size=1, max_size=6),
       outcomes=st.lists(OUTCOMES, min_size=1, max_size=5), retry=st.integers(0, 3),
       spent=st.booleans(), cuts=st.lists(st.integers(0, 10**6), max_size=6))
def test_retries_before_the_first_byte_end_in_one_whole_answer_or_one_marked_error(
        api: str, words: list[str], outcomes: list[str], retry: int, spent: bool,
        cuts: list[int]) -> None:
    """Any fault before the first byte, any ``--retry``, the budget spent or not: every attempt is
    recorded once (the client's stream once, each attempt it never saw once, linked), and the
    client gets the whole answer, the relay's explicit error, or an error answer whose
    ``x-should-retry`` (and ``retry-after``) follow the header table."""
    budget = RetryBudget(0.2)
    now = 0.5  # the budget's clock stands still: a window, not the waits, is under test here
    if spent:
        for _ in range(10):  # the floor: no retry fits now
            budget.spend(now)
    machine = Attempts(retry=retry, max_wait=10.0, budget=budget, rng=random.Random(0),
                       retry_off=retry == 0, healing=True)
    start = machine.begin(now)
    linked = own = 0
    answer: ErrorAnswer | None = None
    run: Run | None = None
    made = 0
    while True:
        made += 1
        assert start.number == made and start.heal_attempts == made - 1
        assert start.last == (made > retry or spent)
        outcome = outcomes[min(made - 1, len(outcomes) - 1)]
        if outcome == "ok" or (outcome in FIRST_FAILURES and start.last):
            # A 2xx relayed: the stream machine takes it from here (as it comes when last).
            body = STREAMS[api](words) if outcome == "ok" else (
                ERROR_FRAMES[api] if outcome == "error_first" else b"")
            run = drive(machine_for(api), split(body, cuts), FIRST_FAILURES.get(outcome, {}))
            own += 1
            machine.own_recorded()
            break
        retried_before = False
        for action in machine.failed(_failure(outcome, api), now=now, wall=1e9):
            if isinstance(action, RecordAttempt):
                linked += action.linked
                own += not action.linked
            elif isinstance(action, RetryAfter):
                assert not start.last and 0 <= action.seconds <= 10.0
                retried_before = True
            else:
                assert isinstance(action, ErrorAnswer)
                answer = action
        if answer is not None:
            break
        assert retried_before
        start = machine.waited(now)
    assert machine.client_left() == []  # the stream's record exists: nothing more to write
    assert own == 1 and linked == made - 1  # every attempt recorded once
    assert made <= retry + 1 and (not spent or made == 1)
    if run is not None:
        assert_honest(api, run, words)
        if outcomes[made - 1 if made <= len(outcomes) else -1] == "ok":
            assert run.ended == "eof" and client_text(api, bytes(run.body))[0] == "".join(words)
        else:
            assert run.ended in ("eof", "reset") and client_text(api, bytes(run.body))[0] == ""
        return
    assert answer is not None
    outcome = outcomes[min(made - 1, len(outcomes) - 1)]
    header = _expected_header(outcome, retried=made > 1, retry=retry, spent=spent)
    wait = outcome.partition("_wait_")[2]
    assert dict(answer.headers) == ({"x-should-retry": "true", "retry-after": wait}
                                    if header == "true" and wait
                                    else {"x-should-retry": header})
    assert answer.as_is == outcome.startswith("http_")
    assert answer.status == (504 if outcome == "timeout" else 502 if not answer.as_is
                             else int(outcome[5:8]))


def test_a_client_gone_during_a_backoff_gets_its_record_written_once() -> None:
    machine = Attempts(retry=2, max_wait=10.0, budget=RetryBudget(0.2), rng=random.Random(0),
                       retry_off=False, healing=True)
    machine.begin(0.0)
    actions = machine.failed(HttpError(503, {}), now=0.0, wall=0.0)
    assert actions[0] == RecordAttempt(linked=True) and isinstance(actions[1], RetryAfter)
    assert machine.client_left() == [RecordGone("retry", 1, 0)]
    assert machine.client_left() == []
