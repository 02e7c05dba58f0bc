"""``sseguard.chaos``: a fault-injecting upstream for tests, demos and benchmarks, speaking every
registered protocol at its routes (``/v1/chat/completions``, ``/v1/responses``, ``/v1/messages``, …):
each protocol's writer is ``chaos/<protocol>.py``, listed in ``chaos/registry.py``.

    async with run_chaos(ChaosConfig(faults={Fault.TRUNCATED: 0.1}, seed=7)) as server:
        ...  # point any client at server.url; server.stats counts what was injected

Each response says what it carries in ``x-sseguard-fault``; ``EXPECTED[fault]`` is the verdict a
strict checker must reach for it. See ``docs/chaos.md``.
"""

from sseguard.chaos.config import (
    MARKUP_FAMILIES,
    ApiPattern,
    ChaosConfig,
    FaultOptions,
    LoadPattern,
    Pacing,
    RoutedPattern,
    WindowPattern,
    slope_points,
)
from sseguard.chaos.decide import decide
from sseguard.chaos.faults import DIALECT_ENDING, EXPECTED, Decision, Expectation, Fault, ServerDialect
from sseguard.chaos.responding import (
    FAULT_HEADER,
    INFLIGHT_HEADER,
    INJECT_HEADER,
    ROUTE_HEADER,
    SERVER_HEADER,
)
from sseguard.chaos.server import ChaosServer, make_app, run_chaos, run_chaos_in_thread, serve
from sseguard.chaos.state import ChaosStats
from sseguard.core._renamed import renamed

__all__ = [
    "DIALECT_ENDING",
    "EXPECTED",
    "FAULT_HEADER",
    "INFLIGHT_HEADER",
    "INJECT_HEADER",
    "MARKUP_FAMILIES",
    "ROUTE_HEADER",
    "SERVER_HEADER",
    "ApiPattern",
    "ChaosConfig",
    "ChaosServer",
    "ChaosStats",
    "Decision",
    "Expectation",
    "Fault",
    "FaultOptions",
    "LoadPattern",
    "Pacing",
    "RoutedPattern",
    "ServerDialect",
    "WindowPattern",
    "decide",
    "make_app",
    "run_chaos",
    "run_chaos_in_thread",
    "serve",
    "slope_points",
]

#: Old names → new (docs/design/vocabulary.md "Names": each dialect says its room).
__getattr__ = renamed(__name__, {"Dialect": "ServerDialect"})
