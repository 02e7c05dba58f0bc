"""The SQLite store and the BatchWriter: WAL, exact round trips, concurrent writers, nothing lost."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from sseguard.core.errors import ConfigError, UsageError
from sseguard.core.record import Record
from sseguard.store import BatchWriter, RecordStore, SQLiteStore, is_store_url, open_store
from support.store import KEY, is_clean, record, record_strategy, records, secret_records


@pytest.fixture
def db(tmp_path: Path) -> Iterator[SQLiteStore]:
    store = open_store(str(tmp_path / "s.db"))
    assert isinstance(store, SQLiteStore)
    yield store
    store.close()


def test_sqlite_store_is_a_record_store_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = open_store(str(path))
    assert isinstance(store, RecordStore)
    store.write(records(3))
    other = sqlite3.connect(path)
    assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert (tmp_path / "s.db-wal").exists()
    assert other.execute("SELECT count(*) FROM sseguard_records").fetchone()[0] == 3
    indexes = {row[0] for row in other.execute(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'sseguard_records'")}
    columns = ("run_id", "arm", "ending", "started_at", "id_prefix")
    assert {f"sseguard_records_{c}" for c in columns} <= indexes
    other.close()
    store.close()


@pytest.mark.parametrize("form", ["plain", "url"])
def test_sqlite_url_and_path_open_the_same_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                form: str) -> None:
    monkeypatch.chdir(tmp_path)
    store = open_store("x.db" if form == "plain" else "sqlite:///x.db")
    store.write(records(2))
    store.close()
    again = open_store(f"sqlite:///{tmp_path}/x.db")  # sqlite:////abs/path
    assert again.count() == 2
    again.close()


def test_records_round_trip_exactly(db: SQLiteStore) -> None:
    written = [*records(5), *secret_records(), record(tail="bin\x00ary \U0001f600", extra={"n": None})]
    written = [r for r in written if is_clean(r)]
    db.write(written)
    assert list(db.read()) == written


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=record_strategy.filter(is_clean).map(lambda r: [r]))
def test_any_record_round_trips(db: SQLiteStore, batch: list[Record]) -> None:
    before = db.count()
    db.write(batch)
    assert db.count() == before + 1
    assert list(db.read())[-1] == batch[0]


def test_read_filters_by_run_and_start_time(db: SQLiteStore) -> None:
    db.write(records(10, "r1") + records(4, "r2"))
    assert [r.index for r in db.read(run_id="r2")] == [0, 1, 2, 3]
    assert [r.index for r in db.read(run_id="r1", since=1_700_000_007.0)] == [7, 8, 9]
    assert db.count() == 14 and db.count("r1") == 10 and db.count("nope") == 0


def test_read_pages_through_more_rows_than_one_page(db: SQLiteStore) -> None:
    db.write(records(2500))
    assert [r.index for r in db.read()] == list(range(2500))


def test_a_failed_batch_writes_nothing(db: SQLiteStore) -> None:
    class Boom(Record, kw_only=True):
        @property
        def run_id(self) -> str:  # type: ignore[override]  # a record that fails half-way through a batch
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        db.write([*records(3), Boom()])
    assert db.count() == 0
    db.write(records(2))
    assert db.count() == 2


def test_concurrent_writers_on_one_file_lose_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "c.db")
    stores = [open_store(path) for _ in range(3)]  # three connections, as three processes would
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            store = stores[n % 3]
            for b in range(25):
                store.write([record(f"w{n}", b * 10 + i) for i in range(10)])
        except BaseException as exc:  # surfaced by the assert below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    got = [(r.run_id, r.index) for r in stores[0].read()]
    assert sorted(got) == sorted((f"w{n}", i) for n in range(6) for i in range(250))
    for store in stores:
        store.close()


def test_secrets_never_reach_the_database_file(tmp_path: Path) -> None:
    path = tmp_path / "secret.db"
    store = open_store(str(path))
    store.write(secret_records())
    stored = list(store.read())
    assert stored[0].headers["x-request-id"] == "r1"  # the facts stay, only the secrets go
    store.close()
    files = list(tmp_path.iterdir())
    assert files
    for file in files:
        data = file.read_bytes()
        assert KEY.encode() not in data, file.name
        assert b"Bearer sk-" not in data, file.name
    for rec in stored:
        assert KEY not in repr(rec)


def test_closed_store_refuses_use(db: SQLiteStore) -> None:
    db.close()
    with pytest.raises(UsageError):
        db.write(records(1))
    db.close()  # twice is fine


@pytest.mark.parametrize("target", [
    "", "   ", "mysql://u:hunter22@h/db", "sqlite://", "sqlite:///", "sqlite://relative.db",
])
def test_bad_store_urls_are_one_line_config_errors(target: str) -> None:
    with pytest.raises(ConfigError) as info:
        open_store(target)
    message = str(info.value)
    assert "\n" not in message and "hunter22" not in message


def test_unusable_paths_are_config_errors(tmp_path: Path) -> None:
    not_db = tmp_path / "notes.txt"
    not_db.write_text("this is not a database, it is a shopping list\n" * 100)
    for target in (str(tmp_path), str(tmp_path / "missing" / "x.db"), str(not_db)):
        with pytest.raises(ConfigError) as info:
            open_store(target)
        assert "\n" not in str(info.value)


def test_unreachable_postgres_is_a_config_error_without_the_password() -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConfigError) as info:
        open_store(f"postgresql://sseguard:hunter22secret@127.0.0.1:{port}/db?connect_timeout=2")
    message = str(info.value)
    assert "hunter22secret" not in message and "\n" not in message and "***" in message


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    open_store(str(path)).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE sseguard_meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(ConfigError, match="schema version 99"):
        open_store(str(path))


def test_is_store_url() -> None:
    assert is_store_url("sqlite:///x.db") and is_store_url("postgres://h/db")
    assert not is_store_url("results.jsonl") and not is_store_url("x.db")


# ── BatchWriter ────────────────────────────────────────────────────────────────────────────────
class FakeStore:
    """A store that remembers batches and can fail or block on demand."""

    def __init__(self, fail_times: int = 0, message: str = "disk full") -> None:
        self.batches: list[list[Record]] = []
        self.fail_times = fail_times
        self.message = message
        self.calls = 0
        self.gate = threading.Event()
        self.gate.set()

    def write(self, records: Sequence[Record]) -> None:
        self.calls += 1
        self.gate.wait()
        if self.fail_times:
            self.fail_times -= 1
            raise OSError(self.message)
        self.batches.append(list(records))

    def read(self, run_id: str | None = None, since: float | None = None) -> Iterator[Record]:
        return iter([r for b in self.batches for r in b])

    def count(self, run_id: str | None = None) -> int:
        return sum(map(len, self.batches))

    def close(self) -> None:
        pass


def test_batch_writer_drains_everything_on_close(db: SQLiteStore) -> None:
    writer = BatchWriter(db, max_batch=10_000, max_delay=30.0)
    for i in range(1234):
        writer.put(record("drain", i))
    started = time.monotonic()
    writer.close()
    assert time.monotonic() - started < 5  # close does not wait out max_delay
    assert db.count("drain") == 1234
    assert (writer.written, writer.dropped) == (1234, 0)
    writer.close()  # twice is fine


def test_batches_are_cut_by_size() -> None:
    store = FakeStore()
    store.gate.clear()  # hold the first write so the queue fills up behind it
    writer = BatchWriter(store, max_batch=100, max_delay=5.0)
    for i in range(1001):
        writer.put(record(index=i))
    store.gate.set()
    writer.close()
    sizes = [len(b) for b in store.batches]
    assert sum(sizes) == 1001 and max(sizes) == 100
    assert [r.index for b in store.batches for r in b] == list(range(1001))


def test_batches_are_cut_by_delay() -> None:
    store = FakeStore()
    writer = BatchWriter(store, max_batch=1000, max_delay=0.05)
    writer.put(record())
    deadline = time.monotonic() + 30  # a busy machine may be slow to run the thread; no window
    while not store.batches and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [len(b) for b in store.batches] == [1]  # written without close() or flush()
    writer.close()


def test_flush_waits_for_everything_put_before_it(db: SQLiteStore) -> None:
    writer = BatchWriter(db, max_delay=30.0)
    for i in range(50):
        writer.put(record("f", i))
    assert writer.flush(timeout=5)
    assert db.count("f") == 50
    writer.close()


async def test_put_never_blocks_the_event_loop_while_the_store_hangs() -> None:
    store = FakeStore()
    store.gate.clear()  # the database is stuck
    writer = BatchWriter(store, max_batch=100, max_pending=500)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    for i in range(2000):
        writer.put(record(index=i))
        if i % 100 == 0:
            await asyncio.sleep(0)
    task.cancel()
    # A put that waited on the stuck store would never return (the suite's timeout would end the test);
    # the loop went on ticking between the puts.
    assert ticks >= 20
    # Up to one batch taken by the stuck writer, 500 queued, the rest counted, not silently lost.
    assert 2000 - 600 <= writer.dropped <= 2000 - 500
    store.gate.set()
    writer.close()
    assert writer.written + writer.dropped == 2000


def test_a_failed_write_is_retried_once() -> None:
    store = FakeStore(fail_times=1)
    writer = BatchWriter(store, retry_delay=0.01)
    for i in range(20):
        writer.put(record(index=i))
    writer.close()
    assert store.count() == 20 and writer.dropped == 0 and store.calls == 2


def test_a_batch_that_fails_twice_is_counted_and_logged_without_secrets(
        caplog: pytest.LogCaptureFixture) -> None:
    store = FakeStore(fail_times=10**6, message=f"rejected request with Authorization: Bearer {KEY}")
    writer = BatchWriter(store, retry_delay=0.01)
    with caplog.at_level(logging.WARNING, logger="sseguard.store"):
        for i in range(7):
            writer.put(record(index=i))
        writer.close()
    assert writer.dropped == 7 and writer.written == 0
    assert any("dropped" in r.getMessage() for r in caplog.records)
    assert KEY not in caplog.text and "[REDACTED]" in caplog.text


def test_put_after_close_is_counted_not_lost_silently(caplog: pytest.LogCaptureFixture) -> None:
    writer = BatchWriter(FakeStore())
    writer.close()
    with caplog.at_level(logging.WARNING, logger="sseguard.store"):
        writer.put(record())
    assert writer.dropped == 1 and "after the writer was closed" in caplog.text


def test_bad_batch_writer_settings_are_config_errors() -> None:
    for kwargs in ({"max_batch": 0}, {"max_delay": -1.0}, {"max_pending": 0}):
        with pytest.raises(ConfigError):
            BatchWriter(FakeStore(), **kwargs)  # type: ignore[arg-type]


def test_ten_thousand_records_through_a_batch_writer_arrive_in_few_transactions(db: SQLiteStore) -> None:
    """Every record lands, in batches rather than one transaction each (the speed itself is
    bench/store/bench_client_store.py's to measure, not a unit test's)."""
    batch = records(10_000, "bulk")
    writer = BatchWriter(db)
    for rec in batch:
        writer.put(rec)
    writer.close()
    assert db.count("bulk") == 10_000
    assert writer.batches <= 10_000 // 100  # at most 500 a batch by default; far fewer than one each
