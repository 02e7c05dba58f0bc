"""StrictTransport / AsyncStrictTransport: the real openai SDK (3.x) raises on every bad ending.

Every test talks HTTP over loopback to a real server (``_client_support``, and the chaos server for
the fault catalogue). The controls show that without the transport the SDK ends these streams quietly,
which is the whole reason the transport exists.
"""

from __future__ import annotations

import gzip
import json
import pickle
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest

from _client_support import BODIES, STALL_S, body, sse_server
from sseguard.client import AsyncStrictTransport, StreamEndedBadly, StrictTransport, describe
from sseguard.core.contract import StreamChecker
from sseguard.core.errors import ConfigError, SSEGuardError
from sseguard.core.policy import Policy
from sseguard.core.verdict import Ending, FindingKind

MESSAGES: list[Any] = [{"role": "user", "content": "What is the weather in Hangzhou?"}]
TOOLS = json.loads((BODIES.parent / "request_tools.json").read_text())["tools"]

HEALTHY = ["complete", "tool_calls", "crlf_comments", "dialect_empty_finish_reason",
           "dialect_usage_no_choices_key", "dialect_obfuscation_and_extensions", "healthy_long"]

#: Bodies that strict fails, and the ending (plus finding) the SDK's exception must carry.
BAD: dict[str, tuple[Ending, FindingKind | None]] = {
    "truncated": (Ending.TRUNCATED, None),
    "no_done": (Ending.NO_DONE, None),
    "no_finish": (Ending.NO_FINISH, None),
    "dialect_no_finish_reason": (Ending.NO_FINISH, None),
    "cut_mid_frame": (Ending.CUT_MID_FRAME, None),
    "cut_mid_frame_no_blank_line": (Ending.CUT_MID_FRAME, None),
    "error_event": (Ending.ERROR_EVENT, None),
    "error_event_named": (Ending.ERROR_EVENT, None),
    "empty": (Ending.EMPTY, None),
    "tool_args_cut": (Ending.TRUNCATED, FindingKind.TOOL_CALL_UNTERMINATED),
    "tool_args_invalid_json": (Ending.COMPLETE, FindingKind.TOOL_ARGS_INVALID_JSON),
    "markup_leak": (Ending.COMPLETE, FindingKind.MARKUP_LEAK),
    "finish_reason_mismatch": (Ending.COMPLETE, FindingKind.FINISH_REASON_MISMATCH),
    "undefined_tool": (Ending.COMPLETE, FindingKind.TOOL_UNDEFINED_FUNCTION),
    "reset": (Ending.TRANSPORT_ERROR, None),
}

#: Bad endings the SDK, left alone, takes for a normal end of the stream.
QUIET_WITHOUT_GUARD = ["truncated", "no_done", "no_finish", "cut_mid_frame", "error_event_named",
                       "empty", "tool_args_cut", "tool_args_invalid_json", "markup_leak"]


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with sse_server() as url:
        yield url


def _sync_client(base: str, transport: httpx2.BaseTransport | None) -> openai.OpenAI:
    http_client = httpx2.Client(transport=transport) if transport is not None else httpx2.Client()
    return openai.OpenAI(base_url=base, api_key="sk-test", max_retries=0, timeout=10,
                         http_client=http_client)


def _async_client(base: str, transport: httpx2.AsyncBaseTransport | None) -> openai.AsyncOpenAI:
    http_client = (httpx2.AsyncClient(transport=transport) if transport is not None
                   else httpx2.AsyncClient())
    return openai.AsyncOpenAI(base_url=base, api_key="sk-test", max_retries=0, timeout=10,
                              http_client=http_client)


def _dump(chunk: Any) -> dict[str, Any]:
    out: dict[str, Any] = chunk.model_dump()
    return out


