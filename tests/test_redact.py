"""Redaction: secret headers, key-shaped text and known secret values never survive."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sseguard.redact import (
    REDACTED,
    RULES,
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


# ── a corpus of secrets, written here (not derived from the redactor's rules) ────────────────────
#: (the secret, a line of text that carries it). Every secret must be gone from its line.
SECRET_SAMPLES: list[tuple[str, str]] = [
    ("sk-proj-Xq3vB8nT2mK9pL4wR7yZ1cF6hJ0dS5aE",
     "OpenAI key sk-proj-Xq3vB8nT2mK9pL4wR7yZ1cF6hJ0dS5aE in a log"),
    ("sk-ant-api03-Qw8eR4tY1uI9oP3aS7dF2gH6jK0lZ5xC-vB8nM4qW1eR7tYuAA",
     "anthropic: sk-ant-api03-Qw8eR4tY1uI9oP3aS7dF2gH6jK0lZ5xC-vB8nM4qW1eR7tYuAA"),
    ("hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ01234567", "HF_HUB token=hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ01234567 ok"),
    ("hf_ZyXwVuTsRqPoNmLkJiHgFeDcBa76543210", "login with hf_ZyXwVuTsRqPoNmLkJiHgFeDcBa76543210."),
    ("ghp_1A2b3C4d5E6f7G8h9I0jK1lM2nO3pQ4rS5tU",
     "git clone https://ghp_1A2b3C4d5E6f7G8h9I0jK1lM2nO3pQ4rS5tU@github.com/o/r"),
    ("github_pat_11ABCDEFG0abcdefghijkl_mnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRST",
     "pat: github_pat_11ABCDEFG0abcdefghijkl_mnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRST"),
    ("AKIAIOSFODNN7EXAMPLE", "aws_access_key_id AKIAIOSFODNN7EXAMPLE region us-east-1"),
    ("xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
     "slack bot xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx posted"),
    ("AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
     "GET /v1beta/models/gemini:streamGenerateContent?alt=sse&key=AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"),
    ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIn0."
     "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
     '{"id_jwt": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIn0.'
     'SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"}'),
    ("oc_sk-9fK2mQ7xL4vB1nR8tY3wE6zA0cD5hJ", "OPENCODE_GO_API_KEY=oc_sk-9fK2mQ7xL4vB1nR8tY3wE6zA0cD5hJ"),
    ("gho_16C7e42F292c6912E7710c838347Ae178B4a",
     'export GH_TOKEN="gho_16C7e42F292c6912E7710c838347Ae178B4a"'),
    ("Wq8x-pg-pass-31415", "DATABASE_PASSWORD=Wq8x-pg-pass-31415\nDEBUG=1"),
    ("tP9vX2kL7qM4nB8w", "https://api.example.com/v1/search?q=cats&api_key=tP9vX2kL7qM4nB8w&page=2"),
    ("0a1b2c3d4e5f60718293", "https://maps.example.org/geo?key=0a1b2c3d4e5f60718293"),
    ("Zm9vYmFyYmF6cXV4MTIz", "redirect to /cb#state=x&access_token=Zm9vYmFyYmF6cXV4MTIz&expires_in=3600"),
    ("s3cr3t-sess-4f9a2b", "Cookie: theme=dark; sessionid=s3cr3t-sess-4f9a2b"),
    ("Zt4Kq9wLm2Xv7Bn1", "cookie: csrftoken=Zt4Kq9wLm2Xv7Bn1; lang=en"),
    ("Yh7Gf3Dk9Lm2Np5Q", "Set-Cookie: __Host-sid=Yh7Gf3Dk9Lm2Np5Q; Path=/; Secure; HttpOnly"),
    ("dXNlcjpwYXNzd29yZDEyMw==", "Authorization: Basic dXNlcjpwYXNzd29yZDEyMw=="),
    ("7f3c2a91-d4e5-4b6c-8a9f-0e1d2c3b4a59",
     "curl -H 'Authorization: Bearer 7f3c2a91-d4e5-4b6c-8a9f-0e1d2c3b4a59'"),
    ("opaque.Tok3n_value", "sent bearer opaque.Tok3n_value to upstream"),
    ("sk_live_51HxAbCdEfGhIjKlMnOpQrStUv", "stripe sk_live_51HxAbCdEfGhIjKlMnOpQrStUv charge"),
    ("glpat-xY9zW8vU7tS6rQ5pO4nM", "gitlab glpat-xY9zW8vU7tS6rQ5pO4nM"),
    ("npm_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5",
     "//registry.npmjs.org/:_authToken=npm_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5"),
    ("ya29.a0AfH6SMBx3kLmNoPqRsTuVwXyZ012345", "access ya29.a0AfH6SMBx3kLmNoPqRsTuVwXyZ012345 expired"),
    ("hunter2hunter2", '{"password": "hunter2hunter2", "user": "ann"}'),
    ("c1i3nt-s3cr3t-v4lu3", 'client_secret=c1i3nt-s3cr3t-v4lu3'),
]

#: Ordinary text that must come back unchanged: prose, JSON, code, URLs, ids, hashes, base64.
ORDINARY: list[str] = [
    "The key to a good stream is that it ends with a finish_reason and data: [DONE].",
    "A basic understanding of the bearer of bad news: tokens are counted, not trusted.",
    "She baked a cookie and a cake; the monkey ate both.",
    '{"id":"chatcmpl-9f2c","object":"chat.completion.chunk","choices":[{"index":0,"delta":'
    '{"content":"Hello"},"finish_reason":null}],"usage":{"prompt_tokens":12,"completion_tokens":7,'
    '"total_tokens":19}}',
    'data: {"type":"response.output_text.delta","sequence_number":4,"delta":"sk"}',
    "def primary(key: str, tokens: list[int]) -> dict[str, int]:\n    return {key: len(tokens)}",
    "for (const [key, value] of Object.entries(map)) { console.log(key, value); }",
    "https://github.com/python-hyper/h11/blob/master/h11/_events.py#L42",
    "https://example.com/search?q=streaming+llm&page=3&sort=recent&lang=en",
    "https://huggingface.co/deepseek-ai/DeepSeek-V3.2/resolve/main/tokenizer_config.json",
    "request id 3f1c2b4a-9d8e-4f7a-b6c5-1e2d3c4b5a69 took 231 ms",
    "commit 0a6b7a6e1c4f5d2b9e8a7c6d5f4e3b2a1c0d9e8f (HEAD -> main)",
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA"
    "60e6kgAAAABJRU5ErkJggg==",
    "x-ratelimit-remaining-tokens: 149984",
    "task-manager disk-space ask-me risk-free",
    "PATH=/usr/local/bin:/usr/bin HOME=/home/ann LANG=C.UTF-8 MAX_TOKENS=4096",
    "SELECT id, name FROM users WHERE key_id = 7 ORDER BY created_at DESC;",
    "The password manager stores nothing here; see the docs.",
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"}}",
    "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}</tool_call>",
    "Tokens per second: 41.7; time to first token: 212 ms; 1,024 tokens in total.",
]


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
