"""``sseguard export``: records of any source as Parquet, partitioned by day.

Registers itself on the app when ``sseguard.cli`` imports it; DuckDB loads only when the command runs.
"""

from __future__ import annotations

import typer

from sseguard.cli._app import Command, app, err_console, fail
from sseguard.core.errors import ConfigError
from sseguard.extras import require


@app.command(cls=Command, name="export")
def export_command(
    sources: list[str] = typer.Argument(..., metavar="SOURCE",
                                        help="results .jsonl files or run directories, Parquet, or "
                                             "stores (x.db, sqlite:///x.db, postgresql://…)."),
    parquet: str = typer.Option(..., "--parquet", metavar="OUT",
                                help="A new (or empty) directory: OUT/day=YYYY-MM-DD/*.parquet."),
    since: str | None = typer.Option(None, "--since", metavar="AGE|ISO",
                                     help="Only streams started since then: 24h, 7d, or an ISO time (UTC)."),
    until: str | None = typer.Option(None, "--until", metavar="AGE|ISO",
                                     help="Only streams started before then."),
    where: str | None = typer.Option(None, "--where", metavar="COL=VALUE,…",
                                     help="Only these streams (e.g. arm=gw,api=messages)."),
) -> None:
    """Write records as Parquet, partitioned by the UTC day they started: the form a data team loads
    into Spark, Trino, DuckDB or pandas, and that `sseguard analyze OUT` reads back.

    \b
    Example:
      sseguard export sseguard.db --parquet lake/sseguard --since 7d
    """
    try:
        require("parquet", "sseguard export")
        from sseguard.analyze.run import run_export

        run_export(sources, parquet, since=since, until=until, where=where, err_console=err_console)
    except ConfigError as exc:
        fail(str(exc))
