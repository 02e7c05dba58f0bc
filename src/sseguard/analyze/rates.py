"""Failure rates and their Wilson 95 % intervals: the one interval every sseguard view shows.

Failure rates in a probe run are often near 0 % with a few hundred requests, where the textbook normal
interval collapses to zero width or leaves [0, 1]; Wilson's interval stays honest there. This module
imports nothing heavy (no numpy, no scipy), so the probe's live board can show intervals without paying
for the statistics stack that the analyzer's tests need.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: The 97.5th percentile of the standard normal distribution: a two-sided 95 % interval.
Z95 = 1.959963984540054


def wilson(successes: int, trials: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for ``successes / trials``; ``(0, 1)`` when there are no trials."""
    if trials < 0 or not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials, got {successes}/{trials}")
    if trials == 0:
        return 0.0, 1.0
    p = successes / trials
    z2 = z * z
    denom = 1.0 + z2 / trials
    centre = (p + z2 / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials)) / denom
    # Clamp the rounding noise at the ends: 0/n must give exactly 0 as its lower bound.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == trials else min(1.0, centre + half)
    return low, high


@dataclass(frozen=True, slots=True)
class Rate:
    """``failed`` of ``total`` with its Wilson 95 % interval."""

    failed: int
    total: int
    low: float
    high: float

    @classmethod
    def of(cls, failed: int, total: int) -> Rate:
        low, high = wilson(failed, total)
        return cls(failed, total, low, high)

    @property
    def value(self) -> float:
        return self.failed / self.total if self.total else 0.0

    def __str__(self) -> str:
        return f"{pct(self.value)} [{pct(self.low)}–{pct(self.high)}]"

    def to_dict(self) -> dict[str, float | int]:
        return {"failed": self.failed, "total": self.total, "rate": self.value,
                "ci_low": self.low, "ci_high": self.high}


def pct(value: float) -> str:
    """A rate as a short percentage: ``0 %`` and ``100 %`` exact, otherwise one decimal."""
    if value <= 0.0:
        return "0%"
    if value >= 1.0:
        return "100%"
    if value < 0.001:
        return "<0.1%"
    return f"{value * 100:.1f}%"
