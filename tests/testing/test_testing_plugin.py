"""The pytest plugin, used the way a client author uses it: real pytest sessions run by ``pytester``.

Each test writes a test file of a would-be user, runs it in a pytest session of its own and reads the
outcome. The inner tests talk real HTTP over loopback to the fixture's chaos upstream with the real
openai SDK, httpx2 and aiohttp, from sync and async tests alike.
"""

from __future__ import annotations

import importlib.metadata
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]


def _run(pytester: pytest.Pytester) -> pytest.RunResult:
    """Run the written test files in a pytest session of their own (in this process, with the
    plugin loaded from its installed entry point: that is part of what is tested)."""
    return pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider",
                                        "-o", "asyncio_default_fixture_loop_scope=function")

_STRICT_CLIENT = '''
import httpx2, openai, pytest
from sseguard.client import StrictTransport, StreamEndedBadly
from sseguard.testing import BAD_ENDINGS

MESSAGES = [{"role": "user", "content": "hi"}]

def strict_client(base_url):
    return openai.OpenAI(base_url=base_url, api_key="test", max_retries=0, timeout=30,
                         http_client=httpx2.Client(transport=StrictTransport(policy="strict")))

def test_healthy_stream_arrives_whole(sseguard_chaos):
    chunks = list(strict_client(sseguard_chaos.base_url).chat.completions.create(
        model="m", messages=MESSAGES, stream=True))
    assert chunks[-1].choices[0].finish_reason == "stop"

@pytest.mark.parametrize("fault", BAD_ENDINGS["chat"])
def test_every_bad_ending_raises(sseguard_chaos, fault):
    sseguard_chaos.inject(fault)
    with pytest.raises((openai.APIConnectionError, openai.APIError)) as info:
        for _ in strict_client(sseguard_chaos.base_url).chat.completions.create(
                model="m", messages=MESSAGES, stream=True,
                tools=[{"type": "function", "function": {"name": "get_weather", "parameters": {
                    "type": "object", "properties": {"city": {"type": "string"}}}}}]):
            pass
    [served] = sseguard_chaos.requests
    assert served.fault == fault
    if isinstance(info.value, openai.APIConnectionError) and fault != "http_error":
        assert isinstance(info.value.__cause__, StreamEndedBadly)
'''


def test_the_example_strict_client_test_passes(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user_client=_STRICT_CLIENT)
    result = _run(pytester)
    # One healthy test plus one per bad chat ending, written out here, not taken from the plugin.
    chat_bad = ["truncated", "no_done", "no_finish", "cut_mid_frame", "transport_error", "error_event",
                "http_error", "empty", "tool_call_unterminated"]
    result.assert_outcomes(passed=1 + len(chat_bad))
    for fault in chat_bad:
        assert f"test_every_bad_ending_raises[{fault}]" not in result.stdout.str()  # none failed


