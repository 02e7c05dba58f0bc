"""What the benchmarks share: the machine a figure came from, CPU and memory read from ``/proc``,
medians and percentiles, Markdown tables, servers started on loopback, and callgrind's counts.

Every figure of ``docs/benchmarks.md`` names its machine and load average, and most compare two
processes on pinned cores; written once here, each benchmark reads the same clock the same way, so
two figures differ by what they measure, not by how it was read. Linux only (``/proc``,
``sched_setaffinity``), as is the machine the figures come from.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

#: The repository's root: ``python -m bench.<folder>.<script>`` runs from here, and so do the
#: benchmarks' own child processes (which import ``bench`` the same way).
ROOT = Path(__file__).resolve().parent.parent
#: Clock ticks per second of ``/proc/<pid>/stat``'s CPU times.
TICKS = os.sysconf("SC_CLK_TCK")
#: ``sseguard`` as a child process, from the interpreter (and ``sseguard``) this benchmark runs with.
SSEGUARD = [sys.executable, "-c", "from sseguard.cli import main; main()"]


# -- the machine ---------------------------------------------------------------------------------

def load_average() -> float:
    """The one-minute load average: above ~2 on the 2-core machine, absolute rates measure the
    machine as much as the code (docs/benchmarks.md, "Machine")."""
    return os.getloadavg()[0]


def machine() -> str:
    """One line naming what a figure was measured on and when, for the top of a benchmark's output."""
    loads = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.python_implementation()} "
            f"{platform.python_version()}, {platform.system()} {platform.release()} "
            f"{platform.machine()}, {os.cpu_count()} CPUs, load {loads}")


def pin_self(core: int) -> None:
    """Keep this process on ``core`` where the machine has two cores or more (a benchmark's client
    and its server on different cores never queue behind each other)."""
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {core})


def pinned(core: int | None, *, open_files: bool = False) -> Callable[[], None]:
    """A ``preexec_fn`` that pins the child to ``core`` (None: any core) and, with ``open_files``,
    raises its open-file limit to the hard limit (a server holding 1,000 streams needs more than
    the usual 1,024)."""
    def setup() -> None:
        if core is not None:
            pin_self(core)
        if open_files:
            _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return setup


# -- processes, from /proc -----------------------------------------------------------------------

def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (a proxy with ``--workers N`` is a supervisor and N workers)."""
    pids = [pid]
    for current in pids:
        try:
            tasks = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for task in tasks:  # a child started from a thread (the store writer) is that thread's
            try:
                with open(f"/proc/{current}/task/{task}/children") as f:
                    pids.extend(int(child) for child in f.read().split())
            except OSError:
                continue
    return pids


def cpu_seconds(pid: int, *, alone: bool = False) -> float:
    """CPU seconds (user + system) of ``pid`` and its descendants so far (``alone``: ``pid`` only)."""
    total = 0.0
    for each in [pid] if alone else process_tree(pid):
        try:
            with open(f"/proc/{each}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / TICKS
    return total


def machine_busy_seconds() -> float:
    """CPU seconds all cores spent busy so far (from ``/proc/stat``): what other jobs took meanwhile
    is this minus the benchmark's own processes."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return (sum(values[:8]) - idle) / TICKS


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and its descendants, in MB."""
    total = 0.0
    for each in process_tree(pid):
        try:
            with open(f"/proc/{each}/status") as f:
                total += next((int(line.split()[1]) / 1024 for line in f
                               if line.startswith("VmRSS:")), 0.0)
        except OSError:
            continue
    return total


# -- statistics and tables -----------------------------------------------------------------------

def median(values: Iterable[float]) -> float:
    """The median, NaN for no values (a scenario that delivered nothing prints as ``nan``)."""
    listed = list(values)
    return statistics.median(listed) if listed else math.nan


def percentile(values: Iterable[float], q: float) -> float:
    """The ``q``-th percentile (0-100), interpolated between the values around it; the median of
    fewer than two values."""
    listed = list(values)
    if len(listed) < 2:
        return median(listed)
    return statistics.quantiles(listed, n=100, method="inclusive")[min(98, max(0, round(q) - 1))]


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A Markdown table as ``docs/benchmarks.md`` holds them, one line a row."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


# -- servers on loopback -------------------------------------------------------------------------

@contextlib.contextmanager
def server(args: list[str], core: int | None = None, *, raw: bool = False, src: str | None = None,
           open_files: bool = False,
           extra_env: dict[str, str] | None = None) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Start a server (``sseguard ARGS``, or ``ARGS`` itself with ``raw``) pinned to ``core`` (None:
    every core); yield it and the first line it prints (its address), and stop it on the way out.
    ``src``: import ``sseguard`` from there (another tree's ``src``) instead of this checkout;
    ``extra_env``: variables added to the server's environment."""
    command = args if raw else [*SSEGUARD, *args]
    env = None if src is None and not extra_env else {
        **os.environ, **({"PYTHONPATH": f"{src}{os.pathsep}{ROOT}"} if src else {}), **(extra_env or {})}
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=env, cwd=ROOT, preexec_fn=pinned(core, open_files=open_files))
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{args[0]} did not start")
        yield proc, line
    finally:
        stop(proc)


