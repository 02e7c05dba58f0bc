"""``sseguard analyze``: count where the records are, judge, rank, then print or write.

Registers itself on the app when ``sseguard.cli`` imports it; the analysis (DuckDB, scipy) loads only
when the command runs. The work is ``sseguard.analyze.run.run_analyze``; this module parses flags.
"""

from __future__ import annotations

import typer

from sseguard.cli._app import Command, app, console, err_console, fail
from sseguard.cli._options import policy_option, tolerate_option
from sseguard.core.errors import ConfigError
from sseguard.extras import require


@app.command(cls=Command, name="analyze")
def analyze_command(
    sources: list[str] = typer.Argument(..., metavar="SOURCE",
                                        help="results .jsonl files, globs or run directories, Parquet "
                                             "(a file or directory), or stores (x.db, sqlite:///x.db, "
                                             "postgresql://…); several are one run."),
    policy: str = policy_option("strict"),
    tolerate: str | None = tolerate_option(),
    since: str | None = typer.Option(None, "--since", metavar="AGE|ISO",
                                     help="Only streams started since then: 24h, 7d, or an ISO time (UTC)."),
    until: str | None = typer.Option(None, "--until", metavar="AGE|ISO",
                                     help="Only streams started before then."),
    where: str | None = typer.Option(None, "--where", metavar="COL=VALUE,…",
                                     help="Only these streams: arm, api, workload, run, concurrency, "
                                          "ending (e.g. arm=gw,api=messages)."),
    engine: str = typer.Option("duckdb", "--engine", metavar="duckdb|spark",
                               help="Who counts JSONL and Parquet (stores count in their database)."),
    html: str | None = typer.Option(None, "--html", metavar="REPORT.html",
                                    help="Write one self-contained HTML report (plots embedded)."),
    png: str | None = typer.Option(None, "--png", metavar="DIR", help="Write the plots as PNG files."),
    as_json: bool = typer.Option(False, "--json", help="Print the analysis as one JSON document."),
    top: int = typer.Option(5, "--top", metavar="N", help="How many attribute findings to state."),
) -> None:
    """Find what the failing streams of a run have in common.

    The records are counted where they are (DuckDB for files, the store's own database, or Spark);
    only the counts reach Python. Rates per arm and concurrency level (Wilson 95 % intervals), arm
    vs arm (Fisher's exact test), and the recorded attributes ranked by how completely they separate
    failing from healthy streams. The records keep full verdicts, so any policy can judge them again.
    Exit code 0 when no stream failed the policy, 1 when some did, 2 for unusable input.

    \b
    Example:
      sseguard analyze out/results.jsonl --html report.html --tolerate no_done
      sseguard analyze sseguard.db --since 24h --where api=messages
    """
    try:
        require("analyze", "sseguard analyze")
        from sseguard.analyze.run import run_analyze

        result = run_analyze(sources, policy=policy, tolerate=tolerate, html=html, png=png,
                             as_json=as_json, top=top, since=since, until=until, where=where,
                             engine=engine, console=console, err_console=err_console, echo=typer.echo)
    except ConfigError as exc:
        fail(str(exc))
    raise typer.Exit(1 if result.total.failed else 0)
