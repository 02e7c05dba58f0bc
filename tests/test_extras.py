"""Install only what you use (issue 49): each command that needs an extra says which in one line and
exits 2 when it is missing, the probe's summary works without ``[analyze]``, and the extras in
pyproject.toml are the ones the product checks for.

A missing extra is simulated in a subprocess by an import hook placed first on ``sys.meta_path`` that
refuses the extra's modules, as an interpreter without them would (``ModuleNotFoundError``); the
product's own check is not touched. CI's ``.ci/wheel`` repeats the ``analyze`` case in a real venv
with no extra installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from sseguard.chaos import ChaosConfig, Fault, Pacing, run_chaos_in_thread

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
FAST = Pacing(ttft_ms=2.0, inter_token_ms=1.0, tokens=12)

#: Placed first on sys.meta_path: the named top-level modules (and their submodules) are not there.
BLOCKER = """
import sys
class _Missing:
    def __init__(self, names):
        self.names = names
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _Missing(set(sys.argv[1].split(","))))
sys.argv = ["sseguard", *sys.argv[2:]]
from sseguard.cli import main
main()
"""

#: What ``[analyze]`` brings; the probe's summary and live display must do without all of it.
ANALYZE_MODULES = "duckdb,numpy,scipy,matplotlib"


def sseguard_without(modules: str, *args: str, cwd: Path = ROOT,
                     env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", BLOCKER, modules, *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd, env=env)


def _results(tmp: Path) -> Path:
    path = tmp / "results.jsonl"
    path.write_text("")
    return path


def _tokenizer_json(tmp: Path) -> Path:
    path = tmp / "tokenizer.json"
    path.write_text("{}")
    return path


# (extra, the module refused, the command line, what the message names as needing it)
CASES = [
    ("analyze", "duckdb", lambda t: ["analyze", str(_results(t))], "sseguard analyze"),
    ("analyze", "numpy", lambda t: ["analyze", str(_results(t))], "sseguard analyze"),
    ("analyze", "scipy", lambda t: ["demo", "--out", str(t / "demo"), "--no-live"], "sseguard demo"),
    ("parquet", "duckdb", lambda t: ["export", str(_results(t)), "--parquet", str(t / "lake")],
     "sseguard export"),
    ("postgres", "psycopg", lambda t: ["analyze", "postgresql://sseguard@127.0.0.1:9/none"],
     "a PostgreSQL store"),
    ("postgres", "psycopg", lambda t: ["proxy", "--upstream", "http://127.0.0.1:9/v1",
                                       "--store", "postgresql://sseguard@127.0.0.1:9/none"],
     "a PostgreSQL store"),
    ("spark", "pyspark", lambda t: ["analyze", str(_results(t)), "--engine", "spark"],
     "the Spark engine (--engine spark)"),
    ("tokenizer", "tokenizers", lambda t: ["tokenizer", str(_tokenizer_json(t))], "sseguard tokenizer"),
    ("locust", "locust", lambda t: ["locust", "--arm", "a=http://127.0.0.1:9/v1", "--out", str(t / "l"),
                                    "--headless", "-u", "1", "-t", "1s"], "sseguard locust"),
]


@pytest.mark.parametrize(("extra", "module", "argv", "needed_by"), CASES,
                         ids=[f"{c[0]}-{c[1]}-{c[3].split()[-1]}" for c in CASES])
def test_a_command_whose_extra_is_missing_says_which_in_one_line_and_exits_2(
        tmp_path: Path, extra: str, module: str, argv: Callable[[Path], list[str]], needed_by: str) -> None:
    done = sseguard_without(module, *argv(tmp_path))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        f"error: {needed_by} needs the [{extra}] extra (module {module!r} is not installed): "
        f"pip install 'sseguard[{extra}]'"]


def test_the_analysis_api_without_its_extra_raises_the_one_line_error() -> None:
    code = BLOCKER.split("sys.argv = ")[0] + (
        "from sseguard.extras import MissingExtra\n"
        "try:\n"
        "    from sseguard.analyze import analyze_sources\n"
        "except MissingExtra as exc:\n"
        "    print(exc)\n")
    done = subprocess.run([sys.executable, "-c", code, "numpy"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ("sseguard.analyze.analyze_sources needs the [analyze] extra (module 'numpy' is "
                           "not installed): pip install 'sseguard[analyze]'\n")


def test_every_extra_the_product_checks_is_one_of_pyproject_and_all_holds_them() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    optional = project["optional-dependencies"]
    from sseguard.extras import EXTRAS

    assert sorted(EXTRAS) == ["analyze", "locust", "otel", "parquet", "postgres", "spark", "tokenizer"]
    assert set(EXTRAS) <= set(optional)
    (everything,) = optional["all"][:1]
    assert everything.startswith("sseguard[")
    assert set(EXTRAS) <= set(everything.removeprefix("sseguard[").removesuffix("]").split(","))
    assert "sseguard[all]" in optional["test"]  # the suite needs every extra


def test_the_core_dependencies_hold_no_heavy_package() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {dep.split(";")[0].split("[")[0].split(">")[0].split("=")[0].split("<")[0].strip().lower()
             for dep in project["dependencies"]}
    assert names == {"aiohttp", "httpx2", "anyio", "typer", "rich", "msgspec", "jsonschema",
                     "prometheus-client", "uvloop"}


def test_the_version_has_one_source() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"]
    assert project["project"]["dynamic"] == ["version"]
    assert project["tool"]["hatch"]["version"]["path"] == "src/sseguard/__init__.py"


# ── the probe without [analyze] ─────────────────────────────────────────────────────────────────
def test_the_probe_summary_without_analyze_counts_each_arm_and_names_the_extra(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with run_chaos_in_thread(ChaosConfig(pacing=FAST, faults={Fault.TRUNCATED: 0.5}, seed=4)) as srv:
        done = sseguard_without(ANALYZE_MODULES, "probe", "--arm", f"gw={srv.url}", "--count", "10",
                                "--concurrency", "2", "--out", str(out), "--no-live")
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    failed = sum(1 for line in lines if line["ending"] != "complete")
    assert len(lines) == 10 and 0 < failed < 10  # the seed cuts some streams, not all
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    row = next(line for line in done.stdout.splitlines() if line.startswith("│ gw "))
    assert f" {failed} · {100 * failed / 10:.1f} %" in row, row
    assert "needs the [analyze] extra: pip install 'sseguard[analyze]'" in done.stdout


def test_the_probe_json_summary_without_analyze_has_the_counts(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with run_chaos_in_thread(ChaosConfig(pacing=FAST)) as srv:
        done = sseguard_without(ANALYZE_MODULES, "probe", "--arm", f"gw={srv.url}", "--count", "4",
                                "--concurrency", "2", "--out", str(out), "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["analysis"] is None
    arm = summary["counts"]["arms"]["gw"]
    assert (arm["total"], arm["failed"], arm["endings"], arm["api"]) == (4, 0, {"complete": 4}, "chat")
    assert summary["counts"]["levels"][0]["concurrency"] == 2


def test_the_live_display_works_without_analyze(tmp_path: Path) -> None:
    # FORCE_COLOR makes rich treat stderr as a terminal, so the live board draws.
    env = {**os.environ, "FORCE_COLOR": "1", "COLUMNS": "120"}
    with run_chaos_in_thread(ChaosConfig(pacing=FAST)) as srv:
        done = sseguard_without(ANALYZE_MODULES, "probe", "--arm", f"gw={srv.url}", "--count", "4",
                                "--concurrency", "2", "--out", str(tmp_path / "run"), env=env)
    assert done.returncode == 0, done.stderr
    assert "4/4" in done.stderr  # the progress bar's count of the live board
    assert "Traceback" not in done.stderr
