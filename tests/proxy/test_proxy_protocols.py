"""The proxy guards Responses and Messages streams as it guards chat: healthy streams byte-identical
under any chunking, every bad ending turned into that protocol's error frame (docs/design/vocabulary.md), the
terminal event held until the upstream's end, records and metrics by api."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _virtual_time import VirtualTimers
from sseguard.proxy import run_proxy
from sseguard.store import open_store
from support.proxy import Script, frames, proxy_config, raw_post, scripted, scripted_proxy_in_thread
from support.proxy_bodies import MESSAGE_STOP, messages_body, responses_body

RESPONSES_REQUEST: dict[str, Any] = {"model": "m", "input": "Say hello", "stream": True}
MESSAGES_REQUEST: dict[str, Any] = {"model": "m", "max_tokens": 64, "stream": True,
                                    "messages": [{"role": "user", "content": "Say hello"}]}
TEXTS = ["Hel", "lo ", "wor", "ld"]


@contextlib.asynccontextmanager
async def guarded(body: bytes | list[Any], end: str = "eof",
                  **options: Any) -> AsyncIterator[tuple[Any, Any]]:
    chunks = body if isinstance(body, list) else [body]
    async with scripted(Script(chunks, end=end)) as up, \
            run_proxy(proxy_config(up.url, **options)) as px:
        yield up, px


async def post(api: str, body: bytes | list[Any], end: str = "eof", **options: Any) -> Any:
    path, request = (("/responses", RESPONSES_REQUEST) if api == "responses"
                     else ("/messages", MESSAGES_REQUEST))
    async with guarded(body, end, **options) as (up, px):
        if end != "hang":
            return await raw_post(px.url + path, request)
        # A silent upstream: its stall comes when the test says, on a virtual clock.
        timers = px.state.timers = VirtualTimers()
        client = asyncio.create_task(raw_post(px.url + path, request))
        await asyncio.wait_for(up.hanging.wait(), 10)
        await timers.stall(px.state.config.stall_timeout)
        return await asyncio.wait_for(client, 10)


def last_event(body: bytes) -> tuple[str, dict[str, Any]]:
    """The name and the data of the body's last frame."""
    name, data = "message", ""
    for line in frames(body)[-1].decode().splitlines():
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            data = line[6:]
    return name, json.loads(data)


def responses_error(body: bytes) -> dict[str, Any]:
    """The proxy's Responses error event, checked to be exactly docs/design/vocabulary.md's shape."""
    name, data = last_event(body)
    assert name == "error"
    assert set(data) == {"type", "code", "message", "param", "sequence_number", "error"}
    assert data["type"] == "error" and data["param"] is None and data["message"]
    assert data["error"] == {"type": "upstream_stream_error", "code": data["code"],
                             "message": data["message"]}
    return data


def messages_error(body: bytes) -> str:
    """The proxy's Messages error event (docs/design/vocabulary.md's shape); its message."""
    name, data = last_event(body)
    assert name == "error" and set(data) == {"type", "error"} and data["type"] == "error"
    assert set(data["error"]) == {"type", "message"} and data["error"]["type"] == "api_error"
    return str(data["error"]["message"])


def sequence_numbers(body: bytes) -> list[int]:
    out = []
    for f in frames(body):
        for line in f.decode().splitlines():
            if line.startswith("data: {"):
                out.append(json.loads(line[6:]).get("sequence_number"))
    return out


# ── healthy ──────────────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("api, body", [
    ("responses", responses_body(TEXTS)),
    ("responses", responses_body(TEXTS, "incomplete")),
    ("responses", responses_body(TEXTS, "done_trailer")),
    ("messages", messages_body(TEXTS)),
    ("messages", messages_body(TEXTS, ping=False)),
], ids=["responses", "responses_incomplete", "responses_done_trailer", "messages",
        "messages_no_ping"])
async def test_a_healthy_stream_arrives_byte_identical(api: str, body: bytes) -> None:
    got = await post(api, body)
    assert got.status == 200 and got.error is None and got.body == body
    assert got.headers["Cache-Control"] == "no-cache"


