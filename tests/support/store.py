"""Records to store, shared by the SQLite and PostgreSQL store tests."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from sseguard.core.contract import StreamChecker
from sseguard.core.policy import Policy
from sseguard.core.record import Record, record_from_verdict
from sseguard.core.redact import DEFAULT
from support.streams import text_stream

KEY = "sk-live-0123456789abcdefghijklmnopQRST"


def record(run_id: str = "run-1", index: int = 0, **facts: Any) -> Record:
    fields: dict[str, Any] = {
        "run_id": run_id, "index": index, "arm": "a" if index % 2 else "b",
        "ending": ("complete", "truncated", "no_done")[index % 3],
        "started_at": 1_700_000_000.0 + index, "response_id": f"chatcmpl-{index}",
        "id_prefix": "chatcmpl", "findings": [{"kind": "missing_usage", "detail": "d", "frame": 3,
                                               "offset": 99}],
        "headers": {"x-request-id": f"r{index}"}, "ttft_ms": 12.5, "chunks": index,
        "finish_reasons": ["stop", None], "usage": {"prompt_tokens": 3}, "tail": "data: [DONE]\n\n",
    }
    fields.update(facts)
    return Record(**fields)


def records(n: int, run_id: str = "run-1") -> list[Record]:
    return [record(run_id, i) for i in range(n)]


def secret_records() -> list[Record]:
    """A record from a verdict whose request carried a key, and a hand-built one that leaks it."""
    checker = StreamChecker()
    checker.feed(text_stream(["the key is", f" {KEY}"], done=False))
    verdict = checker.close()
    built = record_from_verdict(verdict, policy=Policy.from_spec(), run_id="secret",
                                headers={"Authorization": f"Bearer {KEY}", "x-api-key": KEY,
                                         "Cookie": f"session={KEY}", "x-request-id": "r1"})
    careless = Record(run_id="secret", index=1, error=f"upstream said Authorization: Bearer {KEY}",
                      headers={"authorization": f"Bearer {KEY}"},
                      extra={"api_key": KEY, "note": f"retry with {KEY}\\\" done"})
    return [built, careless]


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
_plain = st.text("abcdefxyz-_ 0123456789", max_size=12)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_plain, inner, max_size=3),
    max_leaves=8,
)

record_strategy = st.builds(
    Record,
    run_id=_plain, arm=_plain, index=st.integers(0, 10**9), worker=st.none() | _plain,
    started_at=st.floats(0, 4e9), model=st.none() | _text, status=st.none() | st.integers(100, 599),
    ending=st.sampled_from(["complete", "truncated", "no_done", "cut_mid_frame", "stalled"]),
    findings=st.lists(st.fixed_dictionaries({"kind": _plain, "detail": _text,
                                             "frame": st.none() | st.integers(0, 10**6)}), max_size=3),
    passed=st.booleans(), error=st.none() | _text, response_id=st.none() | _text,
    id_prefix=st.none() | _plain, headers=st.dictionaries(_plain, _text, max_size=3),
    ttft_ms=st.none() | st.floats(0, 1e7), chunks=st.integers(0, 10**6),
    finish_reasons=st.lists(st.none() | _plain, max_size=3), usage=st.none() | st.dictionaries(_plain, _json),
    tail=_text, extra=st.dictionaries(_plain, _json, max_size=3),
)


def is_clean(rec: Record) -> bool:
    """Whether the redactor leaves the record alone (random text can look like a key)."""
    import msgspec

    text = msgspec.json.encode(rec).decode()
    return DEFAULT.text(text) == text and DEFAULT.obj(msgspec.to_builtins(rec)) == msgspec.to_builtins(rec)
