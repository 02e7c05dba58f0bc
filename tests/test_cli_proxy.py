"""``sseguard proxy``: one-line errors with exit 2 for unusable flags, and a real run as a process that
relays, records, and loses no record when it is stopped."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest
from typer.testing import CliRunner

from _proxy_support import KEY, proxy_process
from sseguard.chaos import ChaosConfig, run_chaos_in_thread
from sseguard.cli import app
from sseguard.store import open_store

runner = CliRunner()
UP = ["--upstream", "http://127.0.0.1:9/v1"]


@pytest.mark.parametrize("args, message", [
    (["--upstream", "ftp://h/v1"], "--upstream 'ftp://h/v1' must be an http:// or https://"),
    ([*UP, "--listen", "nowhere"], "--listen 'nowhere' is not HOST:PORT"),
    ([*UP, "--listen", "127.0.0.1:70000"], "the port must be 0-65535"),
    ([*UP, "--on-bad-end", "explode"], "--on-bad-end 'explode': use error-event, abort, pass"),
    ([*UP, "--repair-markup", "klingon"], "--repair-markup 'klingon': use off, auto or a family"),
    ([*UP, "--policy", "loose"], "unknown policy 'loose'"),
    ([*UP, "--tolerate", "sometimes"], "unknown ending or finding 'sometimes'"),
    ([*UP, "--max-body", "lots"], "--max-body 'lots' is not a size"),
    ([*UP, "--stall-timeout", "-1"], "--stall-timeout must be a number of seconds above 0"),
    ([*UP, "--store", "mysql://db/x"], "unknown store scheme 'mysql'"),
])
def test_bad_flags_exit_2_with_one_line(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["proxy", *args], env={"COLUMNS": "250"})
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output


def test_a_missing_upstream_is_a_usage_error() -> None:
    result = runner.invoke(app, ["proxy"])
    assert result.exit_code == 2 and "--upstream" in result.output


def _sseguard() -> list[str]:
    return [sys.executable, "-c", "from sseguard.cli import main; main()"]


def test_busy_port_is_a_one_line_error(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run([*_sseguard(), "proxy", *UP, "--listen", f"127.0.0.1:{port}",
                                 "--store", str(tmp_path / "x.db")],
                                capture_output=True, text=True, timeout=30,
                                env={**os.environ, "COLUMNS": "200"})
    assert result.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl_c", "sigterm"])
def test_the_proxy_runs_relays_records_and_stops_without_losing_a_record(
        tmp_path: Path, stop: signal.Signals) -> None:
    db = tmp_path / "proxy.db"
    with run_chaos_in_thread(ChaosConfig(seed=2)) as chaos, \
            proxy_process(chaos.url, str(db)) as (proc, url):
        request = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        with httpx2.Client(timeout=10, headers={"Authorization": f"Bearer {KEY}"}) as client:
            for inject in ("none", "truncated", "none"):
                r = client.post(f"{url}/chat/completions", json=request,
                                headers={"x-sseguard-inject": inject})
                assert r.status_code == 200
                assert r.content.endswith(b"data: [DONE]\n\n") is (inject == "none")
            assert client.get(url.removesuffix("/v1") + "/healthz").json()["status"] == "ok"
        start = time.monotonic()
        proc.send_signal(stop)
        assert proc.wait(timeout=15) == 0
        assert time.monotonic() - start < 10
        assert "Traceback" not in (proc.stderr.read() if proc.stderr else "")
    store = open_store(str(db))
    try:
        records = list(store.read())
    finally:
        store.close()
    assert sorted(r.ending for r in records) == ["complete", "complete", "truncated"]
    assert KEY.encode() not in b"".join(p.read_bytes() for p in tmp_path.iterdir())
