"""Writing records off the hot path: a queue in front of one writer thread.

The proxy finishes a stream on the event loop and must not wait for a disk or a database, so
``put()`` only appends to a queue; one thread turns the queue into batches (by size or by age) and
writes each batch in one transaction. ``put()`` does not wake that thread for each record (the thread
looks every ``max_delay``, or at once when a full batch is waiting): a wake-up per record handed the
GIL to the writer thread on every stream's end, which cost the proxy's event loop ~4 % of its CPU at
100 streams in a profile. ``put(record, redactor)`` hands over a record that is not yet redacted
(``record.raw_record``): the secret searches, most of a record's cost, then run on this thread. The
thread lets the GIL go between records (``_base.yield_gil``), so the loop that wants it back waits for
one record's work at most, never for a whole batch. A failed batch is retried once; if it fails again
its records are counted in ``dropped`` and logged, never lost without a trace. ``close()`` writes
everything still queued, so a clean shutdown loses nothing.
"""

from __future__ import annotations

import time

from sseguard.core.errors import ConfigError
from sseguard.core.record import Record, redact_record
from sseguard.store._base import RecordStore, log, one_line, yield_gil
from sseguard.store._queue import QueuedWriter

#: Pause before the one retry of a failed batch: long enough for a database failover blip.
RETRY_DELAY_S = 0.5


class BatchWriter(QueuedWriter):
    """Feeds a ``RecordStore`` from any thread or event loop without blocking the caller.

    ``max_batch`` records or ``max_delay`` seconds after the first queued record, whichever comes
    first, make a batch. ``max_pending`` bounds memory when the store is slower than the traffic; a
    record that finds the queue full is counted in ``dropped`` (and logged), because blocking the
    proxy's event loop would be worse than losing evidence. The store stays the caller's to close.
    The queue, ``put``, ``flush`` and ``close`` are ``store._queue``'s.
    """

    def __init__(self, store: RecordStore, *, max_batch: int = 500, max_delay: float = 0.2,
                 max_pending: int = 100_000, retry_delay: float = RETRY_DELAY_S) -> None:
        if max_batch < 1:
            raise ConfigError(f"max_batch must be at least 1, not {max_batch}")
        if max_delay < 0:
            raise ConfigError(f"max_delay must not be negative, not {max_delay}")
        if max_pending < 1:
            raise ConfigError(f"max_pending must be at least 1, not {max_pending}")
        self.store = store
        self._retry_delay = retry_delay
        self._batches = 0
        self._open_queue(max_batch=max_batch, max_delay=max_delay, max_pending=max_pending,
                         name="sseguard-store-writer")

    @property
    def batches(self) -> int:
        """Transactions written."""
        return self._batches

    # ── the caller's side ──────────────────────────────────────────────────────────────────────
    def _refuse(self, record: Record) -> bool:
        if not self._closed:
            return False
        self._count_dropped(1)
        log.warning("record %s/%s put after the writer was closed: dropped", record.run_id, record.index)
        return True

    def _full(self) -> None:
        dropped = self._count_dropped(1)
        if dropped in (1, 10, 100) or dropped % 1000 == 0:
            log.error("store writer queue full (%d pending): %d record(s) dropped so far",
                      self.max_pending, dropped)

    def _closed_after(self, timeout: float | None) -> None:
        if self._thread.is_alive():
            log.error("store writer did not finish within %ss; about %d record(s) still queued",
                      timeout, len(self._queue))

    # ── the writer thread ──────────────────────────────────────────────────────────────────────
    def _deliver(self, batch: list[object]) -> None:
        records = [record for item in batch if (record := self._clean(item)) is not None]
        if records:
            self._write(records)

    def _stopped(self) -> None:
        """Write what landed behind the stop, in batches."""
        late = [record for item in self._late() if (record := self._clean(item)) is not None]
        for start in range(0, len(late), self.max_batch):
            self._write(late[start:start + self.max_batch])

    def _clean(self, item: object) -> Record | None:
        """A queued record, redacted here if it came with its redactor (then the GIL is let go:
        redaction is most of a record's cost). None: it could not be redacted, and is dropped."""
        if not isinstance(item, tuple):
            return item if isinstance(item, Record) else None
        record, redactor = item
        try:
            clean = redact_record(record, redactor)
        except Exception as exc:  # never store what could not be cleaned; never stop the thread
            self._count_dropped(1)
            log.error("record %s/%s could not be redacted, dropped: %s", record.run_id, record.index,
                      type(exc).__name__)
            return None
        yield_gil()
        return clean

    def _write(self, batch: list[Record]) -> None:
        for attempt in (1, 2):
            try:
                self.store.write(batch)
            except Exception as exc:
                if attempt == 1:
                    log.warning("store write of %d record(s) failed, retrying once: %s",
                                len(batch), one_line(exc))
                    time.sleep(self._retry_delay)
                    continue
                dropped = self._count_dropped(len(batch))
                log.error("store write of %d record(s) failed again, dropped (%d dropped so far): %s",
                          len(batch), dropped, one_line(exc))
                return
            with self._counts_lock:
                self._written += len(batch)
                self._batches += 1
            return
