"""One attempt loop for its three callers (a guarded stream, a continuation request, a guarded
endpoint's non-streaming call): ``driver/attempt_loop.run_attempts`` asks, and performs what the
attempts' machine decides after each failure; nothing else in the proxy feeds the machine failures."""

from __future__ import annotations

import ast
import random
from pathlib import Path

import sseguard.proxy
from sseguard.proxy.config import ProxyConfig
from sseguard.proxy.driver.attempt_loop import run_attempts
from sseguard.proxy.driver.state import ProxyState
from sseguard.proxy.machines.attempts import (
    AttemptFailure,
    Attempts,
    ErrorAnswer,
    HttpError,
    RecordAttempt,
    RetryAfter,
    StartAttempt,
)
from sseguard.proxy.machines.retry import RetryBudget

PROXY = Path(sseguard.proxy.__file__).parent


def _state(waits: list[float]) -> ProxyState:
    state = ProxyState(ProxyConfig.from_options(upstream="http://127.0.0.1:9/v1", store=None))

    async def sleep(seconds: float) -> None:  # no real wait: the loop's waits are noted
        waits.append(seconds)

    state.sleep = sleep
    state.clock = lambda: 100.0
    return state


def _machine(retry: int) -> Attempts:
    return Attempts(retry=retry, max_wait=10.0, budget=RetryBudget(0.2), rng=random.Random(7),
                    retry_off=retry == 0, healing=True)


async def test_failures_are_waited_out_and_asked_again_until_one_succeeds() -> None:
    waits: list[float] = []
    starts: list[int] = []
    recorded: list[RecordAttempt] = []
    retries: list[RetryAfter] = []

    async def attempt(start: StartAttempt) -> str | AttemptFailure:
        starts.append(start.number)
        return "the answer" if start.number == 3 else HttpError(503, {})

    got = await run_attempts(_state(waits), _machine(2), attempt, label="chat",
                             recorded=recorded.append, retrying=retries.append)
    assert got == "the answer"
    assert starts == [1, 2, 3]
    assert len(waits) == 2 and [r.reason for r in retries] == ["http_503", "http_503"]
    assert [r.linked for r in recorded] == [True, True]


async def test_the_last_failure_is_the_machines_error_answer() -> None:
    waits: list[float] = []

    async def attempt(start: StartAttempt) -> str | AttemptFailure:
        return HttpError(503, {"retry-after": "1"})

    got = await run_attempts(_state(waits), _machine(1), attempt, label="chat")
    assert isinstance(got, ErrorAnswer) and got.status == 503 and got.as_is
    assert waits == [1.0]


def test_only_the_attempt_loop_feeds_the_attempts_machine_its_failures() -> None:
    callers = sorted(str(path.relative_to(PROXY)) for path in PROXY.rglob("*.py")
                     for node in ast.walk(ast.parse(path.read_text()))
                     if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                     and node.func.attr == "failed" and path.parent.name == "driver")
    assert callers == ["driver/attempt_loop.py"]
