"""Healed streams in ``sseguard analyze``: attempts are not client streams, healed streams count as
streams whose upstream broke, and every engine counts the same.

The run: 60 streams on route ``chatcmpl-`` (58 fine, 2 stalled, none healed) and 40 on route ``gw-``,
whose upstream breaks every time: 25 healed by resume (one truncated attempt each), 10 by retry (one
503 attempt each), 5 resumed twice and still truncated (two truncated attempts each). 145 records, 100
client streams. The client-side failure search barely sees ``gw-`` (5 of 40 vs 2 of 60); counting
healed streams it is the whole story.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import psycopg
import pytest
from rich.console import Console

from _spark_support import local_spark
from sseguard.analyze.export import export_parquet
from sseguard.analyze.run import run_analyze
from sseguard.analyze.summary import analyze_sources
from sseguard.core.record import Record
from sseguard.store import open_store
from support.analyze_golden import assert_same

HEADLINE = ("10 streams healed by retry, 25 by resume, 5 failed despite healing; behind them 45 upstream "
            "attempts the clients never saw (35 truncated, 10 http_error), 350 completion tokens spent on "
            "them; counting healed streams, the upstream broke on 42 of 100")


def _stream(i: int, *, pfx: str, ending: str = "complete", healed: str = "none", attempts: int = 0,
            tokens: int = 0) -> Record:
    return Record(source="proxy", run_id="heal", arm="gw", index=i, workload="proxy", started_at=1000.0 + i,
                  ending=ending, passed=ending == "complete", response_id=f"{pfx}-{i}", id_prefix=pfx,
                  healed=healed, heal_attempts=attempts, heal_tokens=tokens, status=200)


def _attempt(i: int, of: int, ending: str) -> Record:
    return Record(source="proxy", run_id="heal", arm="gw", index=i, workload="proxy", started_at=1000.0 + of,
                  ending=ending, status=503 if ending == "http_error" else 200, heal_of=of,
                  response_id=None if ending == "http_error" else f"gw-{i}")


def healed_run() -> list[Record]:
    out = [_stream(i, pfx="chatcmpl", ending="stalled" if i in (7, 31) else "complete") for i in range(60)]
    extra = 100
    for i in range(60, 100):
        if i < 85:
            out.append(_stream(i, pfx="gw", healed="resume", attempts=1, tokens=10))
            out.append(_attempt(extra, i, "truncated"))
            extra += 1
        elif i < 95:
            out.append(_stream(i, pfx="gw", healed="retry", attempts=1))
            out.append(_attempt(extra, i, "http_error"))
            extra += 1
        else:
            out.append(_stream(i, pfx="gw", ending="truncated", healed="resume", attempts=2, tokens=20))
            out.extend(_attempt(extra + k, i, "truncated") for k in range(2))
            extra += 2
    assert len(out) == 145
    return out


def _jsonl(path: Path) -> Path:
    encode = msgspec.json.Encoder().encode
    path.write_bytes(b"".join(encode(r) + b"\n" for r in healed_run()))
    return path


def _parquet(tmp: Path) -> Path:
    """The run as ``sseguard export`` writes it: the heal columns must survive the export."""
    target = tmp / "pq"
    assert export_parquet([str(_jsonl(tmp / "p.jsonl"))], target) == 145
    return target


def _analysis(sources: list[str], **kw: Any) -> dict[str, Any]:
    result: dict[str, Any] = analyze_sources(sources, **kw).to_dict()
    return result


def test_attempts_are_not_client_streams_and_healed_streams_are_counted(tmp_path: Path) -> None:
    got = _analysis([str(_jsonl(tmp_path / "r.jsonl"))])
    assert got["requests"] == 100
    assert got["failed"] == 7
    assert got["endings"] == {"complete": 93, "truncated": 5, "stalled": 2}
    heal = got["healing"]
    assert heal["streams"] == 100
    assert (heal["healed_by_retry"], heal["healed_by_resume"], heal["failed_despite_healing"]) == (10, 25, 5)
    assert heal["upstream_attempts"] == {"truncated": 35, "http_error": 10}
    assert (heal["attempts_spent"], heal["tokens_spent"]) == (45, 350)
    assert heal["upstream_broke"]["failed"] == 42
    assert got["headlines"][1].startswith(HEADLINE)


def test_the_route_whose_streams_are_all_healed_is_found(tmp_path: Path) -> None:
    got = _analysis([str(_jsonl(tmp_path / "r.jsonl"))])
    heal = got["healing"]
    top = heal["attributes"][0]
    assert top["key"] == "id_prefix"
    assert top["best"]["values"] == ["gw"]
    assert top["best"]["inside"]["failed"] == 40 and top["best"]["inside"]["total"] == 40
    assert top["significant"] is True
    assert heal["per_value"]["id_prefix"] == [
        {"value": "chatcmpl", "streams": 60, "healed": 0, "failed": 2},
        {"value": "gw", "streams": 40, "healed": 35, "failed": 5},
    ] or heal["per_value"]["id_prefix"] == [
        {"value": "gw", "streams": 40, "healed": 35, "failed": 5},
        {"value": "chatcmpl", "streams": 60, "healed": 0, "failed": 2},
    ]
    line = got["headlines"][2]
    assert line.startswith("healed or failed: 40 of 42 failing streams (35 healed, 5 truncated) had "
                           "response ids starting `gw-` (40 of 40 such streams broke upstream")


def test_a_run_without_healing_has_no_healing_section(tmp_path: Path) -> None:
    plain = [msgspec.structs.replace(r, healed=None, heal_attempts=0, heal_tokens=0)
             for r in healed_run() if r.heal_of is None]
    path = tmp_path / "plain.jsonl"
    path.write_bytes(b"".join(msgspec.json.encode(r) + b"\n" for r in plain))
    got = _analysis([str(path)])
    assert "healing" not in got
    assert got["requests"] == 100


def test_text_json_and_html_reports_show_healed_and_failed_per_value(tmp_path: Path) -> None:
    source = str(_jsonl(tmp_path / "r.jsonl"))
    console = Console(record=True, width=100)
    run_analyze([source], console=console, err_console=Console(stderr=True), html=str(tmp_path / "r.html"))
    text = console.export_text()
    assert "Healed or failed per value" in text
    assert HEADLINE in " ".join(text.split())
    rows = [line.split() for line in text.splitlines()]
    assert ["gw", "40", "35", "5"] in rows or ["id_prefix", "gw", "40", "35", "5"] in rows
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "<h2>Healing</h2>" in page
    assert "<td>gw</td><td>40</td><td>35</td><td>5</td>" in page
    echoed: list[str] = []
    run_analyze([source], as_json=True, console=console, err_console=Console(stderr=True),
                echo=echoed.append)
    assert json.loads(echoed[0])["healing"]["healed_by_resume"] == 25


# ── every engine counts the same ─────────────────────────────────────────────────────────────────
def test_duckdb_parquet_and_sqlite_count_healing_as_jsonl(tmp_path: Path) -> None:
    want = _analysis([str(_jsonl(tmp_path / "r.jsonl"))])
    assert_same(want, _analysis([str(_parquet(tmp_path))]))
    store = open_store(str(tmp_path / "s.db"))
    store.write(healed_run())
    store.close()
    assert_same(want, _analysis([str(tmp_path / "s.db")]))


def test_the_postgresql_store_counts_healing_as_jsonl(pg_dsn: str, tmp_path: Path) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS sseguard_records, sseguard_meta")
    store = open_store(pg_dsn)
    store.write(healed_run())
    store.close()
    assert_same(_analysis([str(_jsonl(tmp_path / "r.jsonl"))]), _analysis([pg_dsn]))


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    session = local_spark()
    yield session
    session.stop()


@pytest.mark.timeout(900)
def test_spark_counts_healing_as_duckdb_on_jsonl_and_parquet(spark: Any, tmp_path: Path) -> None:
    source = str(_jsonl(tmp_path / "r.jsonl"))
    want = _analysis([source])
    assert_same(want, _analysis([source], engine="spark", spark=spark))
    assert_same(want, _analysis([str(_parquet(tmp_path))], engine="spark", spark=spark))


def test_export_keeps_the_heal_columns_from_files_and_stores(tmp_path: Path) -> None:
    want = _analysis([str(_jsonl(tmp_path / "r.jsonl"))])
    store = open_store(str(tmp_path / "s.db"))
    store.write(healed_run())
    store.close()
    assert export_parquet([str(tmp_path / "s.db")], tmp_path / "from-store") == 145
    got = _analysis([str(tmp_path / "from-store")])
    assert got["healing"]["healed_by_resume"] == 25
    assert_same(want, got)
    assert_same(want, _analysis([str(_parquet(tmp_path))]))


def test_retry_amplification_above_one_and_a_half_is_a_headline() -> None:
    from sseguard.analyze.headlines import healing
    from sseguard.analyze.model import Healing
    from sseguard.analyze.stats import Rate

    stormy = Healing(streams=10, by_retry=2, by_resume=0, failed=8, spent_attempts=2, spent_tokens=0,
                     attempts={"transport_error": 18, "http_error": 2}, broke=Rate.of(10, 10))
    assert healing(stormy)[1] == ("retry amplification: 3.00 upstream requests per client request "
                                  "(30 for 10 client streams); retries are adding load to an "
                                  "upstream that keeps failing")
    calm = Healing(streams=10, by_retry=2, by_resume=0, failed=0, spent_attempts=2, spent_tokens=0,
                   attempts={"http_error": 2}, broke=Rate.of(2, 10))
    assert not any(line.startswith("retry amplification") for line in healing(calm))
