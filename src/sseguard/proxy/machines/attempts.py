"""Before the first byte: one client request's upstream attempts, as a sans-IO machine.

While not one byte of the answer has reached the client, a failed upstream attempt can be replaced by
another without the client ever knowing. Every decision about that lives here, in the manner of the
stream machine (``machines/stream.py``, which takes over once a stream's first event is forwarded): the
driver (``driver/guarded.py`` for streams, ``driver/passthrough.py`` for a guarded endpoint's
non-streaming call) tells it what happened — the request began (``begin``), an attempt failed and how
(``failed`` with one of the failures below), the wait it asked for is over (``waited``), the client left
(``client_left``) — and performs what it answers: start attempt N (``StartAttempt``, saying whether it
is the last, so that it is relayed as it comes), record the failed attempt (``RecordAttempt``), wait and
retry (``RetryAfter``), or answer the client this error with these headers (``ErrorAnswer``:
``x-should-retry`` and the upstream's own ``retry-after``).

The retry budget (``retry.RetryBudget``) is the upstream's, shared by every request to it; the machine
asks it and spends it. Time comes in with the events (``now``: the budget's monotonic clock, ``wall``:
epoch seconds, which an HTTP-date ``Retry-After`` needs): no clock, no socket, no asyncio
(``tests/test_layers.py`` keeps it so; ``tests/proxy/machines/test_proxy_machine.py`` drives it alone).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

from sseguard.proxy.machines.retry import (
    RetryBudget,
    retry_after,
    retry_headers,
    retryable_status,
    wait_before_retry,
)

# ── what can happen to an attempt before the client's first byte ────────────────────────────────


@dataclass(frozen=True, slots=True)
class Unreachable:
    """The upstream could not be reached (refused, reset before any header): ``message`` says so."""

    message: str


@dataclass(frozen=True, slots=True)
class TimedOut:
    """No response header within ``--timeout``: the client has already waited it out."""

    message: str


@dataclass(frozen=True, slots=True)
class HttpError:
    """A non-2xx answer (``status``, its ``headers``, ``body`` and reason ``phrase``), which the
    client may get as it is."""

    status: int
    headers: Mapping[str, str]
    body: bytes = b""
    phrase: str | None = None


@dataclass(frozen=True, slots=True)
class BadStart:
    """A 2xx whose beginning failed before its first event (an empty body, a stall, a reset, an error
    event first): ``ending`` and ``error`` are the attempt's verdict; ``tokens`` the completion
    tokens it reported."""

    ending: str
    error: str | None = None
    tokens: int = 0


AttemptFailure = Unreachable | TimedOut | HttpError | BadStart

# ── what the driver does ─────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class StartAttempt:
    """Send attempt ``number`` (1 = the first). ``last``: no retry can follow it (none left, or the
    budget is spent now), so it is relayed exactly as without retries. ``healed``/``heal_attempts``/
    ``heal_tokens``: what the stream's record says about healing so far (``healed`` None: off)."""

    number: int
    last: bool
    healed: str | None
    heal_attempts: int
    heal_tokens: int


@dataclass(frozen=True, slots=True)
class RecordAttempt:
    """Record the attempt that just failed: ``linked`` — an attempt the client never saw, pointing at
    the stream's record (a retry follows); otherwise it is the stream's own record (its answer)."""

    linked: bool


@dataclass(frozen=True, slots=True)
class RetryAfter:
    """Wait ``seconds``, then tell ``waited``. A retry the budget granted (count it under ``reason``)."""

    seconds: float
    reason: str


@dataclass(frozen=True, slots=True)
class ErrorAnswer:
    """ErrorAnswer the client with this error, then the request is over.

    ``as_is``: the upstream's own error answer (its status, body and headers); otherwise the proxy's
    own, ``status`` with ``message`` in the protocol's shape as ``type_``/``code``. ``headers`` go on
    it either way (``x-should-retry`` and, with ``true``, the upstream's ``retry-after``). ``reason``:
    the metrics' name of the failure; ``refused``: the retry budget refused a retry.
    """

    status: int
    headers: tuple[tuple[str, str], ...]
    reason: str
    as_is: bool = False
    message: str = ""
    type_: str = ""
    code: str = ""
    refused: bool = False


@dataclass(frozen=True, slots=True)
class RecordGone:
    """The client left before its stream's record was written: write it now, as a client disconnect,
    so the attempts already recorded never point at a record that does not exist."""

    healed: str | None
    heal_attempts: int
    heal_tokens: int


AttemptAction = StartAttempt | RecordAttempt | RetryAfter | ErrorAnswer | RecordGone


def reason_of(failure: AttemptFailure) -> str:
    """The metrics' name of a failure: ``http_<status>``, ``connect``, ``timeout``, or the ending."""
    if isinstance(failure, HttpError):
        return f"http_{failure.status}"
    if isinstance(failure, Unreachable):
        return "connect"
    if isinstance(failure, TimedOut):
        return "timeout"
    return failure.ending


