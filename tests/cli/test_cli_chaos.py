"""``sseguard chaos``: configuration from flags and TOML, one-line errors with exit 2, a real run."""

from __future__ import annotations

import json
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

from sseguard._config import parse_listen
from sseguard.chaos import ChaosConfig, Fault, LoadPattern, RoutedPattern, ServerDialect, WindowPattern
from sseguard.cli import app
from sseguard.core.errors import ConfigError
from support.workers import one_client_per_worker, started

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "chaos.toml"
runner = CliRunner()


def test_example_toml_loads_with_every_pattern_kind() -> None:
    config = ChaosConfig.from_toml(EXAMPLE)
    assert config.seed == 7 and config.faults[Fault.TRUNCATED] == 0.03
    assert [type(p) for p in config.patterns] == [LoadPattern, RoutedPattern, WindowPattern]
    assert config.pacing.tokens == 48 and config.options.http_statuses == (429, 500, 503)
    assert config.options.responses_error_form == "any"


def test_help_names_the_three_endpoints_and_the_responses_dialect() -> None:
    result = runner.invoke(app, ["chaos", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    for needle in ("/v1/chat/completions", "/v1/responses", "/v1/messages", "trailing_done"):
        assert needle in text, needle


def test_responses_error_form_is_read_and_checked(tmp_path: Path) -> None:
    path = tmp_path / "chaos.toml"
    path.write_text("[fault_options]\nresponses_error_form = 'nested'\n", encoding="utf-8")
    assert ChaosConfig.from_toml(path).options.responses_error_form == "nested"
    path.write_text("[fault_options]\nresponses_error_form = 'loud'\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="must be one of flat, nested, failed, any"):
        ChaosConfig.from_toml(path)


def test_flags_override_the_file_and_faults_merge() -> None:
    config = ChaosConfig.from_toml(EXAMPLE).with_overrides(
        seed=99, faults=["truncated=0.2", "stalled=0.05"], dialects=["no_done"],
        raw_markup="hermes", tokens=5)
    assert config.seed == 99 and config.pacing.tokens == 5 and config.raw_markup == "hermes"
    assert config.faults[Fault.TRUNCATED] == 0.2 and config.faults[Fault.STALLED] == 0.05
    assert config.faults[Fault.NO_DONE] == 0.01 and config.dialects == {ServerDialect.NO_DONE}


@pytest.mark.parametrize(("text", "message"), [
    ("seed = 'x'", "seed must be an integer"),
    ("sneed = 1", "unknown key 'sneed'"),
    ("[faults]\ntruncated = 1.5", "faults.truncated must be between 0 and 1"),
    ("[faults]\ntruncated = 0.7\nno_done = 0.7", "add up to 1.4"),
    ("[faults]\ntrunc = 0.1", "unknown fault 'trunc'"),
    ("[pacing]\ntokens = 0", "pacing.tokens must be ≥ 1"),
    ("[pacing]\nttft = 3", "unknown key 'ttft' in [pacing]"),
    ("[fault_options]\nstall_then = 'later'", "stall_then must be one of finish, hang"),
    ("[fault_options]\nhttp_statuses = [200]", "not an HTTP error status"),
    ("dialects = ['chatty']", "unknown dialect 'chatty'"),
    ("raw_markup = 'xml'", "unknown markup family 'xml'"),
    ("[[patterns]]\ntype = 'load'\nfault = 'truncated'", "needs points or slope"),
    ("[[patterns]]\ntype = 'load'\nfault = 'truncated'\npoints = [[1, 0.1], [1, 0.2]]",
     "same in-flight count"),
    ("[[patterns]]\ntype = 'window'\nfault = 'empty'\nstart_s = 5\nend_s = 2", "must be after"),
    ("[[patterns]]\ntype = 'routed'\nfault = 'empty'\nshare = 0.7\n"
     "[[patterns]]\ntype = 'routed'\nfault = 'empty'\nshare = 0.7", "routed shares add up"),
    ("[[patterns]]\ntype = 'burst'\nfault = 'empty'", "must be one of load, routed, window"),
    ("[[patterns]]\ntype = 'routed'", "needs a fault"),
    ("seed = ", "not valid TOML"),
])
def test_bad_toml_is_a_one_line_config_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "chaos.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        ChaosConfig.from_toml(path)
    assert message in str(info.value) and "\n" not in str(info.value)
    result = runner.invoke(app, ["chaos", "--config", str(path)])
    assert result.exit_code == 2
    assert message in result.output.replace("\n", "")


@pytest.mark.parametrize(("args", "message"), [
    (["--fault", "bogus=0.1"], "unknown fault 'bogus'"),
    (["--fault", "truncated=2"], "must be between 0 and 1"),
    (["--fault", "truncated=lots"], "is not a number"),
    (["--fault", "truncated=0.6", "--fault", "no_done=0.6"], "add up to 1.2"),
    (["--dialect", "nope"], "unknown dialect 'nope'"),
    (["--raw-markup", "xml"], "unknown markup family"),
    (["--listen", "localhost"], "is not HOST:PORT, :PORT or PORT"),
    (["--listen", "127.0.0.1:99999"], "the port must be a number"),
    (["--tokens", "0"], "--tokens must be ≥ 1"),
    (["--stall-then", "never"], "must be one of finish, hang"),
    (["--config", "/nonexistent/chaos.toml"], "cannot read /nonexistent/chaos.toml"),
])
def test_bad_flags_exit_2_with_one_line(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["chaos", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_listen_forms() -> None:
    assert parse_listen("127.0.0.1:9000") == ("127.0.0.1", 9000)
    assert parse_listen(":9000") == ("127.0.0.1", 9000)
    assert parse_listen("9000") == ("127.0.0.1", 9000)
    assert parse_listen("[::1]:0") == ("::1", 0)


def _sseguard() -> list[str]:
    return [sys.executable, "-c", "from sseguard.cli import main; main()"]


def test_chaos_serves_prints_its_url_and_stops_cleanly_on_ctrl_c() -> None:
    proc = subprocess.Popen([*_sseguard(), "chaos", "--listen", "127.0.0.1:0", "--json",
                             "--fault", "truncated=1", "--seed", "3"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        info = json.loads(line)
        assert info["faults"] == {"truncated": 1.0} and info["seed"] == 3
        url = info["url"]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        with httpx2.Client(timeout=5) as client:
            health = client.get(url.removesuffix("/v1") + "/healthz").json()
            assert health == {"status": "ok", "pid": proc.pid}  # one worker: the command's own process
            r = client.post(f"{url}/chat/completions", json={
                "model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]})
            assert r.headers["x-sseguard-fault"] == "truncated"
            assert b"[DONE]" not in r.content
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0
        assert "Traceback" not in (proc.stderr.read() if proc.stderr else "")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_chaos_stops_cleanly_on_sigterm_and_prints_a_plain_url() -> None:
    proc = subprocess.Popen([*_sseguard(), "chaos", "--listen", "127.0.0.1:0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("sseguard chaos listening on http://127.0.0.1:")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_busy_port_is_a_one_line_error() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        start = time.monotonic()
        result = subprocess.run([*_sseguard(), "chaos", "--listen", f"127.0.0.1:{port}"],
                                capture_output=True, text=True, timeout=20,
                                env={**os.environ, "COLUMNS": "200"})
    assert result.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert time.monotonic() - start < 20


def test_bad_workers_value_is_a_one_line_error() -> None:
    result = runner.invoke(app, ["chaos", "--workers", "none"], env={"COLUMNS": "200"})
    assert result.exit_code == 2
    assert "--workers 'none': use a number of processes (1 or more) or auto" in result.output
    assert len(result.output.strip().splitlines()) == 1


def _answers(client: httpx2.Client, url: str, count: int) -> list[tuple[str, str]]:
    """(response id, injected fault) of ``count`` streamed answers."""
    out = []
    for _ in range(count):
        r = client.post(f"{url}/chat/completions", json={
            "model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]})
        first = json.loads(r.content.split(b"\n\n")[0].removeprefix(b"data: "))
        out.append((first["id"], r.headers["x-sseguard-fault"]))
    return out


def test_two_chaos_workers_share_a_port_and_each_request_gets_the_seeded_decision_of_its_number() -> None:
    args = ["chaos", "--listen", "127.0.0.1:0", "--json", "--seed", "11", "--fault", "truncated=0.5"]
    # One process: the seeded sequence of (id, fault) for request numbers 0, 1, 2, …
    with started(args) as (proc, line):
        url = json.loads(line)["url"]
        with httpx2.Client(timeout=30) as client:
            sequence = _answers(client, url, 24)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    assert len(set(sequence)) == 24 and {f for _, f in sequence} == {"none", "truncated"}
    with started([*args, "--workers", "2"]) as (proc, line):
        info = json.loads(line)
        assert info["workers"] == 2
        url = info["url"]
        with one_client_per_worker(url.removesuffix("/v1"), 2) as clients:
            assert len(clients) == 2
            # Worker k numbers its requests k, k + 2, k + 4, …: each gets exactly the answer the
            # single process gave that number, whichever worker the kernel picked.
            by_worker = [_answers(client, url, 6) for client in clients.values()]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        assert "Traceback" not in (proc.stderr.read() if proc.stderr else "")
    assert sorted(by_worker) == sorted([sequence[0:12:2], sequence[1:12:2]])