def _stream_sync(server: str, name: str, transport: httpx2.BaseTransport | None,
                 mode: str = "frames") -> list[dict[str, Any]]:
    with _sync_client(f"{server}/{mode}/{name}/v1", transport) as client:
        stream = client.chat.completions.create(model="m", messages=MESSAGES, tools=TOOLS, stream=True)
        return [_dump(c) for c in stream]


async def _stream_async(server: str, name: str, transport: httpx2.AsyncBaseTransport | None,
                        mode: str = "frames") -> list[dict[str, Any]]:
    async with _async_client(f"{server}/{mode}/{name}/v1", transport) as client:
        stream = await client.chat.completions.create(model="m", messages=MESSAGES, tools=TOOLS,
                                                      stream=True)
        return [_dump(c) async for c in stream]


def _assert_guarded(info: pytest.ExceptionInfo[openai.APIConnectionError], name: str) -> StreamEndedBadly:
    cause = info.value.__cause__
    assert isinstance(cause, StreamEndedBadly), repr(cause)
    ending, finding = BAD[name]
    assert cause.verdict.ending is ending
    if finding is not None:
        assert finding in cause.verdict.finding_kinds
    message = str(cause)
    assert "\n" not in message and f"stream ended badly: {ending}" in message
    return cause


# ── through the openai SDK ─────────────────────────────────────────────────────────────────────
@pytest.mark.parametrize("name", HEALTHY)
def test_healthy_streams_arrive_intact(server: str, name: str) -> None:
    plain = _stream_sync(server, name, None)
    guarded = _stream_sync(server, name, StrictTransport())
    assert guarded == plain and len(guarded) >= 2


@pytest.mark.parametrize("name", HEALTHY)
async def test_healthy_streams_arrive_intact_async(server: str, name: str) -> None:
    plain = await _stream_async(server, name, None)
    guarded = await _stream_async(server, name, AsyncStrictTransport())
    assert guarded == plain and len(guarded) >= 2


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_endings_raise_through_the_sdk(server: str, name: str) -> None:
    with pytest.raises(openai.APIConnectionError) as info:
        _stream_sync(server, name, StrictTransport(policy="strict"))
    _assert_guarded(info, name)


@pytest.mark.parametrize("name", sorted(BAD))
async def test_bad_endings_raise_through_the_async_sdk(server: str, name: str) -> None:
    with pytest.raises(openai.APIConnectionError) as info:
        await _stream_async(server, name, AsyncStrictTransport(policy="strict"))
    _assert_guarded(info, name)


@pytest.mark.parametrize("name", QUIET_WITHOUT_GUARD)
def test_without_the_transport_the_sdk_ends_these_quietly(server: str, name: str) -> None:
    _stream_sync(server, name, None)  # no exception: the caller would act on half an answer


def test_the_data_form_error_event_is_raised_by_us_before_the_sdk_sees_it(server: str) -> None:
    with pytest.raises(openai.APIConnectionError) as info:
        _stream_sync(server, "error_event", StrictTransport())
    cause = _assert_guarded(info, "error_event")
    assert cause.verdict.error == "upstream overloaded" and "upstream overloaded" in str(cause)


@pytest.mark.parametrize("mode", ["bytes", "gzip"])
@pytest.mark.parametrize("name", ["complete", "truncated", "no_finish", "tool_args_invalid_json"])
def test_chunking_and_compression_do_not_change_the_outcome(server: str, name: str, mode: str) -> None:
    if name == "complete":
        assert _stream_sync(server, name, StrictTransport(), mode) == _stream_sync(server, name, None)
        return
    with pytest.raises(openai.APIConnectionError) as info:
        _stream_sync(server, name, StrictTransport(), mode)
    assert isinstance(info.value.__cause__, StreamEndedBadly)


def test_by_default_a_finished_answer_without_done_does_not_raise(server: str) -> None:
    chunks = _stream_sync(server, "no_done", StrictTransport())
    assert chunks == _stream_sync(server, "no_done", None)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    with pytest.raises(openai.APIConnectionError) as info:
        _stream_sync(server, "no_done", StrictTransport(policy="strict"))
    assert _assert_guarded(info, "no_done").verdict.ending is Ending.NO_DONE


