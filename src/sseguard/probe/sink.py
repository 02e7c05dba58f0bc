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

from sseguard.core.errors import ConfigError
from sseguard.core.record import Record, decode_record, encode_record

RESULTS = "results.jsonl"
#: One ``--workers`` process's records until the run merges them into ``RESULTS``.
_WORKER_RESULTS = "results.w{index}.jsonl"
_WORKER_GLOB = "results.w*.jsonl"
EVIDENCE_DIR = "evidence"
RUN_FILE = "run.json"
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


class Sink(Protocol):
    """What ``run_request`` writes through; a Locust user or a test passes its own."""

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
    """Appends to ``OUT/results.jsonl`` (or another ``results`` file) and writes
    ``OUT/evidence/<name>.json``."""

    def __init__(self, out_dir: str | os.PathLike[str], *, results: str = RESULTS) -> None:
        self.out = Path(out_dir)
        self._results = results
        try:
            (self.out / EVIDENCE_DIR).mkdir(parents=True, exist_ok=True)
            self._file = (self.out / results).open("ab")
        except OSError as exc:
            raise ConfigError(f"cannot write to {self.out}: {exc.strerror or exc}") from None
        self.written = 0

    @property
    def results_path(self) -> Path:
        return self.out / self._results

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


def read_results(out_dir: str | os.PathLike[str], name: str = RESULTS) -> Iterator[Record]:
    """Records already in ``OUT/results.jsonl``; a torn last line (killed mid-write) is skipped."""
    path = Path(out_dir) / name
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


def repair_results(out_dir: str | os.PathLike[str], name: str = RESULTS) -> int:
    """Cut a torn last line off ``results.jsonl`` before appending to it; returns bytes removed."""
    path = Path(out_dir) / name
    if not path.exists():
        return 0
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return 0
    keep = data.rfind(b"\n") + 1
    with path.open("r+b") as f:
        f.truncate(keep)
    return len(data) - keep


def worker_results(index: int) -> str:
    """The results file of ``--workers`` process ``index``, inside the run's directory."""
    return _WORKER_RESULTS.format(index=index)


def merge_worker_results(out_dir: str | os.PathLike[str]) -> int:
    """Append every worker's results file to ``results.jsonl`` (whole lines only) and remove it;
    returns the records moved. Run after the workers end, and before a resume reads the run."""
    out = Path(out_dir)
    parts = sorted(out.glob(_WORKER_GLOB))
    if not parts:
        return 0
    repair_results(out)
    moved = 0
    with (out / RESULTS).open("ab") as target:
        for part in parts:
            repair_results(out, part.name)
            data = part.read_bytes()
            target.write(data)
            moved += data.count(b"\n")
        target.flush()
        os.fsync(target.fileno())
    for part in parts:
        part.unlink()
    return moved


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
