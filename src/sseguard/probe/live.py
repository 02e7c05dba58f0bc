"""Running counts while a probe runs, shown with rich: a bar per arm, counts per ending, failure rate.

The tally is updated once per finished request (never per chunk); the display redraws four times a
second from it, so a thousand streams cost the display nothing measurable.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from sseguard.analyze.rates import wilson
from sseguard.core.policy import Policy
from sseguard.core.record import Record
from sseguard.core.verdict import Ending

ENDING_ORDER = [str(e) for e in Ending]


def rate_text(failed: int, total: int) -> str:
    """``3.2 % [1.1–8.9]`` — the rate and its Wilson interval, in percent."""
    if total == 0:
        return "–"
    lo, hi = wilson(failed, total)
    return f"{100 * failed / total:.1f} % [{100 * lo:.1f}–{100 * hi:.1f}]"


@dataclass
class ArmCounts:
    """Counts for one arm (or one arm at one concurrency level)."""

    total: int = 0
    failed: int = 0
    endings: Counter[str] = field(default_factory=Counter)
    findings: Counter[str] = field(default_factory=Counter)
    api: str = ""  # the protocol the arm speaks (an arm speaks one)

    def add(self, record: Record, failed: bool, kinds: list[str] | None = None) -> None:
        """``kinds`` are ``record.finding_kinds`` when the caller has them already."""
        self.api = record.api
        self.total += 1
        self.failed += failed
        self.endings[record.ending] += 1
        for kind in record.finding_kinds if kinds is None else kinds:
            self.findings[kind] += 1


class Tally:
    """Counts per arm and per (arm, concurrency level), judged under the run's policy."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.arms: dict[str, ArmCounts] = {}
        self.levels: dict[tuple[str, int], ArmCounts] = {}

    def add(self, record: Record) -> None:
        kinds = record.finding_kinds
        failed = not self.policy.passes_facts(record.ending, kinds)  # ``Record.failed_under``
        arm = self.arms.get(record.arm)
        if arm is None:
            arm = self.arms[record.arm] = ArmCounts()
        arm.add(record, failed, kinds)
        key = (record.arm, record.concurrency)
        level = self.levels.get(key)
        if level is None:
            level = self.levels[key] = ArmCounts()
        level.add(record, failed, kinds)

    def extend(self, records: Iterable[Record]) -> None:
        for record in records:
            self.add(record)

    @property
    def failed(self) -> int:
        return sum(c.failed for c in self.arms.values())

    @property
    def total(self) -> int:
        return sum(c.total for c in self.arms.values())


def endings_table(tally: Tally, *, by_level: bool = False, title: str | None = None) -> Table:
    """Rows per arm (or arm × level): requests, each ending seen, failures with their interval."""
    cells: Sequence[tuple[str, ArmCounts]]
    if by_level:
        cells = [(f"{arm} @ {level}", cell) for (arm, level), cell in sorted(tally.levels.items())]
    else:
        cells = sorted(tally.arms.items())
    seen = [e for e in ENDING_ORDER if any(c.endings.get(e) for _, c in cells)]
    table = Table(title=title, title_justify="left", expand=False)
    table.add_column("arm @ concurrency" if by_level else "arm")
    table.add_column("api")
    table.add_column("requests", justify="right")
    for ending in seen:
        table.add_column(ending, justify="right")
    table.add_column("findings", justify="left")
    table.add_column(f"failed ({tally.policy.name})", justify="right")
    for name, cell in cells:
        findings = ", ".join(f"{k} {v}" for k, v in cell.findings.most_common(3)) or "–"
        table.add_row(name, cell.api, str(cell.total), *[str(cell.endings.get(e, 0)) for e in seen], findings,
                      f"{cell.failed} · {rate_text(cell.failed, cell.total)}")
    return table


class _Board:
    """Re-rendered by rich on every refresh."""

    def __init__(self, progress: Progress, tally: Tally) -> None:
        self._progress = progress
        self._tally = tally

    def __rich__(self) -> RenderableType:
        return Group(self._progress, endings_table(self._tally))


class LiveView:
    """The live display; a no-op renderer when the console is not a terminal (tests, CI logs)."""

    def __init__(self, console: Console, tally: Tally, *, enabled: bool | None = None) -> None:
        self.console = console
        self.tally = tally
        self.enabled = console.is_terminal if enabled is None else enabled
        self._progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"), TimeElapsedColumn(), console=console)
        self._tasks: dict[str, TaskID] = {}
        self._live: Live | None = None

    def start(self, arms: Sequence[str], totals: dict[str, int | None],
              completed: dict[str, int] | None = None, *, apis: dict[str, str] | None = None) -> None:
        """Show one bar per arm, named with its protocol; ``completed`` counts what a resumed run
        already has."""
        for arm in arms:
            api = (apis or {}).get(arm)
            self._tasks[arm] = self._progress.add_task(
                f"{arm} ({api})" if api and api != arm else arm, total=totals.get(arm),
                completed=(completed or {}).get(arm, 0), status="")
        if self.enabled:
            self._live = Live(_Board(self._progress, self.tally), console=self.console,
                              refresh_per_second=4, transient=False)
            self._live.start()

    def add(self, record: Record) -> None:
        self.tally.add(record)
        task = self._tasks.get(record.arm)
        if task is not None and self.enabled:
            cell = self.tally.arms[record.arm]
            self._progress.update(task, advance=1,
                                  status=f"failed {rate_text(cell.failed, cell.total)}")

    def note(self, text: str) -> None:
        """A line above the live board (level changes, warnings)."""
        if self.enabled:
            self.console.print(text, highlight=False)

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
