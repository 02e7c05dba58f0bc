"""The ``sseguard proxy`` command's body: build the config, serve until Ctrl-C or SIGTERM.

``cli.py`` only parses flags; this module turns them into a running proxy, so the command stays
testable without a terminal. Every unusable value surfaces as a ``ConfigError`` (one line, exit 2).
"""

from __future__ import annotations

import asyncio
import errno
from collections.abc import Callable

from sseguard._serve import loop_factory, raise_open_files_limit
from sseguard.errors import ConfigError
from sseguard.proxy.app import RunningProxy, serve_proxy
from sseguard.proxy.config import ProxyConfig


def run_proxy_command(*, upstream: str, listen: str, policy: str, tolerate: str | None,
                      on_bad_end: str, complete_done: bool, repair_markup: str,
                      stall_timeout: float, timeout: float, store: str, max_body: str,
                      echo: Callable[..., None]) -> None:
    """Serve with the given flags until interrupted; uvloop when installed."""
    config = ProxyConfig.from_options(
        upstream=upstream, listen=listen, policy=policy, tolerate=tolerate, on_bad_end=on_bad_end,
        complete_done=complete_done, repair_markup=repair_markup, stall_timeout=stall_timeout,
        timeout=timeout, max_body=max_body, store=store)
    if config.store is not None:
        from sseguard.store import open_store

        # Fail on an unusable store now, with one line, rather than at the first stream.
        open_store(config.store).close()

    def ready(proxy: RunningProxy) -> None:
        echo(f"sseguard proxy listening on {proxy.url} → {config.upstream}")
        evidence = config.store or "nowhere (--store none)"
        echo(f"policy {config.effective_policy.name}; on bad end: {config.on_bad_end}; repair: "
             f"{config.repair_markup}; records → {evidence}; run {config.run_id}; Ctrl-C to stop",
             err=True)

    raise_open_files_limit()
    try:
        with asyncio.Runner(loop_factory=loop_factory()) as runner:
            runner.run(serve_proxy(config, ready))
    except KeyboardInterrupt:
        return
    except OSError as exc:
        if exc.errno in (errno.EADDRINUSE, errno.EACCES, errno.EADDRNOTAVAIL):
            raise ConfigError(f"cannot listen on {listen}: {exc.strerror or exc}") from None
        raise

