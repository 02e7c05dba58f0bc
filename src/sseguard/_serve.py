"""The asyncio plumbing the adapters share: serving an app, the event loop, the open-files limit.

The chaos upstream and the proxy serve in the caller's event loop with the same runner settings
(``handler_cancellation`` so a client that leaves cancels its handler at once, no access log on the hot
path, no signal handling of their own) and report where they listen the same way. The probe, the proxy
and the chaos server all run on uvloop when it is installed and raise their open-files limit, because a
thousand streams need a thousand sockets (two each for the proxy).
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
from collections.abc import AsyncIterator, Callable
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


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop factory when installed (for ``asyncio.Runner``), else None: asyncio's own loop."""
    try:
        import uvloop
    except ImportError:  # optional (not on Windows); asyncio's loop is fine below a few hundred streams
        return None
    return uvloop.new_event_loop


def raise_open_files_limit() -> tuple[int, int]:
    """Soft ``RLIMIT_NOFILE`` up to the hard limit (a common soft default of 1,024 caps a relay near 500
    streams); returns the limits now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)
