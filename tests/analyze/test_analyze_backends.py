"""Every analysis backend gives the in-memory path's answers, to 1e-9, on the demo's run and a run with every
attribute kind: DuckDB over JSONL and Parquet, the SQLite store, the PostgreSQL store (a real server),
and Spark in local mode. The golden answers were written by the analyzer before it counted in backends.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pytest

from _spark_support import local_spark
from sseguard.analyze.export import export_parquet
from sseguard.analyze.summary import analyze_sources
from sseguard.core.policy import Policy
from sseguard.core.record import encode_record
from sseguard.store import open_store
from support.analyze_golden import CASES, assert_same, golden, jsonl, records
from support.unknown import EXPECTED as UNKNOWN_ROW
from support.unknown import records as unknown_records


def _check(sources: list[str], name: str, only: str | None = None, **kw: Any) -> None:
    for data, tag, tolerate in CASES:
        if data != name or (only is not None and tag != only):
            continue
        got = analyze_sources(sources, Policy.from_spec("strict", tolerate), **kw)
        assert_same(golden(data, tag), got.to_dict())


@pytest.mark.parametrize("name", ["demo", "every_kind"])
def test_duckdb_over_jsonl_equals_the_in_memory_path(tmp_path: Path, name: str) -> None:
    _check([str(jsonl(name, tmp_path / "results.jsonl"))], name)


@pytest.mark.parametrize("name", ["demo", "every_kind"])
def test_duckdb_over_exported_parquet_equals_the_in_memory_path(tmp_path: Path, name: str) -> None:
    source = jsonl(name, tmp_path / "results.jsonl")
    assert export_parquet([str(source)], tmp_path / "pq") == len(records(name))
    assert any((tmp_path / "pq").glob("day=*/*.parquet"))
    _check([str(tmp_path / "pq")], name)


def test_a_run_split_over_several_files_and_kinds_is_one_run(tmp_path: Path) -> None:
    recs = records("every_kind")
    half = len(recs) // 2
    store = open_store(str(tmp_path / "a.db"))
    store.write(recs[:half])
    store.close()
    whole = jsonl("every_kind", tmp_path / "all.jsonl").read_bytes().splitlines(keepends=True)
    (tmp_path / "b.jsonl").write_bytes(b"".join(whole[half:]))
    _check([str(tmp_path / "a.db"), str(tmp_path / "b.jsonl")], "every_kind")


@pytest.mark.parametrize("name", ["demo", "every_kind"])
def test_the_sqlite_store_counts_in_sqlite_and_equals_the_in_memory_path(tmp_path: Path, name: str) -> None:
    store = open_store(str(tmp_path / "s.db"))
    store.write(records(name))
    store.close()
    _check([str(tmp_path / "s.db")], name)
    _check([f"sqlite:///{tmp_path / 's.db'}"], name)


@pytest.fixture
def pg_store(pg_dsn: str) -> Iterator[str]:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS sseguard_records, sseguard_meta")
    yield pg_dsn


@pytest.mark.parametrize("name", ["demo", "every_kind"])
def test_the_postgresql_store_counts_in_the_server_and_equals_the_in_memory_path(
        pg_store: str, name: str) -> None:
    store = open_store(pg_store)
    store.write(records(name))
    store.close()
    _check([pg_store], name)


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """One local Spark (2 cores) for the module (``_spark_support``)."""
    session = local_spark()
    yield session
    session.stop()


# Spark runs each query as jobs on the JVM (seconds each on two cores): one policy per data set.
@pytest.mark.timeout(900)
def test_spark_local_mode_equals_the_in_memory_path_on_jsonl_and_parquet(spark: Any, tmp_path: Path) -> None:
    _check([str(jsonl("demo", tmp_path / "results.jsonl"))], "demo", "strict", engine="spark", spark=spark)
    source = jsonl("every_kind", tmp_path / "every.jsonl")
    export_parquet([str(source)], tmp_path / "pq")
    _check([str(tmp_path / "pq")], "every_kind", "strict-tol", engine="spark", spark=spark)


#: An export of the schema before issue 39: the heal fields last, no prompt_tokens, cached_tokens,
#: cache_write_tokens, fingerprint, consistency, diverged_at, diverged_token.
OLD_EXPORT = """
COPY (
  SELECT * REPLACE (CAST(heal_of AS BIGINT) AS heal_of, CAST(healed AS VARCHAR) AS healed) FROM (VALUES
    (1, 'probe', 'chat', 'old', 'a', 0, 'small', 1000.0, 'complete', '[]', true, 'chatcmpl-0',
     'chatcmpl', MAP {'server': 'x'}, 8, 0, 900, 1, NULL, NULL, 0, 0),
    (1, 'probe', 'chat', 'old', 'a', 1, 'small', 1001.0, 'truncated', '[]', false, 'gw-1', 'gw',
     MAP {'server': 'x'}, 8, 1, 900, 1, NULL, NULL, 0, 0),
    (1, 'probe', 'chat', 'old', 'a', 2, 'small', 1002.0, 'complete', '[{"kind": "markup_leak"}]', false,
     'chatcmpl-2', 'chatcmpl', MAP {'server': 'x'}, 8, 2, 900, 1, NULL, NULL, 0, 0),
    (1, 'proxy', 'messages', 'old', 'b', 3, 'small', 1003.0, 'complete', '[]', true, 'msg_3', 'msg',
     MAP {'server': 'y'}, 1, 0, 900, 1, NULL, NULL, 0, 0),
    (1, 'proxy', 'messages', 'old', 'b', 4, 'small', 1004.0, 'complete', '[]', true, 'msg_4', 'msg',
     MAP {'server': 'y'}, 1, 1, 900, 3, NULL, NULL, 0, 0)
  ) AS t(schema, source, api, run_id, arm, "index", workload, started_at, ending, findings, passed,
         response_id, id_prefix, headers, concurrency, reuse_index, prompt_bytes, weight, heal_of,
         healed, heal_attempts, heal_tokens)
) TO '{path}' (FORMAT parquet)
"""


@pytest.mark.timeout(900)
def test_spark_reads_an_export_from_before_the_cache_columns_as_duckdb_does(spark: Any,
                                                                            tmp_path: Path) -> None:
    path = tmp_path / "old.parquet"
    duckdb.execute(OLD_EXPORT.replace("{path}", str(path)))
    assert "cached_tokens" not in {c[0] for c in duckdb.execute(
        f"DESCRIBE SELECT * FROM read_parquet('{path}')").fetchall()}
    by_spark = analyze_sources([str(path)], engine="spark", spark=spark)
    by_duckdb = analyze_sources([str(path)])
    for analysis in (by_spark, by_duckdb):
        # Two of seven streams (weights 1, 1, 1, 1, 3) failed: the gw- truncation and the leak.
        assert (analysis.total.failed, analysis.total.total) == (2, 7)
        assert analysis.failures == {"truncated": 1, "markup_leak": 1}
        assert analysis.attribute("cache") is None  # no cache facts: NULL, not "none"
        assert analysis.consistency is None
    assert by_spark.to_dict() == by_duckdb.to_dict()


@pytest.mark.timeout(900)
def test_spark_counts_unknown_kinds_in_jsonl_and_parquet_and_reads_parquet_without_them(
        spark: Any, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    source = tmp_path / "u.jsonl"
    source.write_bytes(b"".join(encode_record(r) for r in unknown_records()))
    got = analyze_sources([str(source)], engine="spark", spark=spark).to_dict()
    assert got["unknown_kinds"] == UNKNOWN_ROW and got["failed"] == 1
    export_parquet([str(source)], tmp_path / "pq")
    assert analyze_sources([str(tmp_path / "pq")], engine="spark",
                           spark=spark).to_dict()["unknown_kinds"] == UNKNOWN_ROW
    for file in (tmp_path / "pq").rglob("*.parquet"):  # as exported before the column existed
        pq.write_table(pq.read_table(file).drop_columns(["unknown_kinds"]), file)
    old = analyze_sources([str(tmp_path / "pq")], engine="spark", spark=spark)
    assert old.requests == 10 and old.unknown_kinds == []
