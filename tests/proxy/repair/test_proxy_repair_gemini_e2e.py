"""``--repair-markup`` on a Gemini route, end to end: a real proxy on 127.0.0.1 in front of a chaos
upstream that leaves every markup family raw in ``text`` parts (``--raw-markup``), in both framings,
read raw and by the real google-genai SDK.

What the client gets is checked against the calls the chaos server generates, seen through a second
chaos server with the same seed that sends them structured (``functionCall`` parts: no parser of ours
involved), with Kimi's ids and Harmony's reasoning written out here; and the body the client gets
passes the strict Gemini checker."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

import httpx2
import pytest

from sseguard.chaos import ChaosConfig, Pacing, run_chaos
from sseguard.core.contract import checker_for
from sseguard.store import open_store
from support.gemini import sdk_client
from support.proxy import chaos_proxy, raw_post
from support.workers import started

SEED = 21
FRAMINGS = ["sse", "array"]
SCHEMAS = {"get_weather": {"type": "object", "properties": {"location": {"type": "string"},
                                                            "days": {"type": "integer"}},
                           "required": ["location"]},
           "get_time": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}}
TOOLS = [{"functionDeclarations": [{"name": name, "description": f"{name}.",
                                    "parametersJsonSchema": schema}
                                   for name, schema in SCHEMAS.items()]}]
ASK = "Call get_weather and get_time."
#: family → a piece of its markup the raw upstream must really have sent (the markup reached the proxy)
MARKERS = {"dsml-v32": "｜DSML｜", "dsml-v4": "｜DSML｜", "dsml-v41": "｜DSML｜",
           "deepseek-v3": "tool▁calls", "deepseek-v31": "tool▁calls", "hermes": "<tool_call>",
           "qwen3-coder": "<tool_call>", "kimi-k2": "<|tool_call_begin|>", "glm45": "\n<arg_key>",
           "glm47": "</arg_key><arg_value>", "harmony": "<|channel|>commentary to=functions.",
           "minimax-m2": "<minimax:tool_call>"}
#: Text of the markup that must never reach the client as text.
NEVER = ("｜DSML｜", "tool▁call", "<tool_call>", "</tool_call>", "<|", "|>", "<arg_", "</arg_",
         "minimax:", "<invoke", "<parameter", "<function=", "to=functions")


def _request(family: str) -> dict[str, Any]:
    request: dict[str, Any] = {"contents": [{"role": "user", "parts": [{"text": ASK}]}],
                               "tools": TOOLS}
    if family == "harmony":
        request["generationConfig"] = {"thinkingConfig": {"includeThoughts": True,
                                                          "thinkingBudget": 1024}}
    return request


def _url(base: str, framing: str) -> str:
    root = base.rsplit("/v1", 1)[0]
    query = "?alt=sse" if framing == "sse" else ""
    return f"{root}/v1beta/models/chaos-1:streamGenerateContent{query}"


def _records(body: bytes, framing: str) -> list[dict[str, Any]]:
    """The records a client reads (by ``json``: the framing is Google's, ``\\r\\n\\r\\n`` frames)."""
    if framing == "array":
        records: list[dict[str, Any]] = json.loads(body)
        return records
    frames = body.split(b"\r\n\r\n")
    assert frames[-1] == b"", body[-200:]
    records: list[dict[str, Any]] = []
    for frame in frames[:-1]:
        if frame.startswith(b'{"error"'):
            # The guard's error record is followed by the same object bare (what the JS SDK in
            # Gemini CLI throws on); SSE readers skip it.
            assert records and json.loads(frame) == records[-1], body[-400:]
            continue
        assert frame.startswith(b"data: "), body[-200:]
        records.append(json.loads(frame[len(b"data: "):]))
    return records


def _parts(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for r in records for c in r.get("candidates", [])
            for p in c.get("content", {}).get("parts", [])]


def _answer(parts: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]], str]:
    """The text, the function calls and the thoughts of an answer's parts."""
    text = "".join(p["text"] for p in parts if "text" in p and not p.get("thought"))
    thoughts = "".join(p["text"] for p in parts if "text" in p and p.get("thought"))
    return text, [p["functionCall"] for p in parts if "functionCall" in p], thoughts


