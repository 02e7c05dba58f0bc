"""The ``sseguard`` command line: parses arguments and calls library functions, nothing more.

Every command turns a ``ConfigError`` (or any unusable input) into one line on stderr and exit code 2;
exit 1 means "ran fine, and something failed the policy".
"""

from __future__ import annotations

import sys
from typing import NoReturn

import typer
from rich.console import Console

from sseguard import __version__
from sseguard.errors import ConfigError

app = typer.Typer(
    name="sseguard",
    help="Make streamed LLM responses trustworthy: check, probe, analyze and guard SSE streams.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)


def fail(message: str) -> NoReturn:
    """Unusable input: one line, exit code 2, never a traceback."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(2)


def version_callback(value: bool) -> None:
    if value:
        console.print(f"sseguard {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=version_callback, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """sseguard: strict checking for OpenAI-compatible streaming responses."""


# ── commands ──────────────────────────────────────────────────────────────────────────────────────
# Each command lives in its own section below, in the order of the tour in README.md.


# ── check ─────────────────────────────────────────────────────────────────────────────────────────
@app.command()
def check(
    body_file: str = typer.Argument(..., metavar="BODY_FILE",
                                    help="A captured raw response body, or - for stdin."),
    request: str | None = typer.Option(None, "--request", metavar="REQUEST.json",
                                       help="The request body that produced the stream."),
    policy: str = typer.Option("strict", "--policy", help="strict, no-finish-ok, no-done-ok, lenient."),
    tolerate: str | None = typer.Option(None, "--tolerate", metavar="ENDING,…",
                                        help="Endings or findings that do not fail the stream."),
    status: int = typer.Option(200, "--status", help="The HTTP status the body came with."),
    markup: str = typer.Option("all", "--markup", help="Markup family to look for in content, or all."),
    as_json: bool = typer.Option(False, "--json", help="Print the verdict as one JSON object."),
) -> None:
    """Check one captured stream body against the streaming contract.

    Exit code 0 when the policy passes it, 1 when it fails, 2 for unusable input.

    Example: sseguard check examples/bodies/truncated.sse --request examples/request_tools.json
    """
    from sseguard import checkfile

    try:
        outcome = checkfile.check_file(body_file, request_path=request, policy=policy,
                                      tolerate=tolerate, status=status, markup=markup)
    except ConfigError as exc:
        fail(str(exc))
    if as_json:
        typer.echo(checkfile.verdict_json(outcome))
    else:
        checkfile.print_verdict(outcome, console)
    raise typer.Exit(0 if outcome.passed else 1)


def main() -> None:
    """Console-script entry: click's usage errors exit 2 already; ConfigError is mapped to exit 2."""
    try:
        app()
    except ConfigError as exc:
        err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
