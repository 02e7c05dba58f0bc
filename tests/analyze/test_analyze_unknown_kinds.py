"""The analysis's row for unknown kinds: streams per protocol and kind, the same in every engine
(DuckDB over JSONL and Parquet, the SQLite and PostgreSQL stores; Spark in ``test_analyze_backends``),
in text, ``--json`` and HTML, and never a verdict."""

from __future__ import annotations

import json
import re
from pathlib import Path

import psycopg
import pyarrow.parquet as pq
import pytest
from rich.console import Console
from typer.testing import CliRunner

from sseguard.analyze.export import export_parquet
from sseguard.analyze.report import print_summary, render_html
from sseguard.analyze.summary import analyze_sources
from sseguard.cli import app
from sseguard.core.record import encode_record
from sseguard.store import open_store
from support.unknown import EXPECTED, records


def _jsonl(path: Path) -> str:
    path.write_bytes(b"".join(encode_record(r) for r in records()))
    return str(path)


def test_duckdb_counts_the_streams_per_protocol_and_kind_and_judges_none(tmp_path: Path) -> None:
    analysis = analyze_sources([_jsonl(tmp_path / "r.jsonl")])
    assert analysis.to_dict()["unknown_kinds"] == EXPECTED
    # Never a verdict: the one failure is the truncated stream, whatever the others carried.
    assert (analysis.total.failed, analysis.total.total, analysis.failures) == (1, 10, {"truncated": 1})
    assert ("streams carried kinds their protocol's tables do not know: delta.foo (chat) in 3 of 6, "
            "chunk.obfuscation2 (chat) in 1 of 6, block:hologram (messages) in 1 of 4, "
            "delta:hologram_delta (messages) in 1 of 4 and 1 more; passed through and judged by their "
            "endings alone (classify them: sseguard protocols --sdk-drift)") in analysis.headlines


def test_a_run_without_unknown_kinds_has_no_row(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(b"".join(encode_record(r) for r in records() if not r.unknown_kinds))
    data = analyze_sources([str(path)]).to_dict()
    assert "unknown_kinds" not in data


def test_exported_parquet_keeps_them_and_counts_the_same(tmp_path: Path) -> None:
    assert export_parquet([_jsonl(tmp_path / "r.jsonl")], tmp_path / "pq") == 10
    table = pq.read_table(next((tmp_path / "pq").rglob("*.parquet")))
    got = sorted(x for x in table.column("unknown_kinds").to_pylist() if x != "[]")
    assert got == ['["block:hologram","delta:hologram_delta"]', '["chunk.obfuscation2","delta.foo"]',
                   '["delta.foo"]', '["delta.foo"]', '["telepathy"]']
    assert analyze_sources([str(tmp_path / "pq")]).to_dict()["unknown_kinds"] == EXPECTED


def test_parquet_exported_before_the_column_existed_still_analyses(tmp_path: Path) -> None:
    export_parquet([_jsonl(tmp_path / "r.jsonl")], tmp_path / "pq")
    for file in (tmp_path / "pq").rglob("*.parquet"):
        table = pq.read_table(file)
        pq.write_table(table.drop_columns(["unknown_kinds"]), file)
    analysis = analyze_sources([str(tmp_path / "pq")])
    assert analysis.requests == 10 and analysis.unknown_kinds == []


def test_the_sqlite_store_counts_them_in_sql_with_weights(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "s.db"))
    store.write(records(), [1, 2, 1, 1, 1, 1, 3, 1, 1, 1])
    store.close()
    got = analyze_sources([str(tmp_path / "s.db")]).to_dict()["unknown_kinds"]
    assert got == [
        {"api": "chat", "kind": "delta.foo", "streams": 4, "of": 7},
        {"api": "messages", "kind": "block:hologram", "streams": 3, "of": 6},
        {"api": "messages", "kind": "delta:hologram_delta", "streams": 3, "of": 6},
        {"api": "chat", "kind": "chunk.obfuscation2", "streams": 2, "of": 7},
        {"api": "messages", "kind": "telepathy", "streams": 1, "of": 6},
    ]


def test_the_postgresql_store_counts_them_in_the_server(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS sseguard_records, sseguard_meta")
    store = open_store(pg_dsn)
    store.write(records())
    store.close()
    assert analyze_sources([pg_dsn]).to_dict()["unknown_kinds"] == EXPECTED


def test_a_store_and_a_file_of_one_run_add_up(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "s.db"))
    store.write(records())
    store.close()
    path = tmp_path / "more.jsonl"
    path.write_bytes(b"".join(encode_record(r) for r in records(start=100)))
    got = analyze_sources([str(tmp_path / "s.db"), str(path)]).to_dict()["unknown_kinds"]
    assert got == [{**row, "streams": 2 * row["streams"], "of": 2 * row["of"]} for row in EXPECTED]


def test_text_json_and_html_show_the_row(tmp_path: Path) -> None:
    source = _jsonl(tmp_path / "r.jsonl")
    analysis = analyze_sources([source])
    console = Console(record=True, width=200)
    print_summary(analysis, console)
    text = console.export_text()
    # rich wraps a title to its table's width: words are compared, rows by their cells
    words = " ".join(text.split())
    assert "Kinds the protocol tables do not know (passed through; never a verdict)" in words
    assert re.search(r"chat\s+delta\.foo\s+3\s+6", text)
    assert re.search(r"messages\s+telepathy\s+1\s+4", text)
    page = render_html(analysis, [], {})
    assert "<h2>Unknown kinds</h2>" in page
    assert ("<tr><td>chat</td><td>delta.foo</td><td>3</td><td>6</td></tr>"
            "<tr><td>chat</td><td>chunk.obfuscation2</td><td>1</td><td>6</td></tr>") in page
    result = CliRunner().invoke(app, ["analyze", source, "--json"])
    assert result.exit_code == 1, result.output  # the truncated stream, nothing else
    assert json.loads(result.stdout)["unknown_kinds"] == EXPECTED


@pytest.mark.parametrize("kinds", [["<script>", "a&b"]])
def test_names_from_the_wire_are_escaped_in_html(tmp_path: Path, kinds: list[str]) -> None:
    recs = records()
    recs[0].unknown_kinds = kinds
    path = tmp_path / "r.jsonl"
    path.write_bytes(b"".join(encode_record(r) for r in recs))
    page = render_html(analyze_sources([str(path)]), [], {})
    assert "<td>&lt;script&gt;</td>" in page and "<td>a&amp;b</td>" in page and "<script>" not in page
