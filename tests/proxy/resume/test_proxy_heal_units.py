"""The pure parts of healing: when to retry and how long to wait, the splice of a continuation into
the client's stream, tool calls held until the answer's end, old records, and the flags."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from sseguard.cli import app
from sseguard.core.record import decode_record
from sseguard.core.sse import SSEEvent
from sseguard.proxy.machines.retry import backoff, retry_after, retryable_status, wait_before_retry
from sseguard.proxy.resume.chat import ChatResume, ChatSplice, HeldToolCalls

runner = CliRunner()
NOW = 1_800_000_000.0  # 2027-01-15 08:00:00 UTC


@pytest.mark.parametrize("value, seconds", [
    ("1", 1.0), ("2.5", 2.5), ("-3", 0.0), ("Fri, 15 Jan 2027 08:00:30 GMT", 30.0),
    ("Fri, 15 Jan 2027 07:59:00 GMT", 0.0), ("soon", None),
])
def test_retry_after_in_seconds_or_an_http_date(value: str, seconds: float | None) -> None:
    assert retry_after({"Retry-After": value}, NOW) == seconds


def test_no_retry_after_is_none() -> None:
    assert retry_after({}, NOW) is None


@pytest.mark.parametrize("status, body, expected", [
    (429, b"", True), (500, b"", True), (503, b"", True), (529, b"", True),
    (400, b"", False), (404, b"", False), (400, b'{"error":{"type":"overloaded_error"}}', True),
])
def test_which_statuses_are_retried(status: int, body: bytes, expected: bool) -> None:
    assert retryable_status(status, body) is expected


@given(st.integers(0, 30), st.floats(0.01, 60), st.integers(0, 2**32))
def test_backoff_is_jittered_within_half_and_all_of_its_capped_step(attempt: int, cap: float,
                                                                    seed: int) -> None:
    step = min(cap, 0.25 * 2.0 ** attempt)
    wait = backoff(attempt, cap, random.Random(seed))
    assert step / 2 <= wait <= step <= cap


def test_a_retry_after_is_waited_as_asked_within_the_cap_and_refused_beyond_it() -> None:
    rng = random.Random(1)
    assert wait_before_retry(0, 3.0, 10.0, rng) == 3.0
    assert wait_before_retry(0, 10.5, 10.0, rng) is None


def _frame(obj: object) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _delta(content: str | None = None, *, role: bool = False, finish: str | None = None,
           id_: str = "up-2") -> bytes:
    delta: dict[str, str] = {"role": "assistant"} if role else {}
    if content is not None:
        delta["content"] = content
    return _frame({"id": id_, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def _content(body: bytes) -> tuple[str, set[str]]:
    text, ids = "", set()
    for frame in body.split(b"\n\n"):
        if frame.startswith(b"data: {"):
            obj = json.loads(frame[6:])
            ids.add(obj["id"])
            text += "".join(c["delta"].get("content") or "" for c in obj["choices"])
    return text, ids


# The rest never starts like SENT ("Hello, "): a continuation that does is taken as repeating it.
@given(st.lists(st.text("abc xyzé\"\n", min_size=1, max_size=5), min_size=1, max_size=8),
       st.integers(0, 2), st.data())
def test_a_spliced_continuation_gives_sent_plus_the_rest_whatever_the_chunking(
        rest: list[str], repeat: int, data: st.DataObject) -> None:
    sent = "Hello, "
    pieces = ([sent] if repeat == 1 else ["Hel", "lo, "] if repeat == 2 else []) + rest
    body = _delta("", role=True) + b"".join(_delta(p) for p in pieces) + _delta(
        finish="stop") + b"data: [DONE]\n\n"
    cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=6)))
    splice = ChatSplice(sent, "client-1")
    out = b"".join(splice.feed(body[a:b]) for a, b in zip([0, *cuts], [*cuts, len(body)],
                                                          strict=True)) + splice.close()
    text, ids = _content(out)
    # An exact repetition of SENT, in one piece or several, is removed.
    assert text == "".join(rest)
    assert ids == {"client-1"} and out.endswith(b"data: [DONE]\n\n")
    assert b'"role"' not in out and splice.failure is None


def test_a_continuation_that_repeats_part_of_sent_and_stops_does_not_line_up() -> None:
    splice = ChatSplice("Hello", "c1")
    splice.feed(_delta("Hel") + b"data: [DONE]\n\n")
    splice.close()
    assert splice.failure is not None


def test_the_continuation_request_carries_the_answer_so_far() -> None:
    resume = ChatResume({"model": "m", "stream": True, "messages": [{"role": "user", "content": "q"}]},
                        2)
    resume.note(_delta("", role=True, id_="c1") + _delta("Hel", id_="c1") + b": ping\n\n")
    resume.note(_delta("lo", id_="c1"))
    body = json.loads(resume.body())
    assert body == {"model": "m", "stream": True, "continue_final_message": True,
                    "add_generation_prompt": False,
                    "messages": [{"role": "user", "content": "q"},
                                 {"role": "assistant", "content": "Hello"}]}
    assert resume.client_id == "c1" and resume.why_not() is None
    resume.splice()
    resume.splice()
    assert resume.why_not() == "--resume-max continuations spent"


def test_tool_call_deltas_are_held_until_the_choice_finishes() -> None:
    def event(raw: bytes) -> SSEEvent:
        return SSEEvent(raw[6:-2].decode(), None, None, None, raw)

    call = _frame({"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "function": {"name": "f", "arguments": "{"}}]}, "finish_reason": None}]})
    more = _frame({"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "function": {"arguments": "}"}}]}, "finish_reason": None}]})
    end = _delta(finish="tool_calls", id_="c")
    held = HeldToolCalls()
    text = _delta("hi", id_="c")
    assert held.transform(event(text)) == text
    assert held.transform(event(call)) == b""
    assert held.transform(event(more)) == b""
    assert held.transform(event(end)) == call + more + end
    assert held.transform(event(text)) == text


def test_records_written_before_healing_read_with_its_fields_empty() -> None:
    old = decode_record(b'{"schema":1,"source":"proxy","ending":"complete","index":3}')
    assert (old.heal_of, old.healed, old.heal_attempts, old.heal_tokens) == (None, None, 0, 0)


UP = ["--upstream", "http://127.0.0.1:9/v1"]


@pytest.mark.parametrize("args, message", [
    ([*UP, "--retry", "-1"], "--retry -1: use a whole number from 0 to 20"),
    ([*UP, "--retry-max-wait", "0"], "--retry-max-wait must be a number of seconds above 0"),
    ([*UP, "--resume", "gemini"],
     "--resume 'gemini': use off, or one or more of vllm, deepseek, anthropic"),
    ([*UP, "--resume", "vllm,deepseek"],
     "--resume 'vllm,deepseek': vllm and deepseek both continue chat streams"),
    ([*UP, "--resume", "deepseek", "--resume-base-url", "ftp://api.deepseek.com/beta"],
     "--resume-base-url 'ftp://api.deepseek.com/beta' must be an http:// or https:// base URL"),
    ([*UP, "--resume", "deepseek", "--resume-base-url", "not a url"],
     "--resume-base-url 'not a url' must be an http:// or https:// base URL"),
    ([*UP, "--resume", "deepseek", "--resume-base-url", "https://api.deepseek.com/beta?x=1"],
     "--resume-base-url 'https://api.deepseek.com/beta?x=1' must not carry a query"),
    ([*UP, "--resume", "deepseek", "--resume-base-url", "https://k:s3cr3t@api.deepseek.com/beta"],
     "--resume-base-url must not carry credentials"),
    ([*UP, "--resume", "vllm", "--resume-base-url", "https://api.deepseek.com/beta"],
     "--resume-base-url is used only by --resume deepseek"),
    ([*UP, "--resume-base-url", "https://api.deepseek.com/beta"],
     "--resume-base-url is used only by --resume deepseek"),
    ([*UP, "--resume", "vllm", "--repair-markup", "auto"],
     "--resume cannot be combined with --repair-markup"),
    ([*UP, "--resume-max", "99"], "--resume-max 99: use a whole number from 0 to 20"),
])
def test_bad_healing_flags_exit_2_with_one_line(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["proxy", *args], env={"COLUMNS": "250"})
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert "s3cr3t" not in result.output


def test_a_chat_continuation_asks_for_what_is_left_of_the_token_budget() -> None:
    """vLLM counts a continuation's ``max_tokens`` from the continued text on (measured on vLLM 0.32:
    continued with the client's own budget, answers that stop at it uncut came back longer), so the
    continuation asks for the client's budget less the deltas it already got."""
    from sseguard.proxy.resume.chat import ChatResume

    frames = b"".join(
        b'data: {"id":"c1","choices":[{"index":0,"delta":{"content":' + word + b'}}]}\n\n'
        for word in (b'""', b'"The"', b'" tide"', b'" is"'))
    for key in ("max_tokens", "max_completion_tokens"):
        state = ChatResume({"model": "m", "stream": True, key: 32,
                            "messages": [{"role": "user", "content": "hi"}]}, 2)
        state.note(frames)
        body = json.loads(state.continuation().body)
        assert body[key] == 29
        assert body["messages"][-1] == {"role": "assistant", "content": "The tide is"}
    unbounded = ChatResume({"model": "m", "messages": [{"role": "user", "content": "hi"}]}, 2)
    unbounded.note(frames)
    assert "max_tokens" not in json.loads(unbounded.continuation().body)
    # A budget the deltas used up: the answer stopped at its limit, nothing is left to continue.
    spent = ChatResume({"model": "m", "max_tokens": 3,
                        "messages": [{"role": "user", "content": "hi"}]}, 2)
    spent.note(frames)
    assert spent.why_not() == ("the answer used its whole token budget (max_tokens 3): nothing is "
                               "left to continue")
