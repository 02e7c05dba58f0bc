"""Retry before the first byte: which upstream failures earn another attempt, how long to wait, the
retry budget, and what the client is told about retrying (``x-should-retry``).

While not one byte of the response body has gone to the client, a failed upstream attempt can be
replaced by another without the client ever knowing: the client gets one healthy stream, or after
``--retry`` attempts the last failure exactly as it would have without retries. Worth retrying are
the failures a second ask can cure: a refused or reset connection, ``429`` and ``5xx`` (Anthropic's
``529 overloaded_error`` among them), an empty ``200``, a stall before the first event, an error event
as the first event. A ``Retry-After`` is honoured up to ``--retry-max-wait``; an upstream that asks for
longer gets its answer to the client at once (waiting would only hide that it said no).

Pure rules (no I/O, no clock), applied by the attempts' machine (``attempts.py``), which makes every
decision before a client's first byte; ``driver/guarded.py`` and ``driver/passthrough.py`` do the
asking and the sleeping it decides.
"""

from __future__ import annotations

import email.utils
import math
import random
from collections.abc import Awaitable, Callable, Mapping

from sseguard.core.verdict import Verdict

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


# ── one layer retries (docs/design/guarantees.md guarantee 7) ───────────────────────────────────────────────

#: The window a retry budget counts requests over, in seconds (Envoy's and Finagle's budgets: 10 s).
BUDGET_WINDOW = 10.0
#: Retries a budget allows in any window however few requests it saw (one a second): a quiet proxy
#: can still retry a few requests in full (``--retry 2`` each).
BUDGET_FLOOR = 10


class RetryBudget:
    """Retries may add at most ``ratio`` to the requests of the last ``window`` seconds, at least
    ``floor`` retries (as Envoy's and Finagle's retry budgets, and the SRE book's per-client ratio).

    A persistent upstream failure then costs at most ``1 + ratio`` upstream requests per client
    request, not ``1 + --retry``, and the SDK's and the agent's own retries are told not to stack on
    top (``x-should-retry``). One budget per upstream; time comes in as ``now`` (this module reads no
    clock): counts are kept per whole second, so memory is bounded by the window.
    """

    __slots__ = ("_requests", "_retries", "floor", "ratio", "window")

    def __init__(self, ratio: float = 0.2, *, window: float = BUDGET_WINDOW,
                 floor: int = BUDGET_FLOOR) -> None:
        self.ratio = ratio
        self.window = window
        self.floor = floor
        self._requests: dict[int, int] = {}  # second → client requests started in it
        self._retries: dict[int, int] = {}  # second → retries sent in it

    @classmethod
    def of_worker(cls, ratio: float, workers: int) -> RetryBudget:
        """One worker's share of the proxy's budget (``--workers N``: N processes, each its own).

        The ratio stays: the kernel spreads connections over the workers (``SO_REUSEPORT``), so each
        sees about 1/N of the requests and allows ``ratio`` of its own, ``ratio`` of the whole in sum.
        The floor is split, rounded up (``ceil(floor / N)``): a quiet proxy of N workers still allows
        about ``floor`` retries in a window (at most ``floor + N - 1``), not N times as many. Shared
        state between processes would be exact, but would put a lock or a round trip on each
        failure's path; the split needs neither.
        """
        return cls(ratio, floor=math.ceil(BUDGET_FLOOR / max(1, workers)))

    def _count(self, table: dict[int, int], now: float) -> int:
        oldest = math.floor(now - self.window)  # the window is the seconds after this one
        for second in [s for s in table if s <= oldest]:
            del table[second]
        return sum(table.values())

    def request(self, now: float) -> None:
        """A client request is sent upstream (its first attempt)."""
        second = int(now)
        self._requests[second] = self._requests.get(second, 0) + 1

    def allows(self, now: float) -> bool:
        """Whether one more retry fits the budget now."""
        if self.ratio <= 0:
            return False
        retries = self._count(self._retries, now)
        return retries < max(self.floor, self.ratio * self._count(self._requests, now))

    def spend(self, now: float) -> None:
        """A retry is sent."""
        second = int(now)
        self._retries[second] = self._retries.get(second, 0) + 1


#: Failures a second ask will not cure: the request itself, a model failure, a policy end.
FINAL_CAUSES = frozenset({"bad_request", "client_error", "model_failure", "policy"})


def should_retry(cause: str, *, retried: bool, retry_off: bool, budget_spent: bool = False,
                 asked: float | None = None, waited_too_long: bool = False) -> str:
    """``x-should-retry`` for an error answer the proxy writes (``"true"`` or ``"false"``).

    ``false`` when the proxy already spent retries on this request (``retried``), when the failure
    will not change on a retry (``FINAL_CAUSES``), or when the proxy chose not to retry (a timeout
    the client has already waited out, a budget spent with no wait asked): then the client's SDK and
    agent stop at once instead of multiplying the load. ``true`` only where a client retry can help
    and the proxy did not retry: it was told ``--retry 0`` (``retry_off``), or the upstream asked to
    wait (``asked``) longer than ``--retry-max-wait`` (``waited_too_long``) or while the budget was
    spent — the upstream's own ``retry-after`` then goes with it, never one the proxy invents.
    """
    if cause in FINAL_CAUSES or retried:
        return "false"
    if asked is not None and (waited_too_long or budget_spent):
        return "true"
    if retry_off and not budget_spent:
        return "true"
    return "false"


def retry_headers(cause: str, *, retried: bool, retry_off: bool, budget_spent: bool = False,
                  upstream_headers: Mapping[str, str] | None = None, wall: float = 0.0,
                  waited_too_long: bool = False) -> tuple[tuple[str, str], ...]:
    """The retry headers of every error answer the proxy writes, decided here only:
    ``x-should-retry`` (``should_retry``, the upstream's ``retry-after`` read at ``wall`` epoch
    seconds from ``upstream_headers``) and, with ``true``, that ``retry-after`` passed on."""
    asked = None if upstream_headers is None else retry_after(upstream_headers, wall)
    value = should_retry(cause, retried=retried, retry_off=retry_off, budget_spent=budget_spent,
                         asked=asked, waited_too_long=waited_too_long)
    if value != "true":
        return (("x-should-retry", value),)
    return (("x-should-retry", value), *passed_on_retry_after(upstream_headers))


def passed_on_retry_after(headers: Mapping[str, str] | None) -> list[tuple[str, str]]:
    """The upstream's own ``retry-after`` and ``retry-after-ms``, to go with ``x-should-retry``."""
    if headers is None:
        return []
    out = []
    for name in ("retry-after", "retry-after-ms"):
        value = headers.get(name)
        if value is not None:
            out.append((name, value))
    return out
