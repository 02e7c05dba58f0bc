"""`sseguard probe`, `sweep` and `demo` on the command line: exit codes, one-line errors, files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sseguard.chaos import ChaosConfig, ChaosServer, Fault, Pacing, run_chaos_in_thread
from sseguard.cli import app
from sseguard.probe.config import build_config
from sseguard.probe.sink import read_results
from support.probe import FAST, free_port

runner = CliRunner()
SSEGUARD = [sys.executable, "-m", "sseguard.cli"]


@pytest.fixture
def chaos() -> Iterator[ChaosServer]:
    with run_chaos_in_thread(ChaosConfig(pacing=FAST)) as server:
        yield server


def _bad_inputs(tmp: Path) -> list[tuple[list[str], str]]:
    missing = tmp / "missing.toml"
    broken = tmp / "broken.toml"
    broken.write_text("[[arm]\nname = 'x'")
    unknown = tmp / "unknown.toml"
    unknown.write_text("[[arm]]\nname = 'x'\nbase_url = 'http://127.0.0.1:9/v1'\napi_key = 'sk-no'\n")
    no_url = tmp / "no_url.toml"
    no_url.write_text("[[arm]]\nname = 'x'\n")
    closed = f"a=http://127.0.0.1:{free_port()}/v1"
    ok = "a=http://127.0.0.1:9/v1"
    chat_body = tmp / "chat.json"
    chat_body.write_text('{"messages": [{"role": "system", "content": "x"}, {"role": "user", '
                         '"content": "y"}]}')
    bad_api = tmp / "bad_api.toml"
    bad_api.write_text("[[arm]]\nname = 'x'\nbase_url = 'http://127.0.0.1:9/v1'\napi = 'soap'\n")
    return [
        (["probe", "--arm", ok, "--api", "grpc"], "unknown api 'grpc'"),
        (["probe", "--config", str(bad_api)], "unknown api 'soap'"),
        (["probe", "--arm", ok, "--api", "messages", "--body", str(chat_body)],
         "needs an Anthropic Messages body"),
        (["probe", "--arm", ok, "--api", "responses", "--body", str(chat_body)],
         "needs a Responses body"),
        (["locust", "--arm", ok, "--api", "grpc", "--headless"], "unknown api 'grpc'"),
        (["probe", "--arm", "a=ftp://example.com/v1"], "unknown URL scheme 'ftp'"),
        (["probe", "--arm", ok, "--key-env", "SSEGUARD_TEST_UNSET_KEY"],
         "SSEGUARD_TEST_UNSET_KEY"),
        (["probe", "--config", str(missing)], "cannot read config"),
        (["probe", "--config", str(broken)], "not valid TOML"),
        (["probe", "--config", str(unknown)], "unknown key 'api_key'"),
        (["probe", "--config", str(no_url)], "base_url is missing"),
        (["probe", "--arm", closed, "--out", str(tmp / "o1")], "cannot reach 127.0.0.1"),
        (["probe", "--arm", ok, "--header", "Authorization: Bearer abc"], "carries a secret"),
        (["probe", "--arm", ok, "--duration", "soon"], "duration 'soon'"),
        (["probe", "--arm", ok, "--concurrency", "0"], "between 1 and"),
        (["probe", "--arm", ok, "--workload", "huge"], "unknown workload 'huge'"),
        (["probe", "--arm", ok, "--policy", "nope"], "unknown policy 'nope'"),
        (["probe", "--arm", ok, "--tolerate", "nope"], "unknown ending or finding"),
        (["probe", "--arm", ok, "--body", str(missing)], "cannot read body file"),
        (["probe"], "no target"),
        (["sweep", "--arm", ok, "--concurrency", "8"], "two or more levels"),
        (["probe", "--resume", str(tmp / "nothing")], "cannot resume"),
        (["demo", "--seconds", "1"], "--seconds 1"),
    ]


def test_unusable_input_is_one_line_on_stderr_and_exit_2(tmp_path: Path) -> None:
    for args, needle in _bad_inputs(tmp_path):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:"), (args, result.stderr)
        assert needle in lines[0], (args, lines[0])
        assert "Traceback" not in result.output


def test_unusable_input_through_the_real_executable_has_no_traceback(tmp_path: Path) -> None:
    proc = subprocess.run([*SSEGUARD, "probe", "--arm", "a=gopher://h/v1"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "unknown URL scheme" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


def test_healthy_run_exits_0_and_writes_results(chaos: ChaosServer, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = runner.invoke(app, ["probe", "--arm", f"c={chaos.url}", "--count", "20",
                                 "--concurrency", "4", "--out", str(out), "--no-live"])
    assert result.exit_code == 0, result.output
    records = list(read_results(out))
    assert len(records) == 20 and all(r.ending == "complete" for r in records)
    assert "results:" in result.stdout and "20 requests" in result.stdout


def test_failures_exit_1_and_json_summary_parses(tmp_path: Path) -> None:
    with run_chaos_in_thread(ChaosConfig(pacing=FAST, faults={Fault.TRUNCATED: 0.3}, seed=1)) as srv:
        result = runner.invoke(app, ["probe", "--arm", f"c={srv.url}", "--count", "30", "--json",
                                     "--out", str(tmp_path / "r"), "--concurrency", "5"])
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["records"] == 30 and data["failed"] > 0 and data["exit_code"] == 1
    assert data["analysis"]["endings"]["truncated"] == data["failed"]


def test_toml_config_with_key_env_and_a_sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSEGUARD_TEST_KEY", "k3y-from-the-environment")
    with run_chaos_in_thread(ChaosConfig(pacing=FAST)) as a, \
            run_chaos_in_thread(ChaosConfig(pacing=FAST)) as b:
        cfg = tmp_path / "probe.toml"
        cfg.write_text(f"""
