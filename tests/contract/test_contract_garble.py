"""Corruption the markup does not show: the garbled-text signals, and the cache facts of each protocol."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from sseguard.core.contract import checker_for
from sseguard.core.contract.garble import GarbleScanner
from sseguard.core.contract.usage import UsageFacts, cache_share
from sseguard.core.policy import STRICT, Policy
from sseguard.core.record import record_from_verdict
from sseguard.core.verdict import Ending, FindingKind, Verdict

BODIES = Path(__file__).parents[2] / "examples" / "bodies"


def check(api: str, body: bytes, size: int | None = None) -> Verdict:
    checker = checker_for(api)
    step = size or len(body) or 1
    for i in range(0, len(body), step):
        checker.feed(body[i:i + step])
    return checker.close()


def scan(deltas: list[tuple[int, str, str]], *, shared: bool = True) -> list[tuple[str, int, str]]:
    found: list[tuple[str, int, str]] = []
    scanner = GarbleScanner(lambda kind, detail, index, where: found.append((str(kind), index, where)),
                            shared_index=shared)
    for index, where, text in deltas:
        scanner.scan(index, where, text)
    scanner.close()
    return found


# ── the four signals ───────────────────────────────────────────────────────────────────────────────

def test_invalid_utf8_in_the_body_is_invalid_text() -> None:
    verdict = check("chat", (BODIES / "invalid_text.sse").read_bytes())
    assert b"Par\xc3(s" in (BODIES / "invalid_text.sse").read_bytes()
    assert [f.kind for f in verdict.findings] == [FindingKind.INVALID_TEXT]
    assert verdict.findings[0].detail == "U+FFFD at 28 in content of choice 0"


def test_a_bell_character_is_a_control_character_but_tab_and_newlines_are_text() -> None:
    assert scan([(0, "content", "Pa\x07ris")]) == [("control_character", 0, "content")]
    assert scan([(0, "content", "a\tb\nc\r\nd")]) == []
    assert scan([(0, "content", "x\x85y")]) == [("control_character", 0, "content")]


def test_one_token_sixteen_times_in_a_row_is_found_and_fifteen_is_not() -> None:
    assert scan([(0, "content", "The capital is")] + [(0, "content", " Paris")] * 16) == [
        ("repeated_token", 0, "content")]
    assert scan([(0, "content", " Paris")] * 15 + [(0, "content", " Lyon")]) == []


def test_a_delta_of_many_words_is_looked_into_for_a_run() -> None:
    assert scan([(0, "content", "It is " + "Paris " * 16)]) == [("repeated_token", 0, "content")]
    assert scan([(0, "content", "Paris " * 15 + "Lyon")]) == []


def test_numbers_and_rules_repeated_are_legitimate_text() -> None:
    assert scan([(0, "content", "0 " * 40 + "-" * 200 + " |---|" * 30)]) == []
    assert scan([(0, "content", " 0")] * 40 + [(0, "content", "-")] * 40) == []


def test_reasoning_after_the_answer_began_is_found_per_choice() -> None:
    assert scan([(0, "reasoning", "think"), (0, "content", "answer"), (0, "reasoning", "more")]) == [
        ("reasoning_after_answer", 0, "reasoning")]
    # Another choice's answer says nothing about choice 1's reasoning.
    assert scan([(0, "content", "answer"), (1, "reasoning", "think")]) == []


def test_blocks_of_their_own_judge_reasoning_after_the_answer_over_the_stream() -> None:
    assert scan([(0, "thinking", "t"), (1, "text", "answer"), (2, "thinking", "late")],
                shared=False) == [("reasoning_after_answer", 2, "thinking")]


def test_one_finding_per_signal_and_place() -> None:
    assert scan([(0, "content", "\ufffd\ufffd"), (0, "content", "\ufffd")]) == [
        ("invalid_text", 0, "content")]


_DELTA = st.sampled_from([" Paris", " is", "\ufffd", "Pa\x07ris", "\n", " 0", "Paris " * 16, "a"])


def _chat(deltas: list[str]) -> bytes:
    frames = [b'data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,'
              b'"delta":' + json.dumps({"content": d}).encode() + b',"finish_reason":null}]}\n\n'
              for d in deltas]
    return b"".join(frames) + (b'data: {"id":"c","object":"chat.completion.chunk","model":"m",'
                               b'"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
                               b"data: [DONE]\n\n")


@settings(max_examples=60, deadline=None)
@given(deltas=st.lists(_DELTA, max_size=40), size=st.integers(1, 97))
def test_any_split_of_the_body_gives_the_same_findings(deltas: list[str], size: int) -> None:
    body = _chat(deltas)
    whole = check("chat", body)
    split = check("chat", body, size)
    assert [(f.kind, f.detail, f.frame, f.offset) for f in split.findings] == [
        (f.kind, f.detail, f.frame, f.offset) for f in whole.findings]


@settings(max_examples=30, deadline=None)
@given(size=st.integers(1, 64))
def test_the_sample_bodies_get_their_finding_for_every_split(size: int) -> None:
    for name, kind in (("invalid_text", FindingKind.INVALID_TEXT),
                       ("control_character", FindingKind.CONTROL_CHARACTER),
                       ("repeated_token", FindingKind.REPEATED_TOKEN),
                       ("reasoning_after_answer", FindingKind.REASONING_AFTER_ANSWER)):
        verdict = check("chat", (BODIES / f"{name}.sse").read_bytes(), size)
        assert [f.kind for f in verdict.findings] == [kind]


def test_garbled_text_warns_under_the_default_policies_and_fails_under_strict_text() -> None:
    verdict = check("chat", (BODIES / "repeated_token.sse").read_bytes())
    assert verdict.ending is Ending.COMPLETE
    assert STRICT.passes(verdict)
    assert Policy().passes(verdict)
    assert Policy.from_spec("agents").passes(verdict)
    assert Policy.from_spec("strict-text").failure(verdict) == "repeated_token"
    assert not Policy.from_spec("strict-text").passes_facts("complete", ["invalid_text"])
    assert Policy.from_spec("strict").passes_facts("complete", ["invalid_text"])


# ── the cache facts, per protocol, from literal bodies ─────────────────────────────────────────────

CHAT_BODY = (
    b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"m","system_fingerprint":'
    b'"fp_44709d6fcb","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},'
    b'"finish_reason":"stop"}]}\n\n'
    b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"m","choices":[],"usage":'
    b'{"prompt_tokens":2006,"completion_tokens":300,"total_tokens":2306,'
    b'"prompt_tokens_details":{"cached_tokens":1920}}}\n\n'
    b'data: [DONE]\n\n')
RESPONSES_BODY = (
    b'event: response.created\ndata: {"type":"response.created","sequence_number":0,"response":'
    b'{"id":"resp_1","object":"response","status":"in_progress","model":"gpt-4.1","output":[]}}\n\n'
    b'event: response.completed\ndata: {"type":"response.completed","sequence_number":1,"response":'
    b'{"id":"resp_1","object":"response","status":"completed","model":"gpt-4.1","output":[],'
    b'"usage":{"input_tokens":1000,"input_tokens_details":{"cached_tokens":200},"output_tokens":5,'
    b'"output_tokens_details":{"reasoning_tokens":0},"total_tokens":1005}}}\n\n')
MESSAGES_BODY = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message",'
    b'"role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,'
    b'"usage":{"input_tokens":10,"cache_creation_input_tokens":40,"cache_read_input_tokens":950,'
    b'"output_tokens":1}}}\n\n'
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    b'"content_block":{"type":"text","text":""}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"Hi"}}\n\n'
    b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},'
    b'"usage":{"output_tokens":2}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n')
GEMINI_BODY = (
    b'data: {"candidates":[{"content":{"role":"model","parts":[{"text":"Hi"}]},"finishReason":"STOP",'
    b'"index":0}],"usageMetadata":{"promptTokenCount":4000,"candidatesTokenCount":1,'
    b'"cachedContentTokenCount":1000,"totalTokenCount":4001},"modelVersion":"gemini-2.5-flash",'
    b'"responseId":"r-1"}\n\n')


def test_each_protocol_reads_its_own_cached_token_field() -> None:
    expected = {
        "chat": (CHAT_BODY, UsageFacts(2006, 1920, None, "fp_44709d6fcb"), "most"),
        "responses": (RESPONSES_BODY, UsageFacts(1000, 200, None, None), "partial"),
        "messages": (MESSAGES_BODY, UsageFacts(1000, 950, 40, None), "most"),
        "gemini": (GEMINI_BODY, UsageFacts(4000, 1000, None, "gemini-2.5-flash"), "partial"),
    }
    for api, (body, facts, share) in expected.items():
        verdict = check(api, body)
        assert verdict.ending is Ending.COMPLETE, api
        record = record_from_verdict(verdict, policy=STRICT)
        got = UsageFacts(record.prompt_tokens, record.cached_tokens, record.cache_write_tokens,
                         record.fingerprint)
        assert (got, record.cache) == (facts, share), api


def test_a_stream_without_usage_has_no_cache_facts_and_a_wrong_type_is_not_a_count() -> None:
    body = CHAT_BODY.replace(b'"cached_tokens":1920', b'"cached_tokens":"1920"')
    record = record_from_verdict(check("chat", body), policy=STRICT)
    assert (record.prompt_tokens, record.cached_tokens, record.cache) == (2006, None, None)


def test_gemini_without_a_cached_count_served_nothing_from_cache() -> None:
    body = GEMINI_BODY.replace(b'"cachedContentTokenCount":1000,', b"")
    assert record_from_verdict(check("gemini", body), policy=STRICT).cache == "none"


def test_cache_share_words() -> None:
    assert [cache_share(c, p) for c, p in ((None, 10), (0, 10), (4, 10), (5, 10), (3, None))] == [
        None, "none", "partial", "most", "most"]


def test_the_fingerprint_is_redacted_like_every_stored_string() -> None:
    body = CHAT_BODY.replace(b"fp_44709d6fcb", b"sk-" + b"a" * 40)
    record = record_from_verdict(check("chat", body), policy=STRICT)
    assert record.fingerprint is not None and "a" * 40 not in record.fingerprint
    assert json.loads(json.dumps(record.cached_tokens)) == 1920
