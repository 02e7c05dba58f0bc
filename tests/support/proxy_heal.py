"""A scripted upstream behind a real proxy for the healing tests (``--retry``, ``--resume``): each
request is answered by its number in a list of ``Step``s, and the proxy's records are read back
(``heal_proxy``), shared by ``tests/proxy/test_proxy_heal_retry.py`` and the resume tests."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from sseguard.core.record import Record, decode_record, encode_record, redact_record
from sseguard.core.redact import Redactor
from sseguard.proxy import RunningProxy, run_proxy
from support.proxy import proxy_config

GOOD = (b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":'
        b'{"role":"assistant","content":"Hel"},"finish_reason":null}]}\n\n'
        b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":'
        b'{"content":"lo"},"finish_reason":"stop"}]}\n\n'
        b"data: [DONE]\n\n")
FIRST = GOOD[:GOOD.index(b"\n\n") + 2]
ERROR_FIRST = b'data: {"error":{"message":"model overloaded","type":"server_error"}}\n\n'


@dataclass
class Step:
    """One answer: ``status`` with ``body`` (then ``end``: eof | reset | hang), or ``reset_at_once`` (the
    connection dropped before any response header)."""

    body: bytes = GOOD
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    end: str = "eof"
    reset_at_once: bool = False


@dataclass
class Upstream:
    steps: list[Step]
    url: str = ""
    paths: list[str] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    #: Set once a "hang" step's headers are out, and once the proxy has closed that connection.
    hanging: asyncio.Event = field(default_factory=asyncio.Event)
    hung_up: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.bodies.append(await request.read())
        step = self.steps[min(len(self.paths), len(self.steps) - 1)]
        self.paths.append(request.path)
        if step.reset_at_once:
            assert request.transport is not None
            request.transport.abort()
            return web.Response()
        ctype = "text/event-stream" if step.status == 200 and request.path.endswith(
            "completions") and b"data:" in step.body else "application/json"
        resp = web.StreamResponse(status=step.status,
                                  headers={"Content-Type": ctype, **step.headers})
        await resp.prepare(request)
        if step.body:
            await resp.write(step.body)
        if step.end == "reset":
            assert request.transport is not None
            request.transport.abort()
            return resp
        if step.end == "hang":  # headers, then silence until the proxy gives up on this answer
            self.hanging.set()
            try:
                while request.transport is not None and not request.transport.is_closing():
                    await asyncio.sleep(0.05)
            finally:
                self.hung_up.set()
            return resp
        await resp.write_eof()
        return resp


class Records:
    """Stands in for the evidence writer: the records, as the store would read them back."""

    def __init__(self) -> None:
        self.items: list[Record] = []

    def put(self, record: Record, redactor: Redactor | None = None) -> None:
        """As ``BatchWriter.put``: a record handed over with its redactor is redacted first."""
        if redactor is not None:
            record = redact_record(record, redactor)
        self.items.append(decode_record(encode_record(record)))

    def close(self) -> None:
        pass


@contextlib.asynccontextmanager
async def heal_proxy(steps: list[Step], **options: Any) -> AsyncIterator[
        tuple[Upstream, RunningProxy, list[float], Records]]:
    up = Upstream(steps)
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", up.handle)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    up.url = f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    records = Records()
    try:
        async with run_proxy(proxy_config(up.url, **options)) as px:
            px.state.sleep = sleep
            px.state.writer = records
            yield up, px, waits, records
    finally:
        await runner.cleanup()


async def _settled(records: Records, count: int) -> None:
    for _ in range(500):  # the client's record is written once the relay has wound down
        if len(records.items) >= count:
            return
        await asyncio.sleep(0.01)
