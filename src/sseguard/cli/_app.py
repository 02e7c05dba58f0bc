"""What every command shares: the typer app, the help layout, the consoles and the one-line failure.

Each command module (``check.py``, ``chaos.py``, …) registers itself on :data:`app` when imported,
and is imported only when its command is named (:class:`LazyGroup`): ``sseguard --help`` lists the
commands from :data:`COMMANDS` and imports none of them, ``sseguard check`` imports the checker and
not aiohttp, DuckDB or Locust. Every command turns a ``ConfigError`` (or any unusable input) into one
line on stderr and exit code 2; exit 1 means "ran fine, and something failed the policy".
"""

from __future__ import annotations

import importlib
import sys
from difflib import get_close_matches
from typing import Any, NoReturn

import typer
import typer.main
from rich.console import Console
from rich.markup import escape
from typer.core import TyperCommand, TyperGroup

from sseguard import __version__
from sseguard.core.errors import ConfigError

#: Every command: the module that registers it and its line in ``sseguard --help``, in the order of
#: the tour in README.md. The line is written here only: ``--help`` shows it without importing the
#: module, and :class:`LazyGroup` gives it to the command when the module is imported.
COMMANDS: dict[str, tuple[str, str]] = {
    "check": ("sseguard.cli.check", "Check one captured stream body against its protocol's contract."),
    "chaos": ("sseguard.cli.chaos", "Serve a fault-injecting upstream of every protocol."),
    "probe": ("sseguard.cli.probe", "Send streamed requests and classify how each one ended."),
    "sweep": ("sseguard.cli.probe", "The same workload at each concurrency level, one after another."),
    "locust": ("sseguard.cli.locust", "Run Locust with sseguard's stream-checking user."),
    "proxy": ("sseguard.cli.proxy", "Guard an OpenAI or Anthropic API against silent bad ends."),
    "analyze": ("sseguard.cli.analyze", "Find what the failing streams of a run have in common."),
    "export": ("sseguard.cli.export", "Write records as Parquet, partitioned by day."),
    "parse": ("sseguard.cli.parse", "Parse tool-call markup out of raw model output."),
    "tokenizer": ("sseguard.cli.tokenizer", "Say whether each tool-call marker is one token."),
    "demo": ("sseguard.cli.demo", "Probe a chaos upstream with five hidden faults and find them."),
    "protocols": ("sseguard.cli.protocols", "Print the reason tables; --sdk-drift: what the SDKs add."),
}


class LazyGroup(TyperGroup):
    """The root command: a subcommand's module is imported when the subcommand is named.

    typer builds its click group from the commands registered when the app is called; here the group
    starts with none and, asked for one, imports its module, which registers it on :data:`app`, then
    takes the click command typer builds for it (``typer.main.get_group``: what ``app()`` itself does).
    """

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            importlib.import_module(COMMANDS[cmd_name][0])
            for name, built in typer.main.get_group(app).commands.items():
                self.commands.setdefault(name, built)
        command = self.commands.get(cmd_name)
        if command is not None and cmd_name in COMMANDS:
            command.short_help = COMMANDS[cmd_name][1]
        return command

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        # typer suggests a near name from the commands built so far, which here are none: from the table.
        if args and args[0] not in COMMANDS and not args[0].startswith("-"):
            near = get_close_matches(args[0], list(COMMANDS))
            hint = f" Did you mean {', '.join(repr(name) for name in near)}?" if near else ""
            ctx.fail(f"No such command {args[0]!r}.{hint}")
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        # From the table alone: listing the commands must not import them.
        with formatter.section("Commands"):
            formatter.write_dl([(name, summary) for name, (_module, summary) in COMMANDS.items()])


app = typer.Typer(
    name="sseguard",
    cls=LazyGroup,
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


def version_line() -> str:
    """``sseguard 0.1.0: 4 protocols, 46 markup families``: the version and what this install
    knows (the families include any plugin's)."""
    from sseguard.core.toolcalls import FAMILIES
    from sseguard.core.verdict import Api

    families = [name for name in FAMILIES if name != "auto"]
    return f"sseguard {__version__}: {len(Api)} protocols, {len(families)} markup families"


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(version_line())
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version_callback, is_eager=True,
                                 help="Print the version, the protocol and family counts, and exit."),
) -> None:
    """sseguard: strict checking for OpenAI-, Anthropic- and Gemini-compatible streaming responses."""


def main() -> None:
    """Console-script entry: click's usage errors exit 2 already; ConfigError is mapped to exit 2."""
    try:
        app()
    except ConfigError as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        sys.exit(2)

