"""The golden analyses (tests/data/analyze): records and the in-memory path's answers on them.

``make_golden.py`` there wrote them with the analyzer as it was before counting moved into the
engines (ties between equal counts ordered by name), so every engine is held to those numbers.
"""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from sseguard.core.record import Record

DATA = Path(__file__).parents[1] / "data" / "analyze"
#: (data set, golden tag, tolerate) for every golden file.
CASES = [("demo", "strict", None), ("demo", "strict-tol", "missing_usage,truncated"),
         ("every_kind", "strict", None), ("every_kind", "strict-tol", "missing_usage,truncated")]


def records(name: str) -> list[Record]:
    with gzip.open(DATA / f"{name}.jsonl.gz") as f:
        return [msgspec.json.decode(line, type=Record) for line in f if line.strip()]


def jsonl(name: str, target: Path) -> Path:
    target.write_bytes(gzip.decompress((DATA / f"{name}.jsonl.gz").read_bytes()))
    return target


def golden(name: str, tag: str) -> dict[str, Any]:
    with gzip.open(DATA / f"{name}.{tag}.golden.json.gz") as f:
        data: dict[str, Any] = json.load(f)
        return data


def differences(want: Any, got: Any, path: str = "") -> Iterator[str]:
    """Where two analyses (``to_dict()`` forms) differ; floats compared to 1e-9 relative."""
    if isinstance(want, dict) and isinstance(got, dict):
        for key in sorted(set(want) | set(got), key=str):
            if key not in want or key not in got:
                yield f"{path}.{key}: only in {'golden' if key in want else 'result'}"
            else:
                yield from differences(want[key], got[key], f"{path}.{key}")
    elif isinstance(want, list) and isinstance(got, list):
        if len(want) != len(got):
            yield f"{path}: {len(want)} items in golden, {len(got)} in result"
        for i, (a, b) in enumerate(zip(want, got, strict=False)):
            yield from differences(a, b, f"{path}[{i}]")
    elif isinstance(want, float) or isinstance(got, float):
        if not (isinstance(want, int | float) and isinstance(got, int | float)
                and math.isclose(want, got, rel_tol=1e-9, abs_tol=1e-12)):
            yield f"{path}: golden {want!r}, result {got!r}"
    elif want != got:
        yield f"{path}: golden {want!r}, result {got!r}"


def assert_same(want: dict[str, Any], got: dict[str, Any]) -> None:
    found = list(differences(want, json.loads(json.dumps(got))))
    assert not found, "\n".join(found[:20])
