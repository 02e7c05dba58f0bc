"""The PostgreSQL store against a real server started for this test session (never a mock)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import msgspec
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings

from sseguard.core.errors import ConfigError
from sseguard.core.record import Record
from sseguard.store import BatchWriter, RecordStore, open_store
from sseguard.store.postgres import PostgresStore
from support.postgres import require_bindir
from support.store import KEY, is_clean, record, record_strategy, records, secret_records


@pytest.fixture
def pg(pg_dsn: str) -> Iterator[PostgresStore]:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS sseguard_records, sseguard_meta")
    store = open_store(pg_dsn)
    assert isinstance(store, PostgresStore)
    yield store
    store.close()


def test_postgres_store_is_a_record_store_with_jsonb_and_indexes(pg: PostgresStore, pg_dsn: str) -> None:
    assert isinstance(pg, RecordStore)
    pg.write(records(3))
    with psycopg.connect(pg_dsn) as conn:
        kind = conn.execute("SELECT data_type FROM information_schema.columns "
                            "WHERE table_name = 'sseguard_records' AND column_name = 'record'").fetchone()
        assert kind == ("jsonb",)
        indexes = {r[0] for r in conn.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'sseguard_records'")}
        assert {f"sseguard_records_{c}" for c in ("run_id", "arm", "ending", "started_at",
                                                  "id_prefix")} <= indexes
        # The jsonb column answers ad-hoc SQL about the record's inside.
        endings = conn.execute("SELECT record->>'ending' FROM sseguard_records ORDER BY seq").fetchall()
        assert [e[0] for e in endings] == ["complete", "truncated", "no_done"]


def test_postgres_urls_of_both_schemes_open_the_same_table(pg: PostgresStore, pg_dsn: str) -> None:
    pg.write(records(2))
    other = open_store(pg_dsn.replace("postgresql://", "postgres://", 1))
    assert other.count() == 2
    other.close()


def test_records_round_trip_exactly(pg: PostgresStore) -> None:
    written = [r for r in [*records(5), *secret_records()] if is_clean(r)]
    pg.write(written)
    assert list(pg.read()) == written


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rec=record_strategy.filter(lambda r: is_clean(r) and _no_nul(r) and _plain_numbers(r)))
def test_any_record_round_trips(pg: PostgresStore, rec: Record) -> None:
    pg.write([rec])
    assert next(iter(pg.read(run_id=rec.run_id, since=rec.started_at)), None) is not None
    assert list(pg.read())[-1] == rec


def _no_nul(rec: Record) -> bool:
    """NUL is the one character jsonb cannot hold (it is replaced; see the NUL test)."""
    return b"\\u0000" not in msgspec.json.encode(rec)


def _plain_numbers(rec: Record) -> bool:
    """jsonb keeps numbers as decimals: a free-form float of 1e16 or more comes back as an integer."""
    def ok(value: object) -> bool:
        if isinstance(value, float):
            return abs(value) < 1e16
        if isinstance(value, dict):
            return all(map(ok, value.values()))
        if isinstance(value, list):
            return all(map(ok, value))
        return True

    return ok(rec.extra) and ok(rec.usage) and ok(rec.findings)


def test_nul_characters_that_jsonb_refuses_are_stored_as_replacement_characters(pg: PostgresStore) -> None:
    rec = record(tail="cut \x00 body \\u0000 literal", run_id="nul\x00run")
    pg.write([rec])
    (got,) = pg.read()
    assert got.tail == "cut \ufffd body \\u0000 literal"  # the escaped-backslash text is left alone
    assert got.run_id == "nul\ufffdrun"
    assert pg.count("nul\ufffdrun") == 1


def test_read_filters_and_pages(pg: PostgresStore) -> None:
    pg.write(records(2100, "r1") + records(4, "r2"))
    assert [r.index for r in pg.read(run_id="r2")] == [0, 1, 2, 3]
    assert [r.index for r in pg.read(run_id="r1", since=1_700_000_000.0 + 2097)] == [2097, 2098, 2099]
    assert [r.index for r in pg.read(run_id="r1")] == list(range(2100))
    assert pg.count() == 2104 and pg.count("r2") == 4


def test_a_failed_batch_writes_nothing(pg: PostgresStore, monkeypatch: pytest.MonkeyPatch) -> None:
    import sseguard.store.postgres as module

    real = module._jsonb_safe
    # The fourth row of the batch is JSON the server refuses: the rows before it must roll back too.
    monkeypatch.setattr(module, "_jsonb_safe", lambda text: "{broken" if "poison" in text else real(text))
    with pytest.raises(psycopg.Error):
        pg.write([*records(3), record(run_id="poison"), *records(2)])
    assert pg.count() == 0
    pg.write(records(2))
    assert pg.count() == 2


def test_a_fleet_of_stores_shares_one_table(pg: PostgresStore, pg_dsn: str) -> None:
    pg.close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS sseguard_records, sseguard_meta")
    stores: list[RecordStore] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def proxy(n: int) -> None:
        try:
            store = open_store(pg_dsn)  # all of them create the table at once
            with lock:
                stores.append(store)
            writer = BatchWriter(store, max_batch=50, max_delay=0.01)
            for i in range(300):
                writer.put(record(f"proxy{n}", i))
            writer.close()
            assert writer.dropped == 0
        except BaseException as exc:  # surfaced by the assert below
            errors.append(exc)

    threads = [threading.Thread(target=proxy, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    got = sorted((r.run_id, r.index) for r in stores[0].read())
    assert got == sorted((f"proxy{n}", i) for n in range(4) for i in range(300))
    for store in stores:
        store.close()


def test_secrets_never_reach_the_table(pg: PostgresStore, pg_dsn: str) -> None:
    pg.write(secret_records())
    with psycopg.connect(pg_dsn) as conn:
        dump = conn.execute("SELECT string_agg(record::text || run_id || arm, '') "
                            "FROM sseguard_records").fetchone()
    assert dump is not None and dump[0]
    assert KEY not in dump[0] and "Bearer sk-" not in dump[0]


def test_a_newer_schema_is_refused(pg: PostgresStore, pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("UPDATE sseguard_meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(ConfigError, match="schema version 99"):
        open_store(pg_dsn)


def test_missing_server_binaries_fail_under_ci_and_skip_elsewhere(tmp_path: Path) -> None:
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        require_bindir({"CI": "true"}, None)
    with pytest.raises(pytest.skip.Exception):
        require_bindir({}, None)
    assert require_bindir({"CI": "true"}, tmp_path) == tmp_path


def test_a_wrong_database_is_a_one_line_config_error(pg_dsn: str) -> None:
    with pytest.raises(ConfigError) as info:
        open_store(pg_dsn.rsplit("/", 1)[0] + "/no_such_database")
    assert "\n" not in str(info.value) and "no_such_database" in str(info.value)
