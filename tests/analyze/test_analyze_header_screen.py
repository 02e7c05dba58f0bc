"""The header statistics skip the exact distinct count of per-request ids (a lower bound suffices:
they are dropped either way) and count every other header exactly, on DuckDB (JSONL) and SQLite."""

from __future__ import annotations

import msgspec
import pytest

from sseguard.analyze.backends import open_backend
from sseguard.analyze.counts import MAX_CATEGORIES, Reader
from sseguard.analyze.facts import SCREEN_ABOVE, Filter, header_query
from sseguard.analyze.sources import resolve
from sseguard.store import open_store
from support.store import record

N = 3000


def _records() -> list[object]:
    # x-request-id: one value per record; route: 50 values (kept); shard: 51 (too many, dropped);
    # server: 3 values, on every other record only.
    out = []
    for i in range(N):
        headers = {"x-request-id": f"req-{i}", "route": f"r{i % 50}", "shard": f"s{i % 51}"}
        if i % 2:
            headers["server"] = ("a", "b", "c")[i % 3]
        out.append(record("run-h", i, headers=headers, started_at=1_700_000_000.0 + i))
    return out


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("screen")
    jsonl = root / "r.jsonl"
    jsonl.write_bytes(b"".join(msgspec.json.encode(r) + b"\n" for r in _records()))
    db = root / "r.db"
    store = open_store(str(db))
    store.write(_records())  # type: ignore[arg-type]
    store.close()
    return {"jsonl": str(jsonl), "sqlite": str(db)}


def test_the_screen_is_far_above_what_a_kept_header_may_have() -> None:
    assert SCREEN_ABOVE >= 10 * MAX_CATEGORIES


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_per_request_ids_get_a_lower_bound_and_the_rest_exact_counts(kind: str,
                                                                     sources: dict[str, str]) -> None:
    eng = open_backend(resolve([sources[kind]])[0])
    try:
        facts = eng.materialize(eng.source.facts(eng.dialect.name))
        values: dict[str, set[str]] = {}
        bounds: dict[str, int] = {}
        present: dict[str, int] = {}
        for name, value, bound, n in eng.rows(header_query(facts, Filter(), eng.dialect)):
            present[name] = present.get(name, 0) + n
            if bound is not None:
                assert value is None and name not in bounds
                bounds[name] = bound
            else:
                values.setdefault(name, set()).add(value)
        got = {name: (bounds.get(name) or len(values[name]), n) for name, n in present.items()}
    finally:
        eng.close()
    request_ids, present = got.pop("x-request-id")
    assert present == 3000
    assert 1000 < request_ids <= 3000
    assert got == {"route": (50, 3000), "shard": (51, 3000), "server": (3, 1500)}


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_the_headers_kept_are_the_ones_an_exact_count_keeps(kind: str, sources: dict[str, str]) -> None:
    with Reader(resolve([sources[kind]])) as reader:
        assert reader.cells(Filter()).header_names == ["route", "server"]
