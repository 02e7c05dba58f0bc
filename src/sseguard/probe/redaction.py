"""A ``Redactor`` with a fast path for text that cannot hold a secret.

Every record carries a 2 KiB body tail, and ``Redactor.text`` runs four regular expressions over it
(~0.4 ms on this machine, mostly ``\\b``-anchored and case-insensitive scans): at a thousand streams
that is more CPU than checking the stream. Each of those expressions needs a literal word to match
(``authorization``, ``api-key`` and its spellings, ``cookie``, ``bearer``, ``basic``, ``sk-``), so
text that contains none of them, and none of the known secret values, is returned as is; anything
else takes the full path.
``tests/test_probe_engine.py`` checks this premise against ``sseguard.redact``'s own patterns.
"""

from __future__ import annotations

from sseguard.redact import Redactor

#: Lower-case words at least one of which every secret pattern of ``sseguard.redact`` contains.
TRIGGERS = ("authorization", "apikey", "api-key", "api_key", "cookie", "bearer", "basic", "sk-")


class QuickRedactor(Redactor):
    """Same results as ``Redactor``; skips the regular expressions when no trigger word occurs."""

    def __init__(self, secrets: list[str] | tuple[str, ...] = ()) -> None:
        super().__init__(secrets)
        self._known = tuple(secrets)

    def text(self, text: str) -> str:
        if any(s and s in text for s in self._known):
            return super().text(text)
        low = text.lower()
        if any(t in low for t in TRIGGERS):
            return super().text(text)
        return text
