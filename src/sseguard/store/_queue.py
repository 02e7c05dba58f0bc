"""The queue both store writers put in front of their work: ``put`` never blocks, ``flush`` waits for
what came before it, ``close`` drains. One thread turns the queue into batches.

``BatchWriter`` (a thread writing the store) and ``store.process.ProcessWriter`` (a thread feeding a
child process that writes it) differ only in what a batch becomes, what a flush and the stop ask of the
other side, and how a refused record is told; the hand-off itself lives here once.

``put()`` does not wake the thread for each record (the thread looks every ``max_delay``, or at once
when a full batch is waiting): a wake-up per record handed the GIL to the writer thread on every
stream's end. deque appends and pops are atomic, so the caller's side takes no lock and wakes nobody.
A flush marker ends a batch early, so that its caller is released once what it waited for is written.
"""

from __future__ import annotations

import abc
import atexit
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Self

from sseguard.core.record import Record
from sseguard.core.redact import Redactor


@dataclass(slots=True)
class _Flush:
    done: threading.Event = field(default_factory=threading.Event)


#: The marker ``close()`` queues last: the thread delivers what precedes it, then stops.
STOP = object()


class QueuedWriter(abc.ABC):
    """The caller's side and the batching thread; a subclass says what a batch becomes (``_deliver``).

    Hooks: ``_item`` (what the queue holds for a record), ``_refuse`` (a record put after close or
    when the other side is gone), ``_full`` (the queue held ``max_pending``), ``_flushed`` (after a
    flush's records are delivered, before its caller is released), ``_stopped`` (after the last batch
    before ``STOP``: what is still queued), ``_closed_after`` (once the thread has ended)."""

    max_batch: int
    max_delay: float
    max_pending: int

    def _open_queue(self, *, max_batch: int, max_delay: float, max_pending: int, name: str) -> None:
        """Start the thread; from here ``put`` accepts records."""
        self.max_batch, self.max_delay, self.max_pending = max_batch, max_delay, max_pending
        self._queue: deque[object] = deque()
        self._wake = threading.Event()
        self._counts_lock = threading.Lock()
        self._written = 0
        self._dropped = 0
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
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
        """Records given up on: the queue was full, the writer was closed, or a batch (a record) could
        not be written (redacted)."""
        return self._dropped

    @property
    def pending(self) -> int:
        """Records queued and not yet handed on (approximate, as any queue size)."""
        return len(self._queue)

    def _count_dropped(self, n: int) -> int:
        """Count ``n`` more records given up on; the count so far."""
        with self._counts_lock:
            self._dropped += n
            return self._dropped

    # ── the caller's side ──────────────────────────────────────────────────────────────────────
    def put(self, record: Record, redactor: Redactor | None = None) -> None:
        """Queue one record; returns at once, whatever the store is doing. With a ``redactor`` the
        record is not redacted yet (``record.raw_record``): it is redacted with that redactor before
        the store sees it; without one it is already clean."""
        if self._refuse(record):
            return
        queued = len(self._queue)
        if queued >= self.max_pending:
            self._full()
            return
        self._queue.append(self._item(record, redactor))
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
        """Hand on everything still queued, then stop the thread. Safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        self._queue.append(STOP)
        self._wake.set()
        self._thread.join(timeout)
        self._closed_after(timeout)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ── the thread ─────────────────────────────────────────────────────────────────────────────
    def _run(self) -> None:
        while True:
            self._wake.wait(self.max_delay or None)
            self._wake.clear()
            # Everything queued now, in order, in batches of at most max_batch.
            batch: list[object] = []
            while self._queue:
                item = self._queue.popleft()
                if item is STOP or isinstance(item, _Flush):
                    if batch:
                        self._deliver(batch)
                        batch = []
                    if isinstance(item, _Flush):
                        self._flushed()
                        item.done.set()
                        continue
                    self._stopped()
                    return
                batch.append(item)
                if len(batch) >= self.max_batch:
                    self._deliver(batch)
                    batch = []
            if batch:
                self._deliver(batch)

    def _late(self) -> list[object]:
        """What is still queued once stopping (a put() or flush() that raced close() can land behind
        ``STOP``): flushes released, the records returned in order."""
        left: list[object] = []
        while self._queue:
            item = self._queue.popleft()
            if isinstance(item, _Flush):
                item.done.set()
            elif item is not STOP:
                left.append(item)
        return left

    # ── hooks ──────────────────────────────────────────────────────────────────────────────────
    def _item(self, record: Record, redactor: Redactor | None) -> object:
        return record if redactor is None else (record, redactor)

    @abc.abstractmethod
    def _refuse(self, record: Record) -> bool:
        """Whether ``record`` is refused before it is queued (the writer is closed or lost): the
        writer counts and logs the drop itself."""

    @abc.abstractmethod
    def _full(self) -> None:
        """The queue is full and the record is dropped: the writer counts and logs it."""

    @abc.abstractmethod
    def _deliver(self, batch: list[object]) -> None:
        """Turn one batch into rows (write it, or send it to the writer process)."""

    def _flushed(self) -> None:
        """By default nothing to ask of anyone: a delivered batch is written (an optional hook)."""
        return None

    @abc.abstractmethod
    def _stopped(self) -> None:
        """The batching thread saw ``STOP``: write what landed behind it, or ask the writer process
        to finish."""

    def _closed_after(self, timeout: float | None) -> None:
        """By default nothing more to stop (an optional hook)."""
        return None
