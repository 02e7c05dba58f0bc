"""``sseguard protocols``: the protocols' reason tables, and what the installed SDKs know beyond them.

Without options it prints each protocol's finish reasons in their three classes (finished, ended by
policy, failed; a reason not listed is failed). ``--sdk-drift`` reads the installed openai, anthropic
and google-genai SDKs (``sseguard.sdkdrift``) and prints every name they define with its class, or
"unclassified", and exits 1 when one is unclassified: the operator's view of the CI drift test.
"""

from __future__ import annotations

import json

import typer
from rich.table import Table

from sseguard.cli._app import Command, app, console
from sseguard.core.contract.registry import protocols
from sseguard.core.contract.vocabulary import ReasonClass


@app.command(cls=Command, name="protocols")
def protocols_command(
    sdk_drift: bool = typer.Option(False, "--sdk-drift",
                                   help="Compare every name the installed SDKs define (events, "
                                        "blocks, deltas, finish reasons) with the tables; exit 1 "
                                        "when one is unclassified."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object per row."),
) -> None:
    """Print each protocol's finish reasons by class, or (``--sdk-drift``) the SDKs' names.

    Example: ``sseguard protocols --sdk-drift`` after upgrading the SDKs; a row marked
    ``unclassified`` is a kind or reason to add to ``contract/<protocol>/vocabulary.py``.
    """
    if sdk_drift:
        _drift(as_json)
        return
    rows = [(str(p.api), name, str(p.reasons.classify(name)))
            for p in protocols() for cls in ReasonClass for name in p.reasons.named(cls)]
    if as_json:
        for api, name, cls in rows:
            typer.echo(json.dumps({"protocol": api, "reason": name, "class": cls}))
        return
    table = Table(title="Finish reasons by class (any other reason is failed)",
                  title_justify="left")
    for column in ("protocol", "reason", "class"):
        table.add_column(column)
    for row in rows:
        table.add_row(*row)
    console.print(table)


def _drift(as_json: bool) -> None:
    from sseguard.sdkdrift import drift, sdk_names

    rows = sdk_names()
    if as_json:
        for row in rows:
            typer.echo(json.dumps({"name": row.name, "protocol": str(row.api), "what": row.what,
                                   "class": row.cls, "sdk": row.sdk}))
    else:
        table = Table(title="What the installed SDKs define, by the protocols' tables",
                      title_justify="left")
        for column in ("name", "protocol", "what", "class", "sdk"):
            table.add_column(column)
        for row in rows:
            cls = f"[bold red]{row.cls}[/]" if row.unclassified else row.cls
            table.add_row(row.name, str(row.api), row.what, cls, row.sdk)
        console.print(table)
    missing = drift(rows)
    if missing:
        if not as_json:
            console.print(f"[bold red]{len(missing)} unclassified[/]: "
                          + ", ".join(f"{r.api} {r.what} {r.name}" for r in missing))
        raise typer.Exit(1)