def stop(proc: subprocess.Popen[str]) -> None:
    """Terminate ``proc`` and wait for it (bounded: killed after 10 s)."""
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def start_chaos(options: list[str], core: int | None = None, *,
                open_files: bool = False) -> tuple[subprocess.Popen[str], str]:
    """``sseguard chaos OPTIONS`` on a free loopback port, pinned to ``core``: the process and its
    base URL (ending in ``/v1``). The caller stops it (``stop``)."""
    proc = subprocess.Popen([*SSEGUARD, "chaos", "--listen", "127.0.0.1:0", "--json", *options],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT,
                            preexec_fn=pinned(core, open_files=open_files))
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        stop(proc)
        raise RuntimeError("sseguard chaos did not start")
    url: str = json.loads(line)["url"]
    return proc, url


@contextlib.contextmanager
def chaos(options: list[str], core: int | None = None, *,
          open_files: bool = False) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``start_chaos`` for the length of a ``with`` block."""
    proc, url = start_chaos(options, core, open_files=open_files)
    try:
        yield proc, url
    finally:
        stop(proc)


# -- callgrind: instructions, which do not move with the machine's load --------------------------

def callgrind_total(command: list[str], *, cwd: Path | None = None,
                    env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run ``command`` whole under ``valgrind --tool=callgrind``: the instructions it executed and what
    it printed. A figure is the difference of two such runs (N rounds and one), so start-up and
    imports cancel."""
    out = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *command],
                         cwd=cwd or ROOT, env=env, capture_output=True, text=True, check=False)
    found = re.search(r"Collected : (\d+)", out.stderr)
    if out.returncode != 0 or found is None:
        raise SystemExit(f"no callgrind total for {command[-3:]}:\n{out.stderr[-800:]}")
    return int(found.group(1)), out.stdout.strip()


def build_callgrind_helper(directory: Path, source: str) -> Path:
    """Compile ``source`` (C using valgrind's ``callgrind.h`` client requests) into a shared library
    in ``directory``, for ``ctypes`` to switch collection on and off around the part measured."""
    src, lib = directory / "cg.c", directory / "libcg.so"
    src.write_text(source)
    subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    return lib


def callgrind_control(pid: int, *args: str) -> None:
    """``callgrind_control ARGS`` on a process running under callgrind (``-z`` zero, ``-d`` dump,
    ``-i on|off`` instrumentation)."""
    subprocess.run(["callgrind_control", *args, str(pid)], check=True, capture_output=True)


def dumped_instructions(out_dir: Path, pid: int, before: set[Path]) -> int:
    """The instruction total of the dump ``callgrind_control -d`` just wrote (a ``cg.<pid>.*`` file
    of ``out_dir`` not in ``before``); waits for it at most two minutes."""
    for _ in range(600):
        new = set(out_dir.glob(f"cg.{pid}.*")) - before
        if new:
            time.sleep(0.5)  # let it finish writing
            text = max(new, key=lambda p: p.stat().st_mtime).read_text(errors="replace")
            found = re.search(r"^totals: (\d+)", text, re.M)
            if found:
                return int(found.group(1))
        time.sleep(0.2)
    raise RuntimeError("callgrind wrote no dump")
