"""``sseguard analyze``: load, judge, rank, then print or write; the CLI only parses the flags."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

from rich.console import Console
from rich.text import Text

from sseguard.analyze.load import load_records
from sseguard.analyze.model import Analysis
from sseguard.analyze.report import print_summary, write_html, write_pngs
from sseguard.analyze.summary import analyze
from sseguard.policy import Policy


def run_analyze_command(sources: Sequence[str], *, policy: str = "strict", tolerate: str | None = None,
                        html: str | None = None, png: str | None = None, as_json: bool = False,
                        top: int = 5, console: Console, err_console: Console,
                        echo: Callable[[str], None] = print) -> Analysis:
    """Everything ``sseguard analyze`` does; a ``ConfigError`` means unusable input (exit 2).

    With ``--json`` stdout carries the JSON document only (through ``echo``, never wrapped to the
    terminal's width), so the paths written go to stderr.
    """
    judge = Policy.from_spec(policy, tolerate)
    records = load_records(list(sources))
    result = analyze(records, judge, top=top)
    written: list[Path] = []
    if html:
        written.append(write_html(result, records, html))
    if png:
        written.extend(write_pngs(result, records, png))
    if as_json:
        echo(json.dumps(result.to_dict(), ensure_ascii=False, indent=2))
    else:
        print_summary(result, console, top=max(top, 8))
    notes = err_console if as_json else console
    for path in written:
        notes.print(Text(f"wrote {path}"), highlight=False)
    return result
