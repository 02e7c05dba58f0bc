"""``sseguard parse`` and ``sseguard tokenizer`` through the real command line (typer's runner)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from typer.testing import CliRunner

from sseguard.cli import app
from sseguard.core.toolcalls import FAMILIES

runner = CliRunner()
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "markup"
TOOLS = str(EXAMPLES / "tools.json")
SAMPLES = ["dsml-v32.txt", "dsml-v4.txt", "dsml-v41.txt", "deepseek-v3.txt", "deepseek-v31.txt",
           "hermes.txt", "qwen3-coder.txt", "kimi-k2.txt", "harmony.txt", "glm45.txt", "glm47.txt",
           "minimax-m2.txt"]


def parse_json(*args: str) -> tuple[int, dict]:
    result = runner.invoke(app, ["parse", *args, "--json"])
    return result.exit_code, json.loads(result.output)


@pytest.mark.parametrize("sample", SAMPLES)
def test_parse_json_gives_the_final_openai_message_whatever_the_chunking(sample: str) -> None:
    path = str(EXAMPLES / sample)
    code, whole = parse_json(path, "--tools", TOOLS)
    assert code == 0, whole
    message = whole["message"]
    assert whole["finish_reason"] == "tool_calls" and whole["errors"] == []
    assert message["role"] == "assistant" and message["content"]
    for call in message["tool_calls"]:
        # Kimi's own call ids are kept; the other families write none
        assert call["id"].startswith(("call_", "functions.")) and call["type"] == "function"
        assert isinstance(json.loads(call["function"]["arguments"]), dict)
    for chunk in ("1", "3"):
        assert parse_json(path, "--tools", TOOLS, "--chunk", chunk) == (code, whole)


def test_parse_splits_reasoning_and_reports_the_detected_family() -> None:
    code, out = parse_json(str(EXAMPLES / "dsml-v4.txt"))
    assert code == 0
    assert out["family"] == "dsml-v4"
    assert out["message"]["reasoning_content"] == "The user wants the file; read it first."
    assert out["message"]["content"] == "I will read the file."
    args = json.loads(out["message"]["tool_calls"][0]["function"]["arguments"])
    assert args == {"path": "src/app.py", "range": {"start": 1, "end": 40}}


def test_parse_keeps_kimi_call_ids_and_harmony_analysis_as_reasoning() -> None:
    code, out = parse_json(str(EXAMPLES / "kimi-k2.txt"))
    assert (code, out["family"]) == (0, "kimi-k2")
    assert [c["id"] for c in out["message"]["tool_calls"]] == ["functions.get_weather:0",
                                                               "functions.get_time:1"]
    code, out = parse_json(str(EXAMPLES / "harmony.txt"))
    assert (code, out["family"]) == (0, "harmony")
    assert out["message"]["reasoning_content"] == (
        "The user wants the weather in Paris; call get_weather.")
    assert out["message"]["content"] == "Checking the forecast."
    assert out["message"]["tool_calls"][0]["function"] == {
        "name": "get_weather", "arguments": '{"location": "Paris", "days": 2}'}


def test_parse_thinking_flag_starts_inside_reasoning(tmp_path: Path) -> None:
    f = tmp_path / "t.txt"
    f.write_text("pondering</think>Hello", encoding="utf-8")
    code, out = parse_json(str(f), "--thinking")
    assert (code, out["message"]["reasoning_content"], out["message"]["content"]) == (
        0, "pondering", "Hello")


@pytest.mark.parametrize("family", ["glm45", "glm47", "minimax-m2"])
def test_parse_types_glm_and_minimax_values_with_tools_and_drops_the_answer_framing(
        family: str, tmp_path: Path) -> None:
    sample = (EXAMPLES / f"{family}.txt").read_text(encoding="utf-8")
    f = tmp_path / "t.txt"
    f.write_text("Weather and a file.\n</think>\n\n" + sample, encoding="utf-8")
    code, out = parse_json(str(f), "--family", family, "--tools", TOOLS, "--thinking")
    assert code == 0, out
    assert out["message"]["reasoning_content"] == "Weather and a file.\n"
    assert out["message"]["content"] == "I'll check the weather and read the file."
    calls = [(c["function"]["name"], json.loads(c["function"]["arguments"]))
             for c in out["message"]["tool_calls"]]
    assert calls == [("get_weather", {"location": "Hangzhou", "days": 3}),
                     ("read_file", {"path": "src/<app>.py", "limit": 200})]
    _, untyped = parse_json(str(f), "--family", family, "--thinking")
    args = json.loads(untyped["message"]["tool_calls"][0]["function"]["arguments"])
    assert args == {"location": "Hangzhou", "days": 3 if family != "minimax-m2" else "3"}


def test_parse_with_a_broken_call_exits_1_and_lists_the_error() -> None:
    code, out = parse_json(str(EXAMPLES / "dsml-broken.txt"), "--family", "dsml-v32")
    assert code == 1
    assert [e["kind"] for e in out["errors"]] == ["malformed_tag"]
    assert out["errors"][0]["index"] == 0
    assert [c["function"]["name"] for c in out["message"]["tool_calls"]] == ["read"]
    assert out["message"]["tool_calls"][0]["id"] == "call_1"


def test_parse_table_lists_the_events() -> None:
    result = runner.invoke(app, ["parse", str(EXAMPLES / "qwen3-coder.txt"), "--chunk", "2"])
    assert result.exit_code == 0, result.output
    for word in ("Text", "Markup", "ToolCallStart", "ToolArgsDelta", "ToolCallEnd", "read_file",
                 "qwen3-coder", "1 call(s), 0 markup error(s)"):
        assert word in result.output


@pytest.mark.parametrize("args,needle", [
    (["parse", "/nonexistent/x.txt"], "cannot read"),
    (["parse", str(EXAMPLES / "hermes.txt"), "--family", "nope"], "unknown family"),
    (["parse", str(EXAMPLES / "hermes.txt"), "--chunk", "-1"], "--chunk"),
    (["parse", str(EXAMPLES / "hermes.txt"), "--tools", str(EXAMPLES / "hermes.txt")],
     "cannot read tools file"),
])
def test_parse_bad_input_is_one_line_and_exit_2(args: list[str], needle: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], result.stderr
    assert "Traceback" not in result.output


def test_parse_tools_that_are_not_a_tool_list_is_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "tools.json"
    bad.write_text('[{"type": "function"}]', encoding="utf-8")
    result = runner.invoke(app, ["parse", str(EXAMPLES / "hermes.txt"), "--tools", str(bad)])
    assert result.exit_code == 2
    assert "function.name" in result.stderr


# ── tokenizer ─────────────────────────────────────────────────────────────────────────────────────

def _tokenizer(path: Path, special: list[str]) -> str:
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["[UNK]"])
    corpus = ["invoke parameter function calls tool_calls name string true false DSML"] * 20
    tok.train_from_iterator(corpus, trainer)
    if special:
        tok.add_special_tokens(special)
    tok.save(str(path))
    return str(path)


def test_tokenizer_reports_single_special_tokens_with_their_ids(tmp_path: Path) -> None:
    markers = list(FAMILIES["dsml-v32"].markers)
    path = _tokenizer(tmp_path / "tokenizer.json", markers)
    result = runner.invoke(app, ["tokenizer", path, "--family", "dsml-v32", "--json"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.output.splitlines()]
    assert [r["marker"] for r in rows] == markers
    tok = Tokenizer.from_file(path)
    for row in rows:
        assert row["single_token"] and row["special"]
        assert row["ids"] == [tok.token_to_id(row["marker"])]


def test_tokenizer_says_how_many_pieces_a_marker_splits_into(tmp_path: Path) -> None:
    path = _tokenizer(tmp_path / "tokenizer.json", [])
    result = runner.invoke(app, ["tokenizer", path, "--family", "dsml-v4", "--json"])
    rows = [json.loads(line) for line in result.output.splitlines()]
    assert rows and all(not r["single_token"] and len(r["pieces"]) > 1 for r in rows)
    table = runner.invoke(app, ["tokenizer", path, "--family", "dsml-v4"])
    assert table.exit_code == 0 and "pieces" in table.output
    assert "<｜DSML｜tool_calls>" in table.output


def test_tokenizer_knows_the_kimi_and_harmony_markers(tmp_path: Path) -> None:
    kimi = ["<|tool_calls_section_begin|>", "<|tool_calls_section_end|>",
            "<|tool_call_section_begin|>", "<|tool_call_section_end|>", "<|tool_call_begin|>",
            "<|tool_call_argument_begin|>", "<|tool_call_end|>"]
    path = _tokenizer(tmp_path / "tokenizer.json", kimi)
    rows = [json.loads(line) for line in runner.invoke(
        app, ["tokenizer", path, "--family", "kimi-k2", "--json"]).output.splitlines()]
    assert [r["marker"] for r in rows] == kimi and all(r["single_token"] for r in rows)
    rows = [json.loads(line) for line in runner.invoke(
        app, ["tokenizer", path, "--family", "harmony", "--json"]).output.splitlines()]
    assert [r["marker"] for r in rows] == ["<|start|>", "<|end|>", "<|message|>", "<|channel|>",
                                           "<|constrain|>", "<|return|>", "<|call|>"]
    assert all(not r["single_token"] and len(r["pieces"]) > 1 for r in rows)
def test_tokenizer_tells_glm_added_tokens_from_minimax_special_and_plain_text_tags(
        tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.json"
    _tokenizer(path, ["<minimax:tool_call>", "</minimax:tool_call>"])
    tok = Tokenizer.from_file(str(path))
    tok.add_tokens(["<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>",
                    "</arg_value>"])
    tok.save(str(path))
    glm = runner.invoke(app, ["tokenizer", str(path), "--family", "glm47", "--json"])
    rows = [json.loads(line) for line in glm.output.splitlines()]
    assert [r["marker"] for r in rows] == ["<tool_call>", "</tool_call>", "<arg_key>",
                                           "</arg_key>", "<arg_value>", "</arg_value>"]
    assert all(r["single_token"] and r["added"] and not r["special"] for r in rows)
    mm = runner.invoke(app, ["tokenizer", str(path), "--family", "minimax-m2", "--json"])
    rows = [json.loads(line) for line in mm.output.splitlines()]
    single = {r["marker"]: r["single_token"] and r["special"] for r in rows}
    assert single == {"<minimax:tool_call>": True, "</minimax:tool_call>": True,
                      '<invoke name="': False, "</invoke>": False, '<parameter name="': False,
                      "</parameter>": False}


def test_tokenizer_without_family_covers_every_family(tmp_path: Path) -> None:
    path = _tokenizer(tmp_path / "tokenizer.json", ["<tool_call>"])
    result = runner.invoke(app, ["tokenizer", path, "--json"])
    rows = [json.loads(line) for line in result.output.splitlines()]
    assert {r["family"] for r in rows} == set(FAMILIES) - {"auto"}
    assert any(r["marker"] == "<tool_call>" and r["single_token"] for r in rows)
    table = runner.invoke(app, ["tokenizer", path])
    assert "one special token" in table.output


@pytest.mark.parametrize("content", ["not json at all", '{"version": "1.0"}', ""])
def test_a_file_that_is_not_a_tokenizer_is_one_line_and_exit_2(tmp_path: Path,
                                                               content: str) -> None:
    bad = tmp_path / "tokenizer.json"
    bad.write_text(content, encoding="utf-8")
    result = runner.invoke(app, ["tokenizer", str(bad)])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "is not a tokenizer.json file" in lines[0]
    missing = runner.invoke(app, ["tokenizer", str(tmp_path / "none.json")])
    assert missing.exit_code == 2 and "no such file" in missing.stderr
    unknown = runner.invoke(app, ["tokenizer", str(bad), "--family", "nope"])
    assert unknown.exit_code == 2 and "unknown family" in unknown.stderr
