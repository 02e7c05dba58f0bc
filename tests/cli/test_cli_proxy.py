"""``sseguard proxy``: one-line errors with exit 2 for unusable flags, and a real run as a process that
relays, records, and loses no record when it is stopped."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx2
import pytest
from typer.testing import CliRunner

from sseguard.chaos import ChaosConfig, Pacing, run_chaos_in_thread
from sseguard.cli import app
from sseguard.store import open_store
from support.proxy import KEY, proxy_process
from support.workers import one_client_per_worker, pid_of, started

runner = CliRunner()
UP = ["--upstream", "http://127.0.0.1:9/v1"]


@pytest.mark.parametrize("args, message", [
    (["--upstream", "ftp://h/v1"], "--upstream 'ftp://h/v1' must be an http:// or https://"),
    ([*UP, "--listen", "nowhere"], "--listen 'nowhere' is not HOST:PORT"),
    ([*UP, "--listen", "127.0.0.1:70000"], "the port must be a number from 0 to 65535"),
    ([*UP, "--on-bad-end", "explode"], "--on-bad-end 'explode': use error-event, abort, pass"),
    ([*UP, "--repair-markup", "klingon"], "--repair-markup 'klingon': use off, auto or a family"),
    ([*UP, "--policy", "loose"], "unknown policy 'loose'"),
    ([*UP, "--tolerate", "sometimes"], "unknown ending or finding 'sometimes'"),
    ([*UP, "--max-body", "lots"], "--max-body 'lots' is not a size"),
    ([*UP, "--stall-timeout", "-1"], "--stall-timeout must be a number of seconds above 0"),
    ([*UP, "--store", "mysql://db/x"], "unknown store scheme 'mysql'"),
    ([*UP, "--workers", "0"], "--workers '0': use a number of processes (1 or more) or auto"),
    ([*UP, "--workers", "many"], "--workers 'many': use a number of processes (1 or more) or auto"),
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


def _metric(text: str, name: str) -> float:
    """One sample's value from Prometheus text (0 when absent)."""
    for line in text.splitlines():
        sample, _, value = line.rpartition(" ")
        if sample == name:
            return float(value)
    return 0.0


def test_two_workers_serve_one_port_sum_their_metrics_and_drain_every_stream_on_sigterm(
        tmp_path: Path) -> None:
    db = tmp_path / "workers.db"
    request = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    # Streams of ~1 s, so that several are in flight on both workers when SIGTERM arrives.
    slow = ChaosConfig(seed=4, pacing=Pacing(inter_token_ms=50, tokens=20))
    with run_chaos_in_thread(slow) as chaos, started(
            ["proxy", "--upstream", chaos.url, "--listen", "127.0.0.1:0", "--store", str(db),
             "--workers", "2"]) as (proc, line):
        assert line.startswith("sseguard proxy listening on http://127.0.0.1:"), line
        url = line.split()[4]
        root = url.removesuffix("/v1")
        headers = {"Authorization": f"Bearer {KEY}"}
        with one_client_per_worker(root, 2, headers=headers) as clients:
            assert len(clients) == 2 and proc.pid not in clients  # two worker processes, not the CLI's
            # Each worker relays streams on the one port; the second /healthz proves which one did.
            for pid, client in clients.items():
                for inject in ("none", "truncated"):
                    r = client.post(f"{url}/chat/completions", json=request,
                                    headers={"x-sseguard-inject": inject})
                    assert r.status_code == 200
                    assert r.content.endswith(b"data: [DONE]\n\n") is (inject == "none")
                assert pid_of(client, root) == pid
            # Whichever worker answers the scrape, it reports both workers' streams.
            for client in clients.values():
                scrape = client.get(f"{root}/metrics").text
                assert _metric(scrape, 'sseguard_proxy_requests_total{kind="stream"}') == 4
                assert _metric(scrape, 'sseguard_proxy_streams_total{api="chat",ending="complete"}') == 2
                assert _metric(scrape, 'sseguard_proxy_streams_total{api="chat",ending="truncated"}') == 2

            # SIGTERM with a stream in flight on each worker: both finish, both are recorded.
            bodies: dict[int, bytes] = {}
            first_chunk = {pid: threading.Event() for pid in clients}

            def stream(pid: int, client: httpx2.Client) -> None:
                with client.stream("POST", f"{url}/chat/completions", json=request) as r:
                    body = b""
                    for piece in r.iter_bytes():
                        body += piece
                        first_chunk[pid].set()
                    bodies[pid] = body

            threads = [threading.Thread(target=stream, args=item) for item in clients.items()]
            for thread in threads:
                thread.start()
            for event in first_chunk.values():
                assert event.wait(60)
            proc.send_signal(signal.SIGTERM)
            for thread in threads:
                thread.join(60)
            assert proc.wait(timeout=60) == 0
        assert "Traceback" not in (proc.stderr.read() if proc.stderr else "")
    assert sorted(bodies) == sorted(clients)
    assert all(body.endswith(b"data: [DONE]\n\n") for body in bodies.values())
    store = open_store(str(db))
    try:
        records = list(store.read())
    finally:
        store.close()
    assert sorted(r.ending for r in records) == ["complete"] * 4 + ["truncated"] * 2
    assert len({r.index for r in records}) == 6 and len({r.run_id for r in records}) == 1


def test_two_workers_on_a_busy_port_is_a_one_line_error(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run([*_sseguard(), "proxy", *UP, "--listen", f"127.0.0.1:{port}",
                                 "--store", str(tmp_path / "x.db"), "--workers", "2"],
                                capture_output=True, text=True, timeout=60,
                                env={**os.environ, "COLUMNS": "200"})
    assert result.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