async def _generated(family: str, framing: str) -> tuple[list[dict[str, Any]], str]:
    """The calls and thoughts the chaos server makes for the request at ``SEED``, as it sends them
    when it leaves nothing raw."""
    async with run_chaos(ChaosConfig(seed=SEED, pacing=Pacing(tokens=6))) as structured:
        body = (await raw_post(_url(structured.url, framing), _request(family))).body
    _, calls, thoughts = _answer(_parts(_records(body, framing)))
    return calls, thoughts


def _want(calls: list[dict[str, Any]], family: str) -> list[dict[str, Any]]:
    """The generated calls as the repair writes them: Kimi's own ids, none for the others."""
    if family != "kimi-k2":
        return calls
    return [{"id": f"functions.{c['name']}:{i}", **c} for i, c in enumerate(calls)]


@pytest.mark.parametrize("mode", ["family", "auto"])
@pytest.mark.parametrize("framing", FRAMINGS)
@pytest.mark.parametrize("family", sorted(MARKERS))
async def test_the_proxy_repairs_raw_markup_into_function_calls_in_both_framings(
        family: str, framing: str, mode: str, tmp_path: Path) -> None:
    generated, want_thoughts = await _generated(family, framing)
    assert [c["name"] for c in generated] == ["get_weather", "get_time"]
    assert all(set(c) == {"name", "args"} for c in generated)
    chaos = ChaosConfig(seed=SEED, raw_markup=family, pacing=Pacing(tokens=6))
    db = tmp_path / "repair.db"
    repair = family if mode == "family" else "auto"
    async with run_chaos(chaos) as direct, \
            chaos_proxy(chaos, repair_markup=repair, store=str(db)) as (_, px):
        raw = await raw_post(_url(direct.url, framing), _request(family))
        got = await raw_post(_url(px.url, framing), _request(family))
    raw_text, raw_calls, _ = _answer(_parts(_records(raw.body, framing)))
    assert MARKERS[family] in raw_text and raw_calls == []  # the upstream really left markup in text
    assert (got.status, got.error) == (200, None)
    records = _records(got.body, framing)
    text, calls, thoughts = _answer(_parts(records))
    assert calls == _want(generated, family)
    assert not any(piece in got.body.decode() for piece in NEVER), text
    if family == "harmony":  # the analysis channel arrives as thought parts, word for word
        assert want_thoughts and thoughts == want_thoughts
    assert records[-1]["candidates"][0]["finishReason"] == "STOP"
    checker = checker_for("gemini", _request(family))
    checker.feed(got.body)
    verdict = checker.close()
    assert (str(verdict.ending), verdict.findings) == ("complete", ())
    store = open_store(str(db))
    try:
        [record] = list(store.read())
    finally:
        store.close()
    assert record.api == "gemini" and record.ending == "complete" and record.passed
    assert record.extra["repaired_tool_calls"] == 2 and record.extra["repair"] == repair
    if mode == "auto":
        assert record.extra["repair_family"] == family


@pytest.mark.parametrize("framing", FRAMINGS)
async def test_a_healthy_text_stream_passes_the_repair_byte_identical(framing: str) -> None:
    chaos = ChaosConfig(seed=SEED, pacing=Pacing(tokens=12))
    request = {"contents": [{"role": "user", "parts": [{"text": "Say something."}]}]}
    async with run_chaos(chaos) as direct, chaos_proxy(chaos, repair_markup="auto") as (_, px):
        want = await raw_post(_url(direct.url, framing), request)
        got = await raw_post(_url(px.url, framing), request)
    assert got.body == want.body and b"STOP" in got.body


