"""Every design reference resolves with only the repository: a newcomer who clones sseguard can follow
each citation in code and docs to something that exists.

The files scanned are the repository's own (``src/``, ``tests/``, ``bench/``, ``interop/``, ``docs/``,
``README.md``, ``pyproject.toml``), found by walking the tree, so a module added tomorrow is scanned
too. What fails:

- a cited repository path (``docs/…``, ``tests/…``, ``bench/…``, ``interop/…``, ``src/sseguard/…``,
  ``examples/…``) or markdown link that does not exist, or a ``#anchor`` the target document does not have;
- a bare document name (``benchmarks.md``) found nowhere in the repository, and a bare test file name
  (``test_sse.py``) found nowhere under ``tests/``; a ``path.py::test_name`` whose test is not there;
- a markup decision (``decision 2.5``) without its anchor in ``docs/design/markup.md``, a bare
  ``decision N`` that does not say which part it belongs to, and a file citing decisions without
  naming ``docs/design/markup.md``;
- ``guarantee N`` and ``principle N`` without their anchors in ``docs/design/guarantees.md`` and
  ``docs/design/architecture.md``;
- in ``docs/design/`` (which names modules the short way, ``proxy/machines/stream.py``), a backticked
  module or folder that no file of ``src/``, ``tests/`` or ``bench/`` ends with — so a design page goes
  stale loudly when code moves (``engine-facts.md`` is left out: its paths are the engines' own);
- the names of the research notes the design was first written in (outside this repository), cited as
  if they were here. Only the old-numbering table of ``docs/design/`` may name them, on a line that
  says "formerly".

Template paths (``contract/<protocol>/``, ``examples/bodies/{api}_{name}.sse``, globs) are skipped: they
name a pattern, not a file.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DESIGN = ROOT / "docs" / "design"
MARKUP_DOC = "docs/design/markup.md"
SCANNED_DIRS = ("src", "tests", "bench", "interop", "docs")
SCANNED_FILES = ("README.md", "pyproject.toml")
SUFFIXES = {".py", ".md", ".toml", ".mjs", ".txt", ".cfg", ".ini", ".json", ".sse", ".html", ".yaml", ".yml"}
#: Extensions a cited repository path is checked for (others, like ``module.function``, are names).
FILE_SUFFIXES = (".py", ".md", ".toml", ".json", ".jsonl", ".sse", ".mjs", ".txt")

#: The research notes, spelt in parts so that this file does not cite them itself.
_NOTES = "|".join(["DE" + "SIGN", "MAR" + "KUP[0-9*]?", "PROTO" + "COLS", "HT" + "TP", "ENG" + "INES",
                   "OPERA" + "TORS", "ST" + "YLE"])
NOTE_FILE = re.compile(rf"(?<![\w/.-])(?:{_NOTES})\.md\b")
NOTE_WORD = re.compile(rf"\b(?:{_NOTES})\s+(?:decisions?|§|class(?:es)?|guarantees?)\b")
REPO_PATH = re.compile(
    r"(?<![\w./-])((?:docs|tests|bench|interop|examples|src/sseguard)/[^\s`'\"()\[\],;:|]*)")
MD_LINK = re.compile(r"\]\(([^)\s]+)\)")
BARE_MD = re.compile(r"(?<![\w./-])([\w-]+\.md)\b")
BARE_TEST = re.compile(r"(?<![\w./-])(test_\w+\.py)\b")
TEST_NODE = re.compile(r"((?:tests/)[\w/]+\.py)::(\w+)")
#: ``decision 2.5``, ``decisions 1.7 and 1.9``, ``decisions 1.1–1.2``: the list after the word.
_LIST = r"(?:,\s*|\s+and\s+|\s*[–-]\s*)"
DECISIONS = re.compile(rf"\b[Dd]ecisions?\s+((?:\d+(?:\.\d+)?)(?:{_LIST}\d+(?:\.\d+)?)*)")
NUMBERED = re.compile(rf"\b(guarantee|principle)s?\s+((?:\d+)(?:{_LIST}\d+)*)")
NUMBER = re.compile(r"\d+(?:\.\d+)?")
ANCHOR_ID = re.compile(r"""<a\s+id=["']([^"']+)["']""")
HEADING = re.compile(r"^#{1,6}\s+(.*)$", re.M)
#: A module or folder named in backticks: ``proxy/machines/stream.py``, ``_engine.py``, ``contract/chat/``.
CODE_PATH = re.compile(r"`([\w./-]+(?:\.py|/))`")
#: Design pages whose paths are another project's (the serving engines' source).
FOREIGN_PATHS = frozenset({"engine-facts.md"})
#: What each research note became, for the failure message.
NOTE_HINTS = {"DE" + "SIGN": "docs/design/architecture.md or guarantees.md",
              "PROTO" + "COLS": "docs/design/vocabulary.md", "HT" + "TP": "docs/design/http.md",
              "ENG" + "INES": "docs/design/engine-facts.md", "ST" + "YLE": "docs/design/architecture.md",
              "MAR" + "KUP": "docs/design/markup.md (decision 1.N, 2.N or 3.N; §3.N; class X)"}


def _scanned() -> Iterator[Path]:
    for name in SCANNED_FILES:
        if (ROOT / name).is_file():
            yield ROOT / name
    for top in SCANNED_DIRS:
        for path in sorted((ROOT / top).rglob("*")):
            if (path.is_file() and path.suffix in SUFFIXES and "__pycache__" not in path.parts
                    and not any(p.startswith(".") for p in path.relative_to(ROOT).parts)):
                yield path


FILES = [p for p in _scanned() if p != Path(__file__).resolve()]


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8", errors="replace").splitlines()


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    text = path.read_text(encoding="utf-8")
    return frozenset(ANCHOR_ID.findall(text)) | {_slug(h) for h in HEADING.findall(text)}


@cache
def _test_basenames() -> frozenset[str]:
    return frozenset(p.name for p in (ROOT / "tests").rglob("test_*.py"))


@cache
def _code_paths() -> frozenset[str]:
    """Every file and folder of src/, tests/ and bench/ as a posix path (folders end with ``/``)."""
    found: set[str] = {"src/", "tests/", "bench/"}
    for top in ("src", "tests", "bench"):
        for path in (ROOT / top).rglob("*"):
            if "__pycache__" not in path.parts:
                found.add(path.relative_to(ROOT).as_posix() + ("/" if path.is_dir() else ""))
    return frozenset(found)


def _code_path_exists(cited: str) -> bool:
    return any(p == cited or p.endswith("/" + cited) for p in _code_paths())


@cache
def _md_basenames() -> frozenset[str]:
    return frozenset(p.name for p in ROOT.rglob("*.md")
                     if not any(part.startswith(".") for part in p.relative_to(ROOT).parts))


def _is_template(path: str) -> bool:
    return any(c in path for c in "<>{}*$")


def _check_target(target: str, base: Path, where: str, problems: list[str]) -> None:
    """``target`` (a path, maybe with ``#anchor``) relative to ``base``: it and its anchor exist."""
    path, _, anchor = target.partition("#")
    if _is_template(path) or "://" in target or target.startswith("mailto:"):
        return
    resolved = (base / path).resolve() if path else None
    if resolved is not None and not resolved.exists():
        problems.append(f"{where}: {target} does not exist")
        return
    doc = resolved if resolved is not None else None
    if anchor and doc is not None and doc.suffix == ".md" and anchor not in anchors(doc):
        problems.append(f"{where}: {target}: no anchor #{anchor} there")


def _numbers(listed: str) -> list[str]:
    """The numbers of ``1.7 and 1.9`` or ``1.1–1.2`` (a range names its two ends)."""
    return NUMBER.findall(listed)


def citation_problems(path: Path, *, design: bool | None = None) -> list[str]:
    """Every citation in ``path`` that does not resolve, one line each (``file:line: why``).
    ``design``: read it as a page of ``docs/design/`` (default: whether it is one)."""
    rel = _rel(path)
    in_design = path.parent == DESIGN if design is None else design
    problems: list[str] = []
    text_lines = _lines(path)
    names_markup_doc = any(MARKUP_DOC in line for line in text_lines) or path == DESIGN / "markup.md" \
        or (in_design and "markup.md" in "\n".join(text_lines))
    decision_lines: list[int] = []
    for number, line in enumerate(text_lines, 1):
        where = f"{rel}:{number}"
        if not (in_design and "formerly" in line.lower()):
            for found in (*NOTE_FILE.findall(line), *NOTE_WORD.findall(line)):
                hint = next((h for k, h in NOTE_HINTS.items() if found.startswith(k)), "docs/design/")
                problems.append(f"{where}: {found!r} names a research note, not a repository document "
                                f"(cite {hint})")
        if in_design and path.name not in FOREIGN_PATHS:
            for cited in CODE_PATH.findall(line):
                if not _is_template(cited) and not _code_path_exists(cited):
                    problems.append(f"{where}: `{cited}` is no module or folder of src/, tests/ or bench/")
        for cited in REPO_PATH.findall(line):
            cited = cited.rstrip(".").split("#")[0]
            if _is_template(cited) or not cited.endswith((*FILE_SUFFIXES, "/")):
                continue
            if not (ROOT / cited).exists():
                problems.append(f"{where}: {cited} does not exist")
        for cited, anchor in re.findall(r"(docs/[\w/.-]+\.md)#([\w-]+)", line):
            if (ROOT / cited).exists() and anchor not in anchors(ROOT / cited):
                problems.append(f"{where}: {cited}#{anchor}: no such anchor")
        if path.suffix == ".md":
            for target in MD_LINK.findall(line):
                _check_target(target, path.parent, where, problems)
        for name in BARE_MD.findall(line):
            if name not in _md_basenames() and not NOTE_FILE.fullmatch(name):
                problems.append(f"{where}: {name} is no document of this repository")
        for name in BARE_TEST.findall(line):
            if name not in _test_basenames():
                problems.append(f"{where}: {name} is no test file of this repository")
        for cited, test in TEST_NODE.findall(line):
            file = ROOT / cited
            if file.exists() and not re.search(rf"^(?:async )?def {test}\b", file.read_text(encoding="utf-8"),
                                               re.M):
                problems.append(f"{where}: {cited} has no test {test}")
        for listed in DECISIONS.findall(line):
            decision_lines.append(number)
            for num in _numbers(listed):
                part, dot, n = num.partition(".")
                if not dot:
                    problems.append(f"{where}: 'decision {num}' does not say its part (decision 1.{num}, "
                                    f"2.{num} or 3.{num} of {MARKUP_DOC})")
                elif f"m{part}-{n}" not in anchors(ROOT / MARKUP_DOC):
                    problems.append(f"{where}: decision {num} is not in {MARKUP_DOC}")
        for kind, listed in NUMBERED.findall(line):
            doc, prefix = (("guarantees.md", "g") if kind == "guarantee" else ("architecture.md", "p"))
            for num in _numbers(listed):
                if f"{prefix}{num}" not in anchors(DESIGN / doc):
                    problems.append(f"{where}: {kind} {num} is not in docs/design/{doc}")
    if decision_lines and not names_markup_doc:
        problems.append(f"{rel}:{decision_lines[0]}: cites markup decisions but never names {MARKUP_DOC}")
    return problems


def test_the_scan_finds_the_repository() -> None:
    # Literal oracles: files that exist in every checkout, so a broken walk cannot pass vacuously.
    found = {_rel(p) for p in FILES}
    assert {"README.md", "pyproject.toml", "src/sseguard/core/sse.py", "docs/design/markup.md",
            "tests/test_layers.py"} <= found


@pytest.mark.parametrize("path", FILES, ids=_rel)
def test_every_citation_resolves(path: Path) -> None:
    assert citation_problems(path) == []


def test_the_checker_catches_what_it_is_for(tmp_path: Path) -> None:
    # A file with one bad citation of each kind.
    bad = tmp_path / "probe.py"
    note = "MAR" + "KUP2.md"
    bad.write_text(
        f'"""Cites {note} decision 5, decision 7, decision 9.9, docs/nowhere.md, '
        "tests/proxy/test_gone.py, test_never_written.py, guarantee 99, principle 42, "
        "tests/test_sse.py::test_no_such_test and docs/design/guarantees.md#g99."
        f' See {MARKUP_DOC}."""\n', encoding="utf-8")
    problems = "\n".join(citation_problems(bad))
    for expected in (f"'{note}' names a research note", "'decision 7' does not say its part",
                     "decision 9.9 is not in", "docs/nowhere.md does not exist",
                     "tests/proxy/test_gone.py does not exist",
                     "test_never_written.py is no test file", "guarantee 99 is not in",
                     "principle 42 is not in", "has no test test_no_such_test",
                     "docs/design/guarantees.md#g99: no such anchor"):
        assert expected in problems


def test_a_decision_cited_without_its_document_is_caught(tmp_path: Path) -> None:
    bad = tmp_path / "probe.py"
    bad.write_text('"""The block is void (decision 1.4)."""\n', encoding="utf-8")
    assert citation_problems(bad) == [f"probe.py:1: cites markup decisions but never names {MARKUP_DOC}"]


def test_a_design_page_naming_a_module_that_moved_is_caught(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("The machine is `proxy/machines/stream.py`; the driver was `proxy/driver_gone.py`.\n",
                    encoding="utf-8")
    assert citation_problems(page, design=True) == [
        "page.md:1: `proxy/driver_gone.py` is no module or folder of src/, tests/ or bench/"]


def test_every_markup_decision_has_its_anchor() -> None:
    # The old numbering, written out: part 1 had 11 decisions, part 2 twelve, part 3 eleven.
    expected = {f"m1-{n}" for n in range(1, 12)} | {f"m2-{n}" for n in range(1, 13)} | {
        f"m3-{n}" for n in range(1, 12)}
    assert expected <= anchors(ROOT / MARKUP_DOC)
    assert {f"g{n}" for n in range(1, 8)} <= anchors(DESIGN / "guarantees.md")
