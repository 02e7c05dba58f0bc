"""The chaos server's prefix cache: which requests "hit the cache", and how many words it served.

Real serving engines (vLLM, SGLang) keep the KV of prompt prefixes they computed and serve the next
request that starts the same way from it, reporting those prompt tokens as cached. The chaos server
models just enough of that to reproduce the incident of issue 39 (``config.CachePattern``): the
request's last message, when it holds a long leading part (a document, a shared instruction) before
its last paragraph, has that part as its cache key; the first request with a key writes it, every
later one hits it and is reported truthfully as that many cached prompt words. A prompt unique at its
start (the probe's ``big`` and ``small`` workloads) never hits.
"""

from __future__ import annotations

import hashlib

from sseguard.chaos.request import ChatRequest

#: A leading part shorter than this is no prefix worth caching (a real engine caches whole blocks).
MIN_PREFIX_CHARS = 256


def cached_prefix(req: ChatRequest) -> tuple[bytes, int] | None:
    """The cache key of ``req``'s prompt and the words of its cached part, or None (no such part)."""
    text = req.last_text
    cut = text.rfind("\n\n")
    if cut < MIN_PREFIX_CHARS:
        return None
    head = text[:cut]
    key = hashlib.blake2b(f"{req.model}\x00{head}".encode(), digest_size=16).digest()
    return key, min(len(head.split()), req.prompt_words)


class PrefixCache:
    """The keys written so far (one server process; each ``--workers`` process has its own, as each
    engine replica has its own cache)."""

    def __init__(self) -> None:
        self._keys: set[bytes] = set()

    def lookup(self, req: ChatRequest) -> int:
        """The words ``req`` gets from the cache (0: a miss, which writes its key)."""
        found = cached_prefix(req)
        if found is None:
            return 0
        key, words = found
        if key in self._keys:
            return words
        self._keys.add(key)
        return 0
