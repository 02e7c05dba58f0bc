"""A SQLite store is counted in two parts of its ``seq`` range at once; the parts add up exactly."""

from __future__ import annotations

from pathlib import Path

from sseguard.analyze.backends import SQLiteBackend, open_backends
from sseguard.analyze.counts import Reader
from sseguard.analyze.facts import Filter
from sseguard.analyze.sources import resolve
from sseguard.store import open_store
from support.store import record


def _store(path: Path, n: int = 200) -> str:
    store = open_store(str(path))
    # 40 routes, each in both halves: 40 distinct values in each part and 40 in all (kept: at most
    # 50). Summing the parts' distinct counts would say 80 and drop the header.
    store.write([record("run-p", i, headers={"route": f"r{i % 40}", "x-request-id": f"q{i}"},
                        findings=[]) for i in range(n)])
    store.close()
    return str(path)


def test_a_store_opens_as_two_parts_that_cover_every_row_once(tmp_path: Path) -> None:
    engines = open_backends(resolve([_store(tmp_path / "s.db")])[0])
    try:
        assert [type(e) for e in engines] == [SQLiteBackend, SQLiteBackend]
        assert [getattr(e, "seqs", None) for e in engines] == [(0, 100), (100, 200)]
    finally:
        for e in engines:
            e.close()


def test_the_parts_add_up_and_headers_are_judged_on_all_their_values(tmp_path: Path) -> None:
    with Reader(resolve([_store(tmp_path / "s.db")])) as reader:
        cs = reader.cells(Filter())
        assert cs.header_names == ["route"]
        assert cs.records == 200
        assert sum(c.weight for c in cs.cells) == 200
        endings: dict[str, int] = {}
        for c in cs.cells:
            endings[c.ending] = endings.get(c.ending, 0) + c.weight
        assert endings == {"complete": 67, "truncated": 67, "no_done": 66}
        found = reader.evidence(Filter(), [("truncated", "")], 500)
        assert sorted(r.index for r in found) == list(range(1, 200, 3))


def test_an_empty_store_has_nothing_to_analyze(tmp_path: Path) -> None:
    open_store(str(tmp_path / "e.db")).close()
    engines = open_backends(resolve([str(tmp_path / "e.db")])[0])
    try:
        assert [getattr(e, "seqs", None) for e in engines] == [(0, 0), (0, 0)]
    finally:
        for e in engines:
            e.close()