async def test_by_default_a_finished_answer_without_done_does_not_raise_async(server: str) -> None:
    chunks = await _stream_async(server, "no_done", AsyncStrictTransport())
    assert chunks == await _stream_async(server, "no_done", None)
    with pytest.raises(openai.APIConnectionError) as info:
        await _stream_async(server, "no_done", AsyncStrictTransport(policy="strict"))
    assert _assert_guarded(info, "no_done").verdict.ending is Ending.NO_DONE


@pytest.mark.parametrize("policy", [Policy.from_spec(tolerate="no_done"), "no-done-ok"])
def test_a_policy_tolerating_no_done_lets_the_no_done_body_pass(server: str, policy: Policy | str) -> None:
    chunks = _stream_sync(server, "no_done", StrictTransport(policy=policy))
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    with pytest.raises(openai.APIConnectionError):  # but it does not let a truncated one pass
        _stream_sync(server, "truncated", StrictTransport(policy=policy))


async def test_a_policy_tolerating_no_done_lets_the_no_done_body_pass_async(server: str) -> None:
    chunks = await _stream_async(server, "no_done", AsyncStrictTransport(policy="no-done-ok"))
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_the_request_body_tells_the_checker_which_tools_exist(server: str) -> None:
    with pytest.raises(openai.APIConnectionError):
        _stream_sync(server, "undefined_tool", StrictTransport())
    # Without reading the request, a call to an unknown function cannot be told apart.
    chunks = _stream_sync(server, "undefined_tool", StrictTransport(request_aware=False))
    assert chunks[0]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"] == "delete_everything"


def test_stall_timeout_raises_within_bounded_time(server: str) -> None:
    started = time.monotonic()
    with pytest.raises(openai.APIConnectionError) as info:
        _stream_sync(server, "stall", StrictTransport(stall_timeout=1.0))
    elapsed = time.monotonic() - started
    cause = info.value.__cause__
    assert isinstance(cause, StreamEndedBadly) and cause.verdict.ending is Ending.STALLED
    assert isinstance(cause.__cause__, httpx2.TimeoutException)
    assert 0.9 < elapsed < STALL_S / 2  # the stall timeout, long before the server's silence ends


async def test_stall_timeout_raises_within_bounded_time_async(server: str) -> None:
    started = time.monotonic()
    with pytest.raises(openai.APIConnectionError) as info:
        await _stream_async(server, "stall", AsyncStrictTransport(stall_timeout=1.0))
    elapsed = time.monotonic() - started
    cause = info.value.__cause__
    assert isinstance(cause, StreamEndedBadly) and cause.verdict.ending is Ending.STALLED
    assert 0.9 < elapsed < STALL_S / 2


class _NoTimeouts(httpx2.AsyncBaseTransport):
    """A wrapped transport that drops the read timeout, as a custom transport might."""

    def __init__(self) -> None:
        self.inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        request.extensions = {**request.extensions, "timeout": {"connect": 5.0, "read": None,
                                                               "write": 5.0, "pool": 5.0}}
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_async_stall_is_caught_even_when_the_wrapped_transport_ignores_timeouts(server: str) -> None:
    started = time.monotonic()
    with pytest.raises(openai.APIConnectionError) as info:
        await _stream_async(server, "stall", AsyncStrictTransport(_NoTimeouts(), stall_timeout=1.0))
    assert isinstance(info.value.__cause__, StreamEndedBadly)
    assert info.value.__cause__.verdict.ending is Ending.STALLED
    assert time.monotonic() - started < STALL_S / 2