class Attempts:
    """One client request's upstream attempts while the client has no byte of the answer.

    ``retry``: ``--retry`` (attempts after the first); ``max_wait``: ``--retry-max-wait``;
    ``budget``: the upstream's retry budget; ``rng``: the backoff's jitter; ``retry_off``: the proxy
    does not retry this kind of request at all (``--retry 0``, ``--retry-budget 0``), so a client
    retry may help; ``healing``: ``--retry`` or ``--resume`` is on, so records say how a stream
    healed.
    """

    def __init__(self, *, retry: int, max_wait: float, budget: RetryBudget, rng: random.Random,
                 retry_off: bool, healing: bool) -> None:
        self.retry = retry
        self.max_wait = max_wait
        self.budget = budget
        self.rng = rng
        self.retry_off = retry_off
        self.healing = healing
        self.made = 0  # attempts started
        self.tokens = 0  # completion tokens of the attempts the client never saw
        self.linked = 0  # attempts recorded pointing at the stream's record
        self.recorded = False  # the stream's own record has been written
        self._last_by_budget = False  # the attempt under way is the last because the budget is spent

    @property
    def retried(self) -> bool:
        """The proxy has retried this request at least once."""
        return self.made > 1

    # ── events ─────────────────────────────────────────────────────────────────────────────────
    def begin(self, now: float, *, new_request: bool = True) -> StartAttempt:
        """The client's request arrived: it counts towards the budget (``new_request``: a
        continuation of a request already counted does not); the first attempt starts."""
        if new_request:
            self.budget.request(now)
        return self._start(now)

    def waited(self, now: float) -> StartAttempt:
        """The wait a ``RetryAfter`` asked for is over: the next attempt starts."""
        return self._start(now)

    def failed(self, failure: AttemptFailure, *, now: float, wall: float) -> list[AttemptAction]:
        """The attempt under way failed before the client got a byte: record it, then retry or answer."""
        reason = reason_of(failure)
        last = self.made > self.retry or self._last_by_budget
        if isinstance(failure, TimedOut):
            # Never retried: the client has already waited the whole --timeout.
            return self._answer(failure, reason, wall, last=last)
        if isinstance(failure, HttpError) and not retryable_status(failure.status, failure.body):
            # The request itself: a retry will not help.
            return self._answer(failure, reason, wall, last=last)
        if last:
            return self._answer(failure, reason, wall, last=True)
        asked = retry_after(failure.headers, wall) if isinstance(failure, HttpError) else None
        wait = wait_before_retry(self.made - 1, asked, self.max_wait, self.rng)
        if wait is None:  # the upstream asked to wait beyond --retry-max-wait: its answer goes on
            return self._answer(failure, reason, wall, last=False, waited_too_long=True)
        if not self.budget.allows(now):
            return self._answer(failure, reason, wall, last=False, refused=True)
        self.budget.spend(now)
        self.linked += 1
        if isinstance(failure, BadStart):
            self.tokens += failure.tokens
        return [RecordAttempt(linked=True), RetryAfter(wait, reason)]

    def client_left(self) -> list[AttemptAction]:
        """The client closed its connection (during a wait, or while an attempt waited on the
        upstream): its stream's record, unless one was written."""
        if self.recorded:
            return []
        self.recorded = True
        healed = None if not self.healing else "retry" if self.linked else "none"
        return [RecordGone(healed, self.linked, self.tokens)]

    def own_recorded(self) -> None:
        """The stream's own record was written by its relay (the attempt became the client's stream)."""
        self.recorded = True

    # ── decisions ──────────────────────────────────────────────────────────────────────────────
    def _start(self, now: float) -> StartAttempt:
        self.made += 1
        by_count = self.made > self.retry
        # No retry could follow: the budget is spent now (it is asked again when a retry is due).
        self._last_by_budget = not by_count and not self.budget.allows(now)
        healed = None if not self.healing else "retry" if self.made > 1 else "none"
        return StartAttempt(self.made, by_count or self._last_by_budget, healed, self.made - 1,
                            self.tokens)

    def _answer(self, failure: AttemptFailure, reason: str, wall: float, *, last: bool,
                refused: bool = False,
                waited_too_long: bool = False) -> list[AttemptAction]:
        budget_spent = refused or (last and self._last_by_budget)
        headers = failure.headers if isinstance(failure, HttpError) else None
        if isinstance(failure, HttpError):
            cause = "upstream" if retryable_status(failure.status, failure.body) else "client_error"
        elif isinstance(failure, TimedOut):
            cause = "timeout"
        else:
            cause = "upstream"
        out = retry_headers(cause, retried=self.retried, retry_off=self.retry_off,
                            budget_spent=budget_spent, upstream_headers=headers, wall=wall,
                            waited_too_long=waited_too_long)
        self.recorded = True
        return [RecordAttempt(linked=False), self._shape(failure, out, reason, refused)]

    @staticmethod
    def _shape(failure: AttemptFailure, headers: tuple[tuple[str, str], ...], reason: str,
               refused: bool) -> ErrorAnswer:
        if isinstance(failure, HttpError):
            return ErrorAnswer(failure.status, headers, reason, as_is=True, refused=refused)
        if isinstance(failure, TimedOut):
            return ErrorAnswer(504, headers, reason, message=failure.message, type_="upstream_timeout",
                          code="upstream_timeout", refused=refused)
        if isinstance(failure, Unreachable):
            return ErrorAnswer(502, headers, reason, message=failure.message,
                          type_="upstream_unreachable", code="upstream_unreachable",
                          refused=refused)
        message = (f"the upstream failed before its first byte: {failure.ending}"
                   + (f" ({failure.error})" if failure.error else ""))
        return ErrorAnswer(502, headers, reason, message=message, type_="upstream_error",
                      code=failure.ending, refused=refused)
