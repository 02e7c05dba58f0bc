"""How long `sseguard --help` and `sseguard check FILE` take from a cold interpreter, tree against tree.

Each command runs as the console script runs it (``python -c "from sseguard.cli import main; main()"``)
with ``PYTHONPATH`` at one tree's ``src``, hyperfine-style: warm-up runs first (the OS file cache,
``.pyc`` files written), then ``--runs`` timed runs, the trees alternated run by run so that load on
a shared machine falls on both alike. Reported per tree and command: min, median and mean wall time.
With ``--importtime`` the heaviest imports of each (``python -X importtime``, one run) follow:

    git worktree add --detach ~/.cache/sseguard/baseline-main <old commit>
    python -m bench.cli.bench_cli_startup --tree before=~/.cache/sseguard/baseline-main --tree after=. \\
        --runs 20 --importtime

``--installed NAME=VENV`` times what a venv has installed instead (its own interpreter, no
``PYTHONPATH``): a fresh venv with the core alone (``bench_install.py --keep DIR .``) scans fewer
distributions' entry points than a development venv with every extra.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONSOLE_SCRIPT = "from sseguard.cli import main; main()"
COMMANDS: dict[str, list[str]] = {
    "--help": ["--help"],
    "check": ["check", str(ROOT / "examples" / "bodies" / "truncated.sse")],
}


def _env(tree: Path | None) -> dict[str, str]:
    # Bytecode is written (warm-up) and read, as an installed package's is: pip compiles it at install.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    return {**env, **({"PYTHONPATH": str(tree / "src")} if tree else {}), "COLUMNS": "100"}


def run_once(python: str, tree: Path | None, args: list[str]) -> float:
    """Wall seconds of one run; fails loudly when the command itself fails (exit > 1)."""
    start = time.perf_counter()
    done = subprocess.run([python, "-c", CONSOLE_SCRIPT, *args], env=_env(tree), capture_output=True,
                          timeout=120)
    elapsed = time.perf_counter() - start
    if done.returncode > 1:  # `check` exits 1 on the truncated body: a verdict, not a failure
        raise SystemExit(f"{tree}: sseguard {' '.join(args)} exited {done.returncode}: "
                         f"{done.stderr.decode(errors='replace')[-500:]}")
    return elapsed


def heaviest_imports(python: str, tree: Path | None, args: list[str], top: int) -> list[tuple[int, int, str]]:
    """(self µs, cumulative µs, module) of the ``top`` imports with the largest self time."""
    done = subprocess.run([python, "-X", "importtime", "-c", CONSOLE_SCRIPT, *args], env=_env(tree),
                          capture_output=True, text=True, timeout=120)
    rows = []
    total = 0
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own, cumulative, name = line.removeprefix("import time:").split("|")
        if len(name) - len(name.lstrip()) == 1:  # a top-level import: its cumulative time is its tree's
            total += int(cumulative)
        rows.append((int(own), int(cumulative), name.strip()))
    rows.sort(reverse=True)
    return [(total, total, "(all imports)"), *rows[:top]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", metavar="NAME=PATH",
                        help="a checkout to time (repeatable); default: this one, as 'this'")
    parser.add_argument("--installed", action="append", metavar="NAME=VENV", default=[],
                        help="a venv whose installed sseguard to time (repeatable)")
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter (its venv holds the dependencies); default this one")
    parser.add_argument("--runs", type=int, default=20, help="timed runs per tree and command")
    parser.add_argument("--warmup", type=int, default=3, help="untimed runs first")
    parser.add_argument("--importtime", action="store_true", help="also the heaviest imports")
    parser.add_argument("--top", type=int, default=8, help="imports shown with --importtime")
    args = parser.parse_args(argv)
    # name -> (interpreter, tree on PYTHONPATH or None for what the interpreter's venv installed)
    trees: dict[str, tuple[str, Path | None]] = {}
    for spec in args.tree or ([] if args.installed else [f"this={ROOT}"]):
        name, _, path = spec.partition("=")
        if not path:
            parser.error(f"--tree {spec!r}: write NAME=PATH")
        trees[name] = (args.python, Path(path).expanduser().resolve())
    for spec in args.installed:
        name, _, venv = spec.partition("=")
        if not venv:
            parser.error(f"--installed {spec!r}: write NAME=VENV")
        trees[name] = (str(Path(venv).expanduser() / "bin" / "python"), None)
    print(f"load average {os.getloadavg()[0]:.2f} at the start; "
          f"{args.runs} runs after {args.warmup} warm-up, trees alternated")
    for label, command in COMMANDS.items():
        times: dict[str, list[float]] = {name: [] for name in trees}
        for _ in range(args.warmup):
            for python, tree in trees.values():
                run_once(python, tree, command)
        for _ in range(args.runs):
            for name, (python, tree) in trees.items():
                times[name].append(run_once(python, tree, command))
        for name, values in times.items():
            print(f"sseguard {label:7} {name:10} min {min(values) * 1000:6.0f} ms   median "
                  f"{statistics.median(values) * 1000:6.0f} ms   "
                  f"mean {statistics.fmean(values) * 1000:6.0f} ms")
    if args.importtime:
        for label, command in COMMANDS.items():
            for name, (python, tree) in trees.items():
                print(f"\nsseguard {label} ({name}), -X importtime, self time first:")
                for own, cumulative, module in heaviest_imports(python, tree, command, args.top):
                    print(f"  {own / 1000:7.1f} ms self {cumulative / 1000:7.1f} ms cumulative  {module}")
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
