"""Serving an aiohttp.web app on loopback for a block: what the chaos upstream and the proxy share.

Both run in the caller's event loop with the same runner settings (``handler_cancellation`` so a client
that leaves cancels its handler at once, no access log on the hot path, no signal handling of their own)
and report where they listen the same way.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from aiohttp import web


@dataclass(slots=True)
class Listening:
    """Where a server listens: ``url`` is the OpenAI base URL (``http://127.0.0.1:PORT/v1``)."""

    host: str
    port: int

    @property
    def root(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.root}/v1"


@contextlib.asynccontextmanager
async def serve_app(app: web.Application, host: str, port: int, *, backlog: int = 4096,
                    shutdown_timeout: float = 1.0) -> AsyncIterator[int]:
    """Serve ``app`` on ``host:port`` (0 = a free port) for the block; yields the bound port."""
    runner = web.AppRunner(app, handle_signals=False, access_log=None, handler_cancellation=True,
                           shutdown_timeout=shutdown_timeout)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port, backlog=backlog, reuse_address=True)
        await site.start()
        yield int(runner.addresses[0][1])
    finally:
        await runner.cleanup()
