"""What `sseguard analyze` reads and refuses: sources, time ranges and --where, bad input as one line."""

from __future__ import annotations

import io
import json
import socket
from pathlib import Path

import msgspec
import pytest
from rich.console import Console

from sseguard.analyze.facts import Filter, bucket_edges, log_bucket
from sseguard.analyze.run import make_filter, parse_time, parse_where, run_analyze
from sseguard.analyze.sources import FileSource, StoreSource, resolve
from sseguard.analyze.summary import analyze_sources
from sseguard.core.errors import ConfigError
from sseguard.store import open_store
from support.analyze import routed
from support.analyze_golden import jsonl, records

T0 = 1_750_000_000.0


def _write(path: Path, recs: list) -> Path:  # type: ignore[type-arg]
    path.write_bytes(b"".join(msgspec.json.encode(r) + b"\n" for r in recs))
    return path


def test_sources_of_every_kind_resolve(tmp_path: Path) -> None:
    a = _write(tmp_path / "a.jsonl", routed(n=10))
    b = _write(tmp_path / "b.jsonl", routed(n=10))
    (tmp_path / "s.db").touch()
    got = resolve([str(tmp_path / "*.jsonl"), str(tmp_path / "s.db"), "postgresql://u:pw@h/db"])
    assert got[0] == FileSource("jsonl", (str(a), str(b)))
    assert got[1] == StoreSource("sqlite", str(tmp_path / "s.db"))
    assert got[2].label == "postgresql://u:***@h/db"
    assert resolve([str(tmp_path)]) == [FileSource("jsonl", (str(a), str(b)))]


@pytest.mark.parametrize("source", ["missing.jsonl", "missing-dir/*.jsonl", "gone.db", "sqlite:///gone.db",
                                    "ftp://x/y", "sqlite://relative.db"])
def test_a_source_that_does_not_exist_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  source: str) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as err:
        analyze_sources([source])
    assert "\n" not in str(err.value)


def test_a_file_that_is_not_records_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "notes.jsonl").write_text("these are notes\n")
    with pytest.raises(ConfigError, match=r"notes\.jsonl") as err:
        analyze_sources([str(tmp_path / "notes.jsonl")])
    assert "\n" not in str(err.value)
    (tmp_path / "plain.db").write_text("not a database")
    with pytest.raises(ConfigError, match=r"plain\.db"):
        analyze_sources([str(tmp_path / "plain.db")])


def test_a_record_of_a_newer_schema_names_both_versions(tmp_path: Path) -> None:
    rec = routed(n=3)[0]
    rec.schema = 7
    path = _write(tmp_path / "new.jsonl", [rec, *routed(n=3)[1:]])
    with pytest.raises(ConfigError, match=r"schema 7; this sseguard reads schema 1 and older"):
        analyze_sources([str(path)])


def test_a_postgresql_that_refuses_is_one_line() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConfigError, match=r"cannot read store postgresql://u:\*\*\*@127\.0\.0\.1") as err:
        analyze_sources([f"postgresql://u:secret@127.0.0.1:{port}/db"])
    assert "secret" not in str(err.value) and "\n" not in str(err.value)


def test_time_range_and_where_select_records(tmp_path: Path) -> None:
    recs = routed(n=300)  # started T0 + i * 0.2
    for i, r in enumerate(recs):
        r.arm = "gw" if i % 2 else "direct"
    path = str(_write(tmp_path / "r.jsonl", recs))
    since = "2025-06-15T15:07:00"  # T0 + 20 s: records 100 and up
    assert parse_time(since, "--since") == T0 + 20
    assert analyze_sources([path], flt=make_filter(since=since)).requests == 200
    assert analyze_sources([path], flt=Filter(until=T0 + 10)).requests == 50
    assert analyze_sources([path], flt=make_filter(where="arm=gw")).requests == 150
    assert analyze_sources([path], flt=make_filter(where="arm=gw,arm=direct,run=run-1")).requests == 300
    with pytest.raises(ConfigError, match="no records to analyze in the time range"):
        analyze_sources([path], flt=make_filter(where="api=messages"))


@pytest.mark.parametrize(("text", "message"), [("arm", "column=value"), ("colour=red", "cannot filter on"),
                                               ("concurrency=high", "whole number")])
def test_a_bad_where_is_one_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_where(text)


def test_relative_and_bad_times() -> None:
    assert parse_time("24h", "--since", now=T0) == T0 - 86400
    with pytest.raises(ConfigError, match="--until"):
        parse_time("yesterday", "--until")
    with pytest.raises(ConfigError, match="empty"):
        make_filter(since="2026-01-02", until="2026-01-01")


@pytest.mark.parametrize(("base", "start"), [(2, 1), (4, 1024)])
def test_bucket_edges_agree_with_the_label_formula(base: int, start: int) -> None:
    edges = bucket_edges(base, start)
    for b, edge in enumerate(edges, start=1):
        assert log_bucket(edge, base, start) == b
        assert log_bucket(edge - 1, base, start) == b - 1
    assert edges[:3] == ([1, 2, 4] if base == 2 else [1024, 4096, 16384])


def test_analyze_writes_json_html_and_quotes_failing_records_fetched_by_query(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    store = open_store(db)
    store.write(records("every_kind"))
    store.close()
    out: list[str] = []
    console = Console(file=io.StringIO())
    result = run_analyze([db, str(jsonl("demo", tmp_path / "d.jsonl"))], as_json=True,
                         html=str(tmp_path / "r.html"), console=console, err_console=console,
                         echo=out.append)
    assert json.loads(out[0])["requests"] == 1200 + 1152 == result.requests
    page = (tmp_path / "r.html").read_text()
    assert page.count("<section class=evidence>") == 10
    assert f"of {result.total.failed} failing streams" in page
