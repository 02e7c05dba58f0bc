"""`sseguard locust`: a real Locust master and two workers against the real chaos upstream.

Locust runs only in child processes (importing it monkey-patches the importing process for gevent).
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from _locust_support import base_env, chaos_server, free_port, run_cli, run_distributed, start, stop
from sseguard.analyze import analyze, load_records
from sseguard.core.policy import STRICT
from sseguard.core.record import Record, decode_record
from sseguard.core.verdict import Ending
from sseguard.locust.launch import LOCUSTFILE, SETTINGS_ENV, LaunchSettings, locust_argv, master_address, role
from support.expected import expected

SECRET = "sk-locusttestsecret-9f8e7d6c5b4a"
KEY_ENV = "SSEGUARD_TEST_LOCUST_KEY"

# A routed share of responses (ids `gw-…`) is always truncated; a few other faults at random; stalls
# last longer than the users' stall timeout.
CHAOS = """
seed = 11
[pacing]
inter_token_ms = 8
tokens = 8
[faults]
cut_mid_frame = 0.04
http_error = 0.04
transport_error = 0.03
stalled = 0.03
[fault_options]
stall_then = "hang"
hang_max_s = 60
[[patterns]]
type = "routed"
fault = "truncated"
share = 0.25
prefix = "gw-"
"""

ENDING_NAMES = {str(e) for e in Ending}


def expected_ending(record: Record) -> str:
    return expected(record.injected or "none").ending


@pytest.fixture(scope="module")
def distributed_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """One master and two workers, headless, 6 s, default output directory (named by the run id)."""
    work = tmp_path_factory.mktemp("locust")
    with chaos_server(CHAOS, work) as url:
        common = ["locust", "--arm", f"chaos={url}", "--key-env", KEY_ENV, "--stall-timeout", "2"]
        # The master sends no request: it runs without the key variable.
        return run_distributed(common, work, master_args=["--csv", "stats/run", "--json-file",
                                                          "stats/run"],
                               worker_env={KEY_ENV: SECRET})


def _results(work: Path) -> dict[Path, list[Record]]:
    files = sorted(work.glob("sseguard-locust/*/results-*.jsonl"))
    return {f: [decode_record(line) for line in f.read_bytes().splitlines() if line] for f in files}


def test_both_workers_stream_into_their_own_file_under_the_masters_run_id(distributed_run: dict) -> None:
    work = distributed_run["work"]
    log = (work / "master.log").read_text(errors="replace")
    assert distributed_run["master_code"] == 1, log[-2000:]  # Locust: 1 = some requests failed
    assert distributed_run["worker_codes"] == [0, 0]
    results = _results(work)
    assert len(results) == 2, log[-2000:]
    workers = set()
    for path, records in results.items():
        assert len(records) >= 20, path
        assert {r.worker for r in records} == {path.stem.removeprefix("results-")}
        workers |= {r.worker for r in records}
        assert {r.source for r in records} == {"locust"}
    assert len(workers) == 2
    run_ids = {r.run_id for records in results.values() for r in records}
    assert len(run_ids) == 1 and run_ids.pop() == next(work.glob("sseguard-locust/*")).name


def test_merged_endings_equal_what_the_chaos_server_injected(distributed_run: dict) -> None:
    records = load_records([str(next(distributed_run["work"].glob("sseguard-locust/*")))])
    wrong = [(r.injected, r.ending, r.error) for r in records if r.ending != expected_ending(r)]
    assert not wrong
    endings = Counter(r.ending for r in records)
    assert endings == Counter(expected_ending(r) for r in records)
    # Every kind of fault in the config happened, so each ending was really checked.
    assert {"complete", "truncated", "cut_mid_frame", "http_error", "transport_error",
            "stalled"} <= set(endings)


def test_locust_counts_failures_under_ending_names(distributed_run: dict) -> None:
    work = distributed_run["work"]
    records = [r for recs in _results(work).values() for r in recs]
    failing = Counter(r.ending for r in records if not r.passed)
    with (work / "stats" / "run_failures.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    in_csv = Counter({row["Error"]: int(row["Occurrences"]) for row in rows})
    assert set(in_csv) <= ENDING_NAMES
    assert {row["Name"] for row in rows} == {"small"}
    # Locust writes its CSV once a second and the master hears from workers every few seconds, so
    # the last moments may be missing from it: never more than the records, and most of them.
    assert set(in_csv) <= set(failing) and "truncated" in in_csv
    assert all(in_csv[e] <= failing[e] for e in in_csv)
    assert sum(in_csv.values()) >= 0.5 * sum(failing.values())
    # Locust's final statistics (written after the workers' last reports) match the records exactly.
    final = json.loads((work / "stats" / "run.json").read_text())
    entry = next(e for e in final if e["name"] == "small")
    assert (entry["num_requests"], entry["num_failures"]) == (len(records), sum(failing.values()))


def test_analyze_on_the_merged_files_names_the_routed_id_prefix(distributed_run: dict) -> None:
    records = load_records([str(p) for p in _results(distributed_run["work"])])
    analysis = analyze(records, STRICT)
    top = analysis.attributes[0]
    assert top.key == "id_prefix"
    assert top.best is not None and top.best.values == ("gw",)
    assert "gw-" in analysis.headlines[1]


def test_evidence_per_bad_stream_and_no_secret_on_disk(distributed_run: dict) -> None:
    work = distributed_run["work"]
    records = [r for recs in _results(work).values() for r in recs]
    bad = [r for r in records if r.ending != "complete"]
    assert bad and all(r.evidence for r in bad)
    run_dir = next(work.glob("sseguard-locust/*"))
    for record in bad:
        doc = json.loads((run_dir / str(record.evidence)).read_text())
        assert doc["ending"] == record.ending and doc["injected"] == record.injected
    assert not any(r.evidence for r in records if r.ending == "complete")
    for path in work.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


# One stream in ten truncated at random, and nothing else: no attribute may be named as the cause.
RANDOM_CHAOS = """
seed = 21
[pacing]
inter_token_ms = 4
tokens = 8
[faults]
truncated = 0.1
"""


@pytest.fixture(scope="module")
def random_run(tmp_path_factory: pytest.TempPathFactory) -> list[Record]:
    """One local (master-less) Locust process, 4 users for 5 s, against random truncations."""
    work = tmp_path_factory.mktemp("locust-random")
    with chaos_server(RANDOM_CHAOS, work) as url:
        proc = start(["locust", "--arm", f"chaos={url}", "--key-env", KEY_ENV, "--headless",
                      "-u", "4", "-r", "4", "-t", "5s"],
                     cwd=work, env=base_env(**{KEY_ENV: SECRET}), log=work / "local.log")
        try:
            proc.wait(60)
        finally:
            stop(proc)
    runs = list(work.glob("sseguard-locust/*"))
    assert len(runs) == 1, (work / "local.log").read_text(errors="replace")[-2000:]
    return load_records([str(runs[0])])


def test_every_locust_stream_knows_its_connection_and_reuse_counts_up_per_connection(
        random_run: list[Record]) -> None:
    records = random_run
    assert len(records) >= 40
    assert all(r.connection is not None and r.reuse_index is not None for r in records)
    by_conn: dict[tuple[str | None, str | None], list[int | None]] = {}
    for r in sorted(records, key=lambda r: r.started_at):
        by_conn.setdefault((r.worker, r.connection), []).append(r.reuse_index)
    for turns in by_conn.values():
        assert turns == list(range(len(turns)))
    # Users keep their connection across streams: most streams are not a connection's first.
    assert sum(r.reuse_index != 0 for r in records) > len(records) / 2


def test_random_faults_in_a_locust_run_name_no_attribute(random_run: list[Record]) -> None:
    truncated = sum(r.ending == "truncated" for r in random_run)
    assert 0 < truncated < 0.25 * len(random_run)
    assert {r.ending for r in random_run} == {"complete", "truncated"}
    analysis = analyze(random_run, STRICT)
    assert not [a.key for a in analysis.attributes if a.significant], analysis.headlines
    assert analysis.headlines[1].startswith("no recorded attribute separates"), analysis.headlines


# ── bad input: one line, exit 2 ───────────────────────────────────────────────────────────────────
def _one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def test_missing_key_variable_is_one_line_exit_2(tmp_path: Path) -> None:
    line = _one_line_error(run_cli(["locust", "--arm", "a=http://127.0.0.1:9/v1", "--key-env",
                                    "SSEGUARD_NO_SUCH_KEY", "--headless", "-u", "1", "-t", "1s"],
                                   env=base_env(), cwd=tmp_path))
    assert "SSEGUARD_NO_SUCH_KEY" in line


def test_unknown_workload_is_one_line_exit_2(tmp_path: Path) -> None:
    line = _one_line_error(run_cli(["locust", "--arm", "a=http://127.0.0.1:9/v1", "--workload",
                                    "huge", "--headless"], env=base_env(), cwd=tmp_path))
    assert "huge" in line and "small" in line


def test_unreachable_master_is_one_line_exit_2(tmp_path: Path) -> None:
    port = free_port()
    line = _one_line_error(run_cli(["locust", "--arm", "a=http://127.0.0.1:9/v1", "--worker",
                                    "--master-host", "127.0.0.1", "--master-port", str(port),
                                    "--master-wait", "0.5"], env=base_env(), cwd=tmp_path))
    assert f"127.0.0.1:{port}" in line


def test_plain_locust_with_a_bad_config_file_is_one_line_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "probe.toml"
    config.write_text('[[arm]]\nname = "a"\nbase_url = "http://127.0.0.1:9/v1"\n'
                      'key_env = "SSEGUARD_NO_SUCH_KEY"\n', "utf-8")
    result = subprocess.run([sys.executable, "-m", "locust", "-f", LOCUSTFILE, "--headless", "-u", "1",
                             "-t", "1s"], capture_output=True, text=True, timeout=30, cwd=tmp_path,
                            env=base_env(SSEGUARD_LOCUST_CONFIG=str(config)))
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "SSEGUARD_NO_SUCH_KEY" in errors[0]
    assert "Traceback" not in result.stderr


@pytest.fixture(scope="module")
def edge_results() -> dict[str, Any]:
    """`_locust_edge.py` in its own process (it imports Locust): a misbehaving raw server."""
    script = Path(__file__).parent / "_locust_edge.py"
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                            env=base_env())
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout))


def test_peer_failures_become_endings_on_locusts_client_never_exceptions(edge_results: dict) -> None:
    got = edge_results["streams"]
    endings = {mode: value[0] for mode, value in got.items()}
    assert endings == {
        "complete": "complete", "slow": "complete", "close_delimited": "complete",
        "clean_eof": "truncated", "cut_mid_frame": "cut_mid_frame",
        "chunked_fin": "transport_error", "length_fin": "transport_error", "rst": "transport_error",
        "stall_body": "stalled", "stall_head": "stalled", "http500": "http_error",
        "garbage": "transport_error", "refused": "transport_error"}
    # Bytes are checked as they arrive: the first token is seen well before the server sends the
    # rest, 1.5 s later.
    _, ttft_ms, duration_ms = got["slow"]
    assert duration_ms - ttft_ms >= 750
    # A stall is declared after the stall timeout (3 s), not at the end of the server's 20 s silence.
    assert 2900 <= got["stall_body"][2] < 15_000


def test_locust_error_text_is_the_ending_then_the_first_untolerated_finding(edge_results: dict
                                                                            ) -> None:
    reasons = edge_results["reasons"]
    assert reasons == {
        "complete": [None, None, None],
        "markup_leak": ["complete: markup_leak", "complete: markup_leak",
                        ["Complete", "complete: markup_leak"]],
        "no_done": ["no_done: missing_usage", None, ["NoDone", "no_done: missing_usage"]],
        "cut_mid_frame": ["cut_mid_frame", "cut_mid_frame", ["CutMidFrame", "cut_mid_frame"]],
        "tool_args_invalid_json": ["complete: tool_args_invalid_json",
                                   "complete: tool_args_invalid_json",
                                   ["Complete", "complete: tool_args_invalid_json"]],
    }


# ── the pieces, without Locust ────────────────────────────────────────────────────────────────────
def test_master_needs_no_key_but_workers_and_local_runs_do(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSEGUARD_NO_SUCH_KEY", raising=False)
    settings = LaunchSettings(options={"arms": ["a=http://127.0.0.1:9/v1"],
                                       "key_env": "SSEGUARD_NO_SUCH_KEY"})
    assert settings.resolve(need_keys=False).arms[0].key_env == "SSEGUARD_NO_SUCH_KEY"
    import os

    assert "SSEGUARD_NO_SUCH_KEY" not in os.environ  # the placeholder did not outlive validation
    with pytest.raises(Exception, match="SSEGUARD_NO_SUCH_KEY"):
        settings.resolve()


def test_settings_travel_as_inputs_never_as_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                    ) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    config = tmp_path / "probe.toml"
    config.write_text(f'[probe]\nworkload = "tools"\nstall_timeout = 3\n[[arm]]\nname = "x"\n'
                      f'base_url = "http://127.0.0.1:9/v1"\nkey_env = "{KEY_ENV}"\n', "utf-8")
    settings = LaunchSettings(options={"policy": "no-done-ok"}, config_path=str(config))
    raw = settings.to_env()
    assert SECRET not in raw
    again = LaunchSettings.from_env({SETTINGS_ENV: raw})
    resolved = again.resolve()
    assert (resolved.workload.name, resolved.stall_timeout, resolved.policy.name) == (
        "tools", 3.0, "no-done-ok")
    assert resolved.arms[0].key() == SECRET
    assert not again.explicit_out


def test_locust_argument_handling() -> None:
    assert role(["--master", "-u", "3"]) == "master"
    assert role(["--worker"]) == "worker"
    assert role(["--headless"]) == "local"
    assert master_address(["--master-host=10.0.0.5", "--master-port", "6000"], {}) == ("10.0.0.5", 6000)
    assert master_address([], {}) == ("127.0.0.1", 5557)
    argv = locust_argv(["--headless"], locust_config="l.conf", run_id="r1")
    assert argv[1:5] == ["-m", "locust", "-f", LOCUSTFILE]
    assert argv[5:] == ["--config", "l.conf", "--sseguard-run-id", "r1", "--headless"]
    assert "-f" not in locust_argv(["--locustfile", "mine.py"])[1:4]


def test_importing_the_user_module_loads_no_asyncio_code() -> None:
    code = ("import sys, sseguard.locust.user\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('aiohttp', 'asyncio', 'uvloop'))\n"
            "print(bad)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30,
                            env=base_env())
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_missing_locust_package_is_a_one_line_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from sseguard.core.errors import ConfigError
    from sseguard.locust import launch as locust_run

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "locust" else real(name, *a))
    settings = LaunchSettings(options={"arms": ["a=http://127.0.0.1:9/v1"]})
    with pytest.raises(ConfigError, match=r"pip install 'sseguard\[locust\]'"):
        locust_run.prepare(settings, ["--headless"])


# ── a responses arm and a messages arm through a master and two workers ──────────────────────────
#: What each worker must record for the fault the server says it injected (any protocol).
PROTOCOL_ENDINGS = {"none": "complete", "truncated": "truncated", "cut_mid_frame": "cut_mid_frame",
                    "http_error": "http_error", "transport_error": "transport_error",
                    "no_finish": "no_finish"}
PROTOCOL_CHAOS = """
seed = 13
[pacing]
inter_token_ms = 8
tokens = 8
[faults]
cut_mid_frame = 0.05
http_error = 0.05
transport_error = 0.04
[[patterns]]
type = "api"
api = "messages"
fault = "no_finish"
probability = 0.2
[[patterns]]
type = "routed"
fault = "truncated"
share = 0.2
prefix = "gw-"
"""


@pytest.fixture(scope="module")
def protocol_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Master + 2 workers, users spread over a responses, a messages and a gemini arm, each keyed in
    its own protocol's header."""
    work = tmp_path_factory.mktemp("locust-apis")
    with chaos_server(PROTOCOL_CHAOS, work) as url:
        config = work / "probe.toml"
        config.write_text(f'[probe]\nstall_timeout = 2\nout = "run"\nworkload = "tools"\n'
                          f'[[arm]]\nname = "oai"\nbase_url = "{url}"\napi = "responses"\n'
                          f'key_env = "{KEY_ENV}"\n'
                          f'[[arm]]\nname = "claude"\nbase_url = "{url}"\napi = "messages"\n'
                          f'key_env = "{KEY_ENV}"\n'
                          f'[[arm]]\nname = "gem"\nbase_url = "{url}"\napi = "gemini"\n'
                          f'key_env = "{KEY_ENV}"\n', "utf-8")
        return run_distributed(["locust", "--config", str(config)], work,
                               master_args=["--json-file", "run/stats", "--csv", "run/locust",
                                            "-u", "6", "-r", "6"],  # two users per arm
                               worker_env={KEY_ENV: SECRET})