@pytest.fixture(scope="module")
def chunked_servers() -> Any:
    with scripted_proxy_in_thread() as value:
        yield value


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(api=st.sampled_from(["responses", "messages"]),
       texts=st.lists(st.text(min_size=1, max_size=10), min_size=1, max_size=6), data=st.data())
def test_any_chunking_of_a_healthy_body_is_relayed_byte_identical(
        chunked_servers: Any, api: str, texts: list[str], data: Any) -> None:
    up, px = chunked_servers
    body = responses_body(texts) if api == "responses" else messages_body(texts)
    cuts = sorted(data.draw(st.sets(st.integers(1, len(body) - 1), max_size=12)))
    up.script.chunks = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    request = RESPONSES_REQUEST if api == "responses" else MESSAGES_REQUEST
    got = asyncio.run(raw_post(f"{px.url}/{api}", request))
    assert got.body == body


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(api=st.sampled_from(["responses", "messages"]),
       end=st.sampled_from(["truncated", "cut_mid_frame", "no_finish"]),
       texts=st.lists(st.text(min_size=1, max_size=10), min_size=1, max_size=6), data=st.data())
def test_any_chunking_of_a_bad_body_ends_with_the_same_error_event(
        chunked_servers: Any, api: str, end: str, texts: list[str], data: Any) -> None:
    up, px = chunked_servers
    body = responses_body(texts, end) if api == "responses" else messages_body(texts, end)
    cuts = sorted(data.draw(st.sets(st.integers(1, len(body) - 1), max_size=12)))
    up.script.chunks = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    request = RESPONSES_REQUEST if api == "responses" else MESSAGES_REQUEST
    got = asyncio.run(raw_post(f"{px.url}/{api}", request))
    delivered = got.body[: -len(frames(got.body)[-1])]
    # The complete frames before the bad end, as they came; never the terminal event or [DONE].
    assert body.startswith(delivered) and frames(delivered) == frames(body)[:len(frames(delivered))]
    assert b"[DONE]" not in delivered and b"message_stop" not in delivered
    if api == "responses":
        assert responses_error(got.body)["code"] == end
        numbers = sequence_numbers(got.body)
        assert numbers == list(range(len(numbers)))
    else:
        assert messages_error(got.body).startswith(f"{end}: ")


# ── responses: bad endings ───────────────────────────────────────────────────────────────────────

RESPONSES_BAD = {"truncated": "truncated", "cut_mid_frame": "cut_mid_frame",
                 "no_finish": "no_finish", "empty": "empty", "error_flat": "error_event",
                 "error_nested": "error_event", "failed": "error_event",
                 "after_end": "event_order"}


@pytest.mark.parametrize("end", sorted(RESPONSES_BAD))
async def test_a_bad_responses_ending_becomes_a_responses_error_event(end: str) -> None:
    body = responses_body(TEXTS, end)
    got = await post("responses", body)
    assert got.status == 200 and got.error is None
    error = responses_error(got.body)
    assert error["code"] == RESPONSES_BAD[end]
    delivered = got.body[: -len(frames(got.body)[-1])]
    assert body.startswith(delivered)  # everything before the error is the upstream's, as it came
    assert b"response.completed" not in delivered and b"[DONE]" not in delivered
    numbers = sequence_numbers(got.body)
    assert numbers == list(range(len(numbers)))  # the error event continues the numbering
    if end in ("error_flat", "error_nested", "failed"):
        assert "engine crashed" in error["message"]


@pytest.mark.parametrize("end, code", [("reset", "transport_error"), ("hang", "stalled")])
async def test_a_failed_responses_connection_becomes_an_error_event(end: str, code: str) -> None:
    body = responses_body(TEXTS, "truncated")
    got = await post("responses", body, end=end, stall_timeout=2.0)
    assert responses_error(got.body)["code"] == code
    assert got.body.startswith(body)


# ── messages: bad endings ────────────────────────────────────────────────────────────────────────

MESSAGES_BAD = {"truncated": "truncated", "cut_mid_frame": "cut_mid_frame", "no_finish": "no_finish",
                "no_done": "no_done", "empty": "empty"}


