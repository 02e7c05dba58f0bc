"""Test helpers live where tests/README.md says: a bare-name helper (``from _chaos_support import x``)
beside every test that imports it, since pytest puts only the test file's own folder on ``sys.path``
(a helper found in another folder is found only when some earlier test happened to import it, so a
run of one folder, or another order, fails to collect); shared helpers in ``tests/support/``; none
loose at the root of ``tests/``."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _bare_imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def test_every_bare_helper_lies_beside_the_test_that_imports_it() -> None:
    far = sorted(f"{path.relative_to(TESTS)} imports {name}"
                 for path in TESTS.rglob("*.py") if "support" not in path.relative_to(TESTS).parts
                 for name in _bare_imports(path) if not (path.parent / f"{name}.py").is_file())
    assert far == []


def test_no_helper_lies_loose_at_the_root() -> None:
    loose = sorted(p.name for p in TESTS.glob("_*.py"))
    assert loose == []


def test_the_reader_sees_bare_imports() -> None:
    # Literal oracle: tests/chaos/ has its own helper, imported by its bare name.
    users = [p for p in (TESTS / "chaos").glob("test_*.py") if "_chaos_support" in _bare_imports(p)]
    assert users
