"""The guardrail in a real LiteLLM proxy (``litellm[proxy]==1.108.7``) in front of ``sseguard chaos``.

Every bad ending of every protocol is sent through LiteLLM with the guardrail and through LiteLLM
without any guardrail, and read with the vendor's SDK as an application reads it: with the guardrail
the SDK raises on each; the tables below are what LiteLLM alone lets through as a clean stream
(measured; ``docs/litellm.md`` shows them side by side). Healthy streams come out byte-identical
with and without the guardrail, and every guarded stream is in the guardrail's store.

One module, one pair of LiteLLM processes (about 40 s to start on an idle 2-core machine).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from _litellm_clients import DRIVERS
from _litellm_support import (
    CHAT_MODEL,
    CLAUDE_MODEL,
    GEMINI_MODEL,
    MASTER_KEY,
    TWIN,
    Pair,
    Side,
    litellm_pair,
)
from sseguard.testing import BAD_ENDINGS

pytestmark = [pytest.mark.timeout(1500), pytest.mark.xdist_group("litellm")]

#: How often LiteLLM asks the upstream for one request that keeps failing with an HTTP error (its
#: router's default: the first try and two retries).
HTTP_TRIES = 3

#: Bad endings that reach the application as a clean end through LiteLLM *without* the guardrail
#: (measured). On Responses LiteLLM itself notices every bad ending and ends the stream with
#: response.failed, which openai-python hands the application as one more event, without raising.
BARE_CLEAN = {
    "chat": {"truncated", "no_done", "no_finish", "cut_mid_frame", "empty", "tool_call_unterminated"},
    "responses": {"truncated", "no_finish", "cut_mid_frame", "transport_error", "error_event",
                  "empty", "tool_call_unterminated"},
    "messages": {"truncated", "no_done", "no_finish", "cut_mid_frame", "empty",
                 "tool_call_unterminated"},
    "gemini": {"truncated", "empty"},
}
#: ... and *with* the guardrail: only ``no_done``, a finished answer that lacks only its sentinel
#: (LiteLLM writes chat's [DONE] itself; on Messages the guardrail appends message_stop under its
#: default ``agents`` policy).
GUARDED_CLEAN = {"chat": {"no_done"}, "responses": set(), "messages": {"no_done"}, "gemini": set()}


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    with litellm_pair(tmp_path_factory.mktemp("litellm"), os.environ) as running:
        yield running


def through(side: Side, api: str, fault: str | None, *, tools: bool = False) -> str:
    """Send one request of ``api`` through ``side`` with ``fault`` injected; how it ended for the
    application: the SDK's exception, ``clean``, or ``healed`` (clean, because LiteLLM retried a
    failure before the first byte and its next try was served healthy: one whole answer).

    A Messages connection reset is either, by timing: LiteLLM reads ahead of its hook, and retries
    when the reset comes before the first chunk reached it."""
    tries = HTTP_TRIES if fault == "http_error" else 1
    before = len(side.upstream.requests)
    if fault is not None:
        side.upstream.inject(fault, times=tries, api=api)
    outcome = DRIVERS[api](side.url, tools=tools)
    assert side.upstream.pending == 0, f"{api}/{fault}: LiteLLM did not ask the upstream {tries}x"
    served = [r.fault for r in side.upstream.requests[before:]]
    if outcome.startswith("clean") and len(served) > 1 and served[-1] is None:
        return "healed"
    return outcome


def run_all(pair: Pair, api: str) -> dict[str, tuple[str, str]]:
    """Each bad ending of ``api``, guarded and bare: ``fault → (guarded outcome, bare outcome)``."""
    return {fault: (through(pair.guarded, api, fault), through(pair.bare, api, fault))
            for fault in BAD_ENDINGS[api]}


@pytest.mark.parametrize("api", ["chat", "responses", "messages", "gemini"])
def test_the_sdk_raises_on_every_bad_ending_through_the_guardrail(pair: Pair, api: str) -> None:
    table = run_all(pair, api)
    clean_guarded = {f for f, (guarded, _) in table.items() if guarded.startswith("clean")}
    clean_bare = {f for f, (_, bare) in table.items() if bare.startswith("clean")}
    assert clean_guarded == GUARDED_CLEAN[api], table
    assert clean_bare == BARE_CLEAN[api], table


#: Findings in a stream that ends well, which LiteLLM alone passes as clean (measured): tool-call
#: markup left in the text (the markup families' leak shapes) and cut-off tool arguments.
FINDINGS = {"chat": ("markup_leak", "tool_args_invalid_json"),
            "responses": ("markup_leak", "tool_args_invalid_json"),
            "messages": ("markup_leak", "tool_args_invalid_json"),
            "gemini": ("markup_leak",)}


@pytest.mark.parametrize("api", ["chat", "responses", "messages", "gemini"])
def test_a_stream_with_a_failing_finding_raises_through_the_guardrail(pair: Pair, api: str) -> None:
    for fault in FINDINGS[api]:
        guarded, bare = through(pair.guarded, api, fault), through(pair.bare, api, fault)
        assert bare == "clean", (fault, bare)
        assert not guarded.startswith("clean"), (fault, guarded)


#: Findings about a call of an offered tool (its name, its arguments against the tool's schema),
#: which LiteLLM alone passes as clean (measured).
TOOL_FINDINGS = {"chat": ("tool_undefined_function", "tool_args_schema_mismatch"),
                 "responses": ("tool_undefined_function", "tool_args_schema_mismatch"),
                 "messages": ("tool_undefined_function", "tool_args_schema_mismatch"),
                 "gemini": ("tool_undefined_function", "tool_args_schema_mismatch")}


@pytest.mark.parametrize("api", ["chat", "responses", "messages", "gemini"])
def test_a_healthy_tool_call_passes_and_a_broken_one_raises(pair: Pair, api: str) -> None:
    """A whole answer that calls the offered tool passes through the guardrail as it does without
    it; a call of a tool never offered, or with arguments against its schema, raises only with it."""
    assert through(pair.guarded, api, None, tools=True) == "clean"
    assert through(pair.bare, api, None, tools=True) == "clean"
    for fault in TOOL_FINDINGS[api]:
        guarded = through(pair.guarded, api, fault, tools=True)
        bare = through(pair.bare, api, fault, tools=True)
        assert bare == "clean", (fault, bare)
        assert not guarded.startswith("clean"), (fault, guarded)


def test_healthy_streams_are_byte_identical_with_and_without_the_guardrail(pair: Pair) -> None:
    """Each twin upstream serves the same answers in the same order (same seed, same requests).

    Two kinds of field differ between any two requests or deployments, guardrail or not, and are
    compared masked: the clock (``created``, ``created_at``: the two requests are seconds apart), and
    the Responses id, which LiteLLM writes in its own encoding naming the deployment the answer came
    from (its api_base among other things: here each proxy's own upstream port)."""
    for request in HEALTHY:
        guarded = raw_body(pair.guarded, request)
        bare = raw_body(pair.bare, request)
        assert len(guarded) > 500
        assert masked(guarded) == masked(bare), request["path"]


#: What differs between two requests or two deployments whatever the guardrail does.
VARYING = [(re.compile(rb'"(created|created_at)":\s*\d+'), rb'"\1":0'),
           (re.compile(rb'"id":"resp_[A-Za-z0-9_=-]+"'), b'"id":"resp_*"')]


def masked(body: bytes) -> bytes:
    for pattern, mask in VARYING:
        body = pattern.sub(mask, body)
    return body


#: One healthy streamed request per route, as raw HTTP (the twin models: only healthy answers).
HEALTHY = [
    {"path": "/v1/chat/completions", "json": {
        "model": CHAT_MODEL + TWIN, "stream": True,
        "messages": [{"role": "user", "content": "Say something."}]}},
    {"path": "/v1/responses", "json": {
        "model": CHAT_MODEL + TWIN, "stream": True, "input": "Say something."}},
    {"path": "/v1/messages", "json": {
        "model": CLAUDE_MODEL + TWIN, "stream": True, "max_tokens": 256,
        "messages": [{"role": "user", "content": "Say something."}]}},
    {"path": f"/v1beta/models/{GEMINI_MODEL}{TWIN}:streamGenerateContent?alt=sse", "json": {
        "contents": [{"role": "user", "parts": [{"text": "Say something."}]}]}},
]


def raw_body(side: Side, request: dict[str, object]) -> bytes:
    headers = {"authorization": f"Bearer {MASTER_KEY}", "x-api-key": MASTER_KEY,
               "x-goog-api-key": MASTER_KEY, "anthropic-version": "2023-06-01"}
    with httpx.Client(base_url=side.url, timeout=90.0) as client, client.stream(
            "POST", str(request["path"]), json=request["json"], headers=headers) as answer:
        assert answer.status_code == 200
        return b"".join(answer.iter_raw())


def test_a_finished_messages_stream_without_message_stop_gets_it_under_agents(pair: Pair) -> None:
    pair.guarded.upstream.inject("no_done", api="messages")
    request = {"model": CLAUDE_MODEL, "stream": True, "max_tokens": 256,
               "messages": [{"role": "user", "content": "Say something."}]}
    body = raw_body(pair.guarded, {"path": "/v1/messages", "json": request})
    assert body.count(b"event: message_stop") == 1
    assert body.endswith(b'event: message_stop\ndata: {"type":"message_stop"}\n\n')
    assert b'"stop_reason":"end_turn"' in body


def test_a_failed_stream_is_recorded_with_its_ending_and_what_was_done(pair: Pair) -> None:
    """The record is found by the call id LiteLLM answers with; the writer (a thread in LiteLLM's
    process) flushes within a fraction of a second, and the wait for it is bounded."""
    pair.guarded.upstream.inject("truncated", api="chat")
    request = {"model": CHAT_MODEL, "stream": True,
               "messages": [{"role": "user", "content": "Say something."}]}
    with httpx.Client(base_url=pair.guarded.url, timeout=90.0) as client, client.stream(
            "POST", "/v1/chat/completions", json=request,
            headers={"authorization": f"Bearer {MASTER_KEY}"}) as answer:
        call_id = answer.headers["x-litellm-call-id"]
        body = b"".join(answer.iter_raw())
    assert b'"code": "502"' in body or b'"code":"502"' in body, body[-400:]
    assert b'"message": "sseguard: truncated: ' in body, body[-400:]
    record = wait_for_record(pair.store, call_id)
    assert (record["source"], record["api"], record["ending"], record["passed"]) == (
        "litellm", "chat", "truncated", False)
    assert record["run_id"] == "litellm-test"
    assert record["extra"]["action"] == "error-event"
    assert record["extra"]["error_code"] == "truncated"
    assert record["extra"]["finish_filled_by_litellm"] is True
    assert record["path"] == "/v1/chat/completions"


def wait_for_record(store: Path, call_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if store.exists():
            with contextlib.closing(sqlite3.connect(store)) as db:
                for (text,) in db.execute("SELECT record FROM sseguard_records"):
                    record: dict[str, Any] = json.loads(text)
                    if record.get("extra", {}).get("litellm_call_id") == call_id:
                        return record
        time.sleep(1.0)
    raise AssertionError(f"no record of call {call_id} in {store} within 60 s")
