"""Helpers for the proxy tests: a chaos upstream and a proxy on loopback, a scripted upstream that
writes exactly the bytes a test gives it, raw reads of what a client receives."""

from __future__ import annotations

import asyncio
import contextlib
import re
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from sseguard.chaos import ChaosConfig, ChaosServer, run_chaos
from sseguard.proxy import ProxyConfig, RunningProxy, run_proxy

KEY = "sk-proxytest-0123456789abcdef"
MESSAGES: list[dict[str, str]] = [{"role": "user", "content": "What is the weather in Paris?"}]
WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"location": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["location"]}},
}


def chat(stream: bool = True, **extra: Any) -> dict[str, Any]:
    req: dict[str, Any] = {"model": "chaos-1", "stream": stream, "messages": MESSAGES}
    req.update(extra)
    return req


def proxy_config(upstream: str, **options: Any) -> ProxyConfig:
    options.setdefault("store", None)
    options.setdefault("listen", "127.0.0.1:0")
    return ProxyConfig.from_options(upstream=upstream, **options)


@contextlib.asynccontextmanager
async def chaos_proxy(chaos: ChaosConfig | None = None,
                      **options: Any) -> AsyncIterator[tuple[ChaosServer, RunningProxy]]:
    async with run_chaos(chaos or ChaosConfig()) as srv, \
            run_proxy(proxy_config(srv.url, **options)) as px:
        yield srv, px


@dataclass
class Raw:
    """What a client received: status, headers, the body bytes, and how the body ended."""

    status: int
    headers: dict[str, str]
    body: bytes
    error: str | None = None  # the client's read error (an incomplete body), if any


async def raw_post(url: str, body: dict[str, Any] | bytes, *, headers: dict[str, str] | None = None,
                   inject: str | None = None, timeout: float = 10.0) -> Raw:
    """POST and read the whole body as bytes, noting an incomplete one instead of raising."""
    hdrs = {"Authorization": f"Bearer {KEY}", **(headers or {})}
    if inject is not None:
        hdrs["x-sseguard-inject"] = inject
    data = body if isinstance(body, bytes) else None
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session, \
            session.post(url, data=data, json=None if data is not None else body,
                         headers=hdrs) as resp:
        out = bytearray()
        error = None
        try:
            async for chunk in resp.content.iter_any():
                out += chunk
        except aiohttp.ClientPayloadError as exc:
            error = repr(exc)
        return Raw(resp.status, dict(resp.headers), bytes(out), error)


def frames(body: bytes) -> list[bytes]:
    """The body split into its frames (each with its blank line)."""
    return [f + b"\n\n" for f in body.split(b"\n\n") if f]


def has_done(body: bytes) -> bool:
    return any(f.rstrip(b"\r\n") == b"data: [DONE]" for f in frames(body))


_CREATED = re.compile(rb'"created(_at)?":\d+')


def same_second(body: bytes) -> bytes:
    """Two chaos servers stamp ``created`` (``created_at`` in Responses) with their own clock;
    everything else is deterministic."""
    return _CREATED.sub(rb'"created\1":0', body)


def error_code(body: bytes) -> str | None:
    """The code of the proxy's error frame, if the body ends with one."""
    import json

    last = frames(body)[-1] if body else b""
    if not last.startswith(b"data: {\"error\""):
        return None
    return str(json.loads(last[6:])["error"]["code"])


# ── a scripted upstream ──────────────────────────────────────────────────────────────────────────


@dataclass
class Script:
    """What the scripted upstream does for each request: write ``chunks`` (bytes, or a float to sleep,
    or an ``asyncio.Event`` to wait for), then end cleanly, reset, or hang."""

    chunks: list[Any] = field(default_factory=list)
    end: str = "eof"  # eof | reset | hang
    status: int = 200
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "text/event-stream"})
    #: Silence before the response headers: seconds, or an ``asyncio.Event`` to wait for.
    before_headers: float | asyncio.Event = 0.0


