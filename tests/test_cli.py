"""The command line's own face: ``--help`` of every command reads well at 80 columns, ``--version``."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from sseguard import __version__
from sseguard.cli import app

COMMANDS = ["check", "chaos", "probe", "sweep", "locust", "proxy", "analyze", "parse", "tokenizer",
            "demo"]
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


def test_version_is_one_line_with_its_newline() -> None:
    result = subprocess.run([sys.executable, "-m", "sseguard.cli", "--version"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0
    assert result.stdout == f"sseguard {__version__}\n"
