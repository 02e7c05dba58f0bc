"""``sseguard analyze``: load, judge, rank, then print or write.

Registers itself on the app when ``sseguard.cli`` imports it; the analysis (and scipy) load only when
the command runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.text import Text

from sseguard.cli._app import Command, app, console, err_console, fail
from sseguard.errors import ConfigError
from sseguard.policy import Policy

if TYPE_CHECKING:
    from sseguard.analyze.model import Analysis


def run_analyze_command(sources: Sequence[str], *, policy: str = "strict", tolerate: str | None = None,
                        html: str | None = None, png: str | None = None, as_json: bool = False,
                        top: int = 5, console: Console, err_console: Console,
                        echo: Callable[[str], None] = print) -> Analysis:
    """Everything ``sseguard analyze`` does; a ``ConfigError`` means unusable input (exit 2).

    With ``--json`` stdout carries the JSON document only (through ``echo``, never wrapped to the
    terminal's width), so the paths written go to stderr.
    """
    from sseguard.analyze.load import load_records
    from sseguard.analyze.report import print_summary, write_html, write_pngs
    from sseguard.analyze.summary import analyze

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


@app.command(cls=Command, name="analyze")
def analyze_command(
    sources: list[str] = typer.Argument(..., metavar="SOURCE",
                                        help="results .jsonl files, directories of them (merged), or "
                                             "stores (x.db, sqlite:///x.db, postgresql://…)."),
    policy: str = typer.Option("strict", "--policy", metavar="POLICY",
                               help="strict, no-finish-ok, no-done-ok, lenient."),
    tolerate: str | None = typer.Option(None, "--tolerate", metavar="ENDING,…",
                                        help="Endings or findings that do not fail a stream."),
    html: str | None = typer.Option(None, "--html", metavar="REPORT.html",
                                    help="Write one self-contained HTML report (plots embedded)."),
    png: str | None = typer.Option(None, "--png", metavar="DIR", help="Write the plots as PNG files."),
    as_json: bool = typer.Option(False, "--json", help="Print the analysis as one JSON document."),
    top: int = typer.Option(5, "--top", metavar="N", help="How many attribute findings to state."),
) -> None:
    """Find what the failing streams of a run have in common.

    Rates per arm and concurrency level (Wilson 95 % intervals), arm vs arm (Fisher's exact test),
    and the recorded attributes ranked by how completely they separate failing from healthy streams.
    The records keep full verdicts, so any policy can judge them again. Exit code 0 when no stream
    failed the policy, 1 when some did, 2 for unusable input.

    \b
    Example:
      sseguard analyze out/results.jsonl --html report.html --tolerate no_done
    """
    try:
        result = run_analyze_command(sources, policy=policy, tolerate=tolerate, html=html, png=png,
                                     as_json=as_json, top=top, console=console, err_console=err_console,
                                     echo=typer.echo)
    except ConfigError as exc:
        fail(str(exc))
    raise typer.Exit(1 if result.total.failed else 0)
