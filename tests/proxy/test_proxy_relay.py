"""Everything that is not a guarded stream is relayed verbatim, both bodies streamed: models, embeddings,
legacy completions, count_tokens, non-streaming calls, 50 MB uploads and downloads with the proxy's
memory flat; bases with and without /v1; timeouts on the relay; and never an open relay."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import aiohttp
import anthropic
import openai
import pytest
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _virtual_time import VirtualTimers, until
from sseguard.proxy import ProxyConfig, run_proxy
from support.proxy import KEY, Script, chat, in_thread, proxy_config, raw_post, scripted

PATTERN = bytes(range(256)) * 256  # 64 KiB


def pattern_chunks(total: int) -> Iterator[bytes]:
    """``total`` bytes of a fixed pattern, in 64 KiB pieces (the last one shorter)."""
    left = total
    while left > 0:
        piece = PATTERN[:min(left, len(PATTERN))]
        left -= len(piece)
        yield piece


def pattern_sha(total: int) -> str:
    digest = hashlib.sha256()
    for piece in pattern_chunks(total):
        digest.update(piece)
    return digest.hexdigest()


# ── a small upstream with the endpoints chaos does not have ──────────────────────────────────────


@dataclass
class Upstream:
    """Records every request it gets; answers models, embeddings, completions, count_tokens,
    uploads (hashed as they stream in) and downloads (streamed out)."""

    url: str = ""
    seen: list[dict[str, Any]] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        tail = request.match_info["tail"]
        entry: dict[str, Any] = {"method": request.method, "path": request.path_qs,
                                 "raw_path": request.raw_path, "headers": dict(request.headers)}
        self.seen.append(entry)
        if tail == "upload":
            digest, size = hashlib.sha256(), 0
            async for piece in request.content.iter_any():
                digest.update(piece)
                size += len(piece)
            return web.json_response({"sha256": digest.hexdigest(), "bytes": size})
        if tail.startswith("download/"):
            total = int(tail.split("/")[1])
            resp = web.StreamResponse(headers={"Content-Type": "application/octet-stream",
                                               "Content-Length": str(total)})
            await resp.prepare(request)
            for piece in pattern_chunks(total):
                await resp.write(piece)
            await resp.write_eof()
            return resp
        body = await request.read()
        entry["body"] = body
        obj = json.loads(body) if body else {}
        if tail == "models":
            return web.json_response({"object": "list", "data": [
                {"id": "relay-1", "object": "model", "created": 1, "owned_by": "test"}]})
        if tail == "embeddings":
            text = obj["input"]
            return web.json_response({"object": "list", "model": obj["model"], "data": [
                {"object": "embedding", "index": 0, "embedding": [len(text) / 10, 0.5]}],
                "usage": {"prompt_tokens": 3, "total_tokens": 3}})
        if tail == "messages/count_tokens":
            words = sum(len(m["content"].split()) for m in obj["messages"])
            return web.json_response({"input_tokens": words})
        if tail == "completions" and obj.get("stream"):
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            for i, word in enumerate(["Once", " upon", " a", " time"]):
                chunk = {"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m",
                         "choices": [{"text": word, "index": 0, "logprobs": None,
                                      "finish_reason": "stop" if i == 3 else None}]}
                await resp.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
            return resp
        if tail == "completions":
            return web.json_response({"id": "cmpl-2", "object": "text_completion", "created": 1,
                                      "model": "m", "choices": [{"text": "Once upon a time",
                                                                 "index": 0, "logprobs": None,
                                                                 "finish_reason": "stop"}]})
        return web.json_response({"error": {"message": f"no {tail}"}}, status=404)


@contextlib.asynccontextmanager
async def upstream(base: str = "/v1") -> AsyncIterator[Upstream]:
    up = Upstream()
    app = web.Application(client_max_size=1024 ** 3)
    app.router.add_route("*", base.rstrip("/") + "/{tail:.*}", up.handle)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    up.url = f"http://127.0.0.1:{runner.addresses[0][1]}{base}"
    try:
        yield up
    finally:
        await runner.cleanup()


@contextlib.asynccontextmanager
async def relayed(base: str = "/v1", **options: Any) -> AsyncIterator[tuple[Upstream, str]]:
    async with upstream(base) as up, run_proxy(proxy_config(up.url, **options)) as px:
        yield up, px.url


def _openai(url: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=url, api_key=KEY, max_retries=0, timeout=20)


# ── the SDKs' other endpoints ────────────────────────────────────────────────────────────────────


async def test_models_embeddings_and_completions_reach_the_openai_sdk_as_direct() -> None:
    async with relayed() as (up, url):
        results = {}
        for name, base in (("direct", up.url), ("proxied", url)):
            async with _openai(base) as client:
                models = await client.models.list()
                embedding = await client.embeddings.create(model="e", input="relay me")
                completion = await client.completions.create(model="m", prompt="Tell")
                stream = await client.completions.create(model="m", prompt="Tell", stream=True)
                texts = [c.choices[0].text async for c in stream]
            results[name] = (models.model_dump(), embedding.model_dump(), completion.model_dump(),
                             texts)
        paths = [s["path"] for s in up.seen]
    assert results["proxied"] == results["direct"]
    assert results["direct"][3] == ["Once", " upon", " a", " time"]
    assert results["direct"][1]["data"][0]["embedding"] == [0.8, 0.5]
    assert paths == ["/v1/models", "/v1/embeddings", "/v1/completions", "/v1/completions"] * 2


async def test_count_tokens_goes_through_for_the_anthropic_sdk() -> None:
    async with relayed() as (up, url), anthropic.AsyncAnthropic(
            base_url=url.removesuffix("/v1"), api_key=KEY, max_retries=0) as client:
        counted = await client.messages.count_tokens(
            model="claude-x", messages=[{"role": "user", "content": "three words here"}])
    assert counted.input_tokens == 3
    [seen] = up.seen
    headers = {k.lower(): v for k, v in seen["headers"].items()}
    assert seen["path"] == "/v1/messages/count_tokens"
    # The key goes upstream in whichever header the SDK put it (anthropic 2.x: Authorization).
    assert KEY in headers.get("x-api-key", "") + headers.get("authorization", "")
    assert "anthropic-version" in headers


@pytest.mark.parametrize("path", ["/chat/completions", "/responses", "/messages"])
async def test_non_streaming_calls_of_the_guarded_endpoints_are_relayed_verbatim(path: str) -> None:
    answer = b'{"id": "x-1", "object": "whatever", "weird":   "spacing kept"}'
    script = Script([answer], headers={"Content-Type": "application/json", "X-Upstream": "u1"})
    request = chat(stream=False)
    async with scripted(script) as up, run_proxy(proxy_config(up.url)) as px:
        got = await raw_post(f"{px.url}{path}?beta=true", request)
    assert got.status == 200 and got.body == answer and got.headers["X-Upstream"] == "u1"
    [seen] = up.requests
    assert seen["path"] == f"/v1{path}?beta=true" and json.loads(seen["body"]) == request


async def test_any_method_query_and_status_pass_through() -> None:
    script = Script([b"gone"], status=410, headers={"Content-Type": "text/plain", "X-Why": "old"})
    async with scripted(script) as up, run_proxy(proxy_config(up.url)) as px, \
            aiohttp.ClientSession() as session:
        for method in ("DELETE", "PATCH", "PUT", "GET"):
            async with session.request(method, f"{px.url}/files/file-1?purpose=a%20b",
                                       data=b"payload" if method != "GET" else None) as resp:
                assert resp.status == 410 and await resp.read() == b"gone"
                assert resp.headers["X-Why"] == "old"
    assert [(r["method"], r["path"], r["body"]) for r in up.requests] == [
        ("DELETE", "/v1/files/file-1?purpose=a%20b", b"payload"),
        ("PATCH", "/v1/files/file-1?purpose=a%20b", b"payload"),
        ("PUT", "/v1/files/file-1?purpose=a%20b", b"payload"),
        ("GET", "/v1/files/file-1?purpose=a%20b", b"")]


async def test_compressed_answers_pass_through_still_compressed() -> None:
    import gzip

    packed = gzip.compress(b'{"data": []}')
    script = Script([packed], headers={"Content-Type": "application/json",
                                       "Content-Encoding": "gzip"})
    async with scripted(script) as up, run_proxy(proxy_config(up.url)) as px, \
            aiohttp.ClientSession(auto_decompress=False) as session, \
            session.get(f"{px.url}/models", headers={"Accept-Encoding": "gzip"}) as resp:
        body = await resp.read()
        assert resp.headers["Content-Encoding"] == "gzip"
    assert body == packed and up.requests[0]["headers"]["Accept-Encoding"] == "gzip"


async def test_max_body_limits_only_the_bodies_the_proxy_reads_itself() -> None:
    async with relayed(max_body="4KiB") as (up, url), aiohttp.ClientSession() as session:
        async with session.post(f"{url}/upload", data=b"y" * 50_000) as resp:
            assert resp.status == 200  # streamed through, never held
            assert (await resp.json())["bytes"] == 50_000
        async with session.post(f"{url}/messages", data=b"{" + b" " * 5000 + b"}") as resp:
            assert resp.status == 413
            error = (await resp.json())["error"]  # in Anthropic's shape, for a messages client
    assert error["type"] == "invalid_request_error" and "--max-body" in error["message"]
    assert [s["path"] for s in up.seen] == ["/v1/upload"]


# ── large bodies, streamed ───────────────────────────────────────────────────────────────────────

BIG = 50 * 1024 * 1024


def _peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


@contextlib.contextmanager
def proxy_process(upstream_url: str) -> Iterator[tuple[int, str]]:
    """``sseguard proxy`` as its own process (so its memory is its own); yields pid and base URL."""
    proc = subprocess.Popen([sys.executable, "-c", "from sseguard.cli import main; main()", "proxy",
                             "--upstream", upstream_url, "--listen", "127.0.0.1:0", "--store",
                             "none"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, "COLUMNS": "200"})
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("sseguard proxy listening on "), line
        yield proc.pid, line.split()[4]
    finally:
        proc.terminate()
        proc.wait(15)


async def test_50_mb_up_and_down_are_byte_identical_and_the_proxy_memory_stays_flat() -> None:
    async def body() -> AsyncIterator[bytes]:
        for piece in pattern_chunks(BIG):
            yield piece

    async with upstream() as up:
        with proxy_process(up.url) as (pid, url):
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session:
                async with session.get(f"{url}/models") as resp:
                    assert resp.status == 200
                before = _peak_rss_mb(pid)
                async with session.post(f"{url}/upload", data=body(),
                                        headers={"Content-Length": str(BIG)}) as resp:
                    uploaded = await resp.json()
                async with session.post(f"{url}/upload", data=body()) as resp:  # chunked
                    uploaded_chunked = await resp.json()
                digest, size = hashlib.sha256(), 0
                async with session.get(f"{url}/download/{BIG}") as resp:
                    assert resp.headers["Content-Length"] == str(BIG)
                    async for piece in resp.content.iter_any():
                        digest.update(piece)
                        size += len(piece)
                grew = _peak_rss_mb(pid) - before
    want = pattern_sha(BIG)
    assert uploaded == {"sha256": want, "bytes": BIG} and uploaded_chunked == uploaded
    assert size == BIG and digest.hexdigest() == want
    assert grew < 25, f"the proxy's peak memory grew by {grew:.1f} MB for 150 MB relayed"
    declared, chunked = up.seen[1]["headers"], up.seen[2]["headers"]
    assert declared["Content-Length"] == str(BIG) and "Transfer-Encoding" not in declared
    assert chunked["Transfer-Encoding"] == "chunked"


# ── bounded waits ────────────────────────────────────────────────────────────────────────────────


async def test_a_relayed_body_that_stalls_is_cut_after_the_stall_timeout() -> None:
    script = Script([b'{"partial": '], end="hang", headers={"Content-Type": "application/json",
                                                          "Content-Length": "100"})
    timers = VirtualTimers()  # the silence lasts as long as the test says
    async with scripted(script) as up, run_proxy(proxy_config(up.url, stall_timeout=2.0)) as px:
        px.state.timers = timers
        client = asyncio.create_task(raw_post(f"{px.url}/files", b"x", timeout=20))
        await asyncio.wait_for(up.hanging.wait(), 10)
        await timers.stall(1.9)
        assert not client.done()  # short of the stall timeout
        await timers.stall(0.1)
        got = await asyncio.wait_for(client, 10)
        await asyncio.wait_for(up.disconnected.wait(), 10)  # and the upstream was let go
        text = px.state.metrics.render().decode()
    assert got.body == b'{"partial": ' and got.error is not None  # incomplete, never a clean end
    assert 'sseguard_proxy_upstream_errors_total{kind="stalled"} 1.0' in text


async def test_relayed_requests_get_a_504_when_no_headers_come_within_the_timeout() -> None:
    never = asyncio.Event()  # the upstream's headers never come
    timers = VirtualTimers()  # and --timeout passes when the test says

    async def timed_out(session: aiohttp.ClientSession, headers: dict[str, str]) -> Any:
        seen = len(up.requests)
        client = asyncio.create_task(session.get(f"{px.url}/models", headers=headers))
        await until(lambda: len(up.requests) > seen)
        await timers.stall(0.9)
        assert not client.done()  # short of --timeout
        await timers.stall(0.1)
        async with await asyncio.wait_for(client, 10) as resp:
            assert resp.status == 504
            return await resp.json()

    async with scripted(Script([b"{}"], before_headers=never)) as up, \
            run_proxy(proxy_config(up.url, timeout=1.0)) as px, aiohttp.ClientSession() as session:
        px.state.timers = timers
        assert (await timed_out(session, {}))["error"]["code"] == "upstream_timeout"
        body = await timed_out(session, {"anthropic-version": "2023-06-01"})
        never.set()
    assert body["type"] == "error" and body["error"]["code"] == "upstream_timeout"


async def test_a_client_upload_that_stalls_is_a_408() -> None:
    timers = VirtualTimers()  # the client's silence lasts as long as the test says
    async with upstream("/v1") as up, run_proxy(proxy_config(up.url, stall_timeout=2.0)) as px:
        px.state.timers = timers
        reader, writer = await asyncio.open_connection(*px.url.split("/")[2].split(":"))
        writer.write(b"POST /v1/upload HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly-part")
        await writer.drain()
        await until(lambda: len(up.seen) == 1)  # the upload is on its way upstream
        await timers.stall(1.9)
        answer = asyncio.create_task(reader.read(4096))
        await timers.settle()
        assert not answer.done()  # short of the stall timeout
        await timers.stall(0.1)
        head = await asyncio.wait_for(answer, 10)
        writer.close()
    assert head.startswith(b"HTTP/1.1 408")
    assert b"request_body_incomplete" in head
    assert [s["path"] for s in up.seen] == ["/v1/upload"]  # the upload was streamed as it came


# ── bases ────────────────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("given, effective", [
    ("http://h:1", "http://h:1/v1"),
    ("http://h:1/", "http://h:1/v1"),
    ("https://api.anthropic.com", "https://api.anthropic.com/v1"),
    ("https://gw.example/anthropic", "https://gw.example/anthropic/v1"),
    ("https://gw.example/api/anthropic/", "https://gw.example/api/anthropic/v1"),
    ("https://api.openai.com/v1", "https://api.openai.com/v1"),
    ("https://openrouter.example/api/v1", "https://openrouter.example/api/v1"),
    ("https://g.example/v1beta/openai", "https://g.example/v1beta/openai"),
    ("https://z.example/api/paas/v4", "https://z.example/api/paas/v4"),
    ("https://gw.example/anthropic/v1", "https://gw.example/anthropic/v1"),
])
def test_the_upstream_base_is_mapped_the_way_the_sdks_build_urls(given: str, effective: str) -> None:
    assert str(ProxyConfig.from_options(upstream=given).upstream) == effective


@pytest.mark.parametrize("base, client_path, upstream_path", [
    ("/anthropic", "/v1/messages/count_tokens", "/anthropic/v1/messages/count_tokens"),
    ("/api/v1", "/v1/models", "/api/v1/models"),
    ("/v1beta/openai", "/v1/embeddings", "/v1beta/openai/embeddings"),
])
async def test_requests_reach_bases_without_v1(base: str, client_path: str,
                                               upstream_path: str) -> None:
    script = Script([b'{"ok": true}'], headers={"Content-Type": "application/json"})
    async with scripted(script) as up:
        origin = up.url.removesuffix("/v1")
        async with run_proxy(proxy_config(origin + base)) as px, aiohttp.ClientSession() as s, \
                s.post(px.root + client_path, json={"messages": []}) as resp:
            assert resp.status == 200 and await resp.json() == {"ok": True}
    assert [r["path"] for r in up.requests] == [upstream_path]


# ── never an open relay ──────────────────────────────────────────────────────────────────────────


async def test_no_request_line_host_or_path_reaches_anything_but_the_upstream() -> None:
    """A second server stands where a forged target points: it must never hear from the proxy."""
    stream_body = json.dumps(chat()).encode()
    async with relayed() as (up, url), upstream() as elsewhere:
        other = elsewhere.url.split("/")[2]  # 127.0.0.1:PORT of the server that must stay silent
        host, port = url.split("/")[2].split(":")
        attempts = [
            ("GET", f"http://{other}/v1/models", other),
            ("POST", f"http://{other}/v1/chat/completions", other),
            ("GET", "/v1/models", other),
            ("GET", f"/v1/..%2F..%2F{other}/v1/models", other),
            ("GET", "/v1/%2E%2E/%2E%2E/v1/models", other),
            ("GET", f"/v1/models/..%2f..%2f..%2f{other}", other),
            ("GET", f"//{other}/v1/models", other),
            ("GET", f"/v1//{other}/v1/models", other),
            ("GET", f"/v1/@{other}/v1/models", other),
            ("CONNECT", f"{other}", other),
        ]
        statuses = []
        for method, target, host_header in attempts:
            reader, writer = await asyncio.open_connection(host, int(port))
            body = stream_body if method == "POST" else b""
            writer.write(f"{method} {target} HTTP/1.1\r\nHost: {host_header}\r\n"
                         f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
            await writer.drain()
            head = await asyncio.wait_for(reader.read(4096), 10)
            writer.close()
            statuses.append(int(head.split(b" ")[1]))
    assert elsewhere.seen == []
    upstream_hosts = {s["headers"]["Host"] for s in up.seen}
    assert upstream_hosts <= {up.url.split("/")[2]}
    assert [s["path"] for s in up.seen if s["method"] == "GET"] == ["/v1/models", "/v1/models",
                                                                    "/v1/@" + other + "/v1/models"]
    assert statuses[:3] == [200, 404, 200] and all(s in (400, 404, 405) for s in statuses[3:9])


@pytest.fixture(scope="module")
def relay_and_elsewhere() -> Iterator[tuple[Upstream, str, Upstream]]:
    @contextlib.asynccontextmanager
    async def servers() -> AsyncIterator[tuple[Upstream, str, Upstream]]:
        async with relayed() as (up, url), upstream() as elsewhere:
            yield up, url, elsewhere

    with in_thread(servers) as value:
        yield value


async def _raw_get(url: str, target: str, host: str) -> int:
    address, port = url.split("/")[2].split(":")
    reader, writer = await asyncio.open_connection(address, int(port))
    writer.write(f"GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    head = await asyncio.wait_for(reader.read(4096), 10)
    writer.close()
    return int(head.split(b" ")[1])


_SEGMENT = st.text(st.sampled_from("ab.-_~@:%2eEfFcC5\\"), min_size=0, max_size=8)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(segments=st.lists(_SEGMENT, min_size=1, max_size=4), absolute=st.booleans())
def test_any_request_target_reaches_the_upstream_below_its_base_or_nothing(
        relay_and_elsewhere: tuple[Upstream, str, Upstream], segments: list[str],
        absolute: bool) -> None:
    up, url, elsewhere = relay_and_elsewhere
    other = elsewhere.url.split("/")[2]
    path = "/v1/" + "/".join(segments)
    target = f"http://{other}{path}" if absolute else path
    before = len(up.seen)
    status = asyncio.run(_raw_get(url, target, other))
    reached = up.seen[before:]
    assert elsewhere.seen == []
    if reached:  # forwarded: to the upstream, below its base, the path exactly as the client sent it
        [seen] = reached
        assert seen["raw_path"] == path and seen["headers"]["Host"] == up.url.split("/")[2]
        *inner, last = path[len("/v1/"):].split("/")  # and nothing in it can climb out of the base
        assert all(inner) and (last or inner)  # no empty segment but a trailing slash
        for segment in (*inner, last):
            decoded = unquote(segment)
            assert decoded not in (".", "..") and not {"/", "\\"} & set(decoded)
    else:  # or refused by the proxy
        assert status in (400, 404), status


async def test_an_upstream_that_refuses_an_upload_early_is_answered_through() -> None:
    """The upstream answers (413) before the upload ends: the client gets that answer."""
    script = Script([b'{"error": "too big for me"}'], status=413,
                    headers={"Content-Type": "application/json"})

    async def body() -> AsyncIterator[bytes]:
        for piece in pattern_chunks(8 * 1024 * 1024):
            yield piece

    async with scripted(script, read_body=False) as up, \
            run_proxy(proxy_config(up.url, timeout=5.0)) as px, aiohttp.ClientSession() as session:
        try:
            async with session.post(f"{px.url}/files", data=body()) as resp:
                status, answer = resp.status, await resp.read()
        except aiohttp.ClientError as exc:  # the upstream may close before the upload is read
            status, answer = 0, repr(exc).encode()
    assert (status, answer) == (413, b'{"error": "too big for me"}'), answer
