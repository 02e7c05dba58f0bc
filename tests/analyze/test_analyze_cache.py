"""The cache attribute: the SQL label every engine computes is the record's own (``Record.cache``)."""

from __future__ import annotations

from pathlib import Path

import duckdb

from sseguard.analyze.facts import CACHE_LABEL
from sseguard.analyze.summary import analyze_sources
from sseguard.core.record import Record, encode_record

CASES = [((None, 100), None), ((0, 100), "none"), ((49, 100), "partial"), ((50, 100), "most"),
         ((7, None), "most")]


def test_the_sql_label_is_the_records_own_on_duckdb_and_sqlite() -> None:
    import sqlite3

    for (cached, prompt), label in CASES:
        assert Record(cached_tokens=cached, prompt_tokens=prompt).cache == label
        sql = (f"SELECT {CACHE_LABEL} FROM (SELECT CAST(? AS BIGINT) AS cached_tokens, "
               "CAST(? AS BIGINT) AS prompt_tokens) AS f")
        assert duckdb.execute(sql, [cached, prompt]).fetchone() == (label,)
        assert sqlite3.connect(":memory:").execute(sql.replace("BIGINT", "INTEGER"),
                                                   (cached, prompt)).fetchone() == (label,)


def test_failures_only_on_cached_prompts_are_named_by_the_cache_attribute(tmp_path: Path) -> None:
    records = []
    for i in range(400):
        cached = i % 2 == 0
        bad = cached and i % 8 == 0
        records.append(Record(run_id="r", index=i, started_at=1000.0 + i, ending="complete",
                              passed=not bad, findings=[{"kind": "markup_leak"}] if bad else [],
                              prompt_tokens=200, cached_tokens=180 if cached else 0,
                              response_id=f"chatcmpl-{i}"))
    path = tmp_path / "r.jsonl"
    path.write_bytes(b"".join(encode_record(r) for r in records))
    analysis = analyze_sources([str(path)])
    cache = analysis.attribute("cache")
    assert cache is not None and cache.significant and cache.best is not None
    assert list(cache.best.values) == ["most"]
    assert analysis.top is not None and analysis.top.key == "cache"