@pytest.mark.parametrize("end", sorted(MESSAGES_BAD))
async def test_a_bad_messages_ending_becomes_a_messages_error_event(end: str) -> None:
    body = messages_body(TEXTS, end)
    got = await post("messages", body, policy="strict")
    assert got.status == 200 and got.error is None
    message = messages_error(got.body)
    assert message.startswith(MESSAGES_BAD[end] + ": ")
    delivered = got.body[: -len(frames(got.body)[-1])]
    assert body.startswith(delivered) and b"message_stop" not in delivered


async def test_an_upstream_messages_error_event_is_forwarded_as_it_came() -> None:
    body = messages_body(TEXTS, "error_event")
    got = await post("messages", body)
    assert got.body == body  # the anthropic SDK raises on the upstream's own event: error


@pytest.mark.parametrize("end, code", [("reset", "transport_error"), ("hang", "stalled")])
async def test_a_failed_messages_connection_becomes_an_error_event(end: str, code: str) -> None:
    body = messages_body(TEXTS, "truncated")
    got = await post("messages", body, end=end, stall_timeout=2.0)
    assert messages_error(got.body).startswith(code + ": ") and got.body.startswith(body)


async def test_complete_done_appends_message_stop_to_a_finished_messages_stream() -> None:
    body = messages_body(TEXTS, "no_done")
    got = await post("messages", body, complete_done=True)
    assert got.body == body + MESSAGE_STOP


async def test_by_default_a_finished_messages_stream_gets_its_message_stop() -> None:
    body = messages_body(TEXTS, "no_done")
    got = await post("messages", body)
    assert got.body == body + MESSAGE_STOP


@pytest.mark.parametrize("options", [{"policy": "no-done-ok"},
                                     {"policy": "strict", "tolerate": "no_done"}])
async def test_a_tolerated_missing_message_stop_passes_unchanged(options: dict[str, str]) -> None:
    body = messages_body(TEXTS, "no_done")
    got = await post("messages", body, **options)
    assert got.body == body


@pytest.mark.parametrize("api", ["responses", "messages"])
async def test_abort_mode_resets_instead_of_an_error_event(api: str) -> None:
    body = (responses_body if api == "responses" else messages_body)(TEXTS, "truncated")
    got = await post(api, body, on_bad_end="abort")
    assert got.error is not None and got.body == body


@pytest.mark.parametrize("api", ["responses", "messages"])
async def test_pass_mode_forwards_a_bad_stream_as_it_came(api: str) -> None:
    body = (responses_body if api == "responses" else messages_body)(TEXTS, "cut_mid_frame")
    got = await post(api, body, on_bad_end="pass")
    assert got.error is None and got.body == body


# ── evidence ─────────────────────────────────────────────────────────────────────────────────────


async def test_records_and_metrics_say_which_protocol_a_stream_spoke(tmp_path: Path) -> None:
    db = tmp_path / "apis.db"
    plan = [("responses", responses_body(TEXTS)), ("messages", messages_body(TEXTS, "truncated")),
            ("messages", messages_body(TEXTS))]
    async with scripted(Script()) as up, run_proxy(proxy_config(up.url, store=str(db))) as px:
        for api, body in plan:
            up.script.chunks = [body]
            await raw_post(f"{px.url}/{api}",
                           RESPONSES_REQUEST if api == "responses" else MESSAGES_REQUEST)
        text = px.state.metrics.render().decode()
    store = open_store(str(db))
    try:
        records = sorted(store.read(), key=lambda r: r.index)
    finally:
        store.close()
    assert [(r.api, r.ending, r.passed) for r in records] == [
        ("responses", "complete", True), ("messages", "truncated", False),
        ("messages", "complete", True)]
    assert [r.path for r in records] == ["/v1/responses", "/v1/messages", "/v1/messages"]
    assert records[1].extra["action"] == "error-event"
    assert 'sseguard_proxy_streams_total{api="responses",ending="complete"} 1.0' in text
    assert 'sseguard_proxy_streams_total{api="messages",ending="complete"} 1.0' in text
    assert 'sseguard_proxy_streams_total{api="messages",ending="truncated"} 1.0' in text