[probe]
count = 12
workload = "small"
max_tokens = 64

[[arm]]
name = "first"
base_url = "{a.url}"
model = "m-1"
key_env = "SSEGUARD_TEST_KEY"
headers = {{ "x-team" = "probe" }}

[[arm]]
name = "second"
base_url = "{b.url}"
""")
        out = tmp_path / "sweep"
        result = runner.invoke(app, ["sweep", "--config", str(cfg), "--concurrency", "1,3",
                                     "--out", str(out), "--no-live"])
    assert result.exit_code == 0, result.output
    records = list(read_results(out))
    assert {(r.arm, r.concurrency) for r in records} == {("first", 1), ("first", 3), ("second", 1),
                                                        ("second", 3)}
    assert len(records) == 48
    assert "k3y-from-the-environment" not in (out / "run.json").read_text()
    saved = json.loads((out / "run.json").read_text())["config"]
    assert saved["arms"][0]["key_env"] == "SSEGUARD_TEST_KEY" and saved["levels"] == [1, 3]


def test_resume_through_the_cli_finishes_a_cut_run(chaos: ChaosServer, tmp_path: Path) -> None:
    out = tmp_path / "r"
    first = runner.invoke(app, ["probe", "--arm", f"c={chaos.url}", "--count", "10",
                                "--out", str(out), "--no-live"])
    assert first.exit_code == 0
    lines = (out / "results.jsonl").read_bytes().splitlines(keepends=True)
    (out / "results.jsonl").write_bytes(b"".join(lines[:4]))
    again = runner.invoke(app, ["probe", "--resume", str(out), "--no-live"])
    assert again.exit_code == 0, again.output
    assert sorted(r.index for r in read_results(out)) == list(range(10))


def test_ctrl_c_stops_cleanly_keeps_results_and_exits_130(tmp_path: Path) -> None:
    out = tmp_path / "int"
    pacing = Pacing(inter_token_ms=5.0, tokens=10)
    with run_chaos_in_thread(ChaosConfig(pacing=pacing)) as srv:
        proc = subprocess.Popen([*SSEGUARD, "probe", "--arm", f"c={srv.url}", "--count", "5000",
                                 "--concurrency", "4", "--out", str(out), "--no-live"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if (out / "results.jsonl").exists() and len(list(read_results(out))) >= 10:
                break
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr + stdout and "interrupted" in stdout
    kept = list(read_results(out))
    assert 10 <= len(kept) < 5000
    assert json.loads((out / "run.json").read_text())["sessions"][0]["interrupted"] is True


def test_the_example_probe_toml_is_a_valid_config() -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "probe.toml"
    cfg = build_config({}, config_path=str(example),
                       environ={"BLUE_API_KEY": "k-blue-1", "GREEN_API_KEY": "k-green-1"})
    assert [(a.name, a.protocol) for a in cfg.arms] == [("blue", "chat"), ("green", "chat"),
                                                        ("green-anthropic", "messages")]
    assert cfg.arms[1].request_headers({"GREEN_API_KEY": "k-green-1"})["api-key"] == "k-green-1"
    anthropic = cfg.arms[2].request_headers({"GREEN_API_KEY": "k-green-1"})
    assert anthropic["x-api-key"] == "k-green-1" and anthropic["anthropic-version"] == "2023-06-01"
    assert cfg.count == 200 and cfg.duration == 600.0 and cfg.workload.name == "tools"
