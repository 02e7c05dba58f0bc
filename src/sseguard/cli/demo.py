"""``sseguard demo``: probe an in-process chaos upstream with hidden faults and show what analysis finds.

Registers itself on the app when ``sseguard.cli`` imports it; ``sseguard.demo`` does the work.
"""

from __future__ import annotations

import typer

from sseguard.cli._app import Command, app, console, err_console, fail
from sseguard.core.errors import ConfigError
from sseguard.extras import require


@app.command(cls=Command)
def demo(
    out: str | None = typer.Option(None, "--out", metavar="DIR",
                                   help="Where results, report.html and plots go "
                                        "(default sseguard-runs/demo-<time>)."),
    seconds: float = typer.Option(20.0, "--seconds", metavar="SECONDS",
                                  help="Probing time, split over the levels."),
    no_live: bool = typer.Option(False, "--no-live", help="No live display."),
) -> None:
    """Probe an in-process chaos upstream over chat, responses, messages and gemini side by side, with
    five hidden faults (one of them markup leaked only from a cached prefix under load), and show what
    the analysis finds.

    No network, no key; about forty seconds.

    \b
    Example:
      sseguard demo --out demo-run
    """
    try:
        require("analyze", "sseguard demo")
        from sseguard.demo import run_demo

        result = run_demo(out, seconds=seconds, console=console, err_console=err_console,
                          live=False if no_live else None)
    except ConfigError as exc:
        fail(str(exc))
    raise typer.Exit(0 if all(result.named.values()) else 1)
