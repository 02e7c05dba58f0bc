"""The streaming relay on real loopback servers: byte-identical healthy streams, explicit bad ends,
frames forwarded as soon as they are complete, disconnects, backpressure, records and metrics."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _virtual_time import VirtualTimers
from sseguard.chaos import ChaosConfig, FaultOptions, Pacing, run_chaos
from sseguard.chaos import ServerDialect as Dialect
from sseguard.proxy import run_proxy
from sseguard.store import open_store
from support.proxy import (
    KEY,
    WEATHER_TOOL,
    Script,
    chaos_proxy,
    chat,
    error_code,
    frames,
    has_done,
    proxy_config,
    raw_post,
    same_second,
    scripted,
    scripted_proxy_in_thread,
)

# A stall of 4 s against the proxy's 1 s stall timeout: a margin a busy machine cannot eat.
CHAOS = ChaosConfig(seed=5, pacing=Pacing(tokens=12), options=FaultOptions(stall_ms=4000))
USAGE = {"stream_options": {"include_usage": True}}
FRAME_1 = b'data: {"choices":[{"index":0,"delta":{"content":"one"},"finish_reason":null}]}\n\n'
FRAME_2 = b'data: {"choices":[{"index":0,"delta":{"content":"two"},"finish_reason":"stop"}]}\n\n'


async def _direct_and_proxied(inject: str, request: dict[str, Any], chaos: ChaosConfig = CHAOS,
                              **options: Any) -> tuple[bytes, Any]:
    """The same request against two identical chaos servers: one direct, one through the proxy."""
    async with run_chaos(chaos) as direct, chaos_proxy(chaos, **options) as (_, px):
        want = await raw_post(direct.chat_url, request, inject=inject)
        got = await raw_post(f"{px.url}/chat/completions", request, inject=inject)
    return same_second(want.body), got


# ── healthy streams ──────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("request_body", [chat(**USAGE), chat(tools=[WEATHER_TOOL], **USAGE),
                                          chat(n=2, **USAGE)], ids=["text", "tools", "n2"])
async def test_healthy_stream_arrives_byte_identical_to_direct(request_body: dict[str, Any]) -> None:
    want, got = await _direct_and_proxied("none", request_body)
    assert got.status == 200 and got.error is None
    assert same_second(got.body) == want
    assert want.endswith(b"data: [DONE]\n\n") and len(frames(want)) > 10
    assert got.headers["Cache-Control"] == "no-cache" and got.headers["X-Accel-Buffering"] == "no"
    assert got.headers["x-sseguard-fault"] == "none"  # upstream headers are forwarded


def _healthy_body(texts: list[str], crlf: bool, comments: bool) -> bytes:
    eol = "\r\n" if crlf else "\n"
    out = []
    if comments:
        out.append(f": keep-alive{eol}{eol}")
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    out.append("data: " + json.dumps({**base, "choices": [{"index": 0, "delta": {"role": "assistant"},
                                                           "finish_reason": None}]}) + eol + eol)
    for i, text in enumerate(texts):
        if comments and i % 3 == 1:
            out.append(f": ping{eol}")
        out.append(f"id: {i}{eol}data: " + json.dumps({**base, "choices": [
            {"index": 0, "delta": {"content": text}, "finish_reason": None}]}, ensure_ascii=False)
            + eol + eol)
    out.append("data: " + json.dumps({**base, "choices": [{"index": 0, "delta": {},
                                                           "finish_reason": "stop"}]}) + eol + eol)
    out.append(f"data: [DONE]{eol}{eol}")
    return "".join(out).encode("utf-8")


@pytest.fixture(scope="module")
def chunked_servers() -> Any:
    with scripted_proxy_in_thread() as value:
        yield value


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
# The leads of the families' leak markers ("<", "｜", "[", "f") kept out: text with markup openers
# (`<function=`, `[TOOL_CALLS]`, `functools[`) is a markup leak, not a healthy body.
@given(texts=st.lists(st.text(st.characters(blacklist_characters="<｜[f", blacklist_categories=("Cs",)),
                              min_size=1, max_size=12), min_size=1, max_size=8),
       crlf=st.booleans(), comments=st.booleans(), data=st.data())
def test_any_chunking_of_a_healthy_body_is_relayed_byte_identical(
        chunked_servers: Any, texts: list[str], crlf: bool, comments: bool, data: Any) -> None:
    up, px = chunked_servers
    body = _healthy_body(texts, crlf, comments)
    cuts = sorted(data.draw(st.sets(st.integers(1, len(body) - 1), max_size=12)))
    up.script.chunks = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    got = asyncio.run(raw_post(f"{px.url}/chat/completions", chat()))
    assert got.body == body


async def test_complete_done_appends_the_missing_done_to_a_finished_stream() -> None:
    chaos = ChaosConfig(seed=5, dialects=frozenset({Dialect.NO_DONE}))
    want, got = await _direct_and_proxied("none", chat(**USAGE), chaos, complete_done=True)
    assert b"[DONE]" not in want
    assert same_second(got.body) == want + b"data: [DONE]\n\n"


async def test_without_complete_done_a_missing_done_fails_strict() -> None:
    chaos = ChaosConfig(seed=5, dialects=frozenset({Dialect.NO_DONE}))
    _, got = await _direct_and_proxied("none", chat(), chaos, policy="strict")
    assert error_code(got.body) == "no_done"


async def test_by_default_a_finished_stream_without_done_is_completed_and_recorded(
        tmp_path: Path) -> None:
    chaos = ChaosConfig(seed=5, dialects=frozenset({Dialect.NO_DONE}))
    db = tmp_path / "default.db"
    want, got = await _direct_and_proxied("none", chat(**USAGE), chaos, store=str(db))
    assert b"[DONE]" not in want
    assert same_second(got.body) == want + b"data: [DONE]\n\n"
    store = open_store(str(db))
    try:
        [record] = list(store.read())
    finally:
        store.close()
    assert (record.ending, record.passed, record.policy) == ("no_done", True, "agents")
    assert record.extra["action"] == "completed-done"


async def test_by_default_a_stream_cut_before_its_finish_still_fails() -> None:
    _, got = await _direct_and_proxied("truncated", chat(**USAGE))
    assert error_code(got.body) == "truncated" and not has_done(got.body)


async def test_under_pass_a_finished_stream_without_done_goes_out_as_it_came() -> None:
    chaos = ChaosConfig(seed=5, dialects=frozenset({Dialect.NO_DONE}))
    want, got = await _direct_and_proxied("none", chat(**USAGE), chaos, on_bad_end="pass")
    assert same_second(got.body) == want and b"[DONE]" not in want


async def test_a_tolerated_dialect_passes_unchanged() -> None:
    chaos = ChaosConfig(seed=5, dialects=frozenset({Dialect.NO_FINISH_REASON}))
    want, got = await _direct_and_proxied("none", chat(), chaos, policy="no-finish-ok")
    assert same_second(got.body) == want and want.endswith(b"data: [DONE]\n\n")


# ── bad endings ──────────────────────────────────────────────────────────────────────────────────

BAD = {
    "truncated": "truncated", "no_done": "no_done", "no_finish": "no_finish",
    "cut_mid_frame": "cut_mid_frame", "transport_error": "transport_error", "empty": "empty",
    "stalled": "stalled", "tool_args_invalid_json": "tool_args_invalid_json",
    "tool_call_unterminated": "truncated", "frame_after_done": "frame_after_done",
    "bad_chunk_json": "bad_chunk_json", "missing_usage": "missing_usage",
}


@pytest.mark.parametrize("fault", sorted(BAD))
async def test_a_bad_ending_becomes_an_error_frame_and_never_done(fault: str) -> None:
    want, got = await _direct_and_proxied(fault, chat(tools=[WEATHER_TOOL], **USAGE),
                                          stall_timeout=1.0, policy="strict")
    assert got.status == 200 and got.error is None
    assert error_code(got.body) == BAD[fault]
    assert not has_done(got.body)
    delivered = same_second(got.body)[: -len(frames(got.body)[-1])]
    assert want.startswith(delivered)  # everything before the error frame is the upstream's, as is
    error = json.loads(frames(got.body)[-1][6:])["error"]
    assert error["type"] == "upstream_stream_error" and error["message"]


async def test_an_upstream_error_event_reaches_the_client_as_a_data_error_frame() -> None:
    content = b'data: {"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}\n\n'
    script = Script([content, b'event: error\ndata: {"error":{"message":"worker died"}}\n\n',
                     b"data: [DONE]\n\n"])
    async with scripted(script) as up, run_proxy(proxy_config(up.url)) as px:
        got = await raw_post(f"{px.url}/chat/completions", chat())
    assert frames(got.body) == [content, b'data: {"error": {"message": "worker died", "type": '
                                         b'"upstream_stream_error", "code": "error_event"}}\n\n']


@pytest.mark.parametrize("form", [0, 1], ids=["data", "event"])
async def test_chaos_error_events_end_with_an_error_frame(form: int) -> None:
    chaos = ChaosConfig(seed=5, options=FaultOptions(error_event_form=["data", "event"][form]))
    _, got = await _direct_and_proxied("error_event", chat(), chaos)
    last = json.loads(frames(got.body)[-1][6:])
    assert last["error"]["message"] == "upstream model worker failed mid-stream"
    assert not has_done(got.body) and b"event: error" not in got.body


async def test_abort_mode_resets_the_connection_without_a_terminal_frame() -> None:
    want, got = await _direct_and_proxied("truncated", chat(), on_bad_end="abort")
    assert got.error is not None  # the client's HTTP layer saw an incomplete body
    assert error_code(got.body) is None and not has_done(got.body)
    assert want.startswith(same_second(got.body))


async def test_pass_mode_forwards_a_bad_stream_as_is_and_records_it(tmp_path: Path) -> None:
    db = tmp_path / "pass.db"
    want, got = await _direct_and_proxied("cut_mid_frame", chat(), on_bad_end="pass", store=str(db))
    assert same_second(got.body) == want
    store = open_store(str(db))
    try:
        [record] = list(store.read())
    finally:
        store.close()
    assert record.ending == "cut_mid_frame" and not record.passed
    assert record.extra["action"] == "pass" and record.source == "proxy"


@pytest.mark.parametrize("fault", ["transport_error", "stalled"])
async def test_pass_mode_mirrors_a_failed_connection_instead_of_ending_cleanly(fault: str) -> None:
    want, got = await _direct_and_proxied(fault, chat(), on_bad_end="pass", stall_timeout=1.0)
    assert got.error is not None  # reset, as the upstream's was: never turned into a clean end
    assert want.startswith(same_second(got.body)) and error_code(got.body) is None


async def test_a_stalled_upstream_is_cut_after_the_stall_timeout() -> None:
    """On a virtual clock (``_virtual_time``): 29 s of silence is not yet a stall, 30 s is."""
    first = b'data: {"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}\n\n'
    timers = VirtualTimers()
    async with scripted(Script([first], end="hang")) as up, \
            run_proxy(proxy_config(up.url, stall_timeout=30.0)) as px:
        px.state.timers = timers
        client = asyncio.create_task(raw_post(f"{px.url}/chat/completions", chat(), timeout=60.0))
        await asyncio.wait_for(up.hanging.wait(), 10)
        await timers.stall(29.0)
        assert not client.done()  # short of the stall timeout: the client still waits
        await timers.stall(1.0)
        got = await asyncio.wait_for(client, 10)
        await asyncio.wait_for(up.disconnected.wait(), 10)  # and the upstream was let go
    assert got.body.startswith(first) and error_code(got.body) == "stalled"
    assert b"the upstream sent nothing for 30 s" in got.body


async def test_an_upstream_that_never_ends_its_body_after_done_gets_a_short_grace() -> None:
    """A whole answer whose body never ends: delivered after the 1 s grace (virtual), not cut as
    stalled after the 30 s stall timeout."""
    done = b"data: [DONE]\n\n"
    timers = VirtualTimers()
    async with scripted(Script([FRAME_2, done], end="hang")) as up, \
            run_proxy(proxy_config(up.url, stall_timeout=30)) as px:
        px.state.timers = timers
        client = asyncio.create_task(raw_post(f"{px.url}/chat/completions", chat()))
        await asyncio.wait_for(up.hanging.wait(), 10)
        await timers.stall(0.9)
        assert not client.done()  # within the grace
        await timers.stall(0.1)
        got = await asyncio.wait_for(client, 10)
        await asyncio.wait_for(up.disconnected.wait(), 10)
    assert got.body == FRAME_2 + done  # a whole answer: delivered, not cut as stalled


# ── timing of frames ─────────────────────────────────────────────────────────────────────────────

async def test_each_frame_is_forwarded_as_soon_as_it_is_complete_and_not_before() -> None:
    got_first = asyncio.Event()
    half = len(FRAME_2) // 2
    script = Script([FRAME_1, got_first, FRAME_2[:half], 0.2, FRAME_2[half:], b"data: [DONE]\n\n"])
    async with scripted(script) as up, run_proxy(proxy_config(up.url)) as px, \
            aiohttp.ClientSession() as session, \
            session.post(f"{px.url}/chat/completions", json=chat()) as resp:
        # The upstream sends frame 2 only after the client has frame 1: a buffering proxy deadlocks.
        first = await asyncio.wait_for(resp.content.readuntil(b"\n\n"), 10)
        got_first.set()
        sent_half = time.monotonic()
        second = await asyncio.wait_for(resp.content.readuntil(b"\n\n"), 10)
        waited = time.monotonic() - sent_half
        rest = await resp.content.read()
    assert first == FRAME_1 and second == FRAME_2 and rest == b"data: [DONE]\n\n"
    assert waited >= 0.15  # the half frame was held until it was complete
    assert up.requests[0]["headers"]["Accept-Encoding"] == "identity"


async def test_keepalive_comments_go_out_before_the_first_event() -> None:
    pinged = asyncio.Event()
    script = Script([b": ping\n\n", pinged, FRAME_2, b"data: [DONE]\n\n"])
    async with scripted(script) as up, run_proxy(proxy_config(up.url)) as px, \
            aiohttp.ClientSession() as session, \
            session.post(f"{px.url}/chat/completions", json=chat()) as resp:
        ping = await asyncio.wait_for(resp.content.readuntil(b"\n\n"), 10)
        pinged.set()
        rest = await resp.content.read()
    assert ping == b": ping\n\n" and rest == FRAME_2 + b"data: [DONE]\n\n"


async def test_a_client_disconnect_cancels_the_upstream_request_at_once() -> None:
    # A frame every 0.2 s for 20 s: "at once" is checked against that, with room for a busy machine.
    script = Script([FRAME_1, *([0.2, FRAME_1] * 100)], end="hang")
    async with scripted(script) as up, run_proxy(proxy_config(up.url)) as px:
        async with aiohttp.ClientSession() as session, \
                session.post(f"{px.url}/chat/completions", json=chat()) as resp:
            assert await resp.content.readuntil(b"\n\n") == FRAME_1
            resp.close()
        start = time.monotonic()
        await asyncio.wait_for(up.disconnected.wait(), 10)
        assert time.monotonic() - start < 3.0
        for _ in range(500):  # the metric is counted once the relay has wound down
            text = px.state.metrics.render().decode()
            if 'ending="client_disconnect"' in text:
                break
            await asyncio.sleep(0.02)
    assert 'sseguard_proxy_streams_total{api="chat",ending="client_disconnect"} 1.0' in text
    assert up.written < len(FRAME_1) * 20


async def test_a_slow_reader_gets_backpressure_not_unbounded_buffering() -> None:
    big = b"data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": "x" * 65000},
                                               "finish_reason": None}]}).encode() + b"\n\n"
    total = 64 * 1024 * 1024
    script = Script([big] * (total // len(big)) + [FRAME_2, b"data: [DONE]\n\n"])
    async with scripted(script) as up, run_proxy(proxy_config(up.url)) as px, \
            aiohttp.ClientSession() as session, \
            session.post(f"{px.url}/chat/completions", json=chat()) as resp:
        await resp.content.readuntil(b"\n\n")
        await asyncio.sleep(0.5)  # the client reads nothing; the proxy must not read on for it
        stalled_at = up.written
        received = 0
        async for chunk in resp.content.iter_any():
            received += len(chunk)
    assert stalled_at < 32 * 1024 * 1024, stalled_at  # kernel socket buffers, not the proxy
    assert received + len(big) == up.written


# ── evidence ─────────────────────────────────────────────────────────────────────────────────────


async def test_every_stream_is_recorded_in_sqlite_without_secrets(tmp_path: Path) -> None:
    db = tmp_path / "evidence.db"
    leaky = (b'data: {"id":"chatcmpl-9","choices":[{"index":0,"delta":{"content":"your key '
             + KEY.encode() + b' and Bearer abc.def-123"},"finish_reason":null}]}\n\n')
    script = Script([leaky], headers={"Content-Type": "text/event-stream",
                                      "x-echo-auth": f"Bearer {KEY}", "x-request-id": "req-7"})
    async with scripted(script) as up, run_proxy(proxy_config(up.url, store=str(db))) as px:
        for api_key_header in ({}, {"api-key": "weird-shaped-secret-42"}):
            got = await raw_post(f"{px.url}/chat/completions", chat(), headers=api_key_header)
            assert error_code(got.body) == "truncated"
        assert up.requests[0]["headers"]["Authorization"] == f"Bearer {KEY}"  # forwarded upstream
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert KEY.encode() not in stored and b"Bearer" not in stored
    assert b"weird-shaped-secret-42" not in stored and b"abc.def-123" not in stored
    store = open_store(str(db))
    try:
        records = list(store.read())
    finally:
        store.close()
    assert len(records) == 2
    for record in records:
        assert record.source == "proxy" and record.ending == "truncated" and not record.passed
        assert record.response_id == "chatcmpl-9" and record.headers["x-request-id"] == "req-7"
        assert record.ttfb_ms is not None and record.duration_ms is not None
        assert record.extra["action"] == "error-event" and record.extra["error_code"] == "truncated"
        assert record.model == "chaos-1"  # from the request when the upstream never named one


async def test_metrics_count_streams_by_ending_and_findings_by_kind() -> None:
    async with chaos_proxy(CHAOS) as (_, px):
        for fault in ("none", "none", "truncated", "tool_args_invalid_json"):
            await raw_post(f"{px.url}/chat/completions", chat(tools=[WEATHER_TOOL]), inject=fault)
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{px.root}/metrics") as resp:
                text = await resp.text()
            async with session.get(f"{px.root}/healthz") as resp:
                health = await resp.json()
    assert 'sseguard_proxy_streams_total{api="chat",ending="complete"} 3.0' in text
    assert 'sseguard_proxy_streams_total{api="chat",ending="truncated"} 1.0' in text
    assert 'sseguard_proxy_findings_total{api="chat",kind="tool_args_invalid_json"} 1.0' in text
    assert 'sseguard_proxy_bad_ends_total{action="error-event"} 2.0' in text
    assert "sseguard_proxy_ttft_seconds_count 4.0" in text
    assert "sseguard_proxy_stream_duration_seconds_count 4.0" in text
    assert health["status"] == "ok" and health["active_streams"] == 0
