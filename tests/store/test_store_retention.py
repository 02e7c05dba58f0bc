"""Store retention (failed streams kept longer than healthy ones, deleted in batches) and weighted
sampling of healthy streams, whose analysis still estimates the full traffic's rates."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest

from sseguard.analyze.summary import analyze_sources
from sseguard.core.errors import ConfigError
from sseguard.core.record import Record
from sseguard.store import open_store
from sseguard.store.retention import Retention, SampledStore, parse_age, prune, sample_weight
from support.store import record

DAY = 86400.0
NOW = 1_800_000_000.0


@pytest.mark.parametrize(("text", "seconds"), [("14d", 14 * DAY), ("36h", 36 * 3600.0), ("90m", 5400.0),
                                                ("2w", 14 * DAY), ("30s", 30.0), ("1.5d", 1.5 * DAY)])
def test_ages_read_as_people_write_them(text: str, seconds: float) -> None:
    assert parse_age(text, "--retain") == seconds


@pytest.mark.parametrize("text", ["", "14", "d", "-1d", "0d", "14 days", "1y"])
def test_a_bad_age_names_the_flag(text: str) -> None:
    with pytest.raises(ConfigError, match="--retain-healthy"):
        parse_age(text, "--retain-healthy")


def test_healthy_streams_may_not_outlive_the_failed_ones() -> None:
    with pytest.raises(ConfigError, match="longer than --retain"):
        Retention.from_options("2d", "14d")
    with pytest.raises(ConfigError, match="sample-healthy"):
        Retention.from_options(sample_healthy=1.5)
    assert sample_weight(0.1) == 10
    assert sample_weight(0.3) == 3
    assert sample_weight(1.0) == 1


def _aged(i: int, age_days: float, passed: bool) -> Record:
    return record("run-r", i, started_at=NOW - age_days * DAY, passed=passed,
                  ending="complete" if passed else "truncated")


def test_prune_deletes_old_rows_in_batches_keeping_failed_streams_longer(tmp_path: Path) -> None:
    db = str(tmp_path / "r.db")
    store = open_store(db)
    rows = [_aged(i, age, passed) for i, (age, passed) in enumerate(
        [(1, True), (1, False), (3, True), (3, False), (10, True), (10, False), (20, True), (20, False)] * 5)]
    store.write(rows)
    deleted = prune(db, Retention.from_options("14d", "2d"), now=NOW, batch=3)
    # Gone: everything older than 14 days (10 rows), healthy ones older than 2 days (3 and 10 days: 10).
    assert deleted == 20
    left = list(store.read())
    assert sorted({(round((NOW - r.started_at) / DAY), r.passed) for r in left}) == [
        (1, False), (1, True), (3, False), (10, False)]
    assert prune(db, Retention.from_options("14d", "2d"), now=NOW) == 0
    store.close()


def test_a_writer_keeps_writing_while_prune_runs(tmp_path: Path) -> None:
    db = str(tmp_path / "w.db")
    store = open_store(db)
    store.write([_aged(i, 30, True) for i in range(3000)])
    done = threading.Event()
    written = 0

    def writer() -> None:
        nonlocal written
        while not done.is_set():
            store.write([_aged(10_000 + written, 0, True)])
            written += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert prune(db, Retention.from_options("14d"), now=NOW, batch=100) == 3000
    finally:
        done.set()
        thread.join()
    assert store.count() == written
    store.close()


def _traffic(n: int, seed: int) -> list[Record]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        arm = "gw" if i % 2 else "direct"
        bad = rng.random() < (0.12 if arm == "gw" else 0.03)
        out.append(record("run-s", i, arm=arm, started_at=NOW + i * 0.01, passed=not bad,
                          ending="truncated" if bad else "complete", findings=[]))
    return out


def test_a_sampled_runs_rates_match_the_full_runs_within_their_intervals(tmp_path: Path) -> None:
    traffic = _traffic(20_000, seed=11)
    full = open_store(str(tmp_path / "full.db"))
    full.write(traffic)
    full.close()
    inner = open_store(str(tmp_path / "sampled.db"))
    sampled = SampledStore(inner, 0.1, seed=5)
    for start in range(0, len(traffic), 500):
        sampled.write(traffic[start:start + 500])
    stored = inner.count()
    sampled.close()
    failed = sum(not r.passed for r in traffic)
    assert stored < failed + 0.15 * (len(traffic) - failed)  # about a tenth of the healthy ones kept
    whole = analyze_sources([str(tmp_path / "full.db")])
    estimate = analyze_sources([str(tmp_path / "sampled.db")])
    assert estimate.total.failed == whole.total.failed == failed  # failed streams are all kept
    for mine, truth in [(estimate.total, whole.total),
                        *zip((g.rate for g in estimate.arms), (g.rate for g in whole.arms), strict=True)]:
        assert mine.low <= truth.value <= mine.high
        assert truth.low <= mine.value <= truth.high


def test_the_proxy_takes_retention_and_sampling_flags() -> None:
    from sseguard.proxy.config import ProxyConfig

    config = ProxyConfig.from_options(upstream="http://127.0.0.1:9/v1", retain="14d", retain_healthy="2d",
                                      sample_healthy=0.1)
    assert config.retention == Retention(14 * DAY, 2 * DAY, 0.1)
    assert ProxyConfig.from_options(upstream="http://127.0.0.1:9/v1").retention == Retention()
    with pytest.raises(ConfigError, match="--retain "):
        ProxyConfig.from_options(upstream="http://127.0.0.1:9/v1", retain="soon")
