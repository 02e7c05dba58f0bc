"""No sample secret reaches disk: a careless upstream echoes every one of them (headers, cookies, stream
content, error bodies), and the probe's JSONL and evidence files, the proxy's SQLite file and its
PostgreSQL rows are searched for each. The corpus is ``support.secret_samples.SECRET_SAMPLES``, written
by hand."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import httpx2
import psycopg
import pytest
from aiohttp import web
from typer.testing import CliRunner

from sseguard.cli import app
from sseguard.probe.runner import execute
from sseguard.proxy import run_proxy
from support.probe import config, serve_app
from support.proxy import KEY, chat, in_thread, proxy_config, proxy_process, raw_post
from support.secret_samples import SECRET_SAMPLES

SECRETS = [secret for secret, _ in SECRET_SAMPLES]
LINES = [line.replace("\n", " ") for _, line in SECRET_SAMPLES]
N = len(SECRET_SAMPLES)
SERVED = web.AppKey("served", list[int])


def leaky_app() -> web.Application:
    """Request k carries sample k % N: in a response header, a cookie and the streamed content (then a
    clean EOF, so the stream is truncated and gets an evidence file); from k = N on, half the answers
    are an HTTP 401 whose JSON error repeats the line."""

    async def handle(request: web.Request) -> web.StreamResponse:
        await request.read()
        served = request.app[SERVED]
        k = len(served)
        served.append(k)
        line = LINES[k % N]
        headers = {"x-debug": line, "set-cookie": f"sid={SECRETS[k % N]}; Path=/; HttpOnly"}
        if k >= N and k % 2:
            return web.json_response({"error": {"message": f"rejected: {line}"}}, status=401,
                                     headers=headers)
        resp = web.StreamResponse(headers={"content-type": "text/event-stream", **headers})
        await resp.prepare(request)
        chunk = {"id": f"chatcmpl-{k}", "object": "chat.completion.chunk", "model": "leaky-1",
                 "choices": [{"index": 0, "delta": {"content": f"as you asked: {line}"},
                              "finish_reason": None}]}
        await resp.write(f"data: {json.dumps(chunk)}\n\n".encode())
        return resp

    application = web.Application()
    application[SERVED] = []
    application.router.add_post("/v1/chat/completions", handle)
    return application


def leaks(blob: bytes) -> list[str]:
    return [s for s in SECRETS if s.encode() in blob]


async def test_no_sample_secret_reaches_the_probes_jsonl_or_evidence(tmp_path: Path) -> None:
    application = leaky_app()
    async with serve_app(application) as url:
        cfg = config(url, tmp_path, count=2 * N, concurrency="2")
        result = await execute(cfg, live=False)
    assert len(application[SERVED]) == 2 * N  # every sample was served, twice
    assert {r.ending for r in result.records} == {"truncated", "http_error"}
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    evidence = [p for p in files if "evidence" in p.parts]
    assert len(evidence) == 2 * N and any(p.name.endswith(".jsonl") for p in files)
    for path in files:
        assert not leaks(path.read_bytes()), path
    # The streams were kept, only the secrets went: the redaction marker stands in their place.
    assert b"[REDACTED]" in b"".join(p.read_bytes() for p in evidence)


async def test_no_sample_secret_reaches_the_proxys_sqlite_file(tmp_path: Path) -> None:
    db = tmp_path / "proxy.db"
    application = leaky_app()
    async with serve_app(application) as url, run_proxy(proxy_config(url, store=str(db))) as px:
        for _ in range(2 * N):
            # The client's own key (which the proxy knows to remove) is none of the samples: those
            # must be found by their shape.
            got = await raw_post(f"{px.url}/chat/completions", chat())
            assert got.status in (200, 401)
    assert len(application[SERVED]) == 2 * N
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    assert stored and not leaks(stored)


def test_proxy_to_postgresql_then_analyze_reads_it_back_without_a_secret(pg_dsn: str,
                                                                         tmp_path: Path) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS sseguard_records, sseguard_meta")
    application = leaky_app()
    with in_thread(lambda: serve_app(application)) as upstream, \
            proxy_process(upstream, pg_dsn) as (proc, url):
        with httpx2.Client(timeout=30) as client:
            for _ in range(2 * N):
                r = client.post(f"{url}/chat/completions", json=chat(),
                                headers={"Authorization": f"Bearer {KEY}"})
                assert r.status_code in (200, 401)
        proc.terminate()  # drains and writes every record before it exits
        assert proc.wait(timeout=30) == 0
    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute("SELECT record::text FROM sseguard_records").fetchall()
    assert len(rows) == 2 * N
    dump = "".join(r[0] for r in rows).encode()
    assert not leaks(dump)
    # `sseguard analyze postgresql://…` reads the same streams back.
    result = CliRunner().invoke(app, ["analyze", pg_dsn, "--json"])
    assert result.exit_code == 1, result.output  # every stream failed under strict
    doc = json.loads(result.stdout)
    assert doc["total"] == 2 * N and doc["failed"] == 2 * N
    assert set(doc["endings"]) == {"truncated", "http_error"}
    assert not leaks(result.stdout.encode())


GOOGLE_KEY = "AIzaSyQueryKey-gemini2-0123456789abcdef"


async def test_a_key_in_the_query_string_reaches_no_record_evidence_or_log_line(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Gemini takes its key as ``?key=`` too: an arm whose base URL carries one sends it (the upstream
    sees it), and no record, evidence file, run document or log line keeps it."""
    seen: list[str] = []

    async def gemini(request: web.Request) -> web.StreamResponse:
        await request.read()
        seen.append(request.query.get("key", ""))
        resp = web.StreamResponse(headers={"content-type": "text/event-stream",
                                           "x-upstream-url": str(request.url)})
        await resp.prepare(request)
        record = {"candidates": [{"content": {"role": "model", "parts": [
            {"text": f"you called {request.url}"}]}, "index": 0}],
            "modelVersion": "g", "responseId": "r1"}
        await resp.write(f"data: {json.dumps(record)}\r\n\r\n".encode())
        return resp  # no finishReason, then a clean EOF: truncated, so evidence is written

    application = web.Application()
    application.router.add_post("/v1beta/models/{model}:streamGenerateContent", gemini)
    caplog.set_level(logging.DEBUG)
    async with serve_app(application) as url:
        cfg = config(f"gem={url}beta?key={GOOGLE_KEY}", tmp_path, count=4, concurrency="2",
                     api="gemini", model="g-1")
        result = await execute(cfg, live=False)
    assert seen == [GOOGLE_KEY] * 4  # it was really sent
    assert {r.ending for r in result.records} == {"truncated"}
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len([p for p in files if "evidence" in p.parts]) == 4
    for path in files:
        assert GOOGLE_KEY.encode() not in path.read_bytes(), path
    assert GOOGLE_KEY not in caplog.text
    blob = b"".join(p.read_bytes() for p in files)
    assert b"key=[REDACTED]" in blob  # the URL was kept, only the key went
