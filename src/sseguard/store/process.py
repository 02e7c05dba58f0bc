"""Writing records in a process of their own, so that the proxy's event loop never waits for them.

A ``BatchWriter`` thread shares the proxy's GIL and its core: whatever the record costs (the secret
searches, the JSON, the columns the analysis counts, the SQLite insert) is taken from the relay,
one record's work at a time at best. ``ProcessWriter`` keeps only the hand-off in the proxy: ``put()``
appends the unredacted record and its redactor's secrets to a queue, and a feeder thread sends them,
a batch per ``max_delay``, over a pipe (msgpack, the write with the GIL released) to a child process.
The child is a ``BatchWriter`` over the store: it redacts, derives and writes there, at the lowest
CPU priority (``nice 19``), so on a shared core it runs when the relay does not.

The child never takes a signal of the terminal's (Ctrl-C reaches the whole process group): it stops
when told, or when the pipe closes because the proxy is gone, and writes what it holds first. The
unredacted records cross only this pipe, in memory, between two processes of the same user.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
from multiprocessing.connection import Connection
from typing import Any

import msgspec

from sseguard.core.errors import ConfigError
from sseguard.core.record import Record
from sseguard.core.redact import Redactor
from sseguard.store._base import log, one_line
from sseguard.store._queue import QueuedWriter

#: Seconds the child may take to start, import and open its store (a busy machine is slow to spawn).
START_TIMEOUT_S = 120.0
#: Redactors the child keeps, by their secrets (a deployment has a few client keys).
REDACTORS_KEPT = 64

_RECORDS, _FLUSH, _STOP = b"R", b"F", b"S"


class _Handoff(msgspec.Struct, array_like=True):
    """One record as it crosses the pipe: not yet redacted, with the secrets its redactor removes
    (None: already clean)."""

    record: Record
    secrets: list[str] | None = None


_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(list[_Handoff]).decode


class ProcessWriter(QueuedWriter):
    """Feeds the store at ``target`` (a path or URL, as ``open_store`` takes) from a child process.

    The same calls as ``BatchWriter`` (the queue, ``put``, ``flush`` and ``close`` are
    ``store._queue``'s): its thread sends each batch to the child instead of writing it.
    ``sample_healthy``: the child keeps healthy streams through ``SampledStore`` at that fraction.
    Opening the store happens in the child: a path it cannot open is a ``ConfigError`` here.
    """

    def __init__(self, target: str, *, sample_healthy: float | None = None, max_batch: int = 500,
                 max_delay: float = 0.2, max_pending: int = 100_000) -> None:
        if max_batch < 1 or max_delay < 0 or max_pending < 1:
            raise ConfigError("max_batch and max_pending must be at least 1, max_delay not negative")
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe(duplex=True)
        self._process = context.Process(target=_child, name="sseguard-store-writer",
                                        args=(child, target, sample_healthy, max_batch, max_delay))
        self._process.start()
        child.close()
        if not self._conn.poll(START_TIMEOUT_S):
            self._process.kill()
            raise ConfigError(f"the store writer did not start within {START_TIMEOUT_S:g} s")
        try:
            answer = self._conn.recv()
        except EOFError:
            answer = ("error", "the store writer process ended at start")
        if answer[0] != "ready":
            self._process.join()
            raise ConfigError(str(answer[1]))
        self._child_dropped = 0  # there: a batch the store refused twice, a record not redactable
        self._broken = False
        self._open_queue(max_batch=max_batch, max_delay=max_delay, max_pending=max_pending,
                         name="sseguard-store-feeder")

    # ── counters ───────────────────────────────────────────────────────────────────────────────
    @property
    def written(self) -> int:
        """Records the store has accepted (as of the child's last report: a flush or the close)."""
        return self._written

    @property
    def dropped(self) -> int:
        """Records given up on, here (queue full, writer closed, child gone) or in the child."""
        return self._dropped + self._child_dropped

    def _dropped_because(self, n: int, why: str) -> None:
        dropped = self._count_dropped(n)
        if dropped == n or dropped in (10, 100) or dropped % 1000 == 0:
            log.error("store writer: %d record(s) dropped so far (%s)", dropped, why)

    # ── the caller's side ──────────────────────────────────────────────────────────────────────
    def _item(self, record: Record, redactor: Redactor | None) -> object:
        """The record not yet redacted, with its redactor's secrets: the child redacts it."""
        return _Handoff(record, None if redactor is None else list(redactor.secrets))

    def _refuse(self, record: Record) -> bool:
        if not (self._closed or self._broken):
            return False
        self._dropped_because(1, "put after the writer was closed or lost")
        return True

    def _full(self) -> None:
        self._dropped_because(1, f"queue full, {self.max_pending} pending")

    def _closed_after(self, timeout: float | None) -> None:
        self._process.join(timeout)
        if self._process.is_alive():
            log.error("store writer did not finish within %ss; stopping it", timeout)
            self._process.terminate()
            self._process.join()
        self._conn.close()

    # ── the feeder thread ──────────────────────────────────────────────────────────────────────
    def _deliver(self, batch: list[object]) -> None:
        self._send(_RECORDS + _encode(batch), len(batch))

    def _flushed(self) -> None:
        self._ask(_FLUSH)

    def _stopped(self) -> None:
        self._ask(_STOP)
        self._release()

    def _send(self, message: bytes, count: int) -> None:
        if self._broken:
            self._dropped_because(count, "the store writer process is gone")
            return
        try:
            self._conn.send_bytes(message)  # the write runs with the GIL released
        except (OSError, ValueError) as exc:
            self._broken = True
            self._dropped_because(count, f"the store writer process is gone: {one_line(exc)}")

    def _ask(self, what: bytes) -> None:
        """A flush or stop: the child answers once everything sent before it is written."""
        if self._broken:
            return
        try:
            self._conn.send_bytes(what)
            _, written, dropped = self._conn.recv()
        except (OSError, EOFError, ValueError) as exc:
            self._broken = True
            log.error("the store writer process is gone: %s", one_line(exc))
            return
        self._written, self._child_dropped = int(written), int(dropped)

    def _release(self) -> None:
        """Wake whoever waits on a flush that raced the close, and count what is left as dropped."""
        left = len(self._late())
        if left:
            self._dropped_because(left, "put while the writer was closing")


def _child(conn: Connection, target: str, sample_healthy: float | None, max_batch: int,
           max_delay: float) -> None:
    """The child process: a ``BatchWriter`` over the store, fed from the pipe until told to stop."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    with contextlib.suppress(OSError):  # refused (a sandbox): it still works, at normal priority
        os.nice(19)
    from sseguard.store import BatchWriter, open_store
    from sseguard.store.retention import SampledStore

    try:
        store: Any = open_store(target)
        if sample_healthy is not None:
            store = SampledStore(store, sample_healthy)
    except ConfigError as exc:
        conn.send(("error", str(exc)))
        return
    writer = BatchWriter(store, max_batch=max_batch, max_delay=max_delay)
    redactors: dict[tuple[str, ...], Redactor] = {}
    conn.send(("ready",))
    try:
        while True:
            try:
                message = conn.recv_bytes()
            except (EOFError, OSError):
                break  # the proxy is gone: write what is held, then end
            kind, payload = message[:1], message[1:]
            if kind == _RECORDS:
                for handoff in _decode(payload):
                    writer.put(handoff.record, _redactor(redactors, handoff.secrets))
            elif kind == _FLUSH:
                writer.flush()
                conn.send(("flushed", writer.written, writer.dropped))
            elif kind == _STOP:
                writer.close()
                conn.send(("stopped", writer.written, writer.dropped))
                return
    finally:
        writer.close()
        store.close()


def _redactor(kept: dict[tuple[str, ...], Redactor], secrets: list[str] | None) -> Redactor | None:
    """The redactor for these secrets, built once (building one sorts every secret)."""
    if secrets is None:
        return None
    key = tuple(secrets)
    redactor = kept.get(key)
    if redactor is None:
        if len(kept) >= REDACTORS_KEPT:
            del kept[next(iter(kept))]
        redactor = kept[key] = Redactor(secrets)
    return redactor
