"""The per-request draw: which route a response takes and which fault (if any) it gets.

Pure and deterministic: request number ``counter`` always draws the same numbers from its own generator
(``faults.request_rng``), and the same count of them whatever branch is taken, so a change in one
pattern's probability never reshuffles the draws of the others.
"""

from __future__ import annotations

from dataclasses import replace

from sseguard.chaos.config import (
    ApiPattern,
    CachePattern,
    ChaosConfig,
    LoadPattern,
    RoutedPattern,
    WindowPattern,
)
from sseguard.chaos.faults import STREAM_ONLY, Decision, Fault, request_rng
from sseguard.core.verdict import Api


def decide(config: ChaosConfig, counter: int, *, inflight: int = 1, elapsed_s: float = 0.0,
           forced: Fault | None = None, force: bool = False, api: str = Api.CHAT.value,
           cached: bool = False) -> Decision:
    """Route and fault for request ``counter``. Patterns are tried in order, then the base faults.

    ``force`` (with ``forced`` a fault or None for "none") overrides the fault draw; the route is
    still drawn so that forced requests keep the configured id prefixes. ``api`` is the protocol the
    request came in (for ``ApiPattern``); ``cached``: it hit the prefix cache (``CachePattern``).
    """
    rng = request_rng(config.seed, counter)
    u_route = rng.random()
    route, prefix = "default", config.id_prefix
    acc = 0.0
    for routed in config.routes:
        acc += routed.share
        if u_route < acc:
            route, prefix = routed.route, routed.prefix
            break
    fault: Fault | None = None
    source = "none"
    for pattern in config.patterns:
        u = rng.random()  # drawn for every pattern, fired or not: keeps the others' draws stable
        if fault is not None:
            continue
        if isinstance(pattern, LoadPattern):
            p, kind = pattern.probability(inflight), "load"
        elif isinstance(pattern, RoutedPattern):
            p, kind = (pattern.probability if route == pattern.route else 0.0), "routed"
        elif isinstance(pattern, WindowPattern):
            p, kind = (pattern.probability if pattern.active(elapsed_s) else 0.0), "window"
        elif isinstance(pattern, ApiPattern):
            p, kind = (pattern.probability if pattern.api == api else 0.0), "api"
        elif isinstance(pattern, CachePattern):
            p, kind = pattern.p(cached=cached, inflight=inflight), "cache"
        if u < p:
            fault, source = pattern.fault, kind
    u = rng.random()
    if fault is None:
        acc = 0.0
        for candidate, p in config.faults.items():
            acc += p
            if u < acc:
                fault, source = candidate, "base"
                break
    at = rng.random()
    variant = rng.randrange(1 << 30)
    if force:
        fault, source = forced, ("forced" if forced is not None else "none")
    return Decision(fault=fault, route=route, id_prefix=prefix, at=at, variant=variant,
                    source=source if fault is not None else "none", drawn=fault)


def applicable(decision: Decision, *, stream: bool, tools_offered: bool, typed_tool: bool,
               include_usage: bool, unsupported: frozenset[Fault] = frozenset()) -> Decision:
    """Drop a drawn fault this request cannot carry (``drawn`` keeps it, for the statistics).

    A non-streamed request cannot be cut mid-frame; an undefined function needs offered tools to be
    undefined against; a schema mismatch needs an offered tool with typed parameters; a missing usage chunk
    needs one to have been asked for; and a protocol has no way to carry some faults (``unsupported``:
    chat has no sequence numbers, messages no second id).
    """
    fault = decision.fault
    if fault is None:
        return decision
    unfit = (
        fault in unsupported
        or (fault in STREAM_ONLY and not stream)
        or (fault is Fault.TOOL_UNDEFINED_FUNCTION and not tools_offered)
        or (fault is Fault.TOOL_ARGS_SCHEMA_MISMATCH and not typed_tool)
        or (fault is Fault.MISSING_USAGE and stream and not include_usage)
    )
    if not unfit:
        return decision
    return replace(decision, fault=None, source="none")

