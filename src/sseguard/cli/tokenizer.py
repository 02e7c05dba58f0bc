"""``sseguard tokenizer``: is each marker of a family one token, or text the model can misspell?

The first question an operator asks when markup leaks. A marker that is one added (special) token is
emitted whole or not at all; a marker that splits into pieces is ordinary text to the model, which can
write ``｜DSML`` with the wrong bar, drop a piece under sampling, or produce it in content by accident.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sseguard.cli._app import Command, app, console, fail
from sseguard.cli._names import family_names
from sseguard.core.errors import ConfigError
from sseguard.core.toolcalls import FAMILIES, canonical
from sseguard.extras import require


@dataclass(frozen=True, slots=True)
class MarkerReport:
    """How one marker tokenizes: ``ids`` has one entry when it is a single token."""

    family: str
    marker: str
    ids: tuple[int, ...]
    pieces: tuple[str, ...]
    added: bool  # one of the tokenizer's added tokens
    special: bool  # an added token marked special (skipped when decoding)

    @property
    def single(self) -> bool:
        return len(self.ids) == 1

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "marker": self.marker, "single_token": self.single,
                "ids": list(self.ids), "pieces": list(self.pieces), "added": self.added,
                "special": self.special}


def _load(path: str) -> Any:
    require("tokenizer", "sseguard tokenizer")
    from tokenizers import Tokenizer

    if not Path(path).is_file():
        raise ConfigError(f"{path}: no such file")
    try:
        return Tokenizer.from_file(path)
    except Exception as exc:  # the Rust side raises plain Exception for any unreadable file
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"{path} is not a tokenizer.json file ({reason})") from exc


def families_for(name: str | None) -> list[str]:
    """The families to report: one, or every concrete family for ``None``/``auto``."""
    if name is None or name == "auto":
        return [f for f in FAMILIES if f != "auto"]
    if canonical(name) not in FAMILIES:
        raise ConfigError(f"unknown family {name!r}; known: {', '.join(FAMILIES)}")
    return [canonical(name)]


def check_tokenizer(path: str, family: str | None = None) -> list[MarkerReport]:
    """One report per marker of the family (or of every family)."""
    families = families_for(family)
    tok = _load(path)
    added = {t.content: (i, bool(t.special)) for i, t in tok.get_added_tokens_decoder().items()}
    reports: list[MarkerReport] = []
    for fam in families:
        for marker in FAMILIES[fam].markers:
            if marker in added:
                tid, special = added[marker]
                reports.append(MarkerReport(fam, marker, (tid,), (marker,), True, special))
                continue
            enc = tok.encode(marker, add_special_tokens=False)
            reports.append(MarkerReport(fam, marker, tuple(enc.ids), tuple(enc.tokens), False,
                                        False))
    return reports


def print_reports(reports: list[MarkerReport], console: Console) -> None:
    table = Table(title="Markers and how the tokenizer sees them", title_justify="left")
    table.add_column("family")
    table.add_column("marker")
    table.add_column("verdict")
    table.add_column("ids / pieces", overflow="fold")
    for r in reports:
        if r.single:
            kind = "special token" if r.special else ("added token" if r.added else "vocab token")
            verdict, detail = f"[green]one {kind}[/]", f"id {r.ids[0]}"
        else:
            verdict = f"[yellow]{len(r.ids)} pieces[/]"
            detail = " ".join(escape(repr(p)) for p in r.pieces)
        table.add_row(r.family, escape(r.marker), verdict, detail)
    console.print(table)


@app.command(cls=Command, name="tokenizer")
def tokenizer_command(
    tokenizer_json: str = typer.Argument(..., metavar="TOKENIZER_JSON",
                                         help="A Hugging Face tokenizer.json file."),
    family: str | None = typer.Option(None, "--family", metavar="NAME",
                                      help=f"One markup family ({', '.join(family_names())}); "
                                           "default: all of them."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object per marker."),
) -> None:
    """Say for each tool-call marker whether it is one token (and its id) or splits into pieces.

    A marker that is several pieces is text the model can misspell — the first suspect when markup
    leaks into content.

    \b
    Example:
      sseguard tokenizer ~/models/DeepSeek-V3.2/tokenizer.json --family dsml-v32
    """
    try:
        reports = check_tokenizer(tokenizer_json, family)
    except ConfigError as exc:
        fail(str(exc))
    if as_json:
        for report in reports:
            typer.echo(json.dumps(report.to_dict(), ensure_ascii=False))
    else:
        print_reports(reports, console)