@dataclass
class ScriptedUpstream:
    """A tiny upstream: answers every request per ``script``, records what it saw."""

    script: Script
    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    written: int = 0  # body bytes the handler managed to write
    disconnected: asyncio.Event = field(default_factory=asyncio.Event)
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    #: Set once a "hang" script has written everything and gone silent (a test's stall starts here).
    hanging: asyncio.Event = field(default_factory=asyncio.Event)
    read_body: bool = True  # False: answer without reading the request body (an early refusal)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read() if self.read_body else b""
        self.requests.append({"method": request.method, "path": request.path_qs,
                              "headers": dict(request.headers), "body": body,
                              "host": request.host})
        script = self.script
        if isinstance(script.before_headers, asyncio.Event):
            await script.before_headers.wait()
        elif script.before_headers:
            await asyncio.sleep(script.before_headers)
        resp = web.StreamResponse(status=script.status, headers=script.headers)
        try:
            await resp.prepare(request)
            for item in script.chunks:
                if isinstance(item, float | int):
                    await asyncio.sleep(item)
                elif isinstance(item, asyncio.Event):
                    await item.wait()
                else:
                    await resp.write(item)
                    self.written += len(item)
            if script.end == "reset":
                assert request.transport is not None
                request.transport.abort()
                return resp
            if script.end == "hang":
                self.hanging.set()
                while request.transport is not None and not request.transport.is_closing():
                    await asyncio.sleep(0.01)
                self.disconnected.set()
                return resp
            await resp.write_eof()
        except (ConnectionError, asyncio.CancelledError):
            self.disconnected.set()
            raise
        finally:
            self.finished.set()
        return resp


@contextlib.asynccontextmanager
async def scripted(script: Script, *, read_body: bool = True) -> AsyncIterator[ScriptedUpstream]:
    up = ScriptedUpstream(script, read_body=read_body)
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", up.handle)
    # auto_decompress=False: it records each request body as it came on the wire
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=0.5,
                           auto_decompress=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    up.url = f"http://127.0.0.1:{port}/v1"
    try:
        yield up
    finally:
        await runner.cleanup()


# ── for synchronous SDK clients ──────────────────────────────────────────────────────────────────


@contextlib.contextmanager
def in_thread(factory: Any) -> Iterator[Any]:
    """Run the async context manager ``factory()`` on its own loop in a thread; yield its value."""
    ready = threading.Event()
    box: dict[str, Any] = {}
    loop = asyncio.new_event_loop()

    async def main() -> None:
        stop = asyncio.Event()
        box["stop"] = stop
        async with factory() as value:
            box["value"] = value
            ready.set()
            await stop.wait()

    def target() -> None:
        try:
            loop.run_until_complete(main())
        except BaseException as exc:
            box["error"] = exc
        finally:
            ready.set()
            loop.close()

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    ready.wait(30)
    if "value" not in box:
        raise box.get("error") or RuntimeError("the servers did not start")
    try:
        yield box["value"]
    finally:
        loop.call_soon_threadsafe(box["stop"].set)
        thread.join(10)


# ── `sseguard proxy` as a real process ───────────────────────────────────────────────────────────


@contextlib.contextmanager
def proxy_process(upstream: str, store: str, *flags: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`sseguard proxy` (with ``flags``) on a free loopback port; yields the process and its base URL
    (…/v1), and kills it on the way out if the test has not stopped it."""
    proc = subprocess.Popen([sys.executable, "-c", "from sseguard.cli import main; main()", "proxy",
                             "--upstream", upstream, "--listen", "127.0.0.1:0", "--store", store,
                             *flags],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("sseguard proxy listening on http://127.0.0.1:"), line
        yield proc, line.split()[4]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def scripted_proxy_in_thread(**options: Any) -> Iterator[tuple[ScriptedUpstream, RunningProxy]]:
    """A scripted upstream and a proxy in front of it, served from a thread, for hypothesis tests
    (each example runs its client with ``asyncio.run``; set ``upstream.script.chunks`` first)."""

    @contextlib.asynccontextmanager
    async def both() -> AsyncIterator[tuple[ScriptedUpstream, RunningProxy]]:
        async with scripted(Script()) as up, run_proxy(proxy_config(up.url, **options)) as px:
            yield up, px

    with in_thread(both) as value:
        yield value
