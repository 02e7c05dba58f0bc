"""Records whose streams carried kinds their protocol's tables do not know, and the analysis's row
for them, written out by hand (issue 41: unknown is counted, never judged)."""

from __future__ import annotations

from typing import Any

from sseguard.core.record import Record

#: (api, ending, unknown kinds) per record: chat 0–5, messages 6–9. Only record 3 fails (truncated):
#: records 0, 1, 6 and 7 carry unknown kinds and ended well, so they pass.
ROWS: list[tuple[str, str, list[str]]] = [
    ("chat", "complete", ["delta.foo"]),
    ("chat", "complete", ["chunk.obfuscation2", "delta.foo"]),
    ("chat", "complete", []),
    ("chat", "truncated", ["delta.foo"]),
    ("chat", "complete", []),
    ("chat", "complete", []),
    ("messages", "complete", ["block:hologram", "delta:hologram_delta"]),
    ("messages", "complete", ["telepathy"]),
    ("messages", "complete", []),
    ("messages", "complete", []),
]

#: ``Analysis.to_dict()["unknown_kinds"]`` of ``records()``: most streams first, then api and kind.
EXPECTED: list[dict[str, Any]] = [
    {"api": "chat", "kind": "delta.foo", "streams": 3, "of": 6},
    {"api": "chat", "kind": "chunk.obfuscation2", "streams": 1, "of": 6},
    {"api": "messages", "kind": "block:hologram", "streams": 1, "of": 4},
    {"api": "messages", "kind": "delta:hologram_delta", "streams": 1, "of": 4},
    {"api": "messages", "kind": "telepathy", "streams": 1, "of": 4},
]


def records(start: int = 0, run: str = "u") -> list[Record]:
    return [Record(run_id=run, arm="a", api=api, index=start + i, started_at=1000.0 + start + i,
                   ending=ending, passed=ending == "complete", unknown_kinds=list(kinds),
                   response_id=f"id-{start + i}")
            for i, (api, ending, kinds) in enumerate(ROWS)]
