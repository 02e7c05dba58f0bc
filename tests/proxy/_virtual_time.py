"""A virtual clock for the proxy's stall timers (``ProxyState.timers``): tests drive stalls with events.

The proxy's stall timer (``stall.StallWatch``) only ends a read the relay is waiting on; with this
clock, its time passes when the test says so (``stall``), never by itself. The test calls ``stall``
once its upstream has gone silent (an event the upstream sets); ``stall`` first lets the event loop
run until no stall timer has been re-armed for a number of loop turns (what a loopback round trip
needs: the bytes written before the silence are read and relayed), then moves time on by the
timeout and runs the timers that came due. No wall-clock wait, no sub-second timeout.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

#: Loop turns with no timer activity that count as "the proxy is waiting on a silent upstream".
QUIET_TURNS = 50


@dataclass(order=True)
class _Timer:
    when: float
    seq: int
    callback: Callable[[], object] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)

    def cancel(self) -> None:
        self.cancelled = True


class VirtualTimers:
    """``stall.Timers`` on a clock that only the test moves."""

    def __init__(self) -> None:
        self.now = 0.0
        self._timers: list[_Timer] = []
        self._seq = itertools.count()
        self.activity = 0  # timers armed or time read: the relay is still busy

    def time(self) -> float:
        self.activity += 1
        return self.now

    def call_at(self, when: float, callback: Callable[[], object]) -> _Timer:
        self.activity += 1
        timer = _Timer(when, next(self._seq), callback)
        heapq.heappush(self._timers, timer)
        return timer

    async def settle(self) -> None:
        """Run the loop until no timer was touched for ``QUIET_TURNS`` turns in a row."""
        quiet, seen = 0, self.activity
        while quiet < QUIET_TURNS:
            await asyncio.sleep(0)
            if self.activity != seen:
                quiet, seen = 0, self.activity
            else:
                quiet += 1

    async def stall(self, seconds: float) -> None:
        """Once the loop has settled, ``seconds`` pass: the timers due by then run."""
        await self.settle()
        self.now += seconds
        while self._timers and self._timers[0].when <= self.now:
            timer = heapq.heappop(self._timers)
            if not timer.cancelled:
                timer.callback()
        await self.settle()


async def until(predicate: Callable[[], bool], turns: int = 100_000) -> None:
    """Run the loop until ``predicate()`` holds (an upstream saw its request, …); loop turns, not
    seconds, so no wall-clock window."""
    for _ in range(turns):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError("the awaited condition never came")