@pytest.mark.parametrize("framing", FRAMINGS)
@pytest.mark.parametrize("family", ["dsml-v4", "hermes", "kimi-k2"])
async def test_unparseable_markup_ends_the_stream_with_the_guard_error_never_as_text(
        family: str, framing: str) -> None:
    chaos = ChaosConfig(seed=SEED, raw_markup=family, pacing=Pacing(tokens=6))
    async with chaos_proxy(chaos, repair_markup="auto") as (_, px):
        got = await raw_post(_url(px.url, framing), _request(family), inject="malformed_closing_tag")
    records = _records(got.body, framing)  # one valid JSON array, or whole frames
    error = records[-1]["error"]
    assert (error["code"], error["status"]) == (502, "UNAVAILABLE")
    assert error["message"].startswith("markup_malformed_tag: ")
    assert not any(piece in got.body.decode() for piece in NEVER)


# ── the real google-genai SDK ───────────────────────────────────────────────────────────────────


#: The tools as google-genai declares them: ``parameters`` in Gemini's OpenAPI subset (its
#: ``parameters_json_schema``, sent in snake case, is tested in ``test_gemini_request_spelling.py``).
SDK_TOOLS = [{"function_declarations": [
    {"name": "get_weather", "description": "get_weather.", "parameters": {
        "type": "OBJECT", "properties": {"location": {"type": "STRING"}, "days": {"type": "INTEGER"}},
        "required": ["location"]}},
    {"name": "get_time", "description": "get_time.", "parameters": {
        "type": "OBJECT", "properties": {"tz": {"type": "STRING"}}, "required": ["tz"]}}]}]


def _config(family: str) -> dict[str, Any]:
    config: dict[str, Any] = {"tools": SDK_TOOLS}
    if family == "harmony":
        # In the body's own spelling: 3.6 writes a thinking_config's fields in snake case too.
        config["http_options"] = {"extra_body": {"generationConfig": {"thinkingConfig": {
            "includeThoughts": True, "thinkingBudget": 1024}}}}
    return config


def _read(chunks: list[Any]) -> tuple[list[dict[str, Any]], str, str, list[str]]:
    """What the SDK's chunks carry: the function calls, the text, the thoughts, the finish reasons."""
    calls: list[dict[str, Any]] = []
    text, thoughts, finishes = [], [], []
    for chunk in chunks:
        for candidate in chunk.candidates or []:
            if candidate.finish_reason is not None:
                finishes.append(candidate.finish_reason.value)
            for part in candidate.content.parts or [] if candidate.content else []:
                if part.function_call is not None:
                    call = part.function_call
                    calls.append({"name": call.name, "args": call.args}
                                 | ({"id": call.id} if call.id is not None else {}))
                elif part.text is not None:
                    (thoughts if part.thought else text).append(part.text)
    return calls, "".join(text), "".join(thoughts), finishes


def _sync_chunks(sdk: Any, family: str) -> list[Any]:
    return list(sdk.models.generate_content_stream(model="chaos-1", contents=ASK,
                                                   config=_config(family)))


async def _async_chunks(sdk: Any, family: str) -> list[Any]:
    stream = await sdk.aio.models.generate_content_stream(model="chaos-1", contents=ASK,
                                                          config=_config(family))
    return [chunk async for chunk in stream]


