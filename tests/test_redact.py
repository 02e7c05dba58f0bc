"""Redaction: secret headers, key-shaped text and known secret values never survive."""

from __future__ import annotations

import logging
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from sseguard.redact import (
    _PATTERNS,
    _TRIGGERS,
    REDACTED,
    RedactingFilter,
    Redactor,
    redact_headers,
    redact_obj,
    redact_text,
)

KEY = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"


def test_secret_headers_are_replaced_case_insensitively() -> None:
    out = redact_headers({"Authorization": f"Bearer {KEY}", "API-Key": "k1", "X-Api-Key": "k2",
                          "Cookie": "session=abc", "Set-Cookie": "a=b", "X-Request-Id": "req-1"})
    assert out == {"authorization": REDACTED, "api-key": REDACTED, "x-api-key": REDACTED,
                   "cookie": REDACTED, "set-cookie": REDACTED, "x-request-id": "req-1"}


def test_key_shaped_values_and_bearer_tokens_leave_free_text() -> None:
    line = f"calling with Authorization: Bearer {KEY} and key={KEY} done"
    cleaned = redact_text(line)
    assert KEY not in cleaned and "Bearer" not in cleaned
    assert cleaned.startswith("calling with Authorization: ")
    assert redact_text('{"x-api-key": "abc123secret"}') == '{"x-api-key": "[REDACTED]"}'


def test_json_objects_lose_secret_valued_keys() -> None:
    obj = {"api_key": "plain", "nested": [{"Authorization": "x"}, f"text {KEY}"], "n": 3}
    assert redact_obj(obj) == {"api_key": REDACTED, "nested": [{"Authorization": REDACTED},
                                                                f"text {REDACTED}"], "n": 3}


def test_known_secret_values_of_any_shape_are_removed() -> None:
    r = Redactor(secrets=["hunter2-token"])
    assert r.text("the key hunter2-token leaked") == f"the key {REDACTED} leaked"
    assert b"hunter2" not in r.bytes(b"tail: hunter2-token")


def test_log_lines_are_scrubbed(caplog: object) -> None:
    logger = logging.getLogger("sseguard.test.redact")
    logger.addFilter(RedactingFilter())
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    logger.addHandler(Keep())
    logger.warning("upstream said %s", f"Authorization: Bearer {KEY}")
    assert records and KEY not in records[0] and "Bearer" not in records[0]


# ── the trigger-word fast path never changes what is redacted ────────────────────────────────────
SECRETISH = ["Authorization: Bearer abc.def-123", "proxy-authorization=Basic QWxhZGRpbjpvcGVu",
             "x-api-key: zz-top-999", "API_KEY=hunter2hunter2", "apikey: 12345678", "Cookie: a=b; c=d",
             "set-cookie: s=1", "bearer tok_987654321", "sk-abcdef123456", "BASIC QWxhZGRpbjpvcGVu",
             '"api-key": "v4lue"', "known-secret-value"]


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.one_of(st.sampled_from(SECRETISH), st.text(max_size=30)), max_size=8),
       upper=st.booleans())
def test_fast_path_agrees_with_running_every_pattern(parts: list[str], upper: bool) -> None:
    text = " ".join(parts)
    if upper:
        text = text.upper()
    r = Redactor(["known-secret-value"])
    expected = r._scrub(text.replace("known-secret-value", REDACTED))
    assert r.text(text) == expected


def test_every_redaction_pattern_needs_a_trigger_word() -> None:
    """If sseguard.redact gains a pattern, the fast path must learn its trigger word too."""
    for sample in SECRETISH[:-1]:
        if any(p.search(sample) for p in _PATTERNS):
            assert any(t in sample.lower() for t in _TRIGGERS), sample


def test_plain_stream_text_is_returned_untouched() -> None:
    tail = (Path(__file__).parent.parent / "examples" / "bodies" / "complete.sse").read_text()
    assert Redactor().text(tail) == tail
