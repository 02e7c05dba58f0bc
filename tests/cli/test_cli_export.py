"""`sseguard export` and the new `sseguard analyze` flags, through the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sseguard.cli import app
from sseguard.core.record import encode_record
from support.analyze import routed

runner = CliRunner()


@pytest.fixture
def run_file(tmp_path: Path) -> str:
    path = tmp_path / "results.jsonl"
    records = routed()
    for i, r in enumerate(records):
        r.arm = "gw" if i % 2 else "direct"
    path.write_bytes(b"".join(encode_record(r) for r in records))
    return str(path)


def test_export_writes_parquet_by_day_that_analyze_reads_back(tmp_path: Path, run_file: str) -> None:
    out = tmp_path / "lake"
    result = runner.invoke(app, ["export", run_file, "--parquet", str(out)])
    assert result.exit_code == 0, result.output
    assert "wrote 300 records" in result.stderr
    assert [p.name for p in out.iterdir()] == ["day=2025-06-15"]
    again = runner.invoke(app, ["analyze", str(out), "--json"])
    assert json.loads(again.stdout)["requests"] == 300


def test_analyze_filters_by_time_and_where(run_file: str) -> None:
    result = runner.invoke(app, ["analyze", run_file, "--json", "--where", "arm=gw",
                                 "--since", "2025-06-15T15:07:00"])
    assert json.loads(result.stdout)["requests"] == 100


@pytest.mark.parametrize("args", [
    ["export", "missing.jsonl", "--parquet", "out"],
    ["analyze", "results.jsonl", "--where", "colour=red"],
    ["analyze", "results.jsonl", "--since", "yesterday"],
    ["analyze", "results.jsonl", "--engine", "excel"],
])
def test_bad_flags_are_one_line_and_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_file: str,
                                           args: list[str]) -> None:
    monkeypatch.chdir(Path(run_file).parent)
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:")
