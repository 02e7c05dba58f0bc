"""Store retention end to end: a real proxy on loopback writes its records into a SQLite file while its
retention thread deletes the expired ones, healthy streams after ``--retain-healthy``, failed ones
(the evidence) after ``--retain``. Time is driven without waiting: old records are written with old
start times, and the in-process test hands the pruner a clock and wakes it."""

from __future__ import annotations

import contextlib
import json
import signal
import sqlite3
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from sseguard.chaos import ChaosConfig, run_chaos
from sseguard.proxy import run_proxy
from sseguard.store import open_store
from sseguard.store.retention import RetentionThread
from support.proxy import KEY, chat, in_thread, proxy_config, proxy_process
from support.store import record

DAY = 86400.0
#: (age in days, healthy) of the old records written before the proxy prunes, 20 of each.
AGES = [(1, True), (1, False), (3, True), (3, False), (10, True), (10, False), (20, True), (20, False)]
EACH = 20


def _old_records(now: float, run: str = "old-run") -> list[Any]:
    out = []
    for k, (age, healthy) in enumerate(AGES):
        for j in range(EACH):
            out.append(record(run, k * EACH + j, started_at=now - age * DAY - j, passed=healthy,
                              ending="complete" if healthy else "truncated", findings=[]))
    return out


def _left(db: Path, run: str, now: float) -> list[tuple[int, bool, int]]:
    """(age in days, healthy, how many) of ``run``'s records still in the store."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        rows = conn.execute("SELECT started_at, json_extract(record, '$.passed') FROM sseguard_records "
                            "WHERE run_id = ?", (run,)).fetchall()
    found: dict[tuple[int, bool], int] = {}
    for started, passed in rows:
        key = (round((now - started) / DAY), bool(passed))
        found[key] = found.get(key, 0) + 1
    return sorted((age, healthy, n) for (age, healthy), n in found.items())


def _proxy_rows(db: Path, exclude: str = "old-run") -> list[tuple[float, bool]]:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        rows = conn.execute("SELECT started_at, json_extract(record, '$.passed') FROM sseguard_records "
                            "WHERE run_id <> ?", (exclude,)).fetchall()
    return [(float(s), bool(p)) for s, p in rows]


def _until(check: Any, what: str) -> None:
    """Wait for ``check()`` (records reach the store a moment after their stream ends); a minute at
    most, however busy the machine."""
    deadline = time.monotonic() + 60
    while not check():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.02)


def _stream(base: str, fail: bool) -> bytes:
    """One streamed chat completion through the proxy; ``fail``: the upstream truncates it."""
    req = urllib.request.Request(
        f"{base}/chat/completions", data=json.dumps(chat()).encode(), method="POST",
        headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json",
                 "x-sseguard-inject": "truncated" if fail else "none"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return bytes(resp.read())


# What survives 14d / 2d: every failed stream younger than 14 days, healthy ones younger than 2 days.
KEPT = [(1, False, EACH), (1, True, EACH), (3, False, EACH), (10, False, EACH)]


def test_sseguard_proxy_retain_flags_delete_exactly_the_expired_records(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    now = time.time()
    store = open_store(str(db))
    store.write(_old_records(now))
    store.close()
    with in_thread(lambda: run_chaos(ChaosConfig())) as chaos, \
            proxy_process(chaos.url, str(db), "--retry", "0", "--retain", "14d",
                          "--retain-healthy", "2d") as (proc, base):
        bodies = [_stream(base, fail=i % 3 == 0) for i in range(12)]
        # SIGTERM drains the records and stops the pruner after the round it started with.
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    assert sum(b.rstrip().endswith(b"data: [DONE]") for b in bodies) == 8
    assert _left(db, "old-run", now) == KEPT
    # The proxy's own records, fresh, all kept: 8 healthy, 4 failed.
    written = _proxy_rows(db)
    assert sorted(passed for _, passed in written) == [False] * 4 + [True] * 8


def test_retention_prunes_while_the_proxy_writes_and_ages_its_records_by_the_clock(
        tmp_path: Path) -> None:
    db = tmp_path / "store.db"

    @contextlib.asynccontextmanager
    async def servers() -> Any:
        async with run_chaos(ChaosConfig()) as chaos, \
                run_proxy(proxy_config(chaos.url, store=str(db), retain="14d", retain_healthy="2d",
                                       retry=0)) as px:
            yield px

    with in_thread(servers) as px:
        pruner: RetentionThread = px.state.pruner
        assert pruner.wait_round(1, timeout=60)  # the round at start, on an empty store
        assert pruner.deleted == 0
        sent: list[tuple[float, bool]] = []  # (time the client started it, failed)
        go = threading.Event()
        go.set()
        idle = threading.Event()
        stop = threading.Event()

        def traffic() -> None:
            i = 0
            while not stop.is_set():
                if not go.is_set():
                    idle.set()
                    go.wait()
                    idle.clear()
                    continue
                fail = i % 4 == 0
                sent.append((time.time(), fail))
                _stream(px.url, fail)
                i += 1

        client = threading.Thread(target=traffic)
        client.start()
        try:
            # 1. While streams flow: old records appear (another writer), and a round at the real
            #    time deletes exactly the expired ones, none of the proxy's fresh records.
            _until(lambda: len(sent) >= 5, "five streams")
            now = time.time()
            other = open_store(str(db))
            other.write(_old_records(now))
            other.close()
            pruner.clock = time.time
            assert pruner.wait_round(pruner.wake(), timeout=120)
            streams_during = len(sent)
            assert pruner.deleted == 4 * EACH
            assert _left(db, "old-run", now) == KEPT

            # 2. Pause the client at a quiet moment, let every record reach the store, and mark the
            #    time: the next round's clock is that mark plus two days, while the client writes again.
            go.clear()
            assert idle.wait(60)
            before = list(sent)
            _until(lambda: len(_proxy_rows(db)) == len(before), "the records of every stream")
            mark = time.time()
            go.set()
            _until(lambda: len(sent) >= len(before) + 5, "five more streams")
            pruner.clock = lambda: mark + 2 * DAY
            assert pruner.wait_round(pruner.wake(), timeout=120)

            # 3. Quiet again: the healthy streams from before the mark are gone, the failed ones and
            #    everything written after the mark are there, and the old failed ones of 1 and 3 days
            #    (now 3 and 5 days old) remain while the healthy ones of a day went.
            go.clear()
            assert idle.wait(60)
            _until(lambda: len(_proxy_rows(db)) == len(sent) - sum(not f for _, f in before),
                   "the records of every stream")
        finally:
            stop.set()
            go.set()
            client.join(60)
        rows = _proxy_rows(db)
        healthy_before = sum(not f for _, f in before)
        failed = sum(f for _, f in sent)
        assert healthy_before > 0 and streams_during > 5
        assert len(rows) == len(sent) - healthy_before
        assert sum(not p for _, p in rows) == failed
        assert all(started >= mark for started, passed in rows if passed)
        assert _left(db, "old-run", now) == [(1, False, EACH), (3, False, EACH), (10, False, EACH)]
        assert pruner.deleted == 4 * EACH + healthy_before + EACH
