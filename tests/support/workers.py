"""Helpers for the ``--workers`` tests: start a server command as a process, and reach each of its
worker processes through a connection of its own (``SO_REUSEPORT`` picks the worker per connection)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Callable, Iterator

import httpx2

from sseguard._serve import Worker
from sseguard.core.errors import ConfigError

#: New connections tried before concluding that the kernel never picked a second worker: with two
#: workers the chance that 200 connections all land on one is 2**-199.
CONNECTIONS_TRIED = 200


def sseguard(*args: str) -> list[str]:
    return [sys.executable, "-c", "from sseguard.cli import main; main()", *args]


@contextlib.contextmanager
def started(args: list[str]) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Run ``sseguard ARGS``; yield the process and the first line it prints (its URL). Killed if a
    test leaves it running."""
    proc = subprocess.Popen(sseguard(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield proc, proc.stdout.readline()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def one_client_per_worker(root: str, workers: int, **options: object) -> Iterator[dict[int, httpx2.Client]]:
    """Clients each holding one keep-alive connection to a different worker, keyed by worker pid.

    Each new client opens a fresh connection and asks ``/healthz`` who answered; a client whose worker
    is already covered is closed. Requests on a kept client stay on its connection, so on its worker.
    """
    clients: dict[int, httpx2.Client] = {}
    try:
        for _ in range(CONNECTIONS_TRIED):
            client = httpx2.Client(timeout=30, limits=httpx2.Limits(max_connections=1), **options)
            pid = int(client.get(f"{root}/healthz").json()["pid"])
            if pid in clients:
                client.close()
                continue
            clients[pid] = client
            if len(clients) == workers:
                break
        yield clients
    finally:
        for client in clients.values():
            client.close()


def pid_of(client: httpx2.Client, root: str) -> int:
    return int(client.get(f"{root}/healthz").json()["pid"])


def fail_in_second_worker(worker: Worker, ready: Callable[[int], None]) -> None:
    """A worker body for ``serve_workers``: worker 1 cannot start; worker 0 would serve forever."""
    if worker.index == 1:
        raise ConfigError("worker 1 cannot open its store")
    import time

    ready(worker.port)
    while True:  # stopped by the supervisor's SIGTERM
        time.sleep(1)


def die_after_listening(worker: Worker, ready: Callable[[int], None]) -> None:
    """A worker body: worker 1 listens, then dies with exit code 3; worker 0 serves until stopped."""
    import os
    import time

    ready(worker.port)
    if worker.index == 1:
        os._exit(3)
    while True:
        time.sleep(1)