def test_http_errors_and_plain_json_pass_through_untouched(server: str) -> None:
    with pytest.raises(openai.APIStatusError) as info:
        _stream_sync(server, "http_error", StrictTransport())
    assert info.value.status_code == 503
    with _sync_client(f"{server}/frames/not_a_stream/v1", StrictTransport()) as client:
        reply = client.chat.completions.create(model="m", messages=MESSAGES)
    assert reply.id == "x"


# ── the transport without the SDK ──────────────────────────────────────────────────────────────
def test_stream_ended_badly_is_a_transport_error_with_the_verdict(server: str) -> None:
    with httpx2.Client(transport=StrictTransport()) as client, \
            client.stream("POST", f"{server}/bytes/tool_args_cut/v1/chat/completions",
                          json={"model": "m", "tools": TOOLS}) as response:
        seen = b""
        with pytest.raises(StreamEndedBadly) as info:
            for piece in response.iter_bytes():
                seen += piece
    exc = info.value
    assert isinstance(exc, httpx2.TransportError) and isinstance(exc, SSEGuardError)
    assert seen == body("tool_args_cut")  # every byte reached the caller before the verdict
    assert exc.verdict.ending is Ending.TRUNCATED
    assert exc.request.url.path.endswith("/chat/completions")
    assert str(exc).startswith("stream ended badly: truncated; first finding tool_call_unterminated: ")
    again = pickle.loads(pickle.dumps(exc))
    assert isinstance(again, StreamEndedBadly) and again.verdict == exc.verdict


def test_a_transport_error_keeps_the_original_error_as_its_cause(server: str) -> None:
    with pytest.raises(openai.APIConnectionError) as info:
        _stream_sync(server, "reset", StrictTransport())
    cause = info.value.__cause__
    assert isinstance(cause, StreamEndedBadly) and isinstance(cause.__cause__, httpx2.TransportError)
    # A policy that tolerates transport errors still lets the caller see the original error.
    with pytest.raises(openai.APIConnectionError) as tolerated:
        _stream_sync(server, "reset", StrictTransport(policy=Policy.from_spec(tolerate="transport_error")))
    assert not isinstance(tolerated.value.__cause__, StreamEndedBadly)


def test_a_stream_closed_early_by_the_caller_is_not_judged(server: str) -> None:
    with httpx2.Client(transport=StrictTransport()) as client, \
            client.stream("POST", f"{server}/frames/truncated/v1/chat/completions", json={}) as response:
        first = next(response.iter_bytes())
    assert first.startswith(b"data: ")  # leaving the block closed the stream: no exception


def test_the_message_is_one_redacted_line() -> None:
    checker = StreamChecker()
    checker.feed(b'data: {"error": {"message": "bad key sk-abcdefghijklmnop\\nretry"}}\n\n')
    message = describe(checker.close())
    assert "\n" not in message and "sk-abcdefghijklmnop" not in message
    assert message.startswith("stream ended badly: error_event (bad key [REDACTED] retry)")


def test_bad_options_are_config_errors() -> None:
    with pytest.raises(ConfigError):
        StrictTransport(stall_timeout=0)
    with pytest.raises(ConfigError):
        AsyncStrictTransport(policy="bogus")


