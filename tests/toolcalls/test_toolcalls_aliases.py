"""Every name the serving engines register (docs/design/markup.md §3.1) is accepted
wherever a family name is, and means the family the spec maps it to; ``sseguard parse --list`` shows
them. Also the house rules of the registry: a ``leak_shape`` the leak scan never searches is refused,
and a plugin that takes a built-in's ``auto`` marker is loaded with a warning naming both."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sseguard.chaos import ChaosConfig
from sseguard.cli._names import check_family
from sseguard.core.contract import leak_markers
from sseguard.core.errors import ConfigError, UsageError
from sseguard.core.reasoning import ThinkSplitter
from sseguard.core.toolcalls import Claim, aliases, canonical, family, parser_for
from sseguard.core.toolcalls.family import Family
from sseguard.proxy.config import ProxyConfig
from test_toolcalls_plugin import _distribution, _python

#: engine name → sseguard family, as docs/design/markup.md §3.1 writes it (SGLang 0.5.23's ``deepseekv31``
#: and ``deepseekv32`` included, which its registry holds)
ENGINE_NAMES = {
    "deepseek_v3": "deepseek-v3", "deepseekv3": "deepseek-v3", "deepseek_v31": "deepseek-v31",
    "deepseekv31": "deepseek-v31", "deepseek_v32": "dsml-v32", "deepseekv32": "dsml-v32",
    "deepseek_v4": "dsml-v4", "deepseekv4": "dsml-v4",
    "deepseek_v41": "dsml-v41", "deepseekv41": "dsml-v41", "qwen": "hermes", "qwen25": "hermes",
    "qwen3_json": "hermes", "granite4": "hermes", "ripple": "hermes", "trinity": "hermes",
    "qwen3_coder": "qwen3-coder", "qwen3_xml": "qwen3-coder", "step3p5": "qwen3-coder",
    "nanbeige": "qwen3-coder", "mimo": "qwen3-coder", "granite_toolcall_parser": "qwen3-coder",
    "step5": "qwen3-coder", "kimi_k2": "kimi-k2", "glm": "glm45", "poolside_v1": "glm45",
    "ling3": "glm45", "spark25": "glm45", "openai": "harmony", "gpt-oss": "harmony",
    "minimax_m2": "minimax-m2",
    "llama3_json": "llama3-json", "llama4_json": "llama3-json", "llama3": "llama3-json",
    "interns1": "internlm", "hunyuan_a13b": "hunyuan-a13b", "minimax": "minimax-m1",
    "phi4_mini_json": "phi4-mini", "apertus2509": "apertus", "cohere_command3": "cohere-command",
    "cohere_command4": "cohere-command",
}
#: engine names that are already the family's own name
SAME_NAMES = ["hermes", "glm45", "glm47", "granite", "granite-20b-fc", "internlm", "jamba", "xlam",
              "gigachat3", "longcat", "ernie45", "inkling"]


@pytest.mark.parametrize("engine,name", sorted(ENGINE_NAMES.items()))
def test_every_engine_name_means_its_family(engine: str, name: str) -> None:
    assert aliases()[engine] == name
    assert canonical(engine) == name and family(engine) is family(name)
    assert parser_for(engine).family == name


def test_the_families_own_names_need_no_alias() -> None:
    for name in SAME_NAMES:
        assert canonical(name) == name and family(name).name == name


def test_every_flag_that_takes_a_family_takes_an_alias() -> None:
    assert check_family("qwen3_xml", "--markup", also=("all", "auto")) == "qwen3-coder"
    assert ChaosConfig(raw_markup="gpt-oss").raw_markup == "harmony"
    assert ProxyConfig.from_options(upstream="http://127.0.0.1:9", repair_markup="cohere_command4",
                                    store=None).repair_markup == "cohere-command"
    assert leak_markers("kimi_k2") == leak_markers("kimi-k2")
    assert ThinkSplitter(family="llama4_json").feed("a") is not None
    with pytest.raises(ConfigError):
        check_family("qwen3xml", "--markup")
    with pytest.raises(UsageError):
        ThinkSplitter(family="qwen3xml")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from sseguard.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=60)


def test_parse_list_shows_every_family_with_its_class_and_aliases() -> None:
    done = _cli("parse", "--list", "--json")
    assert done.returncode == 0, done.stderr
    rows = {row["family"]: row for row in json.loads(done.stdout)}
    assert rows["qwen3-coder"]["aliases"] == ["qwen3_coder", "qwen3_xml", "step3p5", "nanbeige",
                                              "mimo", "granite_toolcall_parser", "step5"]
    assert rows["cohere-command"] == {"family": "cohere-command", "grammar": "B",
                                      "aliases": ["cohere_command3", "cohere_command4"]}
    assert rows["granite-20b-fc"]["grammar"] == "A′" and rows["minimax-m1"]["grammar"] == "B′"
    assert all(row["grammar"] for row in rows.values())
    table = _cli("parse", "--list")
    assert table.returncode == 0 and "poolside_v1" in table.stdout and "llama4_json" in table.stdout


def test_parse_takes_an_engine_name(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    path.write_text('<tool_calls>[{"name": "f", "arguments": {}}]</tool_calls>', encoding="utf-8")
    done = _cli("parse", str(path), "--family", "hunyuan_a13b", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["family"] == "hunyuan-a13b"


def _family(**kw: object) -> Family:
    base: dict[str, object] = dict(name="t", make=lambda tools: parser_for("hermes"), markers=("<a>",),
                                   leak_markers=("<a>",), reasoning_exits=(), auto_markers=("<a>",),
                                   claim=lambda held, final: Claim.NO, render=lambda c, m: "")
    base.update(kw)
    return Family(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize("shape", [r"tool\.[a-z]+\{", r"x?functions\.f", r"(", r".*functions\."])
def test_a_leak_shape_the_scan_never_searches_is_refused(shape: str) -> None:
    with pytest.raises(UsageError) as info:
        _family(leak_shape=shape)
    assert "leak_shape" in str(info.value)


def test_the_shipped_leak_shapes_are_accepted() -> None:
    assert family("kimi-k2").leak_shape and family("harmony").leak_shape
    _family(leak_shape=r"(?<=to=)functions\.[a-z]+")


PLUGIN = '''from sseguard.core.toolcalls import json_in_tags

MINE = json_in_tags("mine", "<tool_call>", "</tool_call>")
'''


def test_a_plugin_taking_a_builtins_auto_marker_is_warned_about_naming_both(
        tmp_path: Path) -> None:
    site = _distribution(tmp_path / "site", "mine-family", {"minefam": PLUGIN},
                         "[sseguard.families]\nmine = minefam:MINE\n")
    done = _python("from sseguard.core.toolcalls import families; print('mine' in families())", site)
    assert done.stdout.strip() == "True"
    assert "FamilyPluginWarning" in done.stderr
    assert "'mine'" in done.stderr and "'<tool_call>'" in done.stderr and "'hermes'" in done.stderr
    assert len([line for line in done.stderr.splitlines() if "FamilyPluginWarning" in line]) == 1


def _chat_body(content: str) -> bytes:
    def frame(delta: dict[str, str], finish: str | None) -> str:
        chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return f"data: {json.dumps(chunk)}\n\n"
    return (frame({"role": "assistant", "content": content}, None) + frame({}, "stop")
            + "data: [DONE]\n\n").encode()


@pytest.mark.parametrize("markup,leaked", [
    ("jamba", 'Sure.<tool_calls>[{"name": "f", "arguments": {}}]</tool_calls>'),
    ("cohere_command4", "<|START_ACTION|>[]<|END_ACTION|>"),
    ("phi4_mini_json", 'functools[{"name": "f", "arguments": {}}]'),
    ("interns1", '<|action_start|><|plugin|>{"name": "f", "parameters": {}}<|action_end|>'),
])
def test_check_markup_finds_a_markup3_family_leaked_in_content(markup: str, leaked: str,
                                                               tmp_path: Path) -> None:
    path = tmp_path / "leaked.sse"
    path.write_bytes(_chat_body(leaked))
    done = _cli("check", str(path), "--markup", markup, "--json")
    assert done.returncode == 1, done.stderr
    assert [f["kind"] for f in json.loads(done.stdout)["findings"]] == ["markup_leak"]
    clean = tmp_path / "clean.sse"
    clean.write_bytes(_chat_body("import functools; the <tool> tag"))
    assert _cli("check", str(clean), "--markup", markup, "--json").returncode == 0
