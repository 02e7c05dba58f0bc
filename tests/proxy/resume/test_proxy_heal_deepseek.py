"""``--resume deepseek``: a chat stream that broke after content is continued by DeepSeek's chat prefix
completion (the last message ``{"role": "assistant", "content": SENT, "prefix": true}``) on the beta
base URL, and spliced into the same client stream; the usage a continued stream reports sums every
attempt's completion tokens; a client that leaves between attempts still gets its stream's record."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import openai
import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st
from test_proxy_heal_resume import PART, REST, SPLICED
from yarl import URL

from sseguard.chaos import ChaosConfig, Fault, Pacing, run_chaos
from sseguard.core.errors import ConfigError
from sseguard.proxy import run_proxy
from sseguard.proxy.resume.usage import CHAT_KEYS, UsageSum
from support.proxy import KEY, chat, proxy_config, raw_post
from support.proxy_heal import Step, Upstream, _settled, heal_proxy


def _data(body: bytes) -> list[dict[str, Any]]:
    return [json.loads(f.split(b"data: ", 1)[1]) for f in body.split(b"\n\n")
            if b"data: {" in f]


# ── the continuation request ─────────────────────────────────────────────────────────────────────
@pytest.mark.parametrize("cut", [
    Step(PART, end="reset"),  # transport_error
    Step(PART),  # truncated
    Step(PART + b'data: {"id":"c1","choi', end="eof"),  # cut_mid_frame
], ids=["reset", "truncated", "cut_mid_frame"])
async def test_a_break_is_continued_by_prefix_completion_on_the_beta_base_url(cut: Step) -> None:
    async with heal_proxy([cut, Step(REST)], resume="deepseek") as (up, px, waits, records):
        got = await raw_post(f"{px.url}/chat/completions?trace=1", chat())
        await _settled(records, 2)
    assert got.body == PART + SPLICED and got.error is None
    assert up.paths == ["/v1/chat/completions", "/beta/chat/completions"] and waits == []
    sent = json.loads(up.bodies[1])
    assert sent["messages"] == [*chat()["messages"],
                                {"role": "assistant", "content": "Hel", "prefix": True}]
    assert "continue_final_message" not in sent and "add_generation_prompt" not in sent
    client = next(r for r in records.items if r.heal_of is None)
    attempt = next(r for r in records.items if r.heal_of is not None)
    assert client.ending == "complete" and client.healed == "resume" and client.heal_attempts == 1
    assert attempt.heal_of == client.index and attempt.ending != "complete"


@contextlib.asynccontextmanager
async def _upstream(steps: list[Step]) -> AsyncIterator[Upstream]:
    up = Upstream(steps)
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", up.handle)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    up.url = f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
    try:
        yield up
    finally:
        await runner.cleanup()


async def test_resume_base_url_says_where_continuations_go() -> None:
    async with _upstream([Step(PART, end="reset")]) as main, _upstream([Step(REST)]) as beta:
        base = f"{URL(beta.url).origin()}/other/beta/"
        async with run_proxy(proxy_config(main.url, resume="deepseek",
                                          resume_base_url=base)) as px:
            got = await raw_post(f"{px.url}/chat/completions", chat())
    assert got.body == PART + SPLICED
    assert main.paths == ["/v1/chat/completions"] and beta.paths == ["/other/beta/chat/completions"]
    assert json.loads(beta.bodies[0])["messages"][-1] == {"role": "assistant", "content": "Hel",
                                                          "prefix": True}


@pytest.mark.parametrize("upstream, base", [
    ("https://api.deepseek.com", "https://api.deepseek.com/beta"),
    ("https://api.deepseek.com/v1", "https://api.deepseek.com/beta"),
    ("https://api.deepseek.com/v1/", "https://api.deepseek.com/beta"),
    ("https://gateway.example/deepseek/v1", "https://gateway.example/deepseek/beta"),
    ("http://127.0.0.1:8000/v1beta/openai", "http://127.0.0.1:8000/v1beta/openai/beta"),
])
def test_the_default_resume_base_url_is_the_upstream_with_beta_for_its_version(
        upstream: str, base: str) -> None:
    config = proxy_config(upstream, resume="deepseek")
    assert str(config.resume_base_url) == base


def test_an_explicit_resume_base_url_is_kept_without_its_trailing_slash() -> None:
    config = proxy_config("https://api.deepseek.com", resume="deepseek,anthropic",
                          resume_base_url="https://beta.example/ds/")
    assert str(config.resume_base_url) == "https://beta.example/ds"
    assert config.resume == "deepseek,anthropic"
    assert proxy_config("https://api.deepseek.com", resume="vllm").resume_base_url is None


@pytest.mark.parametrize("options, message", [
    ({"resume": "deepseek", "resume_base_url": "api.deepseek.com/beta"},
     "--resume-base-url 'api.deepseek.com/beta' must be an http:// or https:// base URL"),
    ({"resume": "deepseek", "resume_base_url": "https://api.deepseek.com/beta#x"},
     "--resume-base-url 'https://api.deepseek.com/beta#x' must not carry a query or fragment"),
    ({"resume": "deepseek", "resume_base_url": "http://[::1/beta"},
     "--resume-base-url 'http://[::1/beta' is not a URL"),
    ({"resume": "deepseek,vllm"}, "deepseek and vllm both continue chat streams"),
    ({"resume_base_url": "https://api.deepseek.com/beta"},
     "--resume-base-url is used only by --resume deepseek"),
])
def test_bad_resume_options_are_one_line_config_errors(options: dict[str, Any],
                                                       message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        proxy_config("https://api.deepseek.com", **options)
    assert message in str(caught.value) and "\n" not in str(caught.value)


# ── usage summed over the attempts ───────────────────────────────────────────────────────────────
def _usage(prompt: int, completion: int, total: int) -> bytes:
    return (b'data: {"id":"cX","object":"chat.completion.chunk","choices":[],"usage":'
            + json.dumps({"prompt_tokens": prompt, "completion_tokens": completion,
                          "total_tokens": total}).encode() + b"}\n\n")


async def test_the_final_chat_usage_is_the_original_prompt_plus_every_attempts_completion() -> None:
    # The first answer reports its usage, then ends without a finish_reason (no_finish).
    first = PART + _usage(7, 1, 8) + b"data: [DONE]\n\n"
    rest = REST.replace(b"data: [DONE]\n\n", _usage(8, 2, 10) + b"data: [DONE]\n\n")
    async with heal_proxy([Step(first), Step(rest)], resume="deepseek") as (up, px, _, records):
        got = await raw_post(f"{px.url}/chat/completions",
                             chat(stream_options={"include_usage": True}))
        await _settled(records, 2)
    assert len(up.paths) == 2
    usages = [f["usage"] for f in _data(got.body) if f.get("usage")]
    assert usages[-1] == {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
    client = next(r for r in records.items if r.heal_of is None)
    attempt = next(r for r in records.items if r.heal_of is not None)
    assert client.usage == {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
    assert attempt.usage == {"prompt_tokens": 7, "completion_tokens": 1, "total_tokens": 8}
    assert client.heal_tokens == 1 and client.heal_attempts == 1


async def test_usage_over_three_attempts_when_the_first_reported_none() -> None:
    # 1: cut before any usage; 2: "lo" and its usage, then [DONE] without a finish_reason;
    # 3: "!" with finish and usage. The original prompt is unknown (the first attempt reported
    # none), so the first continuation's prompt count stands in for it.
    second = (b'data: {"id":"c8","choices":[{"index":0,"delta":{"content":"lo"},'
              b'"finish_reason":null}]}\n\n' + _usage(9, 2, 11) + b"data: [DONE]\n\n")
    third = (b'data: {"id":"c7","choices":[{"index":0,"delta":{"content":"!"},'
             b'"finish_reason":"stop"}]}\n\n' + _usage(10, 4, 14) + b"data: [DONE]\n\n")
    async with heal_proxy([Step(PART, end="reset"), Step(second), Step(third)],
                          resume="deepseek") as (up, px, _, records):
        got = await raw_post(f"{px.url}/chat/completions",
                             chat(stream_options={"include_usage": True}))
        await _settled(records, 3)
    assert len(up.paths) == 3
    assert json.loads(up.bodies[2])["messages"][-1] == {"role": "assistant", "content": "Hello",
                                                        "prefix": True}
    frames = _data(got.body)
    assert "".join(c["delta"].get("content") or "" for f in frames
                   for c in f.get("choices") or ()) == "Hello!"
    assert {f["id"] for f in frames} == {"c1"}
    assert [f["usage"] for f in frames if f.get("usage")] == [
        {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11},
        {"prompt_tokens": 9, "completion_tokens": 6, "total_tokens": 15}]
    client = next(r for r in records.items if r.heal_of is None)
    attempts = [r for r in records.items if r.heal_of is not None]
    assert client.usage == {"prompt_tokens": 9, "completion_tokens": 6, "total_tokens": 15}
    assert [a.usage for a in attempts] == [
        None, {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}]
    assert client.heal_attempts == 2 and client.heal_tokens == 2


def _ev(obj: dict[str, Any]) -> bytes:
    return f"event: {obj['type']}\ndata: {json.dumps(obj)}\n\n".encode()


def _start(message_id: str, input_tokens: int, output_tokens: int) -> bytes:
    return _ev({"type": "message_start", "message": {
        "id": message_id, "type": "message", "role": "assistant", "model": "m", "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}}})


async def test_the_final_messages_usage_sums_the_output_tokens_of_every_attempt() -> None:
    part = (_start("msg_client", 12, 1)
            + _ev({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "text", "text": ""}})
            + _ev({"type": "content_block_delta", "index": 0,
                   "delta": {"type": "text_delta", "text": "Hello"}}))
    rest = (_start("msg_other", 14, 1)
            + _ev({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "text", "text": ""}})
            + _ev({"type": "content_block_delta", "index": 0,
                   "delta": {"type": "text_delta", "text": " world"}})
            + _ev({"type": "content_block_stop", "index": 0})
            + _ev({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                   "usage": {"input_tokens": 14, "output_tokens": 5}})
            + _ev({"type": "message_stop"}))
    request = {"model": "m", "max_tokens": 100, "stream": True,
               "messages": [{"role": "user", "content": "hi"}]}
    async with heal_proxy([Step(part, end="reset"), Step(rest)], resume="anthropic") as (
            up, px, _, records):
        got = await raw_post(f"{px.url}/messages", request,
                             headers={"anthropic-version": "2023-06-01"})
        await _settled(records, 2)
    assert len(up.paths) == 2
    delta = next(f for f in _data(got.body) if f["type"] == "message_delta")
    assert delta["usage"] == {"input_tokens": 12, "output_tokens": 6}
    starts = [f for f in _data(got.body) if f["type"] == "message_start"]
    assert [s["message"]["id"] for s in starts] == ["msg_client"]
    client = next(r for r in records.items if r.heal_of is None)
    attempt = next(r for r in records.items if r.heal_of is not None)
    assert client.usage == {"input_tokens": 12, "output_tokens": 6}
    assert attempt.usage == {"input_tokens": 12, "output_tokens": 1}
    assert client.heal_tokens == 1


# ── a client that leaves between attempts ────────────────────────────────────────────────────────
async def test_a_client_that_leaves_during_the_retry_backoff_still_gets_its_stream_record() -> None:
    backing_off = asyncio.Event()

    async def sleep_until_cancelled(seconds: float) -> None:
        backing_off.set()
        await asyncio.Event().wait()  # never set: only the client's leaving ends this wait

    async with heal_proxy([Step(b'{"error":{"message":"busy"}}', 503), Step()]) as (
            up, px, _, records):
        px.state.sleep = sleep_until_cancelled
        task = asyncio.create_task(raw_post(f"{px.url}/chat/completions", chat()))
        await backing_off.wait()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await _settled(records, 2)
        text = px.state.metrics.render().decode()
    assert len(up.paths) == 1  # the retry was never made
    attempt = next(r for r in records.items if r.heal_of is not None)
    clients = [r for r in records.items if r.heal_of is None]
    assert len(clients) == 1 and attempt.heal_of == clients[0].index
    client = clients[0]
    assert client.extra.get("client_disconnected") is True and client.status is None
    assert (client.healed, client.heal_attempts) == ("retry", 1)
    assert attempt.status == 503
    assert 'sseguard_proxy_streams_total{api="chat",ending="client_disconnect"} 1.0' in text


async def test_a_client_that_leaves_while_a_retry_waits_for_headers_still_gets_its_record() -> None:
    async with heal_proxy([Step(b'{"error":{"message":"busy"}}', 503),
                           Step(b"", end="hang")], stall_timeout=30.0) as (up, px, _, records):
        task = asyncio.create_task(raw_post(f"{px.url}/chat/completions", chat()))
        await up.hanging.wait()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await asyncio.wait_for(up.hung_up.wait(), 10)
        await _settled(records, 2)
    assert len(up.paths) == 2
    client = next(r for r in records.items if r.heal_of is None)
    attempts = [r for r in records.items if r.heal_of is not None]
    assert [a.heal_of for a in attempts] == [client.index] and len(records.items) == 2
    assert client.extra.get("client_disconnected") is True and client.heal_attempts == 1


# ── chaos: prefix completion on /beta ────────────────────────────────────────────────────────────
async def _post(url: str, body: dict[str, Any]) -> tuple[int, bytes]:
    async with aiohttp.ClientSession() as session, session.post(url, json=body) as resp:
        return resp.status, await resp.read()


def _text(body: bytes) -> str:
    return "".join(c["delta"].get("content") or "" for f in _data(body)
                   for c in f.get("choices") or ())


async def test_chaos_answers_prefix_completion_on_beta_and_refuses_it_on_v1() -> None:
    pacing = Pacing(ttft_ms=0, inter_token_ms=0, tokens=12)
    messages = [{"role": "user", "content": "tell me something"}]
    async with run_chaos(ChaosConfig(seed=3, pacing=pacing)) as chaos:
        origin = str(URL(chaos.url).origin())
        status, whole = await _post(f"{chaos.url}/chat/completions",
                                    {"model": "m", "messages": messages, "stream": True})
        answer = _text(whole)
        prefix = answer[:len(answer) // 2]
        ask = {"model": "m", "stream": True, "messages": [
            *messages, {"role": "assistant", "content": prefix, "prefix": True}]}
        beta_status, rest = await _post(f"{origin}/beta/chat/completions", ask)
        v1_status, refused = await _post(f"{chaos.url}/chat/completions", ask)
        other = {**ask, "messages": [*messages, {"role": "assistant", "content": "zzz",
                                                 "prefix": True}]}
        _, different = await _post(f"{origin}/beta/chat/completions", other)
        _, plain = await _post(f"{origin}/beta/chat/completions",
                               {"model": "m", "messages": messages, "stream": True})
    assert status == 200 and beta_status == 200 and len(answer) > 20
    assert prefix + _text(rest) == answer
    assert v1_status == 400 and b'"param":"messages"' in refused and b"/beta" in refused
    assert _text(different) == answer  # not its answer's prefix: the answer as it is
    assert _text(plain) == answer


# ── end to end: the openai SDK through --resume deepseek ─────────────────────────────────────────
PACING = Pacing(ttft_ms=0, inter_token_ms=0, tokens=16)
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {"location": {"type": "string"}},
                   "required": ["location"]}}}
Answer = tuple[str, list[tuple[str, str]], str, int | None]


def _kwargs(i: int) -> dict[str, Any]:
    return {"model": "deepseek-chat", "stream": True,
            "messages": [{"role": "user", "content": f"what is the weather in town {i}?"}],
            "stream_options": {"include_usage": True},
            **({"tools": [WEATHER]} if i % 3 == 0 else {})}


def _fold(chunks: Any) -> Answer:
    text, calls, finish, prompt = "", {}, "", None
    for chunk in chunks:
        if chunk.usage is not None:
            prompt = chunk.usage.prompt_tokens
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for call in choice.delta.tool_calls or ():
                name, args = calls.get(call.index, ("", ""))
                fn = call.function
                if fn is not None:
                    name, args = name + (fn.name or ""), args + (fn.arguments or "")
                calls[call.index] = (name, args)
            finish = choice.finish_reason or finish
    return text, [calls[k] for k in sorted(calls)], finish, prompt


async def _no_wait(seconds: float) -> None:
    return None


async def test_100_faulty_streams_through_resume_deepseek_equal_the_fault_free_answers() -> None:
    faults = {Fault.TRUNCATED: 0.3, Fault.CUT_MID_FRAME: 0.2}
    # At 50 % faults per request, continuations included, twenty continuations leave a stream
    # unhealed about once in two million (0.5 ** 21).
    options = {"retry": 20, "resume": "deepseek", "resume_max": 20}
    async with run_chaos(ChaosConfig(seed=21, pacing=PACING, faults=faults)) as bad, \
            run_chaos(ChaosConfig(seed=21, pacing=PACING)) as good, \
            run_proxy(proxy_config(bad.url, **options)) as px:
        px.state.sleep = _no_wait
        gate = asyncio.Semaphore(32)
        healed = openai.AsyncOpenAI(base_url=px.url, api_key=KEY, max_retries=0, timeout=60)
        synced = openai.OpenAI(base_url=px.url, api_key=KEY, max_retries=0, timeout=60)
        direct = openai.AsyncOpenAI(base_url=good.url, api_key=KEY, max_retries=0, timeout=60)

        async def through(i: int) -> Answer:
            async with gate:
                if i % 4 == 0:
                    return await asyncio.to_thread(
                        lambda: _fold(list(synced.chat.completions.create(**_kwargs(i)))))
                stream = await healed.chat.completions.create(**_kwargs(i))
                return _fold([chunk async for chunk in stream])

        async def reference(i: int) -> Answer:
            async with gate:
                stream = await direct.chat.completions.create(**_kwargs(i))
                return _fold([chunk async for chunk in stream])

        with synced:
            async with healed, direct:
                got = await asyncio.gather(*(through(i) for i in range(100)),
                                           return_exceptions=True)
                want = await asyncio.gather(*(reference(i) for i in range(100)))
        requests = bad.stats.requests
        metrics = px.state.metrics.render().decode()
    assert [g for g in got if isinstance(g, BaseException)] == []
    assert got == want  # text, tool calls, finish_reason and the prompt tokens, byte for byte
    assert all(finish in ("stop", "tool_calls") for _, _, finish, _ in want)
    assert sum(1 for _, calls, _, _ in want if calls) >= 30
    assert requests > 140  # faults happened, and were healed
    assert 'how="resume",result="passed"' in metrics


# ── the usage sum, for any attempts ──────────────────────────────────────────────────────────────
Reported = tuple[int, int] | None  # an attempt's (prompt, completion), or None: it reported none


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.tuples(st.integers(0, 10**6), st.integers(0, 10**6))),
                min_size=0, max_size=6),
       st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)))
def test_the_client_gets_the_first_reported_prompt_and_every_reported_completion(
        broken: list[Reported], last: tuple[int, int]) -> None:
    usage = UsageSum(CHAT_KEYS)
    for reported in broken:  # attempts continued after they broke
        if reported is not None:
            usage.seen({"prompt_tokens": reported[0], "completion_tokens": reported[1]})
        usage.end_attempt()
    final = usage.rewrite({"prompt_tokens": last[0], "completion_tokens": last[1],
                           "total_tokens": last[0] + last[1]})
    reported_prompts = [r[0] for r in broken if r is not None]
    prompt = reported_prompts[0] if reported_prompts else last[0]
    completion = sum(r[1] for r in broken if r is not None) + last[1]
    assert final == {"prompt_tokens": prompt, "completion_tokens": completion,
                     "total_tokens": prompt + completion}
