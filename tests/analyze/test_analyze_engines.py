"""Every engine gives the in-memory path's answers, to 1e-9, on the demo's run and a run with every
attribute kind: DuckDB over JSONL and Parquet, the SQLite store, the PostgreSQL store (a real server),
and Spark in local mode. The golden answers were written by the analyzer before it counted in engines.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from _analyze_golden import CASES, assert_same, golden, jsonl, records
from _unknown_support import EXPECTED as UNKNOWN_ROW
from _unknown_support import records as unknown_records
from sseguard.analyze.export import export_parquet
from sseguard.analyze.summary import analyze_sources
from sseguard.policy import Policy
from sseguard.record import encode_record
from sseguard.store import open_store


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
    """One local Spark (2 cores) for the module: starting one costs seconds.

    Spark needs a Java runtime: without one this is a skip on a developer's machine and a failure
    under ``CI=true`` (``.ci/run`` installs it), so the Spark proof cannot vanish from CI unnoticed.
    """
    from sseguard.analyze.engines import spark_session

    if shutil.which("java") is None:
        missing = "no java on PATH: Spark needs a Java runtime (apt-get install default-jre-headless)"
        if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
            pytest.fail(f"CI=true and {missing}")
        pytest.skip(missing)

    session = spark_session("local[2]")
    yield session
    session.stop()


# Spark runs each query as jobs on the JVM (seconds each on two cores): one policy per data set.
@pytest.mark.timeout(900)
def test_spark_local_mode_equals_the_in_memory_path_on_jsonl_and_parquet(spark: Any, tmp_path: Path) -> None:
    _check([str(jsonl("demo", tmp_path / "results.jsonl"))], "demo", "strict", engine="spark", spark=spark)
    source = jsonl("every_kind", tmp_path / "every.jsonl")
    export_parquet([str(source)], tmp_path / "pq")
    _check([str(tmp_path / "pq")], "every_kind", "strict-tol", engine="spark", spark=spark)


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
