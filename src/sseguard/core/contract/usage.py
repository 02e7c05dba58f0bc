"""What a server says about the cache an answer was built on: the facet every protocol descriptor fills.

A corrupting race in a serving engine's prefix (KV) cache damages only the answers built on cached
tokens, and every protocol reports how many prompt tokens came from the cache — each in its own
words (``docs/design/vocabulary.md``). Each protocol's descriptor names one small function
(``Protocol.usage_of``) that reads its usage shape out of the assembled message into ``UsageFacts``; the
record keeps them and the analysis compares streams served from cache with the others (``cache_share``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class UsageFacts:
    """The cache facts of one answer; None where the server did not say."""

    #: The whole prompt, in tokens (cached ones included, whatever the protocol counts apart).
    prompt_tokens: int | None = None
    #: Prompt tokens served from the server's cache.
    cached_tokens: int | None = None
    #: Prompt tokens written to the cache by this request (Messages' ``cache_creation_input_tokens``).
    cache_write_tokens: int | None = None
    #: What identifies the serving build: ``system_fingerprint``, Gemini's ``modelVersion``.
    fingerprint: str | None = None
    #: The answer's own tokens (chat ``completion_tokens``, Responses and Messages ``output_tokens``,
    #: Gemini ``candidatesTokenCount``): what telemetry reports as output usage.
    output_tokens: int | None = None


NONE = UsageFacts()


def count(value: Any) -> int | None:
    """A token count as the server wrote it: a non-negative integer, else None (not a count)."""
    return value if type(value) is int and value >= 0 else None


def field(obj: Any, *path: str) -> Any:
    """``obj[path[0]][path[1]]…``, or None where any step is not an object holding the key."""
    for key in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def cache_share(cached: int | None, prompt: int | None) -> str | None:
    """How much of the prompt was served from cache, as the analysis's attribute value: ``none``,
    ``partial`` (under half) or ``most`` (half or more); None where the server did not report it.
    A cached count without a prompt count (or above it) is ``most``: something came from cache."""
    if cached is None:
        return None
    if cached == 0:
        return "none"
    if prompt is None or 2 * cached >= prompt:
        return "most"
    return "partial"
