"""Every error answer the proxy writes gets its retry headers from one place,
``machines/retry.retry_headers`` (the attempts' machine for its answers, ``ProxyState.tell_retry``
for the others), and "the proxy makes no retries of its own" is one property,
``ProxyConfig.retries_off`` (docs/design/guarantees.md guarantee 7)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import sseguard.proxy
from sseguard.proxy.config import ProxyConfig
from sseguard.proxy.machines.retry import retry_headers

PROXY = Path(sseguard.proxy.__file__).parent


@pytest.mark.parametrize(("cause", "retried", "retry_off", "upstream", "expected"), [
    # A client retry can help and the proxy made none: true, with the upstream's own retry-after.
    ("upstream", False, True, {"retry-after": "3"}, (("x-should-retry", "true"), ("retry-after", "3"))),
    ("timeout", False, True, None, (("x-should-retry", "true"),)),
    # The proxy retried already, or retries itself: false, and no retry-after passed on.
    ("upstream", True, True, {"retry-after": "3"}, (("x-should-retry", "false"),)),
    ("upstream", False, False, None, (("x-should-retry", "false"),)),
    # What a retry cannot change.
    ("bad_request", False, True, None, (("x-should-retry", "false"),)),
    ("client_error", False, True, {"retry-after": "3"}, (("x-should-retry", "false"),)),
])
def test_the_retry_headers_follow_the_table(cause: str, retried: bool, retry_off: bool,
                                            upstream: dict[str, str] | None,
                                            expected: tuple[tuple[str, str], ...]) -> None:
    assert retry_headers(cause, retried=retried, retry_off=retry_off,
                         upstream_headers=upstream) == expected


@pytest.mark.parametrize(("retry", "budget", "off"), [(0, "0.2", True), (2, "0", True),
                                                       (2, "0.2", False), (0, "0", True)])
def test_retries_off_means_no_retry_of_the_proxys_own(retry: int, budget: str, off: bool) -> None:
    config = ProxyConfig.from_options(upstream="http://127.0.0.1:9/v1", retry=retry,
                                      retry_budget=budget, store=None)
    assert config.retries_off is off


def test_only_the_retry_rules_decide_x_should_retry() -> None:
    callers = sorted(str(path.relative_to(PROXY)) for path in PROXY.rglob("*.py")
                     for node in ast.walk(ast.parse(path.read_text()))
                     if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                     and node.func.id == "should_retry")
    assert callers == ["machines/retry.py"]
