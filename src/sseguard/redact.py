"""The one place that removes secrets before anything is stored, logged or shown.

Everything that leaves the process as a file or a log line goes through here: header maps, JSON
bodies, raw body tails and free text. Besides the well-known secret header names and ``sk-…``-shaped
keys, a ``Redactor`` can be told the exact secret values in use (the probe knows the keys it read from
env vars), so a key of any shape is removed wherever it shows up.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any

REDACTED = "[REDACTED]"

#: Header (and JSON key) names whose value is always a secret, compared lower-case.
SECRET_NAMES = frozenset({
    "authorization", "proxy-authorization", "api-key", "x-api-key", "api_key", "apikey",
    "cookie", "set-cookie", "x-goog-api-key", "openai-api-key", "anthropic-api-key",
    "x-auth-token", "access_token", "password",
})

_PATTERNS = [
    # `Authorization: Bearer xyz`, `api-key=xyz`, `"x-api-key": "xyz"` in free text.
    re.compile(r"(?i)\b(authorization|proxy-authorization|x-api-key|api[-_]?key|cookie|set-cookie)"
               r"(\"?\s*[:=]\s*\"?)([^\"\r\n,;]+)"),
    re.compile(r"(?i)\bbearer\s+[^\s\"',;]+"),
    re.compile(r"(?i)\bbasic\s+[A-Za-z0-9+/=]{8,}"),
    re.compile(r"\bsk-[A-Za-z0-9_\-]{6,}"),
]


# Cheap pre-check: every pattern above needs one of these words (lower-cased) to match at all, so most
# text (a body tail, a header value) skips the regexes. Keep in step with _PATTERNS. Not a bare "api":
# every stored record's JSON has an "api" key, which sent each one through every regex (~6 % of the
# proxy's CPU at 100 streams, in the store's second redaction pass).
_TRIGGERS = ("authorization", "apikey", "api-key", "api_key", "cookie", "bearer", "basic", "sk-")


class Redactor:
    """Removes secret header values, known secret strings and key-shaped text."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # Longest first so a secret that contains another is removed whole.
        self._secrets = sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True)

    def with_secrets(self, secrets: Iterable[str]) -> Redactor:
        return Redactor([*self._secrets, *secrets])

    def text(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        lowered = text.lower()
        if not any(t in lowered for t in _TRIGGERS):
            return text
        return self._scrub(text)

    @staticmethod
    def _scrub(text: str) -> str:
        """The patterns themselves (``text`` skips them when no trigger word is present)."""
        for i, pattern in enumerate(_PATTERNS):
            if i == 0:
                text = pattern.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
            else:
                text = pattern.sub(REDACTED, text)
        return text

    def bytes(self, data: bytes) -> bytes:
        return self.text(data.decode("utf-8", "replace")).encode("utf-8")

    def headers(self, headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
        items = headers.items() if isinstance(headers, Mapping) else headers
        out: dict[str, str] = {}
        for name, value in items:
            key = name.lower()
            out[key] = REDACTED if key in SECRET_NAMES else self.text(str(value))
        return out

    def obj(self, value: Any) -> Any:
        """Redact a JSON-like value: secret-named keys lose their value, strings are scrubbed."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {k: (REDACTED if str(k).lower() in SECRET_NAMES else self.obj(v))
                    for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.obj(v) for v in value]
        return value


DEFAULT = Redactor()


def redact_text(text: str) -> str:
    """Scrub secrets from free text (log lines, error messages, body tails)."""
    return DEFAULT.text(text)


def redact_bytes(data: bytes) -> bytes:
    return DEFAULT.bytes(data)


def redact_headers(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
    """Lower-cased header map with secret values replaced."""
    return DEFAULT.headers(headers)


def redact_obj(value: Any) -> Any:
    return DEFAULT.obj(value)


class RedactingFilter(logging.Filter):
    """A logging filter that scrubs every record's message before any handler sees it."""

    def __init__(self, redactor: Redactor = DEFAULT) -> None:
        super().__init__()
        self._redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = self._redactor.text(record.getMessage())
        record.args = None
        return True
