"""Shared helpers for the probe tests: a fast chaos pacing, configs and the injected → expected map."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from aiohttp import web

from sseguard.chaos import Pacing
from sseguard.core.record import Record
from sseguard.probe.config import ProbeConfig, build_config
from support.expected import expected

#: Short streams: 12 content chunks, 1 ms apart, so hundreds of requests take a second or two.
FAST = Pacing(ttft_ms=2.0, inter_token_ms=1.0, tokens=12)


def expected_of(record: Record) -> tuple[str, frozenset[str]]:
    """What a correct probe must have recorded, given what the server says it injected."""
    want = expected(record.injected or "none")
    return want.ending, want.findings


def mismatches(records: list[Record]) -> list[str]:
    """Every record whose ending or finding kinds differ from what its injected fault demands."""
    out = []
    for r in records:
        ending, kinds = expected_of(r)
        got = frozenset(r.finding_kinds)
        if r.ending != ending or not kinds <= got:
            out.append(f"{r.arm}#{r.index}: injected {r.injected}, recorded {r.ending} {sorted(got)}")
    return out


def config(url: str | list[str], out: Path, *, environ: dict[str, str] | None = None,
           **options: Any) -> ProbeConfig:
    """A probe config for tests: named arms on the given base URLs, fast timeouts."""
    urls = [url] if isinstance(url, str) else url
    arms = [u if "=" in u.split("://")[0] else f"arm{i}={u}" for i, u in enumerate(urls, 1)]
    opts: dict[str, Any] = {"arms": arms, "out": str(out), "stall_timeout": 2.0, "timeout": 20.0,
                            "ramp": 0.0}
    opts.update(options)
    return build_config(opts, environ=environ)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.asynccontextmanager
async def serve_app(app: web.Application) -> AsyncIterator[str]:
    """Serve an aiohttp app on a free loopback port; yields its base URL (…/v1)."""
    runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        await runner.cleanup()


@contextlib.asynccontextmanager
async def silent_server() -> AsyncIterator[str]:
    """Accepts connections and reads requests but never answers a byte (a hung upstream)."""
    writers: list[asyncio.StreamWriter] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        with contextlib.suppress(Exception):
            while await reader.read(65536):
                pass

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        for w in writers:
            w.close()
        server.close()
        await server.wait_closed()
