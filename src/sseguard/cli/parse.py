"""``sseguard parse``: run a file of raw model output through the reasoning splitter and a tool-call
parser, the way a streaming server would, and show the events or the final OpenAI message.

Feeding in ``--chunk N`` pieces lets an operator replay the chunking a server saw: the result must not
depend on it, and when it does not, the bug is elsewhere.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sseguard.cli._app import Command, app, console, fail
from sseguard.cli._names import family_names
from sseguard.core.errors import ConfigError, UsageError
from sseguard.core.reasoning import AnswerText, Reasoning, ThinkSplitter
from sseguard.core.toolcalls import (
    FAMILIES,
    Event,
    Markup,
    MarkupError,
    Text,
    ToolArgsDelta,
    ToolCallEnd,
    ToolCallStart,
    canonical,
    families,
    join_events,
    parser_for,
)


@dataclass
class ParseResult:
    """Everything one run of the parsers produced, joined (adjacent pieces merged)."""

    family: str
    events: list[Event | Reasoning] = field(default_factory=list)

    @property
    def errors(self) -> list[MarkupError]:
        return [ev for ev in self.events if isinstance(ev, MarkupError)]

    @property
    def calls(self) -> list[ToolCallEnd]:
        return [ev for ev in self.events if isinstance(ev, ToolCallEnd)]


def load_tools(path: str | None) -> list[dict[str, Any]] | None:
    """An OpenAI ``tools`` list from a file holding the list or a request body with ``tools``."""
    if path is None:
        return None
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"cannot read tools file {path}: {exc}") from exc
    tools = data.get("tools") if isinstance(data, dict) else data
    if not isinstance(tools, list):
        raise ConfigError(f"{path}: expected a JSON list of tools or an object with \"tools\"")
    return tools


def parse_text(text: str, family: str = "auto", *, tools: list[dict[str, Any]] | None = None,
               chunk: int = 0, starts_in_reasoning: bool = False) -> ParseResult:
    """Split reasoning, parse tool calls, in chunks of ``chunk`` characters (0: all at once)."""
    family = canonical(family)  # the engines' names for a family are accepted too (qwen3_xml, …)
    if family not in FAMILIES:
        raise ConfigError(f"unknown family {family!r}; known: {', '.join(FAMILIES)}")
    if chunk < 0:
        raise ConfigError("--chunk must be 0 (whole file) or a positive number of characters")
    try:
        parser = parser_for(family, tools)
    except UsageError as exc:
        raise ConfigError(str(exc)) from exc
    splitter = ThinkSplitter(starts_in_reasoning, family=None if family == "auto" else family)
    raw: list[Event | Reasoning] = []

    def route(pieces: list[Reasoning | AnswerText]) -> None:
        for piece in pieces:
            if isinstance(piece, Reasoning):
                raw.append(piece)
            else:
                raw.extend(parser.feed(piece.text))

    step = chunk or max(len(text), 1)
    for start in range(0, len(text), step):
        route(splitter.feed(text[start:start + step]))
    route(splitter.close())
    raw.extend(parser.close())
    detected = getattr(parser, "detected", None) or family
    return ParseResult(detected, _join(raw))


def _join(events: list[Event | Reasoning]) -> list[Event | Reasoning]:
    """Join adjacent pieces: each run of reasoning into one, the parser's events by join_events."""
    out: list[Event | Reasoning] = []
    thoughts: list[str] = []
    run: list[Event] = []
    for ev in events:
        if isinstance(ev, Reasoning):
            out.extend(join_events(run))
            run = []
            thoughts.append(ev.text)
        else:
            if thoughts:
                out.append(Reasoning("".join(thoughts)))
                thoughts = []
            run.append(ev)
    if thoughts:
        out.append(Reasoning("".join(thoughts)))
    out.extend(join_events(run))
    return out


