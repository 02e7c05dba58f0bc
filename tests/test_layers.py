"""The layers of docs/design/architecture.md hold: the sans-IO core imports no I/O library and nothing from
the adapters, no module imports from a layer above its own, and no modules import each other in a circle.

The import graph is read from the source (``ast``), so every import counts: module level, inside a
function (a lazy import still ties the modules together) and under ``if TYPE_CHECKING:`` (a circle the
type checker needs is still a circle in the design).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "sseguard"

#: The sans-IO core is a folder (docs/design/architecture.md "Layers"): layer 0, every module in it.
CORE_PACKAGE = "sseguard.core"
FORBIDDEN = ["aiohttp", "httpx", "httpx2", "asyncio", "sqlite3", "psycopg", "urllib.request",
             "locust", "gevent", "sseguard.chaos", "sseguard.probe", "sseguard.proxy", "sseguard.store",
             "sseguard.analyze", "sseguard.client", "sseguard.cli", "rich", "typer"]

#: The command line: layer 3. Below it, the modules that string several adapters together for one
#: command (``demo``: chaos, probe, proxy, store and analyze), layer 2, so that no adapter imports
#: another for their sake. Everything else (chaos, probe, analyze, proxy, store, client, locust,
#: testing, the pytest plugin, the shared ``_serve``/``_config`` helpers) is an adapter: layer 1. The
#: package root ranks with the adapters: it is the public face and re-exports ``StreamEndedBadly``
#: from ``client`` (lazily, so ``import sseguard`` loads only the core, which the test above proves).
CLI_PREFIX = "sseguard.cli"
COMPOSITIONS = ("sseguard.demo",)
LAYER_NAMES = ("core", "adapter", "composition", "cli")
#: Adapters that must not import certain others: the probe measures an endpoint and writes its own
#: results; the upstream it may probe (chaos), the proxy and the store are other programs to it.
APART: dict[str, tuple[str, ...]] = {
    "sseguard.probe": ("sseguard.chaos", "sseguard.proxy", "sseguard.store"),
}

#: Import edges known to close a circle, each named with why it is still here. Only edges in code
#: another change is restructuring belong here; that change removes them, and then this entry (the
#: test below fails on an entry whose edge is gone, so the list cannot go stale).
KNOWN_CIRCLE_EDGES: dict[tuple[str, str], str] = {}


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()
#: Every module of the core folder, and the package root (whose import must stay as light).
CORE = ["sseguard", *sorted(m for m in MODULES if m == CORE_PACKAGE or m.startswith(CORE_PACKAGE + "."))]


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def layer(module: str) -> int:
    if _within(module, CLI_PREFIX):
        return 3
    if any(_within(module, c) for c in COMPOSITIONS):
        return 2
    if _within(module, CORE_PACKAGE):
        return 0
    return 1


def _target(name: str) -> str | None:
    """The package module an imported dotted name is (or lives in); None outside the package."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str, path: Path) -> Iterator[str]:
    """Every sseguard module ``module`` imports, wherever the import statement sits."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor[:len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, *([base] if base else [])])
            # `from pkg import sub` imports the submodule when there is one, else a name of pkg.
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                     for alias in node.names]
        else:
            continue
        for name in names:
            target = _target(name)
            if target is not None and target != module:
                yield target


GRAPH: dict[str, set[str]] = {m: set(_imports(m, p)) for m, p in MODULES.items()}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_core_folder_holds_the_sans_io_modules() -> None:
    # Literal oracle: the modules docs/design/architecture.md names as the core.
    for name in ("sse", "jsonarray", "contract", "verdict", "policy", "record", "redact", "errors",
                 "toolcalls", "reasoning"):
        assert f"sseguard.core.{name}" in CORE and layer(f"sseguard.core.{name}") == 0
    assert layer("sseguard.proxy") == 1 and layer("sseguard.cli.check") == 3


def test_core_modules_import_no_io_library() -> None:
    code = (
        "import sys\n"
        f"for name in {CORE!r}: __import__(name)\n"
        f"bad = sorted(m for m in {FORBIDDEN!r} if m in sys.modules)\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"the core pulled in: {out.stdout.strip()}"


def test_no_module_imports_from_a_layer_above_its_own() -> None:
    upward = sorted(f"{src} ({LAYER_NAMES[layer(src)]}) → {dst} ({LAYER_NAMES[layer(dst)]})"
                    for src, targets in GRAPH.items() for dst in targets if layer(dst) > layer(src))
    assert upward == []


def test_adapters_kept_apart_import_nothing_of_each_other() -> None:
    crossing = sorted(f"{src} → {dst}" for src, targets in GRAPH.items() for dst in targets
                      for adapter, others in APART.items() if _within(src, adapter)
                      for other in others if _within(dst, other))
    assert crossing == []


def test_the_demo_is_a_composition_above_the_adapters() -> None:
    # Literal oracles: the demo strings chaos, probe, proxy and store together, and only the CLI
    # imports it.
    assert layer("sseguard.demo") == 2
    assert {"sseguard.chaos", "sseguard.proxy", "sseguard.store"} <= GRAPH["sseguard.demo"]
    assert sorted(src for src, targets in GRAPH.items() if "sseguard.demo" in targets) == [
        "sseguard.cli.demo"]


def test_no_import_circle_type_checking_and_lazy_imports_included() -> None:
    graph = {src: {dst for dst in targets if (src, dst) not in KNOWN_CIRCLE_EDGES}
             for src, targets in GRAPH.items()}
    assert _circles(graph) == []


def test_every_known_circle_edge_still_exists_and_still_closes_a_circle() -> None:
    circles = _circles(GRAPH)
    for src, dst in KNOWN_CIRCLE_EDGES:
        assert dst in GRAPH.get(src, set()), f"{src} → {dst} is gone: delete its entry"
        assert any(src in c and dst in c for c in circles), f"{src} → {dst} closes no circle now"


def test_the_graph_reader_sees_lazy_and_type_checking_imports() -> None:
    # Literal oracles from this repository: cli/proxy.py imports the proxy config inside a function
    # and the package root imports client under TYPE_CHECKING and inside __getattr__.
    assert "sseguard.proxy.config" in GRAPH["sseguard.cli.proxy"]
    assert "sseguard.client" in GRAPH["sseguard"]
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


#: The proxy's sans-IO folders (docs/design/architecture.md "Layers"): the two machines, and the
#: dialects of ``--resume`` and the rewriters of ``--repair-markup`` built on them. Each folder may
#: import the core and the pure folders listed with it, nothing else of the proxy.
PURE_FOLDERS: dict[str, tuple[str, ...]] = {
    "sseguard.proxy.machines": ("sseguard.proxy.machines",),
    "sseguard.proxy.resume": ("sseguard.proxy.machines", "sseguard.proxy.resume"),
    "sseguard.proxy.repair": ("sseguard.proxy.machines", "sseguard.proxy.repair"),
}


def _pure_modules(folder: str) -> list[str]:
    return sorted(m for m in MODULES if _within(m, folder))


def test_the_pure_folders_hold_the_machines_and_what_is_built_on_them() -> None:
    # Literal oracles: the modules docs/design/architecture.md names as the machines' and resume's.
    assert {"sseguard.proxy.machines.stream", "sseguard.proxy.machines.attempts",
            "sseguard.proxy.machines.actions", "sseguard.proxy.machines.frames",
            "sseguard.proxy.machines.retry", "sseguard.proxy.machines.outcome"} <= set(
        _pure_modules("sseguard.proxy.machines"))
    assert {"sseguard.proxy.resume.dialects", "sseguard.proxy.resume.chat",
            "sseguard.proxy.resume.messages", "sseguard.proxy.resume.background",
            "sseguard.proxy.resume.usage"} <= set(_pure_modules("sseguard.proxy.resume"))


def test_the_machines_import_the_core_and_their_own_pure_folders_only() -> None:
    clock_or_io = ("aiohttp", "asyncio", "time", "socket", "yarl", "multidict", "threading")
    for folder, allowed in PURE_FOLDERS.items():
        for module in _pure_modules(folder):
            path = MODULES[module]
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            for node in ast.walk(tree):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                for name in names:
                    assert name.split(".")[0] not in clock_or_io, f"{module} imports {name}"
            for target in _imports(module, path):
                assert layer(target) == 0 or any(_within(target, a) for a in allowed), \
                    f"{module} imports {target}: {folder} takes only the core and {allowed}"
