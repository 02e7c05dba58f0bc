"""A real Prometheus server scrapes the proxy's ``/metrics`` and evaluates the shipped alerting rules:
``SseguardSilentEndings`` fires for chat when chaos truncates streams, and nothing fires on a
healthy run.

Prometheus scrapes and evaluates every second here. The rules are the shipped file's, with one
change made by the test: each ``for:`` hold is cut to ``0s`` (the shipped holds are minutes, which
``test_prometheus_rules`` proves with ``promtool``), so the alert fires at the first evaluation
that sees the truncations. Every wait is a bounded poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import subprocess
import time
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp

from _prometheus_support import RULES, binary
from support.proxy import chaos_proxy, chat, raw_post

#: Bounded waits: Prometheus' start, and its first scrapes and evaluations (1 s apart).
START_WAIT_S = 60.0
ALERT_WAIT_S = 90.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.asynccontextmanager
async def prometheus(target: str, tmp: Path) -> AsyncIterator[str]:
    """A Prometheus on 127.0.0.1 scraping ``target`` (host:port) every second with the shipped
    rules (``for:`` cut to 0s); yields its base URL."""
    rules = tmp / "rules.yml"
    rules.write_text(re.sub(r"(?m)^(\s+for:) \S+$", r"\1 0s", RULES.read_text()))
    config = tmp / "prometheus.yml"
    config.write_text(f"""
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [{rules}]
scrape_configs:
  - job_name: sseguard-proxy
    static_configs:
      - targets: ['{target}']
""")
    port = _free_port()
    proc = subprocess.Popen(
        [binary("prometheus"), f"--config.file={config}", f"--storage.tsdb.path={tmp / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        await _poll(lambda: _ready(base), START_WAIT_S, "Prometheus did not become ready")
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


async def _ready(base: str) -> bool:
    try:
        async with aiohttp.ClientSession() as s, s.get(f"{base}/-/ready") as r:
            return r.status == 200
    except aiohttp.ClientError:
        return False


async def _api(base: str, path: str, **params: str) -> Any:
    async with aiohttp.ClientSession() as s, s.get(f"{base}/api/v1/{path}", params=params) as r:
        body = await r.json()
        assert body["status"] == "success", body
        return body["data"]


async def _poll(check: Any, timeout: float, failure: str) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(failure)
        await asyncio.sleep(0.5)


async def _scraped(base: str, query: str, at_least: float) -> bool:
    """Whether ``query`` (one series) has reached ``at_least`` in Prometheus."""
    result = await _api(base, "query", query=query)
    return bool(result["result"]) and float(result["result"][0]["value"][1]) >= at_least


async def _evaluated_since(base: str, since: float) -> bool:
    """Whether every rule group was evaluated after ``since`` (epoch seconds) at least twice over."""
    groups = (await _api(base, "rules"))["groups"]
    # RFC 3339 in UTC with nanoseconds; the seconds are enough.
    return all(datetime.fromisoformat(g["lastEvaluation"][:19] + "+00:00").timestamp() > since + 2
               for g in groups)


async def test_silent_endings_alert_fires_when_chaos_truncates(tmp_path: Path) -> None:
    async with chaos_proxy(policy="strict", retry=0) as (_, px), \
            prometheus(f"127.0.0.1:{px.port}", tmp_path) as prom:
        # A counter's first scrape is its baseline (rate() sees only increases after it), so
        # one stream of each ending goes first, and the rest once Prometheus has seen them.
        for fault in ("none", "truncated"):
            await raw_post(f"{px.url}/chat/completions", chat(), inject=fault)
        query = 'sseguard_proxy_streams_total{api="chat",ending="truncated"}'
        await _poll(lambda: _scraped(prom, query, 1), ALERT_WAIT_S,
                    "Prometheus never scraped the first streams")
        for i in range(30):
            await raw_post(f"{px.url}/chat/completions", chat(),
                           inject="truncated" if i % 3 == 0 else "none")

        async def firing() -> bool:
            alerts = (await _api(prom, "alerts"))["alerts"]
            return any(a["labels"]["alertname"] == "SseguardSilentEndings"
                       and a["labels"].get("api") == "chat" and a["state"] == "firing"
                       for a in alerts)

        await _poll(firing, ALERT_WAIT_S, "SseguardSilentEndings never fired")
        alerts = (await _api(prom, "alerts"))["alerts"]
    assert {(a["labels"]["alertname"], a["labels"].get("api")) for a in alerts} == \
        {("SseguardSilentEndings", "chat")}


async def test_no_alert_on_a_healthy_run(tmp_path: Path) -> None:
    async with chaos_proxy(policy="strict", retry=0) as (_, px), \
            prometheus(f"127.0.0.1:{px.port}", tmp_path) as prom:
        for _ in range(30):
            await raw_post(f"{px.url}/chat/completions", chat(), inject="none")
        query = 'sseguard_proxy_streams_total{api="chat",ending="complete"}'
        await _poll(lambda: _scraped(prom, query, 30), ALERT_WAIT_S,
                    "Prometheus never scraped the 30 streams")
        scraped_at = time.time()
        await _poll(lambda: _evaluated_since(prom, scraped_at), ALERT_WAIT_S,
                    "the rules were never evaluated after the scrape")
        alerts = (await _api(prom, "alerts"))["alerts"]
    assert alerts == []
