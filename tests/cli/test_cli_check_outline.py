"""`sseguard check`'s human output: every protocol's finish, candidate and block rows, worded from the
protocol's ``Outline`` (a Gemini body used to print none)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from sseguard.cli import app

BODIES = Path(__file__).parents[2] / "examples" / "bodies"
runner = CliRunner()

STOP_72 = {"candidate 0": "finishReason=STOP, 72 chars"}
#: Per Gemini sample body (its .sse and its .json, which carry the same records), the rows it prints
#: about what came back: one per candidate, or the blocked prompt's reason when none came.
GEMINI_ROWS: dict[str, dict[str, str]] = {
    "gemini_bad_chunk_json": STOP_72,
    "gemini_chunk_schema": STOP_72,
    "gemini_complete": STOP_72,
    "gemini_cut_mid_frame": {"candidate 0": "finishReason=null, 54 chars"},
    "gemini_error_event": {"candidate 0": "finishReason=null, 27 chars"},
    "gemini_event_order": STOP_72,
    "gemini_id_changed": STOP_72,
    "gemini_malformed_function_call": {"candidate 0": "finishReason=MALFORMED_FUNCTION_CALL, 7 chars"},
    "gemini_markup_leak": {"candidate 0": "finishReason=STOP, 94 chars"},
    "gemini_max_tokens": {"candidate 0": "finishReason=MAX_TOKENS, 72 chars"},
    "gemini_missing_usage": STOP_72,
    "gemini_prompt_blocked": {"blockReason": "PROHIBITED_CONTENT"},
    "gemini_safety": {"candidate 0": "finishReason=SAFETY, 5 chars"},
    "gemini_thoughts": {"candidate 0": "finishReason=STOP, 47 chars"},
    "gemini_tool_args_schema_mismatch": {
        "candidate 0": "finishReason=STOP, 0 chars, tool calls: get_weather"},
    "gemini_tool_calls": {"candidate 0": "finishReason=STOP, 13 chars, tool calls: get_weather"},
    "gemini_tool_undefined_function": {
        "candidate 0": "finishReason=STOP, 0 chars, tool calls: get_forecast"},
    "gemini_truncated": {"candidate 0": "finishReason=null, 27 chars"},
    "gemini_unclosed": STOP_72,
}
#: The rows of the verdict table that are not about the answer's shape (the class of each finish
#: reason, ``reason N``, has tests of its own).
COMMON = {"ending", "http status", "chunks / bytes", "response id", "findings", "error",
          "unknown kinds"}


def rows(output: str) -> dict[str, str]:
    """The table's rows, label → value; a value rich wrapped onto more lines is joined back."""
    out: dict[str, str] = {}
    label = ""
    for line in output.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if len(cells) != 2:
            continue
        if cells[0]:
            label = cells[0]
            out[label] = cells[1]
        elif label:
            out[label] += " " + cells[1]
    return out


def answer_rows(output: str) -> dict[str, str]:
    return {k: v for k, v in rows(output).items()
            if k not in COMMON and not k.startswith(("finding", "reason "))}


def test_every_gemini_sample_body_prints_its_finish_and_candidate_rows() -> None:
    bodies = sorted(BODIES.glob("gemini_*"))
    assert {p.name.split(".")[0] for p in bodies} == set(GEMINI_ROWS)
    assert len(bodies) == 2 * len(GEMINI_ROWS) - 1  # gemini_unclosed is a JSON array only
    for path in bodies:
        result = runner.invoke(app, ["check", str(path)])
        assert result.exit_code in (0, 1), (path.name, result.output)
        assert answer_rows(result.output) == GEMINI_ROWS[path.name.split(".")[0]], \
            (path.name, result.output)


def test_the_other_protocols_print_their_finish_candidate_and_block_rows() -> None:
    expected = {
        "complete.sse": {"choice 0": "finish_reason=stop, 22 chars"},
        "messages_complete.sse": {"stop_reason": "end_turn", "block 0": "thinking, 27 chars",
                                  "block 1": "text, 22 chars"},
        "responses_incomplete.sse": {"status": "incomplete (max_output_tokens)",
                                     "output 0": "reasoning, 15 chars", "output 1": "message, 10 chars"},
    }
    for name, want in expected.items():
        result = runner.invoke(app, ["check", str(BODIES / name)])
        assert answer_rows(result.output) == want, (name, result.output)
