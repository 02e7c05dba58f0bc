"""`sseguard check`: exit codes 0/1/2, JSON output, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from sseguard.cli import app

BODIES = Path(__file__).parent.parent / "examples" / "bodies"
runner = CliRunner()


def test_complete_body_passes_with_exit_0() -> None:
    result = runner.invoke(app, ["check", str(BODIES / "complete.sse")])
    assert result.exit_code == 0, result.output
    assert "PASS" in result.output and "complete" in result.output


def test_truncated_body_fails_with_exit_1_and_json() -> None:
    result = runner.invoke(app, ["check", str(BODIES / "truncated.sse"), "--json"])
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert (data["ending"], data["passed"], data["failure"]) == ("truncated", False, "truncated")


def test_tolerate_and_presets_change_only_the_judgement() -> None:
    body = str(BODIES / "dialect_no_done.sse")
    assert runner.invoke(app, ["check", body]).exit_code == 1
    assert runner.invoke(app, ["check", body, "--tolerate", "no_done"]).exit_code == 0
    assert runner.invoke(app, ["check", body, "--policy", "no-done-ok"]).exit_code == 0


def test_request_enables_tool_checks() -> None:
    result = runner.invoke(app, ["check", str(BODIES / "tool_calls.sse"), "--json",
                                 "--request", str(BODIES.parent / "request_tools.json")])
    assert json.loads(result.output)["findings"][0]["kind"] == "missing_usage"


def test_http_status_makes_the_body_an_error_body() -> None:
    result = runner.invoke(app, ["check", str(BODIES / "http_error.json"), "--status", "429", "--json"])
    data = json.loads(result.output)
    assert (result.exit_code, data["ending"], data["http_status"]) == (1, "http_error", 429)


def test_stdin_is_read_with_dash() -> None:
    result = runner.invoke(app, ["check", "-"], input=(BODIES / "complete.sse").read_bytes())
    assert result.exit_code == 0


def test_unusable_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad_request = tmp_path / "req.json"
    bad_request.write_text("{nope")
    for args in (["check", str(tmp_path / "missing.sse")],
                 ["check", str(BODIES / "complete.sse"), "--tolerate", "nonsense"],
                 ["check", str(BODIES / "complete.sse"), "--request", str(bad_request)],
                 ["check", str(BODIES / "complete.sse"), "--status", "1000"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, args
        assert "Traceback" not in result.output
        assert len(result.output.strip().splitlines()) == 1, result.output
