"""The one place that removes secrets before anything is stored, logged or shown.

Everything that leaves the process as a file or a log line goes through here: header maps, JSON
bodies, raw body tails and free text. Besides the well-known secret header names, ``RULES`` is one
table of what a secret looks like in text (a named value, a cookie line, a query-string key, an
environment line, a bearer token, a vendor's token format). A ``Redactor`` can also be told the exact
secret values in use (the probe knows the keys it read from env vars), so a key of any shape is removed
wherever it shows up.

Cost: a body tail is redacted for every stored record, so each rule names the lower-case words it
cannot match without ("triggers"); a rule whose triggers are all absent is skipped, and text with
no trigger at all (most of it) costs one pass of a single pattern. To add a secret format, add one
``Rule`` line.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

REDACTED = "[REDACTED]"

#: JSON key names whose value is always a secret, compared lower-case.
SECRET_NAMES = frozenset({
    "authorization", "proxy-authorization", "api-key", "x-api-key", "api_key", "apikey",
    "cookie", "set-cookie", "x-goog-api-key", "openai-api-key", "anthropic-api-key",
    "x-auth-token", "access_token", "refresh_token", "id_token", "client_secret", "password",
    "secret_key", "private_key", "session_token", "x-amz-security-token",
})

#: A header is secret when one of its dash/underscore-separated words is one of these (``x-api-key``,
#: ``x-amz-security-token``), on top of ``SECRET_NAMES``. Plural words are not included on purpose:
#: ``x-ratelimit-remaining-tokens`` is a count worth keeping.
_SECRET_HEADER_WORDS = frozenset({
    "authorization", "auth", "token", "secret", "password", "passwd", "cookie", "apikey", "key",
    "credential", "signature",
})
_HEADER_WORD = re.compile(r"[-_]")


@dataclass(frozen=True, slots=True)
class Rule:
    """One shape of secret in text. The part of a match outside the ``keep`` group is replaced.

    ``triggers`` are lower-case substrings at least one of which every match contains; the redactor
    skips the rule when none is present (``tests/test_redact.py`` checks the two paths agree).
    """

    name: str
    triggers: tuple[str, ...]
    pattern: re.Pattern[str]

    @property
    def replacement(self) -> str:
        return (r"\g<keep>" if "keep" in self.pattern.groupindex else "") + REDACTED


# A value that carries a secret: it only needs to stop where the surrounding syntax resumes. Quotes
# may come escaped (`\"`): a body tail is raw SSE, the model's text JSON-encoded inside each frame.
_VALUE = r"[^\s\"'&,;<>]+"
# A credential-sized token with something no ordinary word has (a digit, a sign, inner capitals),
# so prose ("the bearer responsibilities.") keeps its words.
_TOKENISH = r"(?=[A-Za-z0-9+/=._~-]*?(?:[0-9+/=_~-]|[a-z][A-Z]))[A-Za-z0-9+/=._~-]{8,}"
# Last words of an environment variable name that make its value a secret (OPENAI_API_KEY, GH_TOKEN).
_ENV_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PAT", "CREDENTIALS", "CREDENTIAL", "AUTH")

RULES: tuple[Rule, ...] = (
    # `Authorization: Bearer xyz`, `api-key=xyz`, `"x-api-key": "xyz"`: a secret-named field.
    Rule("named field",
         # Not a bare "api": every record says `"api": "chat"`, and the rule needs `api-key`/`apikey`.
         ("auth", "api-key", "api_key", "apikey", "access_token", "access-token", "refresh_token",
          "client_secret", "password"),
         re.compile(r"(?i)(?P<keep>(?:\b(?:proxy-)?authorization|\bx-api-key|\bapi[-_]?key|"
                    r"\baccess[-_]token|\brefresh_token|\bclient_secret|\bx-auth-token|\bpassword)"
                    r"(?:\\?\")?\s*[:=]\s*(?:\\?\")?)[^\"\\\r\n,;&]+")),
    # A cookie header in text: every cookie of the line goes (`a=b; c=d`), attributes too.
    Rule("cookie line", ("cookie",),
         re.compile(r"(?i)(?P<keep>\b(?:set-)?cookie(?:\\?\")?\s*:\s*(?:\\?\")?)[^\"\\\r\n]+")),
    # A secret in a URL query string or a form body: `?key=AIza…`, `&access_token=…`.
    Rule("query key", ("key=", "token=", "secret=", "password=", "passwd=", "sig=", "signature=",
                       "credential=", "auth="),
         re.compile(r"(?i)(?P<keep>[?&](?:[a-z0-9]+[-_.])*(?:key|api[-_]?key|apikey|token|secret|"
                    r"password|passwd|sig|signature|credential|auth)=)" + _VALUE)),
    # `OPENAI_API_KEY=sk-…`, `export GH_TOKEN="…"`: an environment line whose name ends in a word
    # that makes it a key. Only `NAME=value` (shell syntax): the `=` keeps the trigger words rare.
    Rule("environment line", tuple(f"{w.lower()}=" for w in _ENV_WORDS),
         re.compile(r"(?P<keep>(?<![A-Za-z0-9_])(?:[A-Z0-9]+_)*(?:" + "|".join(_ENV_WORDS) +
                    r")=(?:\\?[\"'])?)[^\s\"'\\]+")),
    Rule("bearer token", ("bearer",), re.compile(r"\b(?i:bearer)\s+" + _TOKENISH)),
    Rule("basic credentials", ("basic",), re.compile(r"\b(?i:basic)\s+" + _TOKENISH)),
    # Well-known token formats, by their vendor prefixes.
    Rule("openai/anthropic key", ("sk-",), re.compile(r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_\-]{6,}")),
    Rule("stripe key", ("k_live_", "k_test_"),
         re.compile(r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{10,}")),
    Rule("hugging face token", ("hf_",), re.compile(r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{20,}")),
    Rule("github token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
         re.compile(r"(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})")),
    Rule("gitlab token", ("glpat-",), re.compile(r"(?<![A-Za-z0-9])glpat-[A-Za-z0-9_\-]{16,}")),
    Rule("npm token", ("npm_",), re.compile(r"(?<![A-Za-z0-9])npm_[A-Za-z0-9]{30,}")),
    Rule("aws access key id", ("akia", "asia"), re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b")),
    Rule("slack token", ("xox",), re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    Rule("google api key", ("aiza",), re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}")),
    Rule("google oauth token", ("ya29.",), re.compile(r"\bya29\.[0-9A-Za-z_\-]{20,}")),
    # A JWT with or without `Bearer`: header and payload are base64url JSON objects (`{"` = `eyJ`).
    Rule("json web token", ("eyj",),
         re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*")),
)


# Characters most text lacks, rarest first. A trigger holding one is searched for only when that
# character occurs: a one-character search is a memchr, twenty times cheaper than a word search.
_RARE = "=-_."
_TRIGGERS = tuple({(t, next((c for c in _RARE if c in t), "")): None
                   for rule in RULES for t in rule.triggers})


def _by_gate() -> tuple[tuple[str, tuple[tuple[str, tuple[str, ...]], ...]], ...]:
    """The triggers by that character ("" for none), each character looked for once per text; and
    within each, triggers sharing their first two characters (``ghp_``, ``gho_``, … ``github_pat_``)
    behind one search for those two."""
    out = []
    for gate in ("", *_RARE):
        heads: dict[str, list[str]] = {}
        for t, g in _TRIGGERS:
            if g == gate:
                heads.setdefault(t[:2], []).append(t)
        if heads:
            out.append((gate, tuple((head if len(ts) > 1 else "", tuple(ts))
                                    for head, ts in heads.items())))
    return tuple(out)


_BY_GATE = _by_gate()

# Every character of a trigger, rarest first in stream text (JSON events, prose, header values);
# a character a new trigger brings that is not listed ranks rarest of all (``find`` gives -1).
_RARITY = "=zw29j-x.vfgykbm_hupdirclsoante"


def _any_trigger() -> re.Pattern[str]:
    """One pattern that matches wherever any trigger occurs, for short text (header values, ids,
    error lines): most has no trigger, and one pass costs a quarter of the instructions of the ~40
    word searches of ``_TRIGGERS`` (callgrind, 2026-12-04). On a 2 KiB body tail the word searches
    cost fewer instructions (the pattern stops at every common letter some trigger holds), hence
    ``_ONE_PASS_MAX``.

    Each trigger is entered at its rarest character (``_RARITY``), with a look-behind for the part
    before it, so the pattern starts with a set of rare characters the regex engine skips to and
    only tries the words there."""
    by_anchor: dict[str, list[str]] = {}
    for trigger, _ in _TRIGGERS:
        at = min(range(len(trigger)), key=lambda i: (_RARITY.find(trigger[i]), i))
        head, tail = re.escape(trigger[:at + 1]), re.escape(trigger[at + 1:])
        by_anchor.setdefault(trigger[at], []).append(f"(?<={head}){tail}" if at else tail)
    return re.compile("|".join(f"{re.escape(c)}(?:{'|'.join(alts)})"
                               for c, alts in sorted(by_anchor.items(),
                                                     key=lambda kv: _RARITY.find(kv[0]))))


_ANY_TRIGGER = _any_trigger()
#: Up to this length (after ``lower()``) text is first checked with ``_ANY_TRIGGER``.
_ONE_PASS_MAX = 256


@functools.lru_cache(maxsize=1024)  # a run sees a few dozen header names, once per response
def _is_secret_header(name: str) -> bool:
    return name in SECRET_NAMES or any(w in _SECRET_HEADER_WORDS for w in _HEADER_WORD.split(name))


class Redactor:
    """Removes secret header values, known secret strings and key-shaped text."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # Longest first so a secret that contains another is removed whole.
        self._secrets = sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True)

    @property
    def secrets(self) -> tuple[str, ...]:
        """The exact strings this redactor removes beside the key shapes (``Redactor(r.secrets)``
        is ``r`` again: what a writer in another process is given)."""
        return tuple(self._secrets)

    def with_secrets(self, secrets: Iterable[str]) -> Redactor:
        return Redactor([*self._secrets, *secrets])

    def text(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        lowered = text.lower()
        if len(lowered) <= _ONE_PASS_MAX and _ANY_TRIGGER.search(lowered) is None:
            return text
        present = {t for gate, groups in _BY_GATE if not gate or gate in lowered
                   for head, group in groups if not head or head in lowered
                   for t in group if t in lowered}
        if present:
            for rule in RULES:
                if not present.isdisjoint(rule.triggers):
                    text = rule.pattern.sub(rule.replacement, text)
        return text

    @staticmethod
    def _scrub(text: str) -> str:
        """Every rule, no trigger check: what ``text`` must equal (the tests compare the two)."""
        for rule in RULES:
            text = rule.pattern.sub(rule.replacement, text)
        return text

    def bytes(self, data: bytes) -> bytes:
        return self.text(data.decode("utf-8", "replace")).encode("utf-8")

    def headers(self, headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
        items = headers.items() if isinstance(headers, Mapping) else headers
        out: dict[str, str] = {}
        for name, value in items:
            key = name.lower()
            out[key] = REDACTED if _is_secret_header(key) else self.text(str(value))
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
