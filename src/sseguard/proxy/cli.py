"""The ``sseguard proxy`` command's body: build the config, serve until Ctrl-C or SIGTERM.

``cli.py`` only parses flags; this module turns them into a running proxy, so the command stays
testable without a terminal. Every unusable value surfaces as a ``ConfigError`` (one line, exit 2).
"""

from __future__ import annotations

import asyncio
import errno
import functools
from collections.abc import Callable
from dataclasses import replace

from sseguard._serve import (
    Listening,
    Worker,
    loop_factory,
    map_large_blocks,
    raise_open_files_limit,
    serve_workers,
    settle_gc,
)
from sseguard.errors import ConfigError
from sseguard.proxy.app import RunningProxy, serve_proxy
from sseguard.proxy.config import ProxyConfig


def run_proxy_command(*, upstream: str, listen: str, policy: str, tolerate: str | None,
                      on_bad_end: str, complete_done: bool, repair_markup: str,
                      stall_timeout: float, timeout: float, store: str, max_body: str,
                      echo: Callable[..., None], workers: str = "1", retain: str | None = None,
                      retain_healthy: str | None = None, sample_healthy: float | None = None) -> int:
    """Serve with the given flags until interrupted (uvloop when installed); returns the exit status."""
    config = ProxyConfig.from_options(
        upstream=upstream, listen=listen, policy=policy, tolerate=tolerate, on_bad_end=on_bad_end,
        complete_done=complete_done, repair_markup=repair_markup, stall_timeout=stall_timeout,
        timeout=timeout, max_body=max_body, store=store, workers=workers, retain=retain,
        retain_healthy=retain_healthy, sample_healthy=sample_healthy)
    if config.store is not None:
        from sseguard.store import open_store

        # Fail on an unusable store now, with one line, rather than at the first stream. This also
        # creates a SQLite file (in WAL mode) before several workers open it at once.
        open_store(config.store).close()

    def ready(where: Listening) -> None:
        echo(f"sseguard proxy listening on {where.url} → {config.upstream}")
        evidence = config.store or "nowhere (--store none)"
        processes = f"{config.workers} workers; " if config.workers > 1 else ""
        echo(f"{processes}policy {config.effective_policy.name}; on bad end: {config.on_bad_end}; "
             f"repair: {config.repair_markup}; records → {evidence}; run {config.run_id}; "
             "Ctrl-C to stop", err=True)

    try:
        return serve_workers(config.workers, config.host, config.port,
                             functools.partial(serve_worker, config), ready)
    except OSError as exc:
        if exc.errno in (errno.EADDRINUSE, errno.EACCES, errno.EADDRNOTAVAIL):
            raise ConfigError(f"cannot listen on {listen}: {exc.strerror or exc}") from None
        raise


def serve_worker(config: ProxyConfig, worker: Worker, ready: Callable[[int], None]) -> None:
    """One proxy process (of ``worker.count``): its own event loop, upstream session and store
    connection, until SIGTERM or SIGINT."""
    raise_open_files_limit()
    map_large_blocks()
    settle_gc()
    own = replace(config, port=worker.port, worker=worker.index, workers=worker.count)

    def listening(proxy: RunningProxy) -> None:
        ready(proxy.port)

    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        runner.run(serve_proxy(own, listening, reuse_port=worker.reuse_port))