def test_workers_record_each_protocols_endings_as_the_server_injected_them(protocol_run: dict
                                                                            ) -> None:
    work = protocol_run["work"]
    log = (work / "master.log").read_text(errors="replace")
    assert protocol_run["worker_codes"] == [0, 0], log[-2000:]
    files = sorted((work / "run").glob("results-*.jsonl"))
    assert len(files) == 2
    records = load_records([str(work / "run")])
    assert {r.arm: r.api for r in records} == {"oai": "responses", "claude": "messages",
                                               "gem": "gemini"}
    assert {r.worker for r in records if r.arm == "oai"} == {r.worker for r in records} and \
        len({r.worker for r in records}) == 2
    wrong = [(r.arm, r.injected, r.ending) for r in records
             if r.ending != PROTOCOL_ENDINGS[str(r.injected)]]
    assert wrong == []
    for arm in ("oai", "claude", "gem"):
        mine = [r for r in records if r.arm == arm]
        assert len(mine) >= 20
        assert Counter(r.ending for r in mine) == Counter(PROTOCOL_ENDINGS[str(r.injected)]
                                                          for r in mine)
    # Only the messages path has the api-pattern fault; the routed truncation hits both.
    assert {r.ending for r in records if r.arm == "claude"} >= {"no_finish", "truncated", "complete"}
    for arm in ("oai", "gem"):
        assert "no_finish" not in {r.ending for r in records if r.arm == arm}
        assert "truncated" in {r.ending for r in records if r.arm == arm}
    # The Gemini arm asked for the SSE framing at the path with the model in it.
    assert {r.path for r in records if r.arm == "gem"} == {
        "/v1/models/sseguard-probe:streamGenerateContent"}
    # The tools workload held multi-turn conversations: tool results made some prompts longer.
    for arm in ("oai", "claude", "gem"):
        assert len({r.prompt_bytes for r in records if r.arm == arm}) >= 2


