"""The command line's own face: ``--help`` of every command reads well at 80 columns, ``--version``."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sseguard import __version__
from sseguard._config import parse_listen
from sseguard.cli import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
COMMANDS = ["check", "chaos", "probe", "sweep", "locust", "proxy", "analyze", "parse", "tokenizer",
            "demo", "protocols"]
#: What a metavar must never be: the parser's type name instead of what goes in.
GENERIC = re.compile(r"<(?:str|int|float|bool|path|file|list\[[^]]*\])>|\b(?:TEXT|INTEGER|FLOAT|BOOLEAN)\b")
#: An option row: two spaces, the option, then its metavar (if any).
OPTION_ROW = re.compile(r"^  (--[a-z][a-z-]*)(?: (\S+))?")


def _help(*args: str) -> str:
    result = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_help_fits_80_columns_and_names_what_goes_in(command: str) -> None:
    text = _help(*([command] if command else []))
    long = [line for line in text.splitlines() if len(line) > 80]
    assert not long, long
    assert not GENERIC.search(text), GENERIC.search(text)
    for line in text.splitlines():
        m = OPTION_ROW.match(line)
        if m and m.group(2) and m.group(2) != "/":  # `--flag / --no-flag` takes no value
            metavar = m.group(2)
            # A metavar says what goes in: capitals (N, MODEL, POLICY), a file shape, or the choices.
            assert metavar[0].isupper() or "|" in metavar or "'" in metavar or metavar[0].isdigit(), line


def test_every_command_is_listed_with_a_whole_one_line_summary() -> None:
    text = _help()
    listed = text.split("Commands:", 1)[1]
    for command in COMMANDS:
        row = next(line for line in listed.splitlines() if line.strip().startswith(command + " "))
        assert not row.rstrip().endswith("..."), row  # click cuts a summary too long for the line


@pytest.mark.parametrize("command", ["check", "probe", "locust", "analyze"])
def test_examples_keep_their_lines(command: str) -> None:
    text = _help(command)
    example = text.split("Example", 1)[1].split("\n\n", 1)[0]
    lines = example.splitlines()[1:]
    commands = [line for line in lines if line.startswith("    ")]
    # Kept as written (click would rewrap the paragraph and break a command mid-option).
    assert commands and commands[0].strip().startswith(("sseguard ", "DS_KEY=")), example
    assert all(line.startswith("      ") for line in commands if not line.strip().startswith(
        ("sseguard ", "DS_KEY="))), example


def test_version_is_one_line_with_the_protocol_and_family_counts() -> None:
    result = subprocess.run([sys.executable, "-m", "sseguard.cli", "--version"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0
    # The families are the entry points pyproject.toml registers (no plugin is installed here).
    pyproject = tomllib.loads((EXAMPLES.parent / "pyproject.toml").read_text())
    families = len(pyproject["project"]["entry-points"]["sseguard.families"])
    assert result.stdout == f"sseguard {__version__}: 4 protocols, {families} markup families\n"


# ── one example per command, names from the registries, one shared option group ─────────────────
@pytest.mark.parametrize("command", COMMANDS)
def test_every_commands_help_shows_an_example_that_runs_sseguard(command: str) -> None:
    text = _help(command)
    assert "Example" in text, text
    example = text.split("Example", 1)[1]
    assert "sseguard " + command in example, example


#: Every unknown protocol or family name, on every command that takes one: (args, words the one line
#: must hold). The known names are written out here, not read from the registries.
UNKNOWN_NAMES = [
    (["check", str(EXAMPLES / "bodies" / "complete.sse"), "--markup", "hermse"],
     ["'hermse'", "hermes", "qwen3-coder", "minimax-m2", "dsml-v32"]),
    (["check", str(EXAMPLES / "bodies" / "complete.sse"), "--api", "soap"],
     ["'soap'", "chat", "responses", "messages"]),
    (["parse", str(EXAMPLES / "markup" / "hermes.txt"), "--family", "hermse"],
     ["'hermse'", "hermes", "kimi-k2"]),
    (["tokenizer", "tokenizer.json", "--family", "hermse"], ["'hermse'", "hermes", "glm47"]),
    (["chaos", "--raw-markup", "hermse"], ["'hermse'", "hermes", "harmony"]),
    (["proxy", "--upstream", "http://127.0.0.1:9/v1", "--repair-markup", "hermse"],
     ["'hermse'", "hermes", "deepseek-v31"]),
    (["probe", "--arm", "a=http://127.0.0.1:9/v1", "--api", "soap"], ["'soap'", "chat", "messages"]),
    (["sweep", "--arm", "a=http://127.0.0.1:9/v1", "--api", "soap"], ["'soap'", "chat", "messages"]),
    (["locust", "--arm", "a=http://127.0.0.1:9/v1", "--api", "soap"], ["'soap'", "chat", "messages"]),
]


@pytest.mark.parametrize(("args", "words"), UNKNOWN_NAMES, ids=[f"{a[0]} {a[-2]}" for a, _ in UNKNOWN_NAMES])
def test_an_unknown_protocol_or_family_is_one_line_with_the_known_names_and_exit_2(
        args: list[str], words: list[str]) -> None:
    result = CliRunner().invoke(app, args, env={"COLUMNS": "400"})
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])
    assert "Traceback" not in result.output


def test_help_texts_name_every_protocol_and_family() -> None:
    check = " ".join(_help("check").split())
    for name in ("chat", "responses", "messages", "gemini", "dsml-v41", "deepseek-v3", "glm45", "minimax-m2"):
        assert name in check, name
    probe = " ".join(_help("probe").split())
    assert "chat (default), responses, messages or gemini" in probe
    for command in ("parse", "tokenizer", "chaos", "proxy"):
        assert "kimi-k2" in " ".join(_help(command).split()), command


def test_the_proxy_says_it_guards_openai_and_anthropic_apis() -> None:
    assert "OpenAI or Anthropic" in _help()
    assert "OpenAI-, Anthropic- or Gemini-compatible" in " ".join(_help("proxy").split())
    assert "OpenAI-compatible" not in _help().replace("OpenAI- and Anthropic-compatible", "")


@pytest.mark.parametrize("command", ["probe", "sweep", "locust"])
def test_probe_sweep_and_locust_take_the_same_load_options(command: str) -> None:
    text = _help(command)
    for option in ("--arm", "--config", "--model", "--api", "--key-env", "--workload", "--body",
                   "--policy", "--tolerate", "--stall-timeout", "--timeout", "--header", "--seed",
                   "--out"):
        assert f"  {option} " in text, (command, option)


@pytest.mark.parametrize(("spec", "expected"), [
    ("127.0.0.1:9000", ("127.0.0.1", 9000)), (":9000", ("127.0.0.1", 9000)),
    ("9000", ("127.0.0.1", 9000)), ("0.0.0.0:0", ("0.0.0.0", 0)), ("[::1]:8080", ("::1", 8080)),
])
def test_chaos_and_proxy_read_listen_addresses_alike(spec: str, expected: tuple[str, int]) -> None:
    from sseguard.proxy.config import ProxyConfig

    assert parse_listen(spec) == expected
    proxy = ProxyConfig.from_options(upstream="http://127.0.0.1:9/v1", listen=spec, store="none")
    assert (proxy.host, proxy.port) == expected


def test_the_command_line_loads_no_server_load_or_statistics_library_until_a_command_runs() -> None:
    # `sseguard --help` stays quick, and Locust's gevent monkey-patching never reaches another command.
    code = ("import sys, sseguard.cli\n"
            "print(sorted(m for m in ('aiohttp', 'locust', 'gevent', 'scipy', 'matplotlib', 'duckdb')"
            " if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
