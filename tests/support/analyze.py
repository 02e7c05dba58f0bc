"""Synthetic runs with a known structure, for the analyzer's tests.

Each builder returns records as the probe would write them, with failures placed by a rule the test
knows (a route, a time window, a load curve, or nothing at all) and seeded, so every run is the same.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from sseguard.core.record import Record, id_prefix

T0 = 1_750_000_000.0
COMPLETE_TAIL = 'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
TRUNCATED_TAIL = 'data: {"choices":[{"delta":{"content":"and then"}}]}\n\n'


def rec(i: int, *, ending: str = "complete", rid: str | None = None, started: float = 0.0,
        findings: tuple[str, ...] = (), **facts: Any) -> Record:
    rid = rid if rid is not None else f"chatcmpl-{i:06x}"
    fields: dict[str, Any] = {
        "run_id": "run-1", "index": i, "started_at": T0 + started, "ending": ending,
        "response_id": rid, "id_prefix": id_prefix(rid), "status": 200,
        "findings": [{"kind": k, "detail": "", "frame": 3, "offset": 120} for k in findings],
        "headers": {"server": "chaos/1", "x-request-id": f"req-{i}"},
        "tail": COMPLETE_TAIL if ending == "complete" else TRUNCATED_TAIL,
        "prompt_bytes": 900, "reuse_index": i % 4, "concurrency": 8,
    }
    fields.update(facts)
    return Record(**fields)


def build(n: int, seed: int, fn: Callable[[int, random.Random], dict[str, Any]]) -> list[Record]:
    rng = random.Random(seed)
    return [rec(i, **fn(i, rng)) for i in range(n)]


def routed(seed: int = 1, n: int = 300) -> list[Record]:
    """A third of responses take the `gw-` route; only they fail (truncated, half the time)."""
    def one(i: int, rng: random.Random) -> dict[str, Any]:
        gw = rng.random() < 1 / 3
        rid = f"gw-{i}" if gw else str(8_731_209 + i)
        ending = "truncated" if gw and rng.random() < 0.5 else "complete"
        return {"rid": rid, "ending": ending, "started": i * 0.2}
    return build(n, seed, one)


def time_window(seed: int = 2, n: int = 360) -> list[Record]:
    """A six-minute run; streams started in minutes 2 and 3 are cut 30 % of the time, no others."""
    def one(i: int, rng: random.Random) -> dict[str, Any]:
        started = i * 1.0
        bad = 120 <= started < 240 and rng.random() < 0.3
        return {"started": started, "ending": rng.choice(["cut_mid_frame", "truncated"]) if bad else
                "complete"}
    return build(n, seed, one)


LEVELS = {1: 0.0, 8: 0.01, 16: 0.05, 32: 0.12, 60: 0.25}


def load_sweep(seed: int = 3, per_level: int = 120) -> list[Record]:
    """A sweep: each concurrency level in turn (so time mirrors load), failures rising with load."""
    out: list[Record] = []
    rng = random.Random(seed)
    i = 0
    for level_no, (level, p) in enumerate(LEVELS.items()):
        for j in range(per_level):
            bad = rng.random() < p
            out.append(rec(i, concurrency=level, started=level_no * 30 + j * 30 / per_level,
                           ending="truncated" if bad else "complete"))
            i += 1
    return out


def no_signal(seed: int = 4, n: int = 400, rate: float = 0.1) -> list[Record]:
    """Failures at random, whatever the attribute; attributes still vary."""
    def one(i: int, rng: random.Random) -> dict[str, Any]:
        return {
            "rid": f"{rng.choice(['gw', 'chatcmpl'])}-{i}", "started": i * 0.5,
            "ending": "truncated" if rng.random() < rate else "complete",
            "concurrency": rng.choice([8, 16]), "prompt_bytes": rng.choice([500, 5000, 50_000]),
            "headers": {"server": rng.choice(["b1", "b2"]), "x-request-id": f"req-{i}"},
        }
    return build(n, seed, one)


def mixed(seed: int = 5, per_level: int = 150) -> list[Record]:
    """The demo's story: a sweep over 1, 8, 32 with cuts growing with load, `gw-` ids truncated half the
    time, and error events in a short window inside the last level."""
    rng = random.Random(seed)
    out: list[Record] = []
    i = 0
    for level_no, (level, p_cut) in enumerate(((1, 0.0), (8, 0.03), (32, 0.3))):
        for j in range(per_level):
            started = level_no * 20 + j * 20 / per_level
            gw = rng.random() < 0.2
            rid = f"gw-{i}" if gw else str(9_000_000 + i)
            if 47 <= started < 53 and rng.random() < 0.9:
                ending = "error_event"
            elif gw and rng.random() < 0.5:
                ending = "truncated"
            elif rng.random() < p_cut:
                ending = "cut_mid_frame"
            else:
                ending = "complete"
            out.append(rec(i, rid=rid, concurrency=level, started=started, ending=ending))
            i += 1
    return out


APIS = ("chat", "responses", "messages")


def by_api(seed: int = 6, n: int = 450, *, arms_per_api: int = 1) -> list[Record]:
    """A side-by-side run over the three protocols, one arm each (or ``arms_per_api``); only the
    messages path truncates, 15 % of its streams."""
    def one(i: int, rng: random.Random) -> dict[str, Any]:
        api = APIS[i % 3]
        arm = f"{api}-{(i // 3) % arms_per_api}" if arms_per_api > 1 else api
        bad = api == "messages" and rng.random() < 0.15
        return {"api": api, "arm": arm, "started": i * 0.1, "ending": "truncated" if bad else "complete"}
    return build(n, seed, one)


def routed_within_messages(seed: int = 7, n: int = 600) -> list[Record]:
    """Chat and messages side by side; on the messages path only, ids `gw-…` (a third) are cut."""
    def one(i: int, rng: random.Random) -> dict[str, Any]:
        api = "messages" if i % 2 else "chat"
        gw = api == "messages" and rng.random() < 1 / 3
        rid = f"gw-{i}" if gw else (f"msg_{i:06x}" if api == "messages" else f"chatcmpl-{i:06x}")
        bad = gw and rng.random() < 0.6
        return {"api": api, "arm": api, "rid": rid, "started": i * 0.1,
                "ending": "cut_mid_frame" if bad else "complete"}
    return build(n, seed, one)


def every_kind(seed: int = 8, n: int = 1200) -> list[Record]:
    """Two runs over all three apis and two arms each, with every attribute kind the analyzer derives:
    id prefixes (a `gw-` route, numeric ids, none on refused streams), a categorical header, a small
    numeric header, a numeric header with many values (log buckets), a per-request header (left out),
    the chaos ground-truth header (never a column), streams without headers, prompt sizes across
    buckets, reuse indexes (None on some), concurrency levels, time windows, two workloads, findings
    (several per stream), and failures placed by route, window and load."""
    rng = random.Random(seed)
    out: list[Record] = []
    for i in range(n):
        run = "run-a" if i < n // 2 else "run-b"
        j = i if run == "run-a" else i - n // 2
        api = APIS[i % 3]
        arm = f"{api}-{'x' if (i // 3) % 2 else 'y'}"
        level = (1, 8, 32)[(j * 3) // (n // 2)]
        started = j * 0.5 + (1000.0 if run == "run-b" else 0.0)
        gw = rng.random() < 0.25
        refused = rng.random() < 0.03
        rid: str | None = (None if refused else f"gw-{i}" if gw else
                           str(7_000_000 + i) if api == "chat" else f"{api[:4]}_{i:06x}")
        ending = "complete"
        findings: tuple[str, ...] = ()
        if refused:
            ending = "http_error"
        elif gw and rng.random() < 0.5:
            ending = "truncated"
        elif 100 <= j * 0.5 < 130 and rng.random() < 0.6:
            ending = "error_event"
        elif rng.random() < {1: 0.0, 8: 0.04, 32: 0.2}[level]:
            ending = "cut_mid_frame"
        elif api == "messages" and rng.random() < 0.3:
            findings = ("finish_reason_mismatch",)
        elif rng.random() < 0.05:
            findings = ("markup_leak", "missing_usage")
        headers: dict[str, str] = {} if refused else {
            "server": rng.choice(["edge-1", "edge-2", "edge-3"]),
            "x-queue": str(rng.randrange(0, 6)),
            "x-inflight": str(rng.randrange(1, 200)),
            "x-request-id": f"req-{i}",
            "x-sseguard-fault": ending,
        }
        if not refused and rng.random() < 0.2:
            del headers["server"]
        out.append(rec(
            i, ending=ending, rid=rid, started=started, findings=findings, run_id=run, api=api,
            arm=arm, workload=rng.choice(["small", "tools"]), concurrency=level, headers=headers,
            prompt_bytes=rng.choice([0, 300, 2000, 9000, 70_000, 300_000]),
            reuse_index=None if rng.random() < 0.1 else rng.randrange(0, 40),
            status=503 if refused else 200,
        ))
    return out
