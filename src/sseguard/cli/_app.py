"""What every command shares: the typer app, the help layout, the consoles and the one-line failure.

Each command module (``check.py``, ``chaos.py``, …) registers itself on :data:`app` when
``sseguard.cli`` imports it. Every command turns a ``ConfigError`` (or any unusable input) into one
line on stderr and exit code 2; exit 1 means "ran fine, and something failed the policy".
"""

from __future__ import annotations

import sys
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperCommand

from sseguard import __version__
from sseguard.errors import ConfigError

app = typer.Typer(
    name="sseguard",
    help="Make streamed LLM responses trustworthy: check, probe, analyze and guard SSE streams.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
console = Console()
err_console = Console(stderr=True)


class Command(TyperCommand):
    """Help that names an argument by its metavar alone: typer appends the Python type
    (``<str>``, ``<list[str]>``), which tells a reader nothing the metavar does not say better."""

    # Typed Any: typer hands in its vendored click's Context and HelpFormatter, which it does not export.
    def format_options(self, ctx: Any, formatter: Any) -> None:
        args: list[tuple[str, str]] = []
        opts: list[tuple[str, str]] = []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                name = param.metavar or (param.name or "").upper()
                args.append((name + ("..." if param.nargs != 1 else ""), record[1]))
            else:
                opts.append(record)
        for title, rows in (("Arguments", args), ("Options", opts)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


def fail(message: str) -> NoReturn:
    """Unusable input: one line, exit code 2, never a traceback."""
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(2)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"sseguard {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version_callback, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """sseguard: strict checking for OpenAI-, Anthropic- and Gemini-compatible streaming responses."""


def main() -> None:
    """Console-script entry: click's usage errors exit 2 already; ConfigError is mapped to exit 2."""
    try:
        app()
    except ConfigError as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        sys.exit(2)

