"""``chaos --upstream`` on loopback: a real upstream's streams (the generated chaos server, and a
scripted raw upstream writing vLLM's chunks token by token) broken in front of the real SDKs of all
four protocols; the ``x-sseguard-fault`` header, seed replay, ``--first-answer``, garbled answers on
cached prompts, and everything else relayed as it came."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from sseguard.chaos import ChaosConfig, ChaosServer, Pacing, run_chaos
from sseguard.chaos.config import FaultOptions
from sseguard.chaos.upstream_server import UpstreamChaos, run_upstream_chaos
from support.gemini import sdk_client
from support.proxy import Script, scripted

# The upstream's answers have 12 words; with ``tokens = 4`` a cut strikes after word 1 to 4.
UPSTREAM = ChaosConfig(model="up-1", pacing=Pacing(tokens=12))
FRONT = ChaosConfig(seed=3, pacing=Pacing(tokens=4),
                    options=FaultOptions(responses_error_form="nested", http_statuses=(500,)))
CHAT_TEXT = "Chunk honest signal honest model count client client ledger reason count harbor."
OTHER_TEXT = "Token honest bright write frame compass send frame send small hold harbor."
GEMINI_TEXT = "Compass shape chunk measure shape delta shape return simple river mountain response."


@contextlib.asynccontextmanager
async def chain(front: ChaosConfig = FRONT) -> AsyncIterator[tuple[ChaosServer, UpstreamChaos]]:
    async with run_chaos(UPSTREAM) as up, run_upstream_chaos(front, up.url) as chaos:
        yield up, chaos


def _headers(inject: str | None) -> dict[str, str]:
    return {"x-sseguard-inject": inject} if inject is not None else {}


async def _chat(url: str, inject: str | None) -> tuple[str, str | None]:
    async with openai.AsyncOpenAI(base_url=url, api_key="sk-test", max_retries=0, timeout=30,
                                  default_headers=_headers(inject)) as client:
        stream = await client.chat.completions.create(
            model="up-1", messages=[{"role": "user", "content": "hi"}], stream=True)
        text, finish = "", None
        async for chunk in stream:
            for choice in chunk.choices:
                text += choice.delta.content or ""
                finish = choice.finish_reason or finish
        return text, finish


async def _responses(url: str, inject: str | None) -> tuple[str, str | None]:
    async with openai.AsyncOpenAI(base_url=url, api_key="sk-test", max_retries=0, timeout=30,
                                  default_headers=_headers(inject)) as client:
        stream = await client.responses.create(model="up-1", input="hi", stream=True)
        text, last = "", None
        async for event in stream:
            last = event.type
            if event.type == "response.output_text.delta":
                text += event.delta
        return text, "completed" if last == "response.completed" else None


async def _messages(url: str, inject: str | None) -> tuple[str, str | None]:
    async with anthropic.AsyncAnthropic(base_url=url.removesuffix("/v1"), api_key="sk-ant-test",
                                        max_retries=0, timeout=30,
                                        default_headers=_headers(inject)) as client:
        stream = await client.messages.create(model="up-1", max_tokens=100, stream=True,
                                              messages=[{"role": "user", "content": "hi"}])
        text, stop = "", None
        async for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                text += event.delta.text
            if event.type == "message_delta":
                stop = event.delta.stop_reason
        return text, stop


async def _gemini(url: str, inject: str | None) -> tuple[str, str | None]:
    sdk = sdk_client(url.removesuffix("/v1"), headers=_headers(inject), timeout=30_000)
    stream = await sdk.aio.models.generate_content_stream(model="up-1", contents="hi")
    text, finish = "", None
    async for chunk in stream:
        text += chunk.text or ""
        for cand in chunk.candidates or ():
            finish = str(cand.finish_reason.value) if cand.finish_reason else finish
    return text, finish


CLIENTS = {"chat": (_chat, CHAT_TEXT, "stop"), "responses": (_responses, OTHER_TEXT, "completed"),
           "messages": (_messages, OTHER_TEXT, "end_turn"), "gemini": (_gemini, GEMINI_TEXT, "STOP")}
#: What each SDK raises on the faults that end a stream with an error (measured, written literally).
RAISES = {
    ("chat", "error_event"): "openai.APIError",
    ("responses", "error_event"): "openai.APIError",
    ("messages", "error_event"): "anthropic.APIStatusError",
    ("gemini", "error_event"): "google.genai.errors.ServerError",
    ("chat", "http_error"): "openai.InternalServerError",
    ("responses", "http_error"): "openai.InternalServerError",
    ("messages", "http_error"): "anthropic.InternalServerError",
    ("gemini", "http_error"): "google.genai.errors.ServerError",
    ("chat", "transport_error"): "openai.APIConnectionError",
    ("responses", "transport_error"): "openai.APIConnectionError",
    ("messages", "transport_error"): "anthropic.APIConnectionError",
    ("gemini", "transport_error"): "aiohttp.client_exceptions.ClientPayloadError",
}


def _name(exc: BaseException) -> str:
    return f"{type(exc).__module__}.{type(exc).__qualname__}".replace("openai._exceptions",
                                                                       "openai").replace(
        "anthropic._exceptions", "anthropic")


@pytest.mark.parametrize("api", list(CLIENTS))
async def test_the_sdks_see_each_fault_of_a_relayed_stream(api: str) -> None:
    read, whole, finish = CLIENTS[api]
    async with chain() as (_, chaos):
        assert await read(chaos.url, "none") == (whole, finish)
        for fault in ("truncated", "cut_mid_frame"):
            if (api, fault) == ("gemini", "cut_mid_frame"):
                with pytest.raises(Exception) as caught:  # google-genai parses each read whole
                    await read(chaos.url, fault)
                assert _name(caught.value) == "google.genai.errors.UnknownApiResponseError"
                continue
            text, got = await read(chaos.url, fault)
            # Cut after one to four of the twelve words, before the finish: a prefix, no finish.
            assert got is None and text and whole.startswith(text) and text != whole, (fault, text)
        if api != "gemini":
            text, got = await read(chaos.url, "no_finish")
            assert (text, got) == (whole, None)
        for fault in ("error_event", "http_error", "transport_error"):
            with pytest.raises(Exception) as caught:
                await read(chaos.url, fault)
            assert _name(caught.value) == RAISES[(api, fault)], fault
        stats = chaos.stats.to_dict()
    injected = 6 if api == "gemini" else 7
    assert stats["requests"] == injected
    assert stats["faults"]["none"] == 1 and stats["faults"]["truncated"] == 1


async def test_the_header_names_the_fault_and_a_seed_replays_the_run() -> None:
    config = ChaosConfig(seed=11, pacing=Pacing(tokens=4)).with_overrides(
        faults=["truncated=0.3", "error_event=0.2", "stalled=0.1"], stall_ms=1.0)
    body = {"model": "up-1", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    runs = []
    for _ in range(2):
        async with chain(config) as (_, chaos), httpx.AsyncClient(timeout=30) as client:
            headers = []
            for _i in range(24):
                r = await client.post(f"{chaos.url}/chat/completions", json=body)
                headers.append(r.headers["x-sseguard-fault"])
            runs.append(headers)
    async with run_chaos(config) as generated, httpx.AsyncClient(timeout=30) as client:
        drawn = []
        for _i in range(24):
            r = await client.post(f"{generated.url}/chat/completions", json=body)
            drawn.append(r.headers["x-sseguard-fault"])
    assert runs[0] == runs[1] == drawn  # the generated server draws the same faults
    assert {"truncated", "error_event", "stalled", "none"} <= set(runs[0])


async def test_other_requests_are_relayed_as_they_came() -> None:
    async with chain() as (up, chaos), httpx.AsyncClient(timeout=30) as client:
        models = (await client.get(f"{chaos.url}/models")).json()
        assert [m["id"] for m in models["data"]] == ["up-1"]
        body = {"model": "up-1", "messages": [{"role": "user", "content": "hi"}]}
        whole = await client.post(f"{chaos.url}/chat/completions", json=body,
                                  headers=_headers("truncated"))
        # A non-streamed answer cannot be cut mid-stream: relayed whole, the fault skipped.
        assert whole.headers["x-sseguard-fault"] == "none"
        assert whole.json()["choices"][0]["message"]["content"] == CHAT_TEXT
        bad = await client.post(f"{chaos.url}/chat/completions", json={"model": "up-1"})
        assert bad.status_code == 400 and "messages" in bad.json()["error"]["message"]
        unknown = await client.post(f"{chaos.url}/chat/completions", json=body,
                                    headers=_headers("no_such_fault"))
        assert unknown.status_code == 400
        stats = (await client.get(f"{chaos.root}/chaos/stats")).json()
    assert stats["skipped"] == {"truncated": 1}
    # The upstream answered the answer and the refused request (its stats count its POSTs), not the
    # request naming an unknown fault, which chaos refused itself.
    assert up.stats.requests == 2 and up.stats.bad_requests == 1


async def test_garbled_answers_only_on_prompts_a_cache_serves() -> None:
    front = ChaosConfig(seed=2, options=FaultOptions(garble_after=6, garble_span=10)
                        ).with_overrides(garble_cached=1.0)
    async with chain(front) as (_, chaos), httpx.AsyncClient(timeout=30) as client:
        async def ask(content: str) -> tuple[str, str]:
            body = {"model": "up-1", "stream": True,
                    "messages": [{"role": "user", "content": content}]}
            r = await client.post(f"{chaos.url}/chat/completions", json=body)
            text = "".join(json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
                           for line in r.text.split("\n\n") if line.startswith("data: {")
                           and json.loads(line[6:])["choices"])
            return r.headers["x-sseguard-fault"], text

        # Long prompts (a cache block's worth, 256 characters or more): a repeat is a cache hit.
        first = await ask("one " * 80)
        other = await ask("two " * 80)
        short = await ask("one")
        again_short = await ask("one")
        again = await ask("one " * 80)
        assert short[0] == again_short[0] == "none"  # a short prompt fills no block
    assert first[0] == other[0] == "none"
    assert again[0] == "garbled"
    # Characters 6 to 15 of the repeat are the start of the latest other stream, the rest its own.
    assert again[1][:6] == first[1][:6] and again[1][16:] == first[1][16:]
    assert again[1][6:16] == again_short[1][:10] != first[1][6:16]
    assert other[1] != first[1]


async def test_first_answer_breaks_each_conversation_once() -> None:
    front = ChaosConfig(seed=1, pacing=Pacing(tokens=12)).with_overrides(first_answer="truncated")
    async with chain(front) as (_, chaos):
        # At half the answer: after word 1 + int(0.5 × 12) = 7.
        assert await _chat(chaos.url, None) == (
            "Chunk honest signal honest model count client", None)
        assert await _chat(chaos.url, None) == (CHAT_TEXT, "stop")
        async with httpx.AsyncClient(timeout=30) as client:
            log = (await client.get(f"{chaos.root}/chaos/conversations")).json()
    assert [(c["requests"], c["broken"], c["last_text"]) for c in log.values()] == [
        (2, "truncated", CHAT_TEXT)]


VLLM_HEAD = {"id": "chatcmpl-9f", "object": "chat.completion.chunk", "created": 1, "model": "qwen"}


def _vllm_chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish, **extra}
    return b"data: " + json.dumps({**VLLM_HEAD, "choices": [choice]}).encode() + b"\n\n"


async def test_a_scripted_raw_upstream_cut_token_by_token() -> None:
    """vLLM's own chunk shape (``token_ids`` beside each delta), one write per token, as a real
    engine streams: the cut falls after the target token, the SDK sees the prefix and no finish."""
    words = ["The", " tide", " is", " measured", " every", " morning", "."]
    chunks: list[Any] = [_vllm_chunk({"role": "assistant", "content": ""})]
    for i, word in enumerate(words):
        chunks += [_vllm_chunk({"content": word}, token_ids=[100 + i]), 0.001]
    chunks += [_vllm_chunk({"content": ""}, "stop", stop_reason=None), b"data: [DONE]\n\n"]
    front = ChaosConfig(seed=4, pacing=Pacing(tokens=4))
    async with scripted(Script(chunks=chunks)) as up, run_upstream_chaos(front, up.url) as chaos:
        whole = await _chat(chaos.url, "none")
        cut = await _chat(chaos.url, "truncated")
        forwarded = up.requests[-1]["headers"]
    assert whole == ("The tide is measured every morning.", "stop")
    assert cut[1] is None and cut[0] and "The tide is measured every morning.".startswith(cut[0])
    assert len(cut[0].split()) <= 4  # after token 1 to 4
    assert "x-sseguard-inject" not in {k.lower() for k in forwarded}
    assert forwarded["Authorization"] == "Bearer sk-test"


def test_the_cli_refuses_a_bad_upstream_in_one_line() -> None:
    done = subprocess.run([sys.executable, "-m", "sseguard.cli", "chaos", "--upstream", "ftp://x"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: --upstream 'ftp://x': an http:// or https:// URL with a host"]


async def test_the_cli_relays_with_faults() -> None:
    async with run_chaos(UPSTREAM) as up:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "sseguard.cli", "chaos", "--upstream", up.url, "--listen",
            "127.0.0.1:0", "--json", "--fault", "truncated=1", stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL)
        try:
            assert proc.stdout is not None
            line = await asyncio.wait_for(proc.stdout.readline(), 60)
            info = json.loads(line)
            assert info["upstream"] == up.url
            text, finish = await _chat(info["url"], None)
            assert finish is None and CHAT_TEXT.startswith(text) and text
        finally:
            proc.terminate()
            await asyncio.wait_for(proc.wait(), 30)


async def test_what_chaos_cannot_parse_is_relayed_as_a_stream() -> None:
    """A request chaos's parser refuses (a tool choice naming no offered tool) reaches the upstream,
    which may well accept it: its stream comes back byte for byte, without a fault header."""
    body = b"".join([_vllm_chunk({"role": "assistant", "content": ""}), _vllm_chunk({"content": "Hi"}),
                     _vllm_chunk({"content": ""}, "stop"), b"data: [DONE]\n\n"])
    front = ChaosConfig(seed=4).with_overrides(faults=["truncated=1"])
    request = {"model": "qwen", "stream": True, "messages": [{"role": "user", "content": "hi"}],
               "tool_choice": {"type": "function", "function": {"name": "nope"}}}
    async with scripted(Script(chunks=[body])) as up, run_upstream_chaos(front, up.url) as chaos, \
            httpx.AsyncClient(timeout=30) as client:
        got = await client.post(f"{chaos.url}/chat/completions", json=request)
        whole = await client.post(f"{chaos.url}/chat/completions",
                                  json={**request, "tool_choice": "auto"})
        stats = chaos.stats.to_dict()
    assert got.content == body and "x-sseguard-fault" not in got.headers
    assert whole.headers["x-sseguard-fault"] == "truncated" and whole.content != body
    assert stats["requests"] == 1 and stats["frames"] == 2  # the role and "Hi": cut before the finish


async def test_a_non_streamed_answer_is_stalled_or_reset() -> None:
    front = ChaosConfig(seed=4).with_overrides(stall_ms=50.0)
    body = {"model": "up-1", "messages": [{"role": "user", "content": "hi"}]}
    async with chain(front) as (_, chaos), httpx.AsyncClient(timeout=30) as client:
        stalled = await client.post(f"{chaos.url}/chat/completions", json=body,
                                    headers=_headers("stalled"))
        assert stalled.headers["x-sseguard-fault"] == "stalled"
        assert stalled.json()["choices"][0]["message"]["content"] == CHAT_TEXT
        with pytest.raises(httpx.HTTPError):
            await client.post(f"{chaos.url}/chat/completions", json=body,
                              headers=_headers("transport_error"))
