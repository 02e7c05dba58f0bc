"""One layer retries (docs/design/guarantees.md guarantee 7): what the proxy tells a client about retrying,
and the retry budget that keeps its own retries from multiplying a failure. Pure decisions, literal tables,
an injected clock."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sseguard.proxy.machines.attempts import (
    AttemptFailure,
    Attempts,
    ErrorAnswer,
    HttpError,
    RetryAfter,
    TimedOut,
    Unreachable,
)
from sseguard.proxy.machines.retry import RetryBudget, passed_on_retry_after, should_retry

#: (status, cause, what the proxy did) → x-should-retry. Written out, not computed.
HEADER_TABLE = [
    # status, cause, retried, --retry 0, budget spent, upstream asked to wait, beyond max wait → header
    (502, "upstream", True, False, False, None, False, "false"),  # retries spent on it
    (503, "upstream", True, False, False, 2.0, False, "false"),
    (502, "upstream", False, True, False, None, False, "true"),  # told --retry 0: the client may
    (503, "upstream", False, True, False, 2.0, False, "true"),
    (429, "upstream", False, False, True, None, False, "false"),  # the budget said no, no wait asked
    (429, "upstream", False, False, True, 5.0, False, "true"),  # budget spent, upstream asked to wait
    (429, "upstream", False, False, False, 60.0, True, "true"),  # asked beyond --retry-max-wait
    (504, "timeout", False, False, False, None, False, "false"),  # the client already waited it out
    (504, "timeout", False, True, False, None, False, "true"),
    (400, "client_error", False, True, False, None, False, "false"),  # a 4xx will not change
    (404, "client_error", True, False, False, None, False, "false"),
    (400, "bad_request", False, True, False, None, False, "false"),  # the proxy's own 400/413
    (413, "bad_request", False, False, False, None, False, "false"),
    (200, "model_failure", False, True, False, None, False, "false"),
    (200, "policy", False, True, False, None, False, "false"),
]


@pytest.mark.parametrize(("status", "cause", "retried", "retry_off", "budget_spent", "asked",
                          "too_long", "header"), HEADER_TABLE)
def test_the_header_table(status: int, cause: str, retried: bool, retry_off: bool,
                          budget_spent: bool, asked: float | None, too_long: bool,
                          header: str) -> None:
    assert should_retry(cause, retried=retried, retry_off=retry_off, budget_spent=budget_spent,
                        asked=asked, waited_too_long=too_long) == header


def test_only_the_upstreams_own_retry_after_is_passed_on() -> None:
    assert passed_on_retry_after({"retry-after": "3", "retry-after-ms": "2500", "x-other": "1"}) == \
        [("retry-after", "3"), ("retry-after-ms", "2500")]
    assert passed_on_retry_after({"content-type": "application/json"}) == []
    assert passed_on_retry_after(None) == []


def test_a_quiet_proxy_still_retries_up_to_the_floor() -> None:
    budget = RetryBudget(0.2)
    budget.request(100.0)
    allowed = []
    for _ in range(12):
        allowed.append(budget.allows(100.5))
        if allowed[-1]:
            budget.spend(100.5)
    assert allowed == [True] * 10 + [False, False]


def test_the_budget_frees_up_once_the_window_has_passed() -> None:
    budget = RetryBudget(0.2)
    for _ in range(10):
        budget.spend(0.0)
    assert not budget.allows(5.0)
    assert budget.allows(11.0)  # the retries of second 0 have left the 10 s window


def test_a_zero_budget_never_retries() -> None:
    budget = RetryBudget(0.0)
    budget.request(1.0)
    assert not budget.allows(1.0)


@settings(max_examples=100, deadline=None)
@given(starts=st.lists(st.floats(0, 30, allow_nan=False), min_size=1, max_size=400),
       wants=st.integers(1, 5))
def test_retries_never_add_more_than_the_budget_to_any_window(starts: list[float],
                                                              wants: int) -> None:
    """However the requests arrive, the 10 s that end at any retry hold at most max(10, 20 % of
    their requests) retries."""
    budget = RetryBudget(0.2)
    events: list[tuple[float, str]] = []
    for now in sorted(starts):
        budget.request(now)
        events.append((now, "request"))
        for _ in range(wants):
            if budget.allows(now):
                budget.spend(now)
                events.append((now, "retry"))
    for i, (end, kind) in enumerate(events):
        if kind != "retry":
            continue
        inside = [k for t, k in events[:i + 1] if int(end) - 9 <= int(t)]
        assert inside.count("retry") <= max(10, 0.2 * inside.count("request"))


@pytest.mark.parametrize(("given", "share"), [("20%", 0.2), ("0.5", 0.5), ("0", 0.0), (0.1, 0.1)])
def test_retry_budget_takes_a_percentage_or_a_share(given: str | float, share: float) -> None:
    from sseguard.proxy import ProxyConfig

    config = ProxyConfig.from_options(upstream="http://127.0.0.1:9/v1", retry_budget=given)
    assert config.retry_budget == pytest.approx(share)


@pytest.mark.parametrize("given", ["lots", "-5%", "2000%"])
def test_a_bad_retry_budget_is_a_one_line_config_error(given: str) -> None:
    from sseguard.core.errors import ConfigError
    from sseguard.proxy import ProxyConfig

    with pytest.raises(ConfigError, match=r"^--retry-budget"):
        ProxyConfig.from_options(upstream="http://127.0.0.1:9/v1", retry_budget=given)


@pytest.mark.parametrize(("workers", "floor"), [(1, 10), (2, 5), (3, 4), (4, 3), (16, 1)])
def test_each_worker_gets_the_floor_split_and_the_whole_ratio(workers: int, floor: int) -> None:
    budget = RetryBudget.of_worker(0.2, workers)
    assert (budget.floor, budget.ratio) == (floor, 0.2)


@settings(max_examples=100, deadline=None)
@given(workers=st.integers(1, 8),
       starts=st.lists(st.tuples(st.floats(0, 9.9, allow_nan=False), st.integers(0, 7)),
                       min_size=1, max_size=300))
def test_n_workers_together_keep_the_budget_of_one_proxy(
        workers: int, starts: list[tuple[float, int]]) -> None:
    """``--workers N``: however the kernel spreads the requests of one window over the workers, each
    failing and asking two retries (``--retry 2``), the workers together retry at most the quiet
    floor plus the rounding (``10 + N - 1``) plus 20 % of all the requests — one proxy's budget, not
    N of them."""
    budgets = [RetryBudget.of_worker(0.2, workers) for _ in range(workers)]
    retries = 0
    for now, which in sorted(starts):
        budget = budgets[which % workers]
        budget.request(now)
        for _ in range(2):  # --retry 2
            if budget.allows(now):
                budget.spend(now)
                retries += 1
    assert retries <= 10 + workers - 1 + 0.2 * len(starts)


#: The same table, as the attempts' machine answers it end to end: (the failure, ``--retry``, the
#: budget spent before the request, failures before it) → the answer's status and headers.
ATTEMPT_TABLE = [
    ("503", 2, False, 2, (503, {"x-should-retry": "false"})),  # retries spent on it
    ("connect", 2, False, 2, (502, {"x-should-retry": "false"})),
    ("503", 0, False, 0, (503, {"x-should-retry": "true"})),  # --retry 0: the client may
    ("503 retry-after 5", 0, False, 0, (503, {"x-should-retry": "true", "retry-after": "5"})),
    ("connect", 0, False, 0, (502, {"x-should-retry": "true"})),
    ("503", 2, True, 0, (503, {"x-should-retry": "false"})),  # the budget said no, no wait asked
    ("503 retry-after 5", 2, True, 0, (503, {"x-should-retry": "true", "retry-after": "5"})),
    ("503 retry-after 60", 2, False, 0, (503, {"x-should-retry": "true", "retry-after": "60"})),
    ("timeout", 2, False, 0, (504, {"x-should-retry": "false"})),  # already waited out
    ("timeout", 0, False, 0, (504, {"x-should-retry": "true"})),
    ("400", 2, False, 0, (400, {"x-should-retry": "false"})),  # the request itself
    ("400", 0, False, 0, (400, {"x-should-retry": "false"})),
    ("404", 2, False, 1, (404, {"x-should-retry": "false"})),
]


def _failure(name: str) -> AttemptFailure:
    if name == "connect":
        return Unreachable("the upstream is unreachable")
    if name == "timeout":
        return TimedOut("no response within 600 s")
    status, _, wait = name.partition(" retry-after ")
    return HttpError(int(status), {"retry-after": wait} if wait else {})


@pytest.mark.parametrize(("failure", "retry", "spent", "before", "expected"), ATTEMPT_TABLE)
def test_the_attempts_machine_answers_the_header_table(
        failure: str, retry: int, spent: bool, before: int,
        expected: tuple[int, dict[str, str]]) -> None:
    budget = RetryBudget(0.2)
    if spent:
        for _ in range(10):
            budget.spend(0.0)
    machine = Attempts(retry=retry, max_wait=10.0, budget=budget, rng=random.Random(0),
                       retry_off=retry == 0, healing=False)
    machine.begin(0.0)
    for _ in range(before):
        actions = machine.failed(HttpError(503, {}), now=0.0, wall=0.0)
        assert isinstance(actions[-1], RetryAfter)
        machine.waited(0.0)
    *_, answer = machine.failed(_failure(failure), now=0.0, wall=0.0)
    assert isinstance(answer, ErrorAnswer)
    assert (answer.status, dict(answer.headers)) == expected