def parse_file(path: str, family: str = "auto", *, tools_path: str | None = None, chunk: int = 0,
               starts_in_reasoning: bool = False) -> ParseResult:
    """``parse_text`` on a UTF-8 file (``-`` is not supported: the file is replayed in chunks)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc
    return parse_text(text, family, tools=load_tools(tools_path), chunk=chunk,
                      starts_in_reasoning=starts_in_reasoning)


def final_message(result: ParseResult) -> dict[str, Any]:
    """The assembled assistant message as OpenAI JSON, plus the markup errors."""
    content = "".join(ev.text for ev in result.events if isinstance(ev, Text))
    reasoning = "".join(ev.text for ev in result.events if isinstance(ev, Reasoning))
    message: dict[str, Any] = {"role": "assistant", "content": content or None}
    if reasoning:
        message["reasoning_content"] = reasoning
    calls = [{"id": call.id or f"call_{call.index}", "type": "function",
              "function": {"name": call.name, "arguments": call.arguments}}
             for call in result.calls]
    if calls:
        message["tool_calls"] = calls
    return {"family": result.family, "message": message,
            "finish_reason": "tool_calls" if calls else "stop",
            "errors": [{"kind": str(e.kind), "index": e.index, "raw": e.raw}
                       for e in result.errors]}


def family_list() -> list[dict[str, Any]]:
    """Every registered family with its grammar class (docs/design/markup.md §3.2) and engine aliases."""
    return [{"family": name, "grammar": fam.grammar, "aliases": list(fam.aliases)}
            for name, fam in families().items()]


def print_family_list(console: Console) -> None:
    table = Table(title="sseguard markup families", title_justify="left")
    table.add_column("family")
    table.add_column("class")
    table.add_column("aliases (engine names)", overflow="fold")
    for row in family_list():
        table.add_row(row["family"], row["grammar"], ", ".join(row["aliases"]))
    console.print(table)


def _short(text: str, limit: int = 120) -> str:
    shown = text if len(text) <= limit else text[:limit - 1] + "…"
    return escape(repr(shown)[1:-1])


def print_events(result: ParseResult, console: Console) -> None:
    """One table row per (joined) event."""
    table = Table(title=f"sseguard parse — family {result.family}", title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("event")
    table.add_column("index", justify="right")
    table.add_column("detail", overflow="fold")
    for n, ev in enumerate(result.events):
        if isinstance(ev, Reasoning):
            row = ("[magenta]Reasoning[/]", "", _short(ev.text))
        elif isinstance(ev, Text):
            row = ("Text", "", _short(ev.text))
        elif isinstance(ev, Markup):
            row = ("[dim]Markup[/]", "", _short(ev.raw))
        elif isinstance(ev, ToolCallStart):
            ident = f" (id {escape(ev.id)})" if ev.id is not None else ""
            row = ("[cyan]ToolCallStart[/]", str(ev.index), escape(ev.name) + ident)
        elif isinstance(ev, ToolArgsDelta):
            row = ("[cyan]ToolArgsDelta[/]", str(ev.index), _short(ev.fragment))
        elif isinstance(ev, ToolCallEnd):
            row = ("[green]ToolCallEnd[/]", str(ev.index),
                   f"{escape(ev.name)} {_short(ev.arguments)}")
        else:
            idx = "" if ev.index is None else str(ev.index)
            row = (f"[bold red]MarkupError[/] {ev.kind}", idx, _short(ev.raw))
        table.add_row(str(n), *row)
    console.print(table)
    summary = f"{len(result.calls)} call(s), {len(result.errors)} markup error(s)"
    console.print(summary, highlight=False)


@app.command(cls=Command, name="parse")
def parse_command(
    file: str | None = typer.Argument(None, metavar="FILE", help="Raw model output (UTF-8 text)."),
    family: str = typer.Option("auto", "--family", metavar="NAME",
                               help=f"{', '.join(family_names())}, an engine's name for one (see "
                                    "--list), or auto (detect from the first marker)."),
    tools: str | None = typer.Option(None, "--tools", metavar="TOOLS.json",
                                     help="OpenAI tools list (or a request body with tools): "
                                          "enables undefined_function and the schema types of "
                                          "Qwen3-Coder, GLM and MiniMax values."),
    chunk: int = typer.Option(0, "--chunk", metavar="N",
                              help="Feed N characters at a time (0: the whole file at once)."),
    thinking: bool = typer.Option(False, "--thinking",
                                  help="The text starts inside reasoning (DeepSeek thinking mode, "
                                       "MiniMax-M2)."),
    as_json: bool = typer.Option(False, "--json",
                                 help="Print the final message as OpenAI JSON, with the errors."),
    list_families: bool = typer.Option(False, "--list",
                                       help="List every family with its grammar class and the "
                                            "names the serving engines give it, then exit."),
) -> None:
    """Parse tool-call markup out of raw model output, as a streaming server should.

    Exit code 0 when no markup error was found, 1 when one was, 2 for unusable input.

    \b
    Example:
      sseguard parse examples/markup/dsml-v4.txt --family auto --chunk 3
      sseguard parse --list
    """
    if list_families:
        if as_json:
            typer.echo(json.dumps(family_list(), ensure_ascii=False, indent=2))
        else:
            print_family_list(console)
        raise typer.Exit(0)
    if file is None:
        fail("a FILE to parse is needed (or --list)")
    try:
        result = parse_file(file, family, tools_path=tools, chunk=chunk,
                            starts_in_reasoning=thinking)
    except ConfigError as exc:
        fail(str(exc))
    if as_json:
        typer.echo(json.dumps(final_message(result), ensure_ascii=False, indent=2))
    else:
        print_events(result, console)
    raise typer.Exit(1 if result.errors else 0)
