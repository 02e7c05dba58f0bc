"""The proxy's store writer in a process of its own: every record written and redacted there, a flush
that waits for the child, a close that drains it, a bad store refused at start, Ctrl-C survived."""

from __future__ import annotations

import os
import signal
import sqlite3
from pathlib import Path

import pytest

from _store_support import KEY, record, records
from _streams import text_stream
from sseguard.contract import StreamChecker
from sseguard.errors import ConfigError
from sseguard.policy import Policy
from sseguard.record import raw_record
from sseguard.redact import DEFAULT
from sseguard.store import open_store
from sseguard.store.process import ProcessWriter


def _stored(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        return [row[0] for row in conn.execute("SELECT record FROM sseguard_records ORDER BY seq")]


def test_every_record_is_written_by_the_child_and_close_drains_it(tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    writer = ProcessWriter(str(db), max_batch=100, max_delay=30.0)
    for r in records(250, "proc"):
        writer.put(r)
    assert writer.flush(60)
    assert (writer.written, writer.dropped) == (250, 0)
    for i in range(250, 400):
        writer.put(record("proc", i))
    writer.close()  # no flush: the close writes the rest
    assert (writer.written, writer.dropped) == (400, 0)
    store = open_store(str(db))
    try:
        assert [r.index for r in store.read("proc")] == list(range(400))
    finally:
        store.close()
    writer.close()  # twice is fine


def test_a_raw_record_is_redacted_in_the_child_with_its_clients_key(tmp_path: Path) -> None:
    client_key = "client-key-without-any-shape-7731"
    checker = StreamChecker()
    checker.feed(text_stream(["echo: ", client_key, " and ", KEY], done=False))
    raw = raw_record(checker.close(), policy=Policy.from_spec(), run_id="raw",
                     headers={"x-api-key": client_key, "x-request-id": "r1"},
                     extra={"note": f"retry with {client_key}"})
    assert client_key in raw.tail and KEY in raw.tail  # not redacted yet
    db = tmp_path / "r.db"
    with ProcessWriter(str(db)) as writer:
        writer.put(raw, DEFAULT.with_secrets([client_key]))
    (text,) = _stored(db)
    assert client_key not in text and KEY not in text and "sk-live" not in text
    assert '"x-api-key":"[REDACTED]"' in text and '"x-request-id":"r1"' in text
    assert '"note":"retry with [REDACTED]"' in text


def test_a_store_the_child_cannot_open_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a directory"):
        ProcessWriter(str(tmp_path))
    with pytest.raises(ConfigError, match="unknown store scheme"):
        ProcessWriter("mysql://host/db")


def test_the_child_ignores_ctrl_c_and_still_writes_everything(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    writer = ProcessWriter(str(db), max_delay=30.0)
    pid = writer._process.pid
    assert pid is not None
    os.kill(pid, signal.SIGINT)  # what a terminal's Ctrl-C sends the whole process group
    for r in records(20, "ctrl-c"):
        writer.put(r)
    writer.close()
    assert (writer.written, writer.dropped) == (20, 0)
    assert len(_stored(db)) == 20


def test_puts_after_close_are_counted_as_dropped(tmp_path: Path) -> None:
    writer = ProcessWriter(str(tmp_path / "d.db"))
    writer.close()
    writer.put(record())
    assert writer.dropped == 1
