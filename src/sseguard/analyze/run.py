"""What ``sseguard analyze`` and ``sseguard export`` do, apart from parsing their flags.

The flags a person types (``--since 24h``, ``--until 2026-12-01T00:00``, ``--where arm=gw,api=messages``)
become a ``Filter`` here, checked with one-line ``ConfigError``s; the counting happens in the backends
(see ``counts``) behind a progress bar on stderr, and only the counts and the few records the HTML
report quotes come back.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from sseguard.analyze.facts import FILTERABLE, Filter
from sseguard.analyze.model import Analysis
from sseguard.core.errors import ConfigError
from sseguard.core.policy import Policy
from sseguard.store.retention import parse_age


def parse_time(text: str, flag: str, now: float | None = None) -> float:
    """``24h`` (that long ago), or an ISO 8601 time (UTC unless it names a zone) → epoch seconds."""
    text = text.strip()
    if text and text[-1] in "smhdw" and text[:-1].replace(".", "", 1).isdigit():
        return (time.time() if now is None else now) - parse_age(text, flag)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(f"{flag} {text!r}: use an age such as 24h or 7d, or an ISO time such as "
                          "2026-12-01T08:00") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def parse_where(text: str | None) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``arm=gw,api=messages`` → column = values (a column named twice: either value)."""
    if not text:
        return ()
    out: dict[str, list[str]] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        key = "run_id" if key == "run" else key
        if not sep or not key or not value:
            raise ConfigError(f"--where {text!r}: write column=value pairs separated by commas, "
                              "such as arm=gw,api=messages")
        if key not in FILTERABLE:
            raise ConfigError(f"--where: cannot filter on {key!r} (use {', '.join(FILTERABLE)})")
        if key == "concurrency" and not value.isdigit():
            raise ConfigError(f"--where concurrency={value!r}: a whole number")
        out.setdefault(key, []).append(value)
    return tuple((k, tuple(v)) for k, v in out.items())


def make_filter(since: str | None = None, until: str | None = None, where: str | None = None) -> Filter:
    start = parse_time(since, "--since") if since else None
    end = parse_time(until, "--until") if until else None
    if start is not None and end is not None and end <= start:
        raise ConfigError("--until is not after --since: the time range is empty")
    return Filter(start, end, parse_where(where))


@contextmanager
def progress_bar(console: Console | None, what: str) -> Iterator[Callable[[float], None] | None]:
    """A bar on ``console`` (stderr) while a backend works; DuckDB reports its share done."""
    if console is None or not console.is_terminal:
        yield None
        return
    with Progress(TextColumn(what), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                  TimeElapsedColumn(), console=console, transient=True) as bar:
        task = bar.add_task(what, total=1.0)
        yield lambda share: bar.update(task, completed=share)


@contextmanager
def stdin_spooled(sources: Sequence[str]) -> Iterator[list[str]]:
    """``-`` (records piped in) as a temporary JSONL file: the backends read files, not pipes."""
    if "-" not in sources:
        yield list(sources)
        return
    with tempfile.TemporaryDirectory(prefix="sseguard-stdin-") as tmp:
        path = Path(tmp) / "stdin.jsonl"
        with path.open("wb") as out:
            shutil.copyfileobj(sys.stdin.buffer, out)
        yield [str(path) if s == "-" else s for s in sources]


def run_analyze(sources: Sequence[str], *, policy: str = "strict", tolerate: str | None = None,
                html: str | None = None, png: str | None = None, as_json: bool = False, top: int = 5,
                since: str | None = None, until: str | None = None, where: str | None = None,
                engine: str = "auto", console: Console, err_console: Console,
                echo: Callable[[str], None] = print, spark: Any = None) -> Analysis:
    """Everything ``sseguard analyze`` does; a ``ConfigError`` means unusable input (exit 2).

    With ``--json`` stdout carries the JSON document only (through ``echo``, never wrapped to the
    terminal's width), so the paths written go to stderr.
    """
    from sseguard.analyze.report import EVIDENCE_COUNT, print_summary, write_html, write_pngs
    from sseguard.analyze.summary import analyze_with_evidence

    judge = Policy.from_spec(policy, tolerate)
    if top < 1:
        raise ConfigError(f"--top must be at least 1, got {top}")
    if engine not in ("auto", "duckdb", "spark"):
        raise ConfigError(f"--engine {engine!r}: use duckdb or spark (stores count in their database)")
    flt = make_filter(since, until, where)
    with stdin_spooled(sources) as named, progress_bar(err_console, "counting") as progress:
        result, evidence = analyze_with_evidence(named, judge, top=top, flt=flt, engine=engine,
                                                 spark=spark, progress=progress,
                                                 evidence=EVIDENCE_COUNT if html else 0)
    written: list[Path] = []
    if html:
        written.append(write_html(result, evidence, html))
    if png:
        written.extend(write_pngs(result, evidence, png))
    if as_json:
        echo(json.dumps(result.to_dict(), ensure_ascii=False, indent=2))
    else:
        print_summary(result, console, top=max(top, 8))
    notes = err_console if as_json else console
    for path in written:
        notes.print(Text(f"wrote {path}"), highlight=False)
    return result


def run_export(sources: Sequence[str], parquet: str, *, since: str | None = None, until: str | None = None,
               where: str | None = None, err_console: Console) -> int:
    """``sseguard export SOURCE… --parquet OUT``: the records as Parquet partitioned by day."""
    from sseguard.analyze.export import export_parquet

    flt = make_filter(since, until, where)
    with progress_bar(err_console, "exporting"):
        count = export_parquet(sources, parquet, flt)
    err_console.print(Text(f"wrote {count} records to {parquet}"), highlight=False)
    return count
