"""Reports: a self-contained HTML file, valid PNGs, a terminal summary, and no secret anywhere."""

from __future__ import annotations

import base64
import re
import struct
from pathlib import Path

import pytest
from rich.console import Console

from sseguard.analyze import analyze, print_summary, write_html, write_pngs
from sseguard.core.contract import StreamChecker
from sseguard.core.errors import ConfigError
from sseguard.core.policy import Policy
from sseguard.core.record import Record, record_from_verdict
from support.analyze import by_api, load_sweep, rec, routed
from support.streams import text_stream

KEY = "sk-live-analyze0123456789abcdefXYZ"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(data: bytes) -> tuple[int, int]:
    assert data.startswith(PNG_SIGNATURE) and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def secret_records() -> list[Record]:
    """One record written properly (headers redacted on the way in) and one hand-built that leaks."""
    checker = StreamChecker()
    checker.feed(text_stream(["the key is", f" {KEY}"], done=False))
    clean = record_from_verdict(checker.close(), policy=Policy.from_spec(), index=1,
                                started_at=1_750_000_001.0,
                                headers={"Authorization": f"Bearer {KEY}", "x-api-key": KEY,
                                         "x-request-id": "r1", "server": "gw"})
    leaky = rec(2, ending="truncated", started=2.0, error=f"upstream said Authorization: Bearer {KEY}",
                headers={"x-debug": f"Bearer {KEY}", "x-api-key": KEY, "server": "gw"},
                tail=f'data: {{"content": "<script>alert(1)</script> {KEY}"}}\n\n',
                findings=("markup_leak",))
    return [clean, leaky, *[rec(i, started=float(i)) for i in range(3, 40)]]


@pytest.fixture(scope="module")
def sweep_html(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    records = load_sweep(per_level=40)
    records += secret_records()
    path = write_html(analyze(records), records, tmp_path_factory.mktemp("html") / "report.html")
    return path, path.read_text(encoding="utf-8")


def test_html_is_one_file_with_embedded_plots(sweep_html: tuple[Path, str]) -> None:
    path, text = sweep_html
    assert sorted(p.name for p in path.parent.iterdir()) == ["report.html"]
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', text)
    assert len(images) == 3
    for image in images:
        assert png_size(base64.b64decode(image))[0] > 100


def test_html_references_nothing_outside_itself(sweep_html: tuple[Path, str]) -> None:
    _, text = sweep_html
    assert re.findall(r'\b(?:src|href)\s*=\s*"(?!data:)', text) == []
    for needle in ("<script", "<link", "url(", "@import", "<iframe"):
        assert needle not in text.lower()


def test_html_names_the_findings_and_shows_the_evidence(sweep_html: tuple[Path, str]) -> None:
    _, text = sweep_html
    assert "Evidence of the first failures" in text and "Failure rate vs concurrency" in text
    assert "concurrency" in text and "truncated" in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text  # peer text is escaped, never markup


def test_secrets_stay_redacted_in_the_html(sweep_html: tuple[Path, str]) -> None:
    _, text = sweep_html
    assert KEY not in text and "Bearer" not in text and "bearer" not in text
    assert "[REDACTED]" in text


def test_pngs_are_written_and_are_valid(tmp_path: Path) -> None:
    records = routed(n=120)
    written = write_pngs(analyze(records), records, tmp_path / "plots")
    names = sorted(p.name for p in written)
    assert names == ["failure_rate_vs_concurrency.png", "failures_over_time.png", "top_attribute.png"]
    for path in written:
        width, height = png_size(path.read_bytes())
        assert width > 100 and height > 100


def test_unwritable_targets_are_config_errors(tmp_path: Path) -> None:
    records = routed(n=20)
    analysis = analyze(records)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ConfigError):
        write_html(analysis, records, tmp_path / "missing-dir" / "r.html")
    with pytest.raises(ConfigError):
        write_pngs(analysis, records, blocker / "plots")


def test_terminal_summary_shows_tables_and_findings() -> None:
    records = routed()
    console = Console(record=True, width=200)
    print_summary(analyze(records), console)
    text = console.export_text()
    assert "Per arm" in text and "id_prefix" in text and "Findings" in text
    assert "all " in text and "response ids starting `gw-`" in text


def test_html_and_terminal_show_one_row_per_arm_with_its_api(tmp_path: Path) -> None:
    records = by_api(arms_per_api=2)
    analysis = analyze(records)
    html = write_html(analysis, records, tmp_path / "r.html").read_text("utf-8")
    section = html.split("<h2>Failure rate per arm</h2>", 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<tr><td>([^<]+)</td><td>([^<]+)</td>", section)
    assert rows == [(f"{api}-{k}", api) for api in ("chat", "messages", "responses") for k in (0, 1)]
    assert "<h2>Failure rate per api</h2>" in html
    assert "<h2>Api vs api (Fisher's exact test)</h2>" in html
    console = Console(record=True, width=160)
    print_summary(analysis, console)
    text = console.export_text()
    assert "Per api (protocol)" in text and "Api vs api" in text
    assert re.search(r"messages-0\s*│\s*messages\s*│", text)
