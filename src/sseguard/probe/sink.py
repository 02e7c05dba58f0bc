"""Where finished requests go: ``OUT/results.jsonl`` (one ``Record`` a line) and ``OUT/evidence/*.json``.

Each line is written and flushed as its request finishes, so Ctrl-C (or a crash) keeps everything that
finished; ``--resume`` reads the same file back to skip what is done. Records and evidence arrive here
already redacted; the sink only writes.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import msgspec

from sseguard.errors import ConfigError
from sseguard.record import Record, decode_record, encode_record

RESULTS = "results.jsonl"
EVIDENCE_DIR = "evidence"
RUN_FILE = "run.json"
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


class Sink(Protocol):
    """What the engine writes through; a Locust user or a test passes its own."""

    def write(self, record: Record) -> None:
        """Keep one finished request."""
        ...

    def write_evidence(self, name: str, document: dict[str, Any]) -> str:
        """Keep one evidence document; returns the reference stored in ``Record.evidence``."""
        ...


class MemorySink:
    """Keeps everything in lists (tests, embedding)."""

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.evidence: dict[str, dict[str, Any]] = {}

    def write(self, record: Record) -> None:
        self.records.append(record)

    def write_evidence(self, name: str, document: dict[str, Any]) -> str:
        self.evidence[name] = document
        return name


class JsonlSink:
    """Appends to ``OUT/results.jsonl`` and writes ``OUT/evidence/<name>.json``."""

    def __init__(self, out_dir: str | os.PathLike[str]) -> None:
        self.out = Path(out_dir)
        try:
            (self.out / EVIDENCE_DIR).mkdir(parents=True, exist_ok=True)
            self._file = (self.out / RESULTS).open("ab")
        except OSError as exc:
            raise ConfigError(f"cannot write to {self.out}: {exc.strerror or exc}") from None
        self.written = 0

    @property
    def results_path(self) -> Path:
        return self.out / RESULTS

    def write(self, record: Record) -> None:
        self._file.write(encode_record(record))
        self._file.flush()
        self.written += 1

    def write_evidence(self, name: str, document: dict[str, Any]) -> str:
        rel = f"{EVIDENCE_DIR}/{_SAFE.sub('_', name)}.json"
        path = self.out / rel
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(document, indent=1, ensure_ascii=False, default=str), "utf-8")
        tmp.replace(path)
        return rel

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> JsonlSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_results(out_dir: str | os.PathLike[str]) -> Iterator[Record]:
    """Records already in ``OUT/results.jsonl``; a torn last line (killed mid-write) is skipped."""
    path = Path(out_dir) / RESULTS
    if not path.exists():
        return
    with path.open("rb") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                yield decode_record(line)
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue


def repair_results(out_dir: str | os.PathLike[str]) -> int:
    """Cut a torn last line off ``results.jsonl`` before appending to it; returns bytes removed."""
    path = Path(out_dir) / RESULTS
    if not path.exists():
        return 0
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return 0
    keep = data.rfind(b"\n") + 1
    with path.open("r+b") as f:
        f.truncate(keep)
    return len(data) - keep


def write_run_file(out_dir: str | os.PathLike[str], document: dict[str, Any]) -> None:
    path = Path(out_dir) / RUN_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(document, indent=1, default=str), "utf-8")
    tmp.replace(path)


def read_run_file(out_dir: str | os.PathLike[str]) -> dict[str, Any]:
    path = Path(out_dir) / RUN_FILE
    try:
        doc = json.loads(path.read_text("utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot resume {out_dir}: {path.name} unreadable "
                          f"({exc.strerror or exc})") from None
    except ValueError as exc:
        raise ConfigError(f"cannot resume {out_dir}: {path.name} is not JSON ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("config"), dict):
        raise ConfigError(f"cannot resume {out_dir}: {path.name} has no saved settings")
    return doc
