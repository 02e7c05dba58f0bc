"""`sseguard check`: exit codes 0/1/2, JSON output, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from sseguard.cli import app

BODIES = Path(__file__).parents[2] / "examples" / "bodies"
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


# ── the other protocols ────────────────────────────────────────────────────────────────────────

def test_protocol_is_detected_from_the_body() -> None:
    for name, api, ending in (("responses_incomplete", "responses", "complete"),
                              ("responses_truncated", "responses", "truncated"),
                              ("messages_no_done", "messages", "no_done"),
                              ("complete", "chat", "complete")):
        result = runner.invoke(app, ["check", str(BODIES / f"{name}.sse"), "--json"])
        data = json.loads(result.output)
        assert (data["api"], data["ending"]) == (api, ending), name


def test_api_option_names_the_protocol() -> None:
    result = runner.invoke(app, ["check", str(BODIES / "messages_complete.sse"), "--api", "messages"])
    assert result.exit_code == 0, result.output
    assert "PASS" in result.output and "stop_reason" in result.output and "end_turn" in result.output
    result = runner.invoke(app, ["check", str(BODIES / "responses_incomplete.sse"), "--api",
                                 "responses"])
    assert result.exit_code == 0 and "incomplete (max_output_tokens)" in result.output


def test_request_in_the_protocols_own_format_enables_tool_checks() -> None:
    for api in ("responses", "messages"):
        request = str(BODIES.parent / f"request_tools_{api}.json")
        for body, kinds in ((f"{api}_tool_calls.sse", []),
                            (f"{api}_tool_args_invalid_json.sse", ["tool_args_invalid_json"])):
            result = runner.invoke(app, ["check", str(BODIES / body), "--api", api, "--request",
                                         request, "--json"])
            assert [f["kind"] for f in json.loads(result.output)["findings"]] == kinds, body
    # The chat request names the tool under "function": to the Messages checker it offers none.
    result = runner.invoke(app, ["check", str(BODIES / "messages_tool_calls.sse"), "--json",
                                 "--request", str(BODIES.parent / "request_tools.json")])
    assert [f["kind"] for f in json.loads(result.output)["findings"]] == ["tool_undefined_function"]


def test_body_of_another_protocol_than_api_says_is_one_line_and_exit_2() -> None:
    for body, api in (("responses_complete.sse", "messages"), ("messages_complete.sse", "chat"),
                      ("complete.sse", "responses")):
        result = runner.invoke(app, ["check", str(BODIES / body), "--api", api])
        assert result.exit_code == 2, (body, api)
        assert "Traceback" not in result.output
        assert len(result.output.strip().splitlines()) == 1, result.output
        assert f"not {api}" in result.output
    result = runner.invoke(app, ["check", str(BODIES / "complete.sse"), "--api", "soap"])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1


def test_garbage_bytes_get_a_verdict_never_a_traceback(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(bytes(range(256)) * 3 + b"\n\ndata: {\"type\": \"response.\n\n\xff\xfe")
    for api in (None, "chat", "responses", "messages"):
        result = runner.invoke(app, ["check", str(garbage), "--json",
                                     *(["--api", api] if api else [])])
        assert result.exit_code == 1, (api, result.output)
        data = json.loads(result.output)
        assert data["api"] == (api or "chat") and data["passed"] is False


def test_peer_objects_nested_to_the_decoders_limit_still_print_as_json(tmp_path: Path) -> None:
    depth = 990
    item = '{"type": "message", "content": [], "x": ' + "[" * depth + "]" * depth + "}"
    body = tmp_path / "deep.sse"
    body.write_text(
        'data: {"type": "response.created", "sequence_number": 0, "response": {"id": "r"}}\n\n'
        'data: {"type": "response.output_item.added", "sequence_number": 1, "output_index": 0, '
        f'"item": {item}}}\n\n')
    result = runner.invoke(app, ["check", str(body), "--json"])
    assert result.exit_code == 1, result.output
    assert json.loads(result.output.replace("[" * depth, "[").replace("]" * depth, "]"))["ending"] \
        == "truncated"


def test_every_sample_body_and_its_cuts_print_a_verdict(tmp_path: Path) -> None:
    cut = tmp_path / "cut.sse"
    for path in sorted(BODIES.glob("*.sse")):
        body = path.read_bytes()
        for end in (len(body), len(body) * 2 // 3, len(body) // 3):
            cut.write_bytes(body[:end])
            result = runner.invoke(app, ["check", str(cut)])
            assert result.exit_code in (0, 1), (path.name, end, result.output)
            assert "Traceback" not in result.output and "ending" in result.output


def test_check_shows_each_finish_reason_with_its_class_and_fails_one_no_table_names(
        tmp_path: Path) -> None:
    def body(reason: str) -> str:
        path = tmp_path / f"{reason}.sse"
        path.write_bytes(
            b'data: {"candidates":[{"content":{"role":"model","parts":[{"text":"Hi"}]},'
            b'"finishReason":"' + reason.encode() + b'","index":0}],"usageMetadata":'
            b'{"promptTokenCount":3,"candidatesTokenCount":1,"totalTokenCount":4},'
            b'"modelVersion":"m","responseId":"r1"}\r\n\r\n')
        return str(path)

    safety = runner.invoke(app, ["check", body("SAFETY"), "--api", "gemini"])
    assert safety.exit_code == 0 and "SAFETY: policy" in safety.output
    tomorrow = runner.invoke(app, ["check", body("A_REASON_FROM_TOMORROW"), "--api", "gemini"])
    assert tomorrow.exit_code == 1
    assert "A_REASON_FROM_TOMORROW: failed" in tomorrow.output
