"""Loading records: JSONL files, directories of worker files, record stores, and one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from sseguard.analyze import load_records
from sseguard.analyze.load import is_store_source
from sseguard.core.errors import ConfigError
from sseguard.core.record import Record, encode_record
from support.analyze import rec, routed


def write_jsonl(path: Path, records: list[Record]) -> Path:
    path.write_bytes(b"".join(encode_record(r) for r in records))
    return path


def test_a_jsonl_file_round_trips(tmp_path: Path) -> None:
    records = routed(n=40)
    assert load_records([str(write_jsonl(tmp_path / "results.jsonl", records))]) == records


def test_a_directory_merges_every_worker_file_and_ignores_other_files(tmp_path: Path) -> None:
    records = routed(n=60)
    write_jsonl(tmp_path / "worker-1.jsonl", records[:25])
    write_jsonl(tmp_path / "worker-2.jsonl", records[25:])
    (tmp_path / "evidence-3.txt").write_text("not records")
    loaded = load_records([str(tmp_path)])
    assert sorted(r.index for r in loaded) == list(range(60))


def test_blank_lines_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(b"\n" + encode_record(rec(1)) + b"\n\n" + encode_record(rec(2)))
    assert [r.index for r in load_records([str(path)])] == [1, 2]


@pytest.mark.parametrize(("content", "line", "words"), [
    (b'{"arm": "a"}\nnot json\n', 2, "not a valid record"),
    (b'{"arm": "a"}\n{"index": "seven"}\n', 2, "index"),
    (b'{"arm": "a"}\n{"arm": "b", "ind', 2, "incomplete"),
    (b'{"schema": 99}\n', 1, "newer"),
])
def test_a_malformed_line_is_one_error_naming_file_and_line(tmp_path: Path, content: bytes, line: int,
                                                            words: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as err:
        load_records([str(path)])
    message = str(err.value)
    assert message.startswith(f"{path}:{line}: ") and words in message and "\n" not in message


@pytest.mark.parametrize("source", ["missing.jsonl", "empty-dir", "missing.db", "sqlite:///missing.db"])
def test_unreadable_sources_are_config_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              source: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty-dir").mkdir()
    with pytest.raises(ConfigError):
        load_records([source])
    assert not (tmp_path / "missing.db").exists()  # reading never creates a database


def test_no_source_is_an_error() -> None:
    with pytest.raises(ConfigError):
        load_records([])


def test_stores_are_recognised_by_suffix_or_scheme() -> None:
    assert all(map(is_store_source, ["x.db", "runs/x.sqlite", "sqlite:///x.db", "postgresql://h/db",
                                     "postgres://h/db"]))
    assert not any(map(is_store_source, ["results.jsonl", "out", "-"]))


def test_a_sqlite_store_is_read_by_path_and_by_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store_module = pytest.importorskip("sseguard.store")
    records = routed(n=30)
    store = store_module.open_store(str(tmp_path / "runs.db"))
    store.write(records)
    store.close()
    by_path = load_records([str(tmp_path / "runs.db")])
    monkeypatch.chdir(tmp_path)
    by_url = load_records(["sqlite:///runs.db"])
    assert sorted(r.index for r in by_path) == sorted(r.index for r in by_url) == list(range(30))
    assert {r.ending for r in by_path} == {r.ending for r in records}


def test_a_file_that_is_not_a_database_is_one_line_error(tmp_path: Path) -> None:
    pytest.importorskip("sseguard.store")
    path = tmp_path / "bogus.db"
    path.write_text("this is not sqlite")
    with pytest.raises(ConfigError) as err:
        load_records([str(path)])
    assert "\n" not in str(err.value)
