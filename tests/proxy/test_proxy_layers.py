"""The proxy's rooms hold: no import circle among its modules (``TYPE_CHECKING`` imports included),
the relay knows no app state, and the markup repair is pure (it imports without aiohttp)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import sseguard.proxy

PROXY = Path(sseguard.proxy.__file__).parent


def _module(path: Path) -> str:
    parts = path.relative_to(PROXY.parent.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph() -> dict[str, set[str]]:
    """Module → the ``sseguard.proxy`` modules it imports, wherever the import statement stands."""
    modules = {_module(p): p for p in PROXY.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            edges.update(t for t in targets if t in modules and t != name)
        graph[name] = edges
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return [*path[path.index(node):], node]
        if node in done:
            return None
        for nxt in sorted(graph[node]):
            found = visit(nxt, [*path, node])
            if found:
                return found
        done.add(node)
        return None

    for start in sorted(graph):
        found = visit(start, [])
        if found:
            return found
    return None


def test_no_import_circle_among_the_proxy_modules_type_checking_included() -> None:
    graph = _graph()
    # The package itself names its public API for type checkers only; it is the top, nothing below
    # may import it back.
    assert not any("sseguard.proxy" in edges for edges in graph.values())
    assert _cycle(graph) is None


def test_the_relay_and_the_repair_meet_only_at_the_frames_seam() -> None:
    graph = _graph()
    repair = {m for m in graph if m.startswith("sseguard.proxy.repair")}
    assert graph["sseguard.proxy.machines.frames"] == set()
    assert not graph["sseguard.proxy.driver.stream"] & (repair | {"sseguard.proxy.driver.app",
                                                          "sseguard.proxy.driver.state"})
    for module in repair:
        assert graph[module] <= repair | {"sseguard.proxy.machines.frames"}, module


CALL_IN_CONTENT = (b'data: {"choices":[{"index":0,"delta":{"content":"<tool_call>{\\"name\\": '
                   b'\\"f\\", \\"arguments\\": {}}</tool_call>"},"finish_reason":"stop"}]}\n\n')


def test_the_repair_imports_and_repairs_without_aiohttp() -> None:
    code = (
        "import sys\n"
        "sys.modules['aiohttp'] = None\n"  # any import of aiohttp now fails
        "from sseguard.proxy.repair import frames_for\n"
        "from sseguard.core.sse import SSEDecoder\n"
        "from sseguard.core.verdict import Api\n"
        "frames = frames_for('hermes', {}, Api.CHAT)\n"
        f"body = {CALL_IN_CONTENT!r}\n"
        "out = b''.join(frames.transform(e) for e in SSEDecoder().feed(body))\n"
        "print(frames.facts()['repaired_tool_calls'], b'tool_calls' in out)\n"
        "print(sorted(m for m, v in sys.modules.items()\n"
        "             if v is not None and m.startswith(('aiohttp', 'yarl', 'multidict'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["1 True", "[]"]


def _private_reaches(source: str, where: str) -> list[str]:
    """``obj._name`` where ``obj`` is not ``self``/``cls``: one object reaching into another's
    private state (``watch._handle``, ``machine._delivered``)."""
    found = []
    for node in ast.walk(ast.parse(source, where)):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and \
                not node.attr.startswith("__") and \
                not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_proxy_module_reaches_into_another_objects_private_state() -> None:
    # The drivers tell the machines what happened through their events and read the stall timer's
    # public state; a private attribute is its own object's.
    assert _private_reaches("if watch._handle is None:\n    machine._delivered = True\n", "x.py") == [
        "x.py:1: watch._handle", "x.py:2: machine._delivered"]
    found = [hit for path in sorted(PROXY.rglob("*.py"))
             for hit in _private_reaches(path.read_text(), str(path.relative_to(PROXY)))]
    assert found == []
