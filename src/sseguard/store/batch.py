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

import atexit
import threading
import time
from collections import deque
from dataclasses import dataclass, field

from sseguard.errors import ConfigError
from sseguard.record import Record, redact_record
from sseguard.redact import Redactor
from sseguard.store._base import RecordStore, log, one_line, yield_gil

#: Pause before the one retry of a failed batch: long enough for a database failover blip.
RETRY_DELAY_S = 0.5


@dataclass(slots=True)
class _Flush:
    done: threading.Event = field(default_factory=threading.Event)


_STOP = object()


class BatchWriter:
    """Feeds a ``RecordStore`` from any thread or event loop without blocking the caller.

    ``max_batch`` records or ``max_delay`` seconds after the first queued record, whichever comes
    first, make a batch. ``max_pending`` bounds memory when the store is slower than the traffic; a
    record that finds the queue full is counted in ``dropped`` (and logged), because blocking the
    proxy's event loop would be worse than losing evidence. The store stays the caller's to close.
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
        self.max_batch = max_batch
        self.max_delay = max_delay
        self.max_pending = max_pending
        self._retry_delay = retry_delay
        # deque appends and pops are atomic: the event loop's side takes no lock and wakes nobody.
        self._queue: deque[object] = deque()
        self._wake = threading.Event()
        self._counts_lock = threading.Lock()
        self._written = 0
        self._dropped = 0
        self._batches = 0
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="sseguard-store-writer", daemon=True)
        self._thread.start()
        # A daemon thread dies with the interpreter; closing at exit drains what is still queued
        # when the owner forgot to (atexit runs while daemon threads are still alive).
        atexit.register(self.close)

    # ── counters ───────────────────────────────────────────────────────────────────────────────
    @property
    def written(self) -> int:
        """Records the store has accepted."""
        return self._written

    @property
    def dropped(self) -> int:
        """Records given up on: the queue was full, the writer was closed, or a batch failed twice."""
        return self._dropped

    @property
    def batches(self) -> int:
        """Transactions written."""
        return self._batches

    @property
    def pending(self) -> int:
        """Records queued and not yet written (approximate, as any queue size)."""
        return len(self._queue)

    def _count_dropped(self, n: int) -> None:
        with self._counts_lock:
            self._dropped += n

    # ── the caller's side ──────────────────────────────────────────────────────────────────────
    def put(self, record: Record, redactor: Redactor | None = None) -> None:
        """Queue one record; returns at once, whatever the store is doing. With a ``redactor`` the
        record is not redacted yet (``record.raw_record``): the writer's thread redacts it with that
        redactor before the store sees it; without one it is already clean."""
        if self._closed:
            self._count_dropped(1)
            log.warning("record %s/%s put after the writer was closed: dropped",
                        record.run_id, record.index)
            return
        queued = len(self._queue)
        if queued >= self.max_pending:
            self._count_dropped(1)
            if self._dropped in (1, 10, 100) or self._dropped % 1000 == 0:
                log.error("store writer queue full (%d pending): %d record(s) dropped so far",
                          self.max_pending, self._dropped)
            return
        self._queue.append(record if redactor is None else (record, redactor))
        # A whole batch is waiting (or batches are not to wait at all): no reason to wait any longer.
        if queued + 1 >= self.max_batch or not self.max_delay:
            self._wake.set()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every record put before this call has been written (or given up on)."""
        if self._closed or not self._thread.is_alive():
            return True
        marker = _Flush()
        self._queue.append(marker)
        self._wake.set()
        return marker.done.wait(timeout)

    def close(self, timeout: float | None = None) -> None:
        """Write everything still queued, then stop the thread. Safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        self._queue.append(_STOP)
        self._wake.set()
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.error("store writer did not finish within %ss; about %d record(s) still queued",
                      timeout, len(self._queue))

    def __enter__(self) -> BatchWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ── the writer thread ──────────────────────────────────────────────────────────────────────
    def _run(self) -> None:
        stop = False
        while not stop:
            self._wake.wait(self.max_delay or None)
            self._wake.clear()
            # Everything queued now, in order, in batches of at most max_batch; a flush marker ends
            # a batch early so that its caller is released once what it waited for is written.
            while self._queue and not stop:
                batch: list[Record] = []
                flushes: list[_Flush] = []
                while self._queue and len(batch) < self.max_batch and not flushes:
                    item = self._queue.popleft()
                    if item is _STOP:
                        stop = True
                        break
                    if isinstance(item, _Flush):
                        flushes.append(item)
                    elif (record := self._clean(item)) is not None:
                        batch.append(record)
                if batch:
                    self._write(batch)
                for marker in flushes:
                    marker.done.set()
        # Whatever is still queued once stopping (a put() or flush() that raced close() can land
        # behind _STOP): write it, release it.
        late: list[Record] = []
        while self._queue:
            item = self._queue.popleft()
            if isinstance(item, _Flush):
                item.done.set()
            elif item is not _STOP and (record := self._clean(item)) is not None:
                late.append(record)
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
                self._count_dropped(len(batch))
                log.error("store write of %d record(s) failed again, dropped (%d dropped so far): %s",
                          len(batch), self._dropped, one_line(exc))
                return
            with self._counts_lock:
                self._written += len(batch)
                self._batches += 1
            return