def test_locust_names_failures_by_ending_per_arm_and_no_key_reaches_disk(protocol_run: dict) -> None:
    work = protocol_run["work"]
    records = load_records([str(work / "run")])
    final = json.loads((work / "run" / "stats.json").read_text())
    by_name = {e["name"]: e for e in final}
    assert set(by_name) == {"oai:tools", "claude:tools", "gem:tools"}
    for arm in ("oai", "claude", "gem"):
        mine = [r for r in records if r.arm == arm]
        entry = by_name[f"{arm}:tools"]
        assert entry["num_requests"] == len(mine)
        assert entry["num_failures"] == sum(not r.passed for r in mine)
    # Failures are named by ending, per arm: the messages arm's no_finish among them.
    with (work / "run" / "locust_failures.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    named = {(row["Name"], row["Error"]) for row in rows}
    assert {error for _, error in named} <= ENDING_NAMES
    assert ("claude:tools", "no_finish") in named
    assert not any(name == "oai:tools" and error == "no_finish" for name, error in named)
    for path in work.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_analyze_of_the_locust_run_names_the_messages_api(protocol_run: dict) -> None:
    records = load_records([str(protocol_run["work"] / "run")])
    analysis = analyze(records, STRICT)
    no_finish = analysis.by_reason.get("no_finish")
    assert no_finish, analysis.headlines
    assert no_finish[0].key == "api" and no_finish[0].best is not None
    assert no_finish[0].best.values == ("messages",)


def test_the_api_flag_travels_to_the_locust_process_as_an_input(monkeypatch: pytest.MonkeyPatch
                                                                 ) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    settings = LaunchSettings(options={"arms": ["a=http://127.0.0.1:9/v1"], "api": "messages",
                                 "key_env": KEY_ENV})
    again = LaunchSettings.from_env({SETTINGS_ENV: settings.to_env()})
    (arm,) = again.resolve().arms
    assert (arm.protocol, arm.url) == ("messages", "http://127.0.0.1:9/v1/messages")
    assert arm.request_headers()["x-api-key"] == SECRET and SECRET not in settings.to_env()
