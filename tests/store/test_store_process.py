"""The proxy's store writer in a process of its own: every record written and redacted there, a flush
that waits for the child, a close that drains it, a bad store refused at start, Ctrl-C survived."""

from __future__ import annotations

import os
import signal
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sseguard.core.contract import StreamChecker
from sseguard.core.errors import ConfigError
from sseguard.core.policy import Policy
from sseguard.core.record import raw_record, record_from_verdict
from sseguard.core.redact import DEFAULT
from sseguard.store import BatchWriter, open_store
from sseguard.store.process import ProcessWriter
from support.store import KEY, record, records
from support.streams import text_stream


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


_secret_text = st.sampled_from(["", "plain words", KEY, f"Bearer {KEY}", "client-key-7731-xyz",
                                "said client-key-7731-xyz twice client-key-7731-xyz"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(_secret_text, min_size=1, max_size=4), header=_secret_text, note=_secret_text)
def test_a_raw_record_redacted_by_the_writer_is_stored_as_one_redacted_before_the_put(
        tmp_path_factory: pytest.TempPathFactory, pieces: list[str], header: str, note: str) -> None:
    checker = StreamChecker()
    checker.feed(text_stream(pieces, done=False))
    verdict = checker.close()
    redactor = DEFAULT.with_secrets(["client-key-7731-xyz"])
    headers = {"x-upstream": header, "Date": "today"}
    before = record_from_verdict(verdict, policy=Policy.from_spec(), redactor=redactor, run_id="same",
                                 headers=headers, extra=redactor.obj({"note": note}))
    before.model = redactor.text(note) if note else None  # the proxy's model, from the request
    raw = raw_record(verdict, policy=Policy.from_spec(), run_id="same", headers=headers,
                     extra={"note": note})
    raw.model = note or None
    db = tmp_path_factory.mktemp("eq") / "eq.db"
    store = open_store(str(db))
    writer = BatchWriter(store)
    writer.put(before)
    writer.put(raw, redactor)
    writer.close()
    store.close()
    first, second = _stored(db)
    assert first == second
    assert KEY not in second and "client-key-7731-xyz" not in second
