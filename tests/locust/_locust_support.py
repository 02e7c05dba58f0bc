"""Real processes for the Locust tests: the chaos upstream and `sseguard locust` master/workers.

Nothing here imports Locust: importing it monkey-patches the process for gevent, which would change
the pytest process under every other test. Locust only ever runs in child processes.
"""

from __future__ import annotations

import json
import os
import selectors
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

CLI = [sys.executable, "-m", "sseguard.cli"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def read_line(proc: subprocess.Popen[bytes], timeout: float) -> bytes:
    """The child's first stdout line, or fail after ``timeout`` seconds."""
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    line = b""
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not sel.select(left):
            raise TimeoutError(f"no line from {proc.args!r} within {timeout} s")
        chunk = os.read(proc.stdout.fileno(), 1)
        if not chunk:
            raise RuntimeError(f"{proc.args!r} exited with {proc.wait()} before printing a line")
        line += chunk
    return line


def stop(proc: subprocess.Popen[bytes]) -> None:
    """End one child this test started (by its own handle), politely first."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@contextmanager
def chaos_server(config_toml: str, workdir: Path) -> Iterator[str]:
    """`sseguard chaos` as a real process on a free loopback port; yields its base URL (…/v1)."""
    path = workdir / "chaos.toml"
    path.write_text(config_toml, "utf-8")
    proc = subprocess.Popen([*CLI, "chaos", "--listen", "127.0.0.1:0", "--config", str(path),
                             "--json"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        url = json.loads(read_line(proc, 20))["url"]
        yield str(url)
    finally:
        stop(proc)


def start(args: Sequence[str], *, cwd: Path, env: Mapping[str, str], log: Path
          ) -> subprocess.Popen[bytes]:
    """`sseguard <args>` in ``cwd``, output to ``log``."""
    handle = log.open("wb")
    try:
        return subprocess.Popen([*CLI, *args], cwd=cwd, env=dict(env), stdout=handle,
                                stderr=subprocess.STDOUT)
    finally:
        handle.close()


def run_cli(args: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None,
            timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout,
                          env=None if env is None else dict(env), cwd=cwd)


def base_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SSEGUARD_", "LOCUST_"))}
    env.update(extra)
    return env


def run_distributed(common: Sequence[str], work: Path, *, master_args: Sequence[str],
                    worker_env: Mapping[str, str]) -> dict[str, object]:
    """A headless master (6 s, 4 users, no key in its environment) and two workers, to the end.

    ``common`` are the `sseguard locust …` arguments both roles get; the workers get ``worker_env``
    on top of a clean environment. Returns the work directory and every process's exit code.
    """
    port = free_port()
    master = start([*common, "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port",
                    str(port), "--headless", "-u", "4", "-r", "4", "-t", "6s", "--expect-workers", "2",
                    "--expect-workers-max-wait", "30", *master_args],
                   cwd=work, env=base_env(), log=work / "master.log")
    workers = [start([*common, "--worker", "--master-host", "127.0.0.1", "--master-port", str(port)],
                     cwd=work, env=base_env(**worker_env), log=work / f"worker{i}.log")
               for i in (1, 2)]
    try:
        master_code = master.wait(50)
        worker_codes = [w.wait(15) for w in workers]
    finally:
        for proc in (master, *workers):
            stop(proc)
    return {"work": work, "master_code": master_code, "worker_codes": worker_codes}
