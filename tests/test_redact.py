"""Redaction: secret headers, key-shaped text and known secret values never survive."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sseguard.core.redact import (
    REDACTED,
    RULES,
    RedactingFilter,
    Redactor,
    redact_headers,
    redact_obj,
    redact_text,
)
from support.secret_samples import ORDINARY, SECRET_SAMPLES

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
@given(parts=st.lists(st.one_of(st.sampled_from(SECRETISH + [line for _, line in SECRET_SAMPLES]),
                                st.text(max_size=30)), max_size=8),
       upper=st.booleans())
def test_fast_path_agrees_with_running_every_pattern(parts: list[str], upper: bool) -> None:
    text = " ".join(parts)
    if upper:
        text = text.upper()
    r = Redactor(["known-secret-value"])
    expected = r._scrub(text.replace("known-secret-value", REDACTED))
    assert r.text(text) == expected


def test_every_rule_match_contains_one_of_its_trigger_words() -> None:
    """If a rule gains a shape its triggers miss, the fast path would skip it: every match of every
    rule on the samples below must contain one of that rule's trigger words."""
    samples = [*SECRETISH[:-1], *(text for _, text in SECRET_SAMPLES)]
    for rule in RULES:
        for sample in samples:
            for m in rule.pattern.finditer(sample):
                assert any(t in m.group(0).lower() for t in rule.triggers), (rule.name, sample)


def test_plain_stream_text_is_returned_untouched() -> None:
    tail = (Path(__file__).parent.parent / "examples" / "bodies" / "complete.sse").read_text()
    assert Redactor().text(tail) == tail


@pytest.mark.parametrize(("secret", "line"), SECRET_SAMPLES, ids=[s[:14] for s, _ in SECRET_SAMPLES])
def test_every_sample_secret_is_gone_from_text(secret: str, line: str) -> None:
    assert secret in line  # the sample itself is well formed
    cleaned = redact_text(line)
    assert secret not in cleaned and REDACTED in cleaned


@pytest.mark.parametrize("text", ORDINARY, ids=range(len(ORDINARY)))
def test_ordinary_text_is_left_unchanged(text: str) -> None:
    assert redact_text(text) == text


def test_every_cookie_of_a_cookie_line_goes_but_the_header_name_stays() -> None:
    assert redact_text("Cookie: a=b; c=d") == f"Cookie: {REDACTED}"
    assert redact_text('{"set-cookie": "sid=abc; Path=/", "n": 1}') == \
        f'{{"set-cookie": "{REDACTED}", "n": 1}}'


def test_query_keys_keep_the_url_around_them() -> None:
    url = "https://api.example.com/v1?alt=sse&api_key=tP9vX2kL7qM4nB8w&page=2"
    assert redact_text(url) == f"https://api.example.com/v1?alt=sse&api_key={REDACTED}&page=2"


def test_geminis_key_goes_from_the_query_and_from_its_header_whatever_its_shape() -> None:
    path = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?key=plain-0042&alt=sse"
    assert redact_text(path) == \
        f"/v1beta/models/gemini-2.5-flash:streamGenerateContent?key={REDACTED}&alt=sse"
    assert redact_text("GET /v1/models/m:generateContent?alt=sse&key=plain-0042 HTTP/1.1") == \
        f"GET /v1/models/m:generateContent?alt=sse&key={REDACTED} HTTP/1.1"
    assert redact_headers({"X-Goog-Api-Key": "plain-0042", "x-goog-api-client": "genai-py/3"}) == \
        {"x-goog-api-key": REDACTED, "x-goog-api-client": "genai-py/3"}


def test_environment_lines_keep_their_name() -> None:
    assert redact_text("OPENCODE_GO_API_KEY=oc_sk-9fK2mQ7xL4vB1nR8tY3wE6zA0cD5hJ") == \
        f"OPENCODE_GO_API_KEY={REDACTED}"


@pytest.mark.parametrize(("secret", "line"), SECRET_SAMPLES, ids=[s[:14] for s, _ in SECRET_SAMPLES])
def test_every_sample_secret_is_gone_from_headers_and_json(secret: str, line: str) -> None:
    headers = redact_headers({"X-Debug": line, "Authorization": line, "Cookie": line,
                              "Set-Cookie": line, "X-Amz-Security-Token": secret, "X-Request-Id": "r1"})
    assert secret not in repr(headers)
    assert headers["x-request-id"] == "r1"
    doc = redact_obj({"error": {"message": line}, "list": [line], "api_key": secret})
    assert secret not in repr(doc)


def test_ordinary_headers_keep_their_values() -> None:
    kept = {"content-type": "text/event-stream", "x-ratelimit-remaining-tokens": "149984",
            "x-request-id": "3f1c2b4a-9d8e-4f7a-b6c5-1e2d3c4b5a69", "openai-processing-ms": "231",
            "server": "uvicorn", "x-sseguard-fault": "truncated"}
    assert redact_headers(kept) == kept


@pytest.mark.parametrize(("secret", "line"), SECRET_SAMPLES, ids=[s[:14] for s, _ in SECRET_SAMPLES])
def test_every_sample_secret_is_gone_from_a_raw_sse_frame(secret: str, line: str) -> None:
    # A body tail is raw SSE: the model's text sits JSON-escaped inside the frame (`\"` for `"`).
    frame = "data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": line}}]}) + "\n\n"
    assert secret not in redact_text(frame)
    assert secret not in redact_text(json.dumps({"error": {"message": line}}))


@settings(max_examples=300, deadline=None)
@given(sample=st.sampled_from(SECRET_SAMPLES), before=st.sampled_from(ORDINARY) | st.text(max_size=60),
       after=st.sampled_from(ORDINARY) | st.text(max_size=60), upper_rest=st.booleans())
def test_a_sample_secret_is_gone_whatever_lines_surround_it(sample: tuple[str, str], before: str,
                                                             after: str, upper_rest: bool) -> None:
    secret, line = sample
    if upper_rest:
        before, after = before.upper(), after.upper()
    assert secret not in redact_text(f"{before}\n{line}\n{after}")
