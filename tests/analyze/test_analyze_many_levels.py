"""A proxy's records carry the streams in flight at the proxy as their concurrency — up to thousands of
distinct values at 10,000 streams, where a sweep has a handful of levels. The range search over them
went in powers of two (issue 39: such a store took minutes to analyze), a sweep's levels stay apart."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sseguard.analyze.summary import analyze_sources
from sseguard.core.record import Record, encode_record
from sseguard.store.sqlite import SQLiteStore


def _record(i: int, level: int, bad: bool) -> Record:
    return Record(source="proxy", run_id="proxy-1", index=i, started_at=1000.0 + i * 0.01,
                  ending="truncated" if bad else "complete", passed=not bad, concurrency=level,
                  response_id=f"chatcmpl-{i}")


def test_a_proxy_store_with_a_thousand_levels_is_searched_in_powers_of_two(tmp_path: Path) -> None:
    # Streams in flight 1…1000 at the proxy; every stream started with 512 or more in flight fails.
    records = [_record(i, i % 1000 + 1, i % 1000 + 1 >= 512 and i % 3 == 0) for i in range(3000)]
    store = SQLiteStore(str(tmp_path / "proxy.db"))
    store.write(records)
    store.close()
    analysis = analyze_sources([str(tmp_path / "proxy.db")])
    level = analysis.attribute("concurrency")
    assert level is not None and level.best is not None and level.significant
    assert [v.value for v in level.values] == ["1", "2–3", "4–7", "8–15", "16–31", "32–63", "64–127",
                                               "128–255", "256–511", "512–1023"]
    assert level.best.values == ("512–1023",)
    assert level.best.tried == 54  # the 55 ranges of 10 buckets, less the one holding them all
    assert "ran at concurrency 512–1023" in " ".join(analysis.headlines)
    # The load curve in one line, one entry per range: 489 of the 1,467 streams at 512–1023 failed.
    assert ("failure rate by concurrency: 0% at 1, 0% at 2–3, 0% at 4–7, 0% at 8–15, 0% at 16–31, "
            "0% at 32–63, 0% at 64–127, 0% at 128–255, 0% at 256–511, 33.3% at 512–1023"
            ) in analysis.headlines


def test_a_sweeps_twelve_levels_keep_their_own_values(tmp_path: Path) -> None:
    levels = [1, 2, 4, 8, 12, 16, 24, 32, 48, 60, 64, 100]
    records = [_record(i, levels[i % 12], levels[i % 12] >= 60 and (i // 12) % 2 == 0) for i in range(1200)]
    path = tmp_path / "sweep.jsonl"
    path.write_bytes(b"".join(encode_record(r) for r in records))
    level = analyze_sources([str(path)]).attribute("concurrency")
    assert level is not None and level.best is not None
    assert [v.value for v in level.values] == [str(v) for v in levels]
    assert level.best.values == ("60", "64", "100")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sets(st.integers(min_value=1, max_value=5000), min_size=13, max_size=40))
def test_more_than_twelve_levels_fall_in_the_power_of_two_range_holding_each(
        tmp_path: Path, levels: set[int]) -> None:
    ordered = sorted(levels)
    records = [_record(i, level, i % 2 == 0) for i, level in enumerate(ordered * 2)]
    path = tmp_path / "many.jsonl"
    path.write_bytes(b"".join(encode_record(r) for r in records))
    level = analyze_sources([str(path)]).attribute("concurrency")
    assert level is not None

    def power_of_two_range(v: int) -> str:
        lo = 1 << (v.bit_length() - 1)
        return str(lo) if lo == 1 else f"{lo}–{2 * lo - 1}"

    assert [v.value for v in level.values] == sorted({power_of_two_range(v) for v in levels},
                                                     key=lambda s: int(s.split("–")[0]))
    assert sum(v.rate.total for v in level.values) == len(records)