@pytest.mark.parametrize("family", sorted(MARKERS))
async def test_google_genai_gets_function_call_parts_from_a_repaired_stream(family: str) -> None:
    async with run_chaos(ChaosConfig(seed=SEED, pacing=Pacing(tokens=6))) as structured:
        # The calls the chaos server generates, as it sends them structured: ground truth.
        want, _, want_thoughts, _ = _read(await _async_chunks(
            sdk_client(structured.url.rsplit("/v1", 1)[0]), family))
    assert [c["name"] for c in want] == ["get_weather", "get_time"] and want[0]["args"]["location"]
    chaos = ChaosConfig(seed=SEED, raw_markup=family, pacing=Pacing(tokens=6))
    async with chaos_proxy(chaos, repair_markup="auto") as (upstream, px):
        sdk = sdk_client(px.url.rsplit("/v1", 1)[0])
        # Sync in a thread (the servers run in this event loop), then async.
        ways = [await asyncio.to_thread(_sync_chunks, sdk, family), await _async_chunks(sdk, family)]
        assert upstream.stats.apis == {"gemini": 2}
    for chunks in ways:
        calls, text, thoughts, finishes = _read(chunks)
        assert calls == _want(want, family)
        assert not any(piece in text for piece in NEVER), text
        assert finishes == ["STOP"]
        if family == "harmony":  # the analysis channel arrives as thought parts, word for word
            assert want_thoughts and thoughts == want_thoughts


async def test_google_genai_raises_on_unparseable_markup_never_showing_it() -> None:
    errors = pytest.importorskip("google.genai.errors")
    chaos = ChaosConfig(seed=SEED, raw_markup="dsml-v4", pacing=Pacing(tokens=6))
    async with chaos_proxy(chaos, repair_markup="auto") as (_, px):
        sdk = sdk_client(px.url.rsplit("/v1", 1)[0],
                         headers={"x-sseguard-inject": "malformed_closing_tag"})
        seen: list[str] = []
        with pytest.raises(errors.ServerError) as info:
            stream = await sdk.aio.models.generate_content_stream(
                model="chaos-1", contents=ASK, config=_config("dsml-v4"))
            async for chunk in stream:
                seen.append(_read([chunk])[1])
    assert str(info.value).startswith("502 UNAVAILABLE") and "markup_malformed_tag" in str(info.value)
    assert seen and not any(piece in "".join(seen) for piece in NEVER)


# ── the commands, as an operator runs them ──────────────────────────────────────────────────────


def test_sseguard_proxy_repair_markup_works_on_a_gemini_route(tmp_path: Path) -> None:
    """``sseguard chaos --raw-markup hermes`` behind ``sseguard proxy --repair-markup hermes``, both
    real processes: a Gemini route of either framing gets the calls as ``functionCall`` parts."""
    want = asyncio.run(_generated("hermes", "sse"))[0]
    db = tmp_path / "cli.db"
    with started(["chaos", "--listen", "127.0.0.1:0", "--seed", str(SEED), "--tokens", "6",
                  "--raw-markup", "hermes"]) as (chaos, chaos_line), \
            started(["proxy", "--upstream", chaos_line.split()[4], "--listen", "127.0.0.1:0",
                     "--repair-markup", "hermes", "--store", str(db)]) as (proxy, proxy_line):
        assert chaos_line.startswith("sseguard chaos listening on http://127.0.0.1:"), chaos_line
        assert proxy_line.startswith("sseguard proxy listening on http://127.0.0.1:"), proxy_line
        bodies = {}
        with httpx2.Client(timeout=30, headers={"x-goog-api-key": "AIza-test"}) as client:
            for framing in FRAMINGS:
                r = client.post(_url(proxy_line.split()[4], framing), json=_request("hermes"))
                assert r.status_code == 200
                bodies[framing] = r.content
        proxy.send_signal(signal.SIGTERM)
        assert proxy.wait(timeout=15) == 0
        chaos.send_signal(signal.SIGTERM)
        chaos.wait(timeout=15)
    for framing, body in bodies.items():
        text, calls, _ = _answer(_parts(_records(body, framing)))
        assert calls == want and "tool_call" not in text
    store = open_store(str(db))
    try:
        records = list(store.read())
    finally:
        store.close()
    assert [(r.api, r.ending, r.extra["repaired_tool_calls"]) for r in records] == [
        ("gemini", "complete", 2)] * 2
