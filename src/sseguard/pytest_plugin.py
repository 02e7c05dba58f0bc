"""The pytest plugin: the ``sseguard_chaos`` fixture and the ``sseguard_chaos`` marker.

Registered through the ``pytest11`` entry point, so it loads in every pytest run of an environment that
has sseguard installed. That is why this module imports nothing heavy: the chaos server (aiohttp) and
its thread start only inside a test that asks for the fixture.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from sseguard.testing import ChaosUpstream

_MARKER = "sseguard_chaos"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{_MARKER}(**options): configure the sseguard_chaos upstream of this test: seed, faults "
        "(['truncated=0.1', ...]), dialects, raw_markup, ttft_ms, inter_token_ms, tokens, stall_ms, "
        "stall_then, model (see sseguard docs/testing.md)")


@pytest.fixture
def sseguard_chaos(request: pytest.FixtureRequest) -> Iterator[ChaosUpstream]:
    """A fresh chaos upstream on a free loopback port for this test; stopped after it, pass or fail."""
    from sseguard.chaos.config import ChaosConfig
    from sseguard.testing import ChaosUpstream

    options: dict[str, Any] = {}
    for marker in reversed(list(request.node.iter_markers(_MARKER))):  # the closest marker wins
        if marker.args:
            raise pytest.UsageError(f"@pytest.mark.{_MARKER} takes keyword options only")
        options.update(marker.kwargs)
    try:
        config = ChaosConfig().with_overrides(**options)
    except TypeError as exc:
        raise pytest.UsageError(f"@pytest.mark.{_MARKER}: {exc}") from None
    with ChaosUpstream.running(config) as upstream:
        yield upstream
