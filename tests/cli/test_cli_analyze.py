"""`sseguard analyze`: summary and findings in words, --json, policies, files, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sseguard.cli import app
from sseguard.core.record import Record, encode_record
from support.analyze import rec, routed

runner = CliRunner()


def jsonl(path: Path, records: list[Record]) -> str:
    path.write_bytes(b"".join(encode_record(r) for r in records))
    return str(path)


@pytest.fixture(scope="module")
def routed_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    return jsonl(tmp_path_factory.mktemp("run") / "results.jsonl", routed())


def test_prints_the_summary_and_the_top_finding_in_words(routed_file: str) -> None:
    result = runner.invoke(app, ["analyze", routed_file], env={"COLUMNS": "200"})
    assert result.exit_code == 1, result.output  # streams failed the policy
    # rich wraps to the console it found first in this process, so words are compared, not lines
    words = " ".join(result.output.split())
    assert "Per arm" in words
    assert "truncated streams had response ids starting `gw-`" in words
    assert "none of" in words and "numeric response ids failed" in words


def test_json_output_is_one_document_with_stable_keys(routed_file: str) -> None:
    result = runner.invoke(app, ["analyze", routed_file, "--json", "--top", "2"])
    data = json.loads(result.stdout)
    assert data["attributes"][0]["key"] == "id_prefix"
    assert len(data["headlines"]) == 2  # the overall line and the one significant attribute


def test_policy_and_tolerate_change_the_judgement(tmp_path: Path) -> None:
    source = jsonl(tmp_path / "r.jsonl", [rec(i, ending="no_done", started=float(i)) for i in range(20)])
    assert runner.invoke(app, ["analyze", source]).exit_code == 1
    assert runner.invoke(app, ["analyze", source, "--tolerate", "no_done"]).exit_code == 0
    result = runner.invoke(app, ["analyze", source, "--policy", "no-done-ok", "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)["failed"] == 0


def test_html_and_png_are_written(tmp_path: Path, routed_file: str) -> None:
    html, pngs = tmp_path / "report.html", tmp_path / "plots"
    result = runner.invoke(app, ["analyze", routed_file, "--html", str(html), "--png", str(pngs)])
    assert result.exit_code == 1, result.output
    assert html.read_text().startswith("<!doctype html>")
    assert len(list(pngs.glob("*.png"))) == 3
    assert f"wrote{html}" in "".join(result.output.split())


def test_a_directory_of_worker_files_is_merged(tmp_path: Path) -> None:
    records = routed(n=90)
    jsonl(tmp_path / "w1.jsonl", records[:40])
    jsonl(tmp_path / "w2.jsonl", records[40:])
    result = runner.invoke(app, ["analyze", str(tmp_path), "--json"])
    assert json.loads(result.stdout)["requests"] == 90


@pytest.mark.parametrize("args", [
    ["missing.jsonl"],
    ["bad.jsonl"],
    ["good.jsonl", "--policy", "sloppy"],
    ["good.jsonl", "--tolerate", "nonsense"],
    ["good.jsonl", "--top", "0"],
    ["empty.jsonl"],
    ["nowhere.db"],
])
def test_unusable_input_is_one_line_and_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               args: list[str]) -> None:
    monkeypatch.chdir(tmp_path)
    jsonl(tmp_path / "good.jsonl", [rec(1)])
    (tmp_path / "bad.jsonl").write_text('{"arm": "a"}\n{oops\n')
    (tmp_path / "empty.jsonl").write_text("")
    result = runner.invoke(app, ["analyze", *args])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:")
    if args[0] == "bad.jsonl":
        assert "bad.jsonl:2:" in lines[0]