def test_a_naive_loop_is_caught_silent_on_truncated(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user_naive='''
import json, httpx2, pytest

def naive_answer(base_url):
    """Reads the stream the way many agents do: lines until the body ends, no check of the end."""
    text = []
    with httpx2.stream("POST", base_url + "/chat/completions", json={
            "model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}) as r:
        for line in r.iter_lines():
            if line.startswith("data: {"):
                delta = json.loads(line[6:])["choices"][0]["delta"]
                text.append(delta.get("content") or "")
    return "".join(text)

def test_naive_loop_notices_truncation(sseguard_chaos):
    sseguard_chaos.inject("truncated")
    with pytest.raises(Exception):
        naive_answer(sseguard_chaos.base_url)
''')
    result = _run(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*DID NOT RAISE*"])


def test_async_tests_use_the_same_fixture(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user_async='''
import aiohttp, httpx2, openai, pytest
from sseguard.client import AsyncStrictTransport

@pytest.mark.asyncio
async def test_async_sdk_raises_on_cut_frame(sseguard_chaos):
    sseguard_chaos.inject("cut_mid_frame")
    client = openai.AsyncOpenAI(base_url=sseguard_chaos.base_url, api_key="t", max_retries=0,
                                http_client=httpx2.AsyncClient(transport=AsyncStrictTransport()))
    with pytest.raises(openai.APIConnectionError):
        async for _ in await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], stream=True):
            pass

@pytest.mark.asyncio
async def test_any_http_client_reaches_it(sseguard_chaos):
    sseguard_chaos.inject("http_error", times=2)
    async with aiohttp.ClientSession() as session:
        for _ in range(3):
            async with session.post(sseguard_chaos.base_url + "/chat/completions",
                                    json={"model": "m", "messages": [{"role": "user", "content": "x"}]}) as r:
                await r.read()
    assert [r.status >= 400 for r in sseguard_chaos.requests] == [True, True, False]
    assert [r.fault for r in sseguard_chaos.requests] == ["http_error", "http_error", None]
''')
    result = _run(pytester)
    result.assert_outcomes(passed=2)


def test_requests_log_says_what_was_served_and_injected(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user_log='''
import httpx2

def test_log(sseguard_chaos):
    sseguard_chaos.inject("truncated", api="chat")
    sseguard_chaos.inject("no_done")
    with httpx2.Client(base_url=sseguard_chaos.base_url) as c:
        assert c.get("/models").status_code == 200
        for _ in range(3):
            c.post("/chat/completions", json={"model": "m", "stream": True,
                                              "messages": [{"role": "user", "content": "hi"}]})
    log = sseguard_chaos.requests
    assert [(r.method, r.path, r.api, r.fault) for r in log] == [
        ("GET", "/v1/models", None, None),
        ("POST", "/v1/chat/completions", "chat", "truncated"),
        ("POST", "/v1/chat/completions", "chat", "no_done"),
        ("POST", "/v1/chat/completions", "chat", None),
    ]
    assert log[1].stream and log[1].body["messages"][0]["content"] == "hi"
    assert sseguard_chaos.pending == 0
''')
    result = _run(pytester)
    result.assert_outcomes(passed=1)


def test_each_test_gets_a_fresh_upstream(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user_fresh='''
import httpx2

def test_first(sseguard_chaos):
    sseguard_chaos.inject("truncated", times=5)   # left over on purpose
    assert sseguard_chaos.pending == 5

def test_second(sseguard_chaos):
    assert sseguard_chaos.pending == 0 and sseguard_chaos.requests == []
    r = httpx2.post(sseguard_chaos.base_url + "/chat/completions",
                    json={"model": "m", "stream": True, "messages": [{"role": "user", "content": "x"}]})
    assert r.headers["x-sseguard-fault"] == "none"
''')
    result = _run(pytester)
    result.assert_outcomes(passed=2)


def test_nothing_is_left_behind_after_a_failing_test(pytester: pytest.Pytester, tmp_path: Path) -> None:
    port_file = tmp_path / "port"
    pytester.makepyfile(test_user_fails=f'''
import httpx2

def test_fails_half_way(sseguard_chaos):
    open({str(port_file)!r}, "w").write(str(httpx2.URL(sseguard_chaos.base_url).port))
    sseguard_chaos.inject("stalled")
    assert False, "the agent under test broke"
''')
    before = {t.ident for t in threading.enumerate()}
    result = _run(pytester)
    result.assert_outcomes(failed=1)
    left = [t for t in threading.enumerate() if t.ident not in before and t.is_alive()]
    assert left == []
    port = int(port_file.read_text())
    with socket.socket() as s, pytest.raises(ConnectionRefusedError):
        s.connect(("127.0.0.1", port))


def test_an_unknown_fault_name_lists_the_known_ones(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user_typo='''
def test_typo(sseguard_chaos):
    sseguard_chaos.inject("truncatd")
''')
    result = _run(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*ConfigError: unknown fault 'truncatd' (known: truncated, *"])


@pytest.mark.parametrize(("call", "message"), [
    ('sseguard_chaos.inject("truncated", times=0)', "times must be a positive integer, not 0"),
    ('sseguard_chaos.inject("truncated", api="grpc")', "unknown api 'grpc' (known: chat, responses, "
                                                        "messages, gemini)"),
    ('sseguard_chaos.dialect("no_dne")', "unknown dialect 'no_dne' (known: *"),
])
def test_bad_use_is_a_clear_error(pytester: pytest.Pytester, call: str, message: str) -> None:
    pytester.makepyfile(test_user_bad=f'''
def test_bad(sseguard_chaos):
    {call}
''')
    result = _run(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*Error: {message}"])


def test_marker_and_dialect_shape_the_upstream(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user_marker='''
import httpx2, pytest
from sseguard.testing import check_stream

BODY = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}

@pytest.mark.sseguard_chaos(dialects=["no_done"], tokens=3)
def test_marker_dialect(sseguard_chaos):
    body = httpx2.post(sseguard_chaos.base_url + "/chat/completions", json=BODY).content
    assert check_stream(body).ending == "no_done"
    assert not body.rstrip().endswith(b"[DONE]")

def test_dialect_switch(sseguard_chaos):
    sseguard_chaos.dialect("no_finish_reason")
    body = httpx2.post(sseguard_chaos.base_url + "/chat/completions", json=BODY).content
    assert check_stream(body, api="chat").ending == "no_finish"
    sseguard_chaos.dialect()
    body = httpx2.post(sseguard_chaos.base_url + "/chat/completions", json=BODY).content
    assert check_stream(body, api="chat").ending == "complete"

@pytest.mark.sseguard_chaos(colour="red")
def test_bad_marker(sseguard_chaos):
    pass
''')
    result = _run(pytester)
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*sseguard_chaos: *colour*"])


def test_parametrize_constants_name_each_protocols_bad_endings() -> None:
    from sseguard.testing import BAD_ENDINGS, DIALECTS

    assert set(BAD_ENDINGS) == {"chat", "responses", "messages", "gemini"} == set(DIALECTS)
    assert "no_done" in BAD_ENDINGS["messages"] and "no_done" not in BAD_ENDINGS["responses"]
    assert {"truncated", "cut_mid_frame", "transport_error", "error_event"} <= set(BAD_ENDINGS["chat"])
    assert "no_done" not in BAD_ENDINGS["gemini"] and "truncated" in BAD_ENDINGS["gemini"]


def test_the_plugin_is_registered_and_loads_nothing_heavy() -> None:
    names = {ep.value for ep in importlib.metadata.entry_points(group="pytest11")}
    assert "sseguard.pytest_plugin" in names
    code = ("import sys, sseguard.pytest_plugin; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('aiohttp', 'httpx2', 'httpx', 'msgspec', 'openai') or m.startswith('sseguard.chaos')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         check=True)
    assert out.stdout.strip() == "[]"


_EVERY_PROTOCOL = '''
import httpx2, pytest
from sseguard.testing import BAD_ENDINGS, check_stream

REQUESTS = {
    "chat": ("/chat/completions", {"model": "m", "stream": True,
                                   "messages": [{"role": "user", "content": "hi"}]}),
    "responses": ("/responses", {"model": "m", "stream": True, "input": "hi"}),
    "messages": ("/messages", {"model": "m", "stream": True, "max_tokens": 200,
                               "messages": [{"role": "user", "content": "hi"}]}),
    "gemini": ("/models/m:streamGenerateContent?alt=sse",
               {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}),
}

def raw_body(base_url, api):
    path, body = REQUESTS[api]
    got = bytearray()
    try:
        with httpx2.stream("POST", base_url + path, json=body, timeout=30) as r:
            status = r.status_code
            for piece in r.iter_raw():
                got += piece
    except httpx2.TransportError:
        return bytes(got), status, True
    return bytes(got), status, False

@pytest.mark.parametrize("api", ["chat", "responses", "messages", "gemini"])
def test_healthy(sseguard_chaos, api):
    body, status, broken = raw_body(sseguard_chaos.base_url, api)
    assert (status, broken) == (200, False)
    assert check_stream(body).ending == "complete"      # the protocol told from the body
    assert sseguard_chaos.requests[-1].api == api

@pytest.mark.parametrize("api,fault", [(a, f) for a in BAD_ENDINGS for f in BAD_ENDINGS[a]])
def test_bad(sseguard_chaos, api, fault):
    sseguard_chaos.inject(fault, api=api)
    body, status, broken = raw_body(sseguard_chaos.base_url, api)
    verdict = check_stream(body, api=api, http_status=status)
    assert broken or verdict.ending != "complete" or verdict.findings
    assert [r.fault for r in sseguard_chaos.requests] == [fault]
'''


def test_every_protocols_bad_endings_are_served(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user_protocols=_EVERY_PROTOCOL)
    result = _run(pytester)
    # 4 healthy + the bad endings written out per protocol here: 9 chat, 8 responses, 9 messages,
    # 6 gemini.
    result.assert_outcomes(passed=4 + 9 + 8 + 9 + 6)


def test_the_real_sdks_of_both_vendors_meet_the_fixture(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user_sdks='''
import anthropic, openai, pytest

def test_openai_responses_stream(sseguard_chaos):
    client = openai.OpenAI(base_url=sseguard_chaos.base_url, api_key="t", max_retries=0)
    with client.responses.stream(model="m", input="hi") as stream:
        final = stream.get_final_response()
    assert final.status == "completed" and final.output_text

def test_anthropic_naive_loop_is_silent_on_truncated(sseguard_chaos):
    sseguard_chaos.inject("truncated", api="messages")
    client = anthropic.Anthropic(base_url=sseguard_chaos.root_url, api_key="t", max_retries=0)
    events = list(client.messages.create(model="m", max_tokens=100, stream=True,
                                         messages=[{"role": "user", "content": "hi"}]))
    assert events[-1].type == "message_stop"    # fails: the SDK ended quietly mid-answer

@pytest.mark.asyncio
async def test_anthropic_async_healthy(sseguard_chaos):
    client = anthropic.AsyncAnthropic(base_url=sseguard_chaos.root_url, api_key="t", max_retries=0)
    async with client.messages.stream(model="m", max_tokens=100,
                                      messages=[{"role": "user", "content": "hi"}]) as stream:
        message = await stream.get_final_message()
    assert message.stop_reason == "end_turn"
''')
    result = _run(pytester)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*test_anthropic_naive_loop_is_silent_on_truncated*"])


def test_google_genai_with_the_strict_transports_raises_on_every_gemini_bad_ending(
        pytester: pytest.Pytester) -> None:
    """``BAD_ENDINGS["gemini"]`` end to end: the real google-genai SDK (sync and async), pointed at the
    fixture with sseguard's strict transports, raises on each bad ending; a healthy stream is read."""
    pytester.makepyfile(test_user_genai='''
import pytest
from google import genai
from google.genai import errors, types
from sseguard.client import AsyncStrictTransport, StreamEndedBadly, StrictTransport
from sseguard.testing import BAD_ENDINGS

def client(chaos):
    return genai.Client(api_key="t", http_options=types.HttpOptions(
        base_url=chaos.root_url, retry_options=types.HttpRetryOptions(attempts=1),
        client_args={"transport": StrictTransport()},
        async_client_args={"transport": AsyncStrictTransport()}))

def read(sdk):
    return "".join(c.text or "" for c in sdk.models.generate_content_stream(model="m", contents="hi"))

def test_healthy(sseguard_chaos):
    assert read(client(sseguard_chaos))
    assert sseguard_chaos.requests[-1].api == "gemini"

@pytest.mark.parametrize("fault", BAD_ENDINGS["gemini"])
def test_bad(sseguard_chaos, fault):
    sseguard_chaos.inject(fault, api="gemini")
    with pytest.raises((StreamEndedBadly, errors.APIError)):
        read(client(sseguard_chaos))
    assert [r.fault for r in sseguard_chaos.requests] == [fault]

@pytest.mark.asyncio
@pytest.mark.parametrize("fault", ["truncated", "error_event"])
async def test_bad_async(sseguard_chaos, fault):
    sseguard_chaos.inject(fault, api="gemini")
    stream = await client(sseguard_chaos).aio.models.generate_content_stream(model="m", contents="hi")
    with pytest.raises(StreamEndedBadly):
        async for _ in stream:
            pass
''')
    result = _run(pytester)
    # 1 healthy + the 6 bad endings written out per protocol above for gemini + 2 async.
    result.assert_outcomes(passed=1 + 6 + 2)
