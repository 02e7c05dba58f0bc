"""Keeping a store's size bounded: retention by age, and weighted sampling of healthy streams.

Failed streams are the evidence, so they may be kept longer (``--retain 14d``) than healthy ones
(``--retain-healthy 2d``). ``prune`` deletes old rows in small batches, each its own short transaction
on a connection of its own: the proxy's writer waits for one batch at most, never for the whole
clean-up. ``RetentionThread`` runs it now and then beside a proxy.

``--sample-healthy 0.1`` keeps about one healthy stream in ten, and stores each kept one with the
weight 10 (one over the fraction, rounded to a whole number ``k``; the sampling probability is then
exactly ``1/k``). Failed streams are always kept with weight 1. The analyzer counts ``weight`` instead
of rows, so every count is a Horvitz–Thompson estimate of the full traffic's count and rates stay
unbiased; an interval computed on weighted counts treats them as observed, so it is somewhat narrower
than the estimate's true uncertainty on the healthy side (see ``docs/analyze.md``).
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from sseguard.core.errors import ConfigError
from sseguard.core.record import Record
from sseguard.store._base import TABLE, RecordStore, log, one_line, safe_target

_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
#: Rows deleted per transaction: short enough that a writer never waits long for the lock.
DELETE_BATCH = 2000
#: How often a running proxy prunes its store.
PRUNE_EVERY_S = 600.0


def parse_age(text: str, flag: str) -> float:
    """``14d``, ``36h``, ``90m``, ``2w`` → seconds; anything else is a ``ConfigError`` naming the flag."""
    m = _AGE.match(text)
    if not m or float(m.group(1)) <= 0:
        raise ConfigError(f"{flag} {text!r}: use a positive age such as 14d, 36h or 90m")
    return float(m.group(1)) * _UNIT[m.group(2)]


def sample_weight(fraction: float) -> int:
    """The weight a kept healthy stream carries: ``1/fraction`` as a whole number, at least 1."""
    if not 0 < fraction <= 1:
        raise ConfigError(f"--sample-healthy {fraction}: use a fraction in (0, 1], such as 0.1")
    return max(1, round(1 / fraction))


@dataclass(frozen=True, slots=True)
class Retention:
    """How long rows stay (seconds; None: forever) and the share of healthy streams stored."""

    retain: float | None = None
    retain_healthy: float | None = None
    sample_healthy: float | None = None

    @classmethod
    def from_options(cls, retain: str | None = None, retain_healthy: str | None = None,
                     sample_healthy: float | None = None) -> Retention:
        out = cls(None if not retain else parse_age(retain, "--retain"),
                  None if not retain_healthy else parse_age(retain_healthy, "--retain-healthy"),
                  sample_healthy)
        if sample_healthy is not None:
            sample_weight(sample_healthy)
        if out.retain is not None and out.retain_healthy is not None and out.retain_healthy > out.retain:
            raise ConfigError("--retain-healthy is longer than --retain: healthy streams would outlive "
                              "the failed ones, which are the evidence")
        return out

    @property
    def prunes(self) -> bool:
        return self.retain is not None or self.retain_healthy is not None


class SampledStore:
    """A store in front of a store: keeps every failed stream, one healthy stream in ``k`` with weight
    ``k``. Seeded, so a test (or a replay) samples the same streams."""

    def __init__(self, store: RecordStore, fraction: float, *, seed: int | None = None) -> None:
        self.store = store
        self.weight = sample_weight(fraction)
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    def write(self, records: Sequence[Record], weights: Sequence[int] | None = None) -> None:
        kept: list[Record] = []
        kept_weights: list[int] = []
        with self._lock:
            for i, r in enumerate(records):
                w = weights[i] if weights is not None else 1
                if r.passed and self.weight > 1:
                    if self._rng.randrange(self.weight):
                        continue
                    w *= self.weight
                kept.append(r)
                kept_weights.append(w)
        self.store.write(kept, kept_weights)

    def read(self, run_id: str | None = None, since: float | None = None) -> Iterator[Record]:
        return self.store.read(run_id, since)

    def count(self, run_id: str | None = None) -> int:
        return self.store.count(run_id)

    def close(self) -> None:
        self.store.close()


def prune(target: str, retention: Retention, *, now: float | None = None,
          batch: int = DELETE_BATCH) -> int:
    """Delete rows past their age from the store ``target`` names; returns how many went."""
    if not retention.prunes:
        return 0
    now = time.time() if now is None else now
    postgres = target.startswith(("postgresql://", "postgres://"))
    healthy = "(record ->> 'passed')::boolean" if postgres else "json_extract(record, '$.passed') = 1"
    mark = "%s" if postgres else "?"
    rules: list[tuple[str, float]] = []
    if retention.retain is not None:
        rules.append(("", now - retention.retain))
    if retention.retain_healthy is not None:
        rules.append((f" AND {healthy}", now - retention.retain_healthy))
    statements = [(f"DELETE FROM {TABLE} WHERE seq IN (SELECT seq FROM {TABLE} WHERE started_at < {mark}"
                   f"{extra} ORDER BY seq LIMIT {int(batch)})", cutoff) for extra, cutoff in rules]
    return _prune_postgres(target, statements) if postgres else _prune_sqlite(target, statements)


def _prune_sqlite(target: str, statements: list[tuple[str, float]]) -> int:
    import sqlite3

    path = target.removeprefix("sqlite://")[1:] if target.startswith("sqlite://") else target
    conn = sqlite3.connect(path, timeout=30.0, isolation_level=None)
    deleted = 0
    try:
        for sql, cutoff in statements:
            while True:
                conn.execute("BEGIN IMMEDIATE")
                n = conn.execute(sql, (cutoff,)).rowcount
                conn.execute("COMMIT")
                deleted += n
                if n == 0:
                    break
                time.sleep(0)  # let a waiting writer take the lock between batches
    finally:
        conn.close()
    return deleted


def _prune_postgres(target: str, statements: list[tuple[str, float]]) -> int:
    import psycopg

    deleted = 0
    with psycopg.connect(target, connect_timeout=10, autocommit=True) as conn:
        for sql, cutoff in statements:
            while True:
                n = conn.execute(sql, (cutoff,)).rowcount
                deleted += n
                if n == 0:
                    break
    return deleted


class RetentionThread:
    """Prunes a store every ``every`` seconds (first at start) until ``stop()``; errors are logged.

    ``clock`` gives the time each round prunes at (tests age the store without waiting days); ``wake``
    asks for a round now, and ``wait_round`` waits until that round is over, so a test can tell the
    moment a clean-up ran from the moment it was asked for.
    """

    def __init__(self, target: str, retention: Retention, *, every: float = PRUNE_EVERY_S,
                 clock: Callable[[], float] = time.time) -> None:
        self.target = target
        self.retention = retention
        self.every = every
        self.clock = clock
        self.deleted = 0
        self.rounds = 0  # rounds finished
        self._started = 0  # rounds begun
        self._stopping = False
        self._kick = threading.Event()
        self._done = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="sseguard-store-retention", daemon=True)

    def start(self) -> RetentionThread:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stopping:
            with self._done:  # a wake after this line asks for the next round, not this one
                self._kick.clear()
                self._started += 1
            deleted = 0
            try:
                deleted = prune(self.target, self.retention, now=self.clock())
            except Exception as exc:  # a database blip: try again next round, never kill the proxy
                log.warning("store retention on %s failed: %s", safe_target(self.target), one_line(exc))
            if deleted:
                log.info("store retention deleted %d records from %s", deleted, safe_target(self.target))
            with self._done:
                self.deleted += deleted
                self.rounds += 1
                self._done.notify_all()
            self._kick.wait(self.every)

    def wake(self) -> int:
        """Ask for a round that starts after this call; returns its number for ``wait_round``."""
        with self._done:
            self._kick.set()
            return self._started + 1

    def wait_round(self, ticket: int, timeout: float | None = None) -> bool:
        """Wait until round ``ticket`` (1: the one at start) is over; False if ``timeout`` ran out."""
        with self._done:
            return self._done.wait_for(lambda: self.rounds >= ticket, timeout)

    def stop(self) -> None:
        self._stopping = True
        self._kick.set()
        if self._thread.is_alive():
            self._thread.join()
