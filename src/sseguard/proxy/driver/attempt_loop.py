"""The one attempt loop: ask the upstream, and after each failure perform what the attempts' machine
decides (record the attempt, wait, ask again) until an attempt succeeds or the machine answers.

Three callers, one loop: a guarded stream's attempts (``driver/guarded.py``, ``guard_stream``), a
continuation request (``driver/guarded.py``, ``_ask``) and a guarded endpoint's non-streaming call
(``driver/passthrough.py``). They differ only in what one attempt is (the caller's ``attempt``)
and in what a recorded attempt or a retry costs them besides the wait (``recorded``, ``retrying``);
every decision is the machine's (``machines/attempts.py``).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from sseguard.proxy.driver.state import ProxyState
from sseguard.proxy.machines.attempts import (
    AttemptFailure,
    Attempts,
    BadStart,
    ErrorAnswer,
    HttpError,
    RecordAttempt,
    RetryAfter,
    StartAttempt,
    TimedOut,
    Unreachable,
)

T = TypeVar("T")


async def run_attempts(state: ProxyState, machine: Attempts,
                       attempt: Callable[[StartAttempt], Awaitable[T | AttemptFailure]], *,
                       label: str, new_request: bool = True,
                       recorded: Callable[[RecordAttempt], None] | None = None,
                       retrying: Callable[[RetryAfter], None] | None = None) -> T | ErrorAnswer:
    """What the last attempt got (whatever is not a failure), or the machine's error answer.

    ``label``: the retries' metric label (the protocol, or ``continuation``); ``new_request``: the
    request counts towards the retry budget (a continuation's was counted already).
    """
    start = machine.begin(state.clock(), new_request=new_request)
    while True:
        got = await attempt(start)
        if not isinstance(got, Unreachable | TimedOut | HttpError | BadStart):
            return got
        for action in machine.failed(got, now=state.clock(), wall=time.time()):
            if isinstance(action, RecordAttempt):
                if recorded is not None:
                    recorded(action)
            elif isinstance(action, RetryAfter):
                if retrying is not None:
                    retrying(action)
                state.metrics.retries.labels(label, action.reason).inc()
                await state.sleep(action.seconds)
                start = machine.waited(state.clock())
            elif isinstance(action, ErrorAnswer):
                return action
