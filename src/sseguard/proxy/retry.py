"""Retry before the first byte: which upstream failures earn another attempt, and how long to wait.

While not one byte of the response body has gone to the client, a failed upstream attempt can be
replaced by another without the client ever knowing: the client gets one healthy stream, or after
``--retry`` attempts the last failure exactly as it would have without retries. Worth retrying are
the failures a second ask can cure: a refused or reset connection, ``429`` and ``5xx`` (Anthropic's
``529 overloaded_error`` among them), an empty ``200``, a stall before the first event, an error event
as the first event. A ``Retry-After`` is honoured up to ``--retry-max-wait``; an upstream that asks for
longer gets its answer to the client at once (waiting would only hide that it said no).

Pure decisions (no I/O, no clock): ``guarded.py`` and ``passthrough.py`` do the asking and the sleeping.
"""

from __future__ import annotations

import email.utils
import random
from collections.abc import Awaitable, Callable, Mapping

from sseguard.verdict import Verdict

#: How a retry waits; ``ProxyState.sleep`` (tests replace it, so no test waits a real second).
Sleep = Callable[[float], Awaitable[None]]

#: The first backoff step, doubled per attempt, before jitter and the cap.
BACKOFF_BASE = 0.25


def retryable_status(status: int, body: bytes = b"") -> bool:
    """``429`` (rate limited), any ``5xx`` (``529`` is Anthropic's overloaded), or an overload by body."""
    return status == 429 or 500 <= status <= 599 or b"overloaded_error" in body[:4096]


def retry_after(headers: Mapping[str, str], now: float) -> float | None:
    """Seconds the upstream asked to wait (``Retry-After``: seconds or an HTTP date), or None.

    ``now`` is the wall clock (epoch seconds), given by the caller: this module reads no clock.
    """
    value = headers.get("Retry-After") or headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, float(when.timestamp()) - now)


def backoff(attempt: int, cap: float, rng: random.Random) -> float:
    """Jittered exponential backoff before retry ``attempt`` (0 = the first retry), at most ``cap``.

    Half fixed, half random: many clients that failed together do not all come back together.
    """
    step: float = min(cap, BACKOFF_BASE * 2.0 ** attempt)
    return step * (0.5 + rng.random() / 2)


def wait_before_retry(attempt: int, asked: float | None, cap: float,
                      rng: random.Random) -> float | None:
    """How long to wait before retry ``attempt``; None when the upstream asked for more than ``cap``."""
    if asked is None:
        return backoff(attempt, cap, rng)
    if asked > cap:
        return None
    return asked


def completion_tokens(verdict: Verdict) -> int:
    """The completion tokens an attempt's usage reports (chat ``completion_tokens``, Responses and
    Messages ``output_tokens``); 0 when it reported none."""
    usage = verdict.message.get("usage")
    if not isinstance(usage, dict):
        return 0
    value = usage.get("completion_tokens", usage.get("output_tokens"))
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
