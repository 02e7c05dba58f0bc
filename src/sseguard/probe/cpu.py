"""The probe's own CPU use, sampled once a second: past ~80 % of a core its timings measure itself
(docs/design/http.md), and the summary says so. A ``--workers`` run keeps every process's samples."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

CPU_WARN = 0.8


@dataclass
class CpuSummary:
    """The probe's own CPU use, as a fraction of one core, sampled once a second."""

    samples: list[float] = field(default_factory=list)
    total_seconds: float = 0.0
    wall_seconds: float = 0.0

    @property
    def peak(self) -> float:
        return max(self.samples, default=0.0)

    @property
    def mean(self) -> float:
        return self.total_seconds / self.wall_seconds if self.wall_seconds > 0 else 0.0

    @property
    def seconds_over(self) -> int:
        return sum(1 for s in self.samples if s > CPU_WARN)

    @property
    def overloaded(self) -> bool:
        return self.seconds_over > 0

    def to_dict(self) -> dict[str, Any]:
        return {"per_second": [round(s, 3) for s in self.samples], "peak": round(self.peak, 3),
                "mean": round(self.mean, 3), "cpu_seconds": round(self.total_seconds, 3),
                "wall_seconds": round(self.wall_seconds, 3), "seconds_over_80pct": self.seconds_over}


class CpuMonitor:
    """Samples ``time.process_time()`` against the monotonic clock every ``interval`` seconds."""

    def __init__(self, interval: float = 1.0) -> None:
        self.interval = interval
        self.summary = CpuSummary()
        self._cpu0 = time.process_time()
        self._t0 = time.monotonic()

    async def run(self) -> None:
        last_cpu, last = self._cpu0, self._t0
        while True:
            await asyncio.sleep(self.interval)
            cpu, now = time.process_time(), time.monotonic()
            if now > last:
                self.summary.samples.append((cpu - last_cpu) / (now - last))
            last_cpu, last = cpu, now

    def stop(self) -> CpuSummary:
        self.summary.total_seconds = time.process_time() - self._cpu0
        self.summary.wall_seconds = time.monotonic() - self._t0
        return self.summary
