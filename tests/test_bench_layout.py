"""``bench/`` stays a suite: every benchmark is a module of a question's folder, run as
``python -m bench.<folder>.<script>``, none edits ``sys.path``, and every command that docs name
(``bench/README.md``, ``docs/``) names a module that exists, so a figure's command cannot go stale
when a script moves. Read as text: the benchmarks' own dependencies (valgrind, Locust, DuckDB, the
engines) need not be installed for this."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
#: ``python -m bench.proxy.bench_proxy``, ``bench.store.bench_client_store`` in a command.
MODULE = re.compile(r"\bbench\.([a-z_]+)\.([a-z_]+)\b")
#: What ``bench/`` holds besides the question folders' scripts.
SHARED = {"__init__.py", "harness.py"}


def _scripts() -> list[Path]:
    return sorted(p for p in BENCH.rglob("*.py")
                  if "__pycache__" not in p.parts and p.parent != BENCH and p.name != "__init__.py")


def _module(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def test_the_scan_finds_the_benchmarks() -> None:
    # Literal oracles: benchmarks whose figures docs/benchmarks.md leads with.
    found = {_module(p) for p in _scripts()}
    assert {"bench.checker.bench_checker", "bench.parsers.bench_parsers", "bench.proxy.bench_proxy",
            "bench.probe.bench_probe"} <= found


def test_every_benchmark_is_in_a_question_folder_that_is_a_package() -> None:
    loose = [p.name for p in BENCH.glob("*.py") if p.name not in SHARED]
    assert loose == []
    assert (BENCH / "__init__.py").is_file()
    folders = {p.parent for p in _scripts()}
    assert [f.name for f in sorted(folders) if not (f / "__init__.py").is_file()] == []
    assert all(f.parent == BENCH for f in folders), "one level of folders: bench/<question>/<script>.py"


def test_no_benchmark_edits_sys_path() -> None:
    edits = []
    for path in [*BENCH.rglob("*.py")]:
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        code = [node for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr == "path"
                and isinstance(node.value, ast.Name) and node.value.id == "sys"]
        # Code run as ``python -c SNIPPET`` is a string here: its text counts too.
        snippets = [node for node in ast.walk(tree) if isinstance(node, ast.Constant)
                    and isinstance(node.value, str) and "sys.path" in node.value
                    and "import" in node.value]
        if code or snippets:
            edits.append(path.relative_to(ROOT).as_posix())
    assert edits == []


def test_the_readme_lists_every_benchmark() -> None:
    readme = (BENCH / "README.md").read_text(encoding="utf-8")
    missing = [_module(p) for p in _scripts() if _module(p) not in readme]
    assert missing == []


def test_every_benchmark_command_in_the_docs_names_a_module_that_exists() -> None:
    modules = {_module(p) for p in _scripts()}
    stale = []
    for doc in [BENCH / "README.md", ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")),
                *_scripts()]:
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            for folder, script in MODULE.findall(line):
                if f"bench.{folder}.{script}" not in modules:
                    stale.append(f"{doc.relative_to(ROOT).as_posix()}:{number}: bench.{folder}.{script}")
    assert stale == []


def test_the_stale_command_check_catches_a_moved_script() -> None:
    # The pattern the check above relies on finds a command the way docs write it.
    line = "Command: `.venv/bin/python -m bench.proxy.bench_gone --repeats 2` (load 1.2)"
    assert MODULE.findall(line) == [("proxy", "bench_gone")]
