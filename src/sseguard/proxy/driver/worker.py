"""One proxy worker process: its own event loop, upstream session and store connection.

``sseguard proxy --workers N`` hands this function to ``sseguard._serve.serve_workers``, which runs it
in each of N processes sharing one port.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace

from sseguard._serve import Worker, loop_factory, map_large_blocks, raise_open_files_limit, settle_gc
from sseguard.proxy.config import ProxyConfig
from sseguard.proxy.driver.app import RunningProxy, serve_proxy


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
