"""A real LiteLLM proxy for the guardrail's tests: its own venv, started on a free loopback port.

LiteLLM's proxy pins its own world (``litellm[proxy]==1.108.7``, ~250 packages), so it lives in a venv
of its own that ``.ci/litellm`` builds (``SSEGUARD_LITELLM_VENV``, default
``~/.cache/sseguard/venv-litellm``) with sseguard installed into it from this checkout; the tests drive
it from the main venv with the openai, anthropic and google-genai SDKs. Without that venv the tests
skip, and under ``CI=true`` they fail, so that they cannot vanish from CI unnoticed.

Two LiteLLM processes run side by side: one with the guardrail enabled exactly as ``docs/litellm.md``
says, one without any guardrail. Each stands in front of its own chaos upstreams, started with the
same seed, so the n-th request to either gets the same bytes from its upstream.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from sseguard.testing import ChaosUpstream

MASTER_KEY = "sk-litellm-test-master"
#: How long a LiteLLM proxy may take to answer its liveness probe (import + startup, busy machine).
START_TIMEOUT_S = 240.0
#: The models each LiteLLM serves: the protocol's route → the model name and its LiteLLM provider.
CHAT_MODEL = "chaos-gpt"
CLAUDE_MODEL = "claude-chaos"
GEMINI_MODEL = "gemini-chaos"
#: The same three, on the twin upstream that only ever serves healthy streams (byte-identity).
TWIN = "-twin"


def venv_dir(environ: Mapping[str, str]) -> Path:
    default = Path.home() / ".cache" / "sseguard" / "venv-litellm"
    return Path(environ.get("SSEGUARD_LITELLM_VENV", str(default)))


def require_litellm(environ: Mapping[str, str]) -> Path:
    """The venv's ``litellm`` command, or the test's end: a skip, or a failure under ``CI=true``."""
    exe = venv_dir(environ) / "bin" / "litellm"
    python = venv_dir(environ) / "bin" / "python"
    problem = None
    if not exe.is_file():
        problem = f"no LiteLLM proxy at {exe}; build it with `bash .ci/litellm`"
    else:
        probe = subprocess.run(
            [str(python), "-c", "import sseguard.integrations.litellm.guardrail"],
            capture_output=True, text=True, timeout=120,
            env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}, check=False)
        if probe.returncode != 0:
            tail = (probe.stderr.strip().splitlines() or ["?"])[-1]
            problem = f"the LiteLLM venv cannot import the guardrail ({tail}); rerun `bash .ci/litellm`"
    if problem is None:
        return exe
    if environ.get("CI", "").lower() in ("true", "1", "yes"):
        pytest.fail(f"CI=true and {problem}")
    pytest.skip(problem)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def config_yaml(upstream: str, twin: str, *, guardrail: str | None) -> str:
    """LiteLLM's config: three models on ``upstream``, the same three on ``twin``; the guardrail
    block exactly as docs/litellm.md gives it (``guardrail``: its extra options, YAML flow style)."""
    lines = ["model_list:"]
    for suffix, root in (("", upstream), (TWIN, twin)):
        lines += [
            f"  - model_name: {CHAT_MODEL}{suffix}",
            f"    litellm_params: {{model: openai/{CHAT_MODEL}, api_base: '{root}/v1', "
            "api_key: sk-upstream-chaos}",
            f"  - model_name: {CLAUDE_MODEL}{suffix}",
            f"    litellm_params: {{model: anthropic/{CLAUDE_MODEL}, api_base: '{root}', "
            "api_key: sk-ant-upstream-chaos}",
            f"  - model_name: {GEMINI_MODEL}{suffix}",
            f"    litellm_params: {{model: gemini/{GEMINI_MODEL}, api_base: '{root}/v1beta', "
            "api_key: upstream-chaos}",
        ]
    if guardrail is not None:
        lines += [
            "guardrails:",
            "  - guardrail_name: sseguard",
            "    litellm_params:",
            "      guardrail: sseguard.integrations.litellm.SSEGuardGuardrail",
            "      mode: post_call",
            "      default_on: true",
            *(f"      {line}" for line in guardrail.splitlines() if line.strip()),
        ]
    lines += ["general_settings:", f"  master_key: {MASTER_KEY}"]
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def litellm_proxy(exe: Path, workdir: Path, config: str) -> Iterator[subprocess.Popen[bytes]]:
    """Start a LiteLLM proxy with ``config`` (its URL: ``proxy.args`` has the port; see ``url_of``)."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "config.yaml").write_text(config)
    port = free_port()
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_LOG": "ERROR",
           "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
    with open(workdir / "litellm.log", "wb") as log:
        proc = subprocess.Popen(
            [str(exe), "--config", "config.yaml", "--host", "127.0.0.1", "--port", str(port)],
            cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield proc
    finally:
        _stop(proc)


def url_of(proc: subprocess.Popen[bytes]) -> str:
    args = [str(a) for a in proc.args] if isinstance(proc.args, list) else []
    return f"http://127.0.0.1:{args[args.index('--port') + 1]}"


def wait_ready(proc: subprocess.Popen[bytes], workdir: Path) -> None:
    """Wait (bounded) until the proxy answers its liveness probe; fail with its log's tail if not."""
    deadline = time.monotonic() + START_TIMEOUT_S
    url = url_of(proc) + "/health/liveliness"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        with contextlib.suppress(OSError, urllib.error.URLError), \
                urllib.request.urlopen(url, timeout=5) as answer:
            if answer.status == 200:
                return
        time.sleep(1.0)
    tail = (workdir / "litellm.log").read_text(errors="replace")[-3000:]
    pytest.fail(f"LiteLLM did not start on {url} (exit {proc.poll()}):\n{tail}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


@dataclass
class Side:
    """One LiteLLM proxy and the chaos upstreams behind it."""

    url: str
    upstream: ChaosUpstream
    twin: ChaosUpstream
    workdir: Path


@dataclass
class Pair:
    """LiteLLM with the guardrail (``guarded``) and without any (``bare``), side by side."""

    guarded: Side
    bare: Side
    store: Path


@contextlib.contextmanager
def litellm_pair(tmp: Path, environ: Mapping[str, str]) -> Iterator[Pair]:
    """Both proxies, started together (their startups overlap), each in front of its own upstreams."""
    exe = require_litellm(environ)
    store = tmp / "guardrail.db"
    with contextlib.ExitStack() as stack:
        ups = [stack.enter_context(ChaosUpstream.running()) for _ in range(4)]
        guarded_dir, bare_dir = tmp / "guarded", tmp / "bare"
        option = f"store: '{store}'\nrun_id: litellm-test"
        guarded = stack.enter_context(litellm_proxy(
            exe, guarded_dir, config_yaml(ups[0].root_url, ups[1].root_url, guardrail=option)))
        bare = stack.enter_context(litellm_proxy(
            exe, bare_dir, config_yaml(ups[2].root_url, ups[3].root_url, guardrail=None)))
        wait_ready(guarded, guarded_dir)
        wait_ready(bare, bare_dir)
        yield Pair(Side(url_of(guarded), ups[0], ups[1], guarded_dir),
                   Side(url_of(bare), ups[2], ups[3], bare_dir), store)