# ── the chaos upstream: every fault it can inject ──────────────────────────────────────────────
def test_every_chaos_fault_is_raised_or_passed_as_the_policy_says() -> None:
    from sseguard.chaos import INJECT_HEADER, ChaosConfig, Fault, FaultOptions, run_chaos_in_thread
    from support.expected import expected as expected_of

    strict = Policy.from_spec()
    # Stalls hang until the transport gives up: no race between the client's timer and the server's.
    config = ChaosConfig(seed=3, options=FaultOptions(stall_then="hang", hang_max_s=60))
    with run_chaos_in_thread(config) as chaos, \
            openai.OpenAI(base_url=chaos.url, api_key="sk-test", max_retries=0, timeout=10,
                          http_client=httpx2.Client(transport=StrictTransport(
                              stall_timeout=1.0, policy="strict"))) as client:
        for fault in Fault:
            if fault in (Fault.SEQUENCE_GAP, Fault.EVENT_ORDER, Fault.BLOCK_UNTERMINATED,
                         Fault.DONE_MISMATCH):
                continue  # Responses/Messages only: a chat stream cannot carry them
            expected = expected_of(fault)
            if fault is Fault.HTTP_ERROR:
                with pytest.raises(openai.APIStatusError):
                    client.chat.completions.create(model="m", messages=MESSAGES, stream=True,
                                                   extra_headers={INJECT_HEADER: fault})
                continue
            bad = expected.ending != "complete" or bool(expected.findings - set(map(str, strict.tolerate)))
            stream = client.chat.completions.create(
                model="m", messages=MESSAGES, stream=True, tools=TOOLS,
                stream_options={"include_usage": True}, extra_headers={INJECT_HEADER: fault})
            if not bad:
                assert list(stream), fault
                continue
            if fault is Fault.BAD_CHUNK_JSON:
                # The SDK parses the broken frame before [DONE] and raises its own JSON error; the
                # transport judges findings at [DONE], which the SDK never reaches.
                with pytest.raises(ValueError):
                    list(stream)
                continue
            with pytest.raises(openai.APIConnectionError) as info:
                list(stream)
            assert isinstance(info.value.__cause__, StreamEndedBadly), (fault, info.value)
            assert info.value.__cause__.verdict.ending == expected.ending, fault


# ── legacy httpx ───────────────────────────────────────────────────────────────────────────────
def test_legacy_httpx_adapter_makes_an_httpx_client_strict(server: str) -> None:
    httpx = pytest.importorskip("httpx")
    from sseguard.client import httpx_transport

    transport = httpx_transport()
    assert isinstance(transport, httpx.BaseTransport)
    client = openai.OpenAI(base_url=f"{server}/frames/truncated/v1", api_key="sk-test", max_retries=0,
                           http_client=httpx.Client(transport=transport))
    with client, pytest.raises(openai.APIConnectionError) as info:
        list(client.chat.completions.create(model="m", messages=MESSAGES, stream=True))
    cause = info.value.__cause__
    assert isinstance(cause, StreamEndedBadly) and isinstance(cause, httpx.TransportError)
    assert cause.verdict.ending is Ending.TRUNCATED
    with httpx.Client(transport=httpx_transport()) as client, \
            client.stream("POST", f"{server}/frames/complete/v1/chat/completions", json={}) as response:
        assert b"".join(response.iter_bytes()) == body("complete")


async def test_legacy_httpx_adapter_async(server: str) -> None:
    httpx = pytest.importorskip("httpx")
    from sseguard.client import async_httpx_transport

    async with httpx.AsyncClient(transport=async_httpx_transport(stall_timeout=1.0)) as client:
        async with client.stream("POST", f"{server}/frames/no_finish/v1/chat/completions",
                                 json={}) as response:
            with pytest.raises(StreamEndedBadly) as info:
                async for _ in response.aiter_bytes():
                    pass
        assert isinstance(info.value, httpx.TransportError)
        assert info.value.verdict.ending is Ending.NO_FINISH
        async with client.stream("POST", f"{server}/frames/stall/v1/chat/completions",
                                 json={}) as response:
            with pytest.raises(StreamEndedBadly) as stalled:
                async for _ in response.aiter_bytes():
                    pass
        assert stalled.value.verdict.ending is Ending.STALLED


def test_gzip_helper_is_real() -> None:
    # The compressed mode of the test server really compresses (else the gzip cases prove nothing).
    assert gzip.decompress(gzip.compress(body("complete"))) == body("complete")


def test_importing_sseguard_client_does_not_import_legacy_httpx() -> None:
    import subprocess
    import sys

    code = "import sys, sseguard.client; print('httpx' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=Path(__file__).parents[1])
    assert out.stdout.strip() == "False", out.stderr
