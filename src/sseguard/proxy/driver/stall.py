"""Upstream silence: a lazy stall timer for an aiohttp body reader, shared by both relays.

The guarded relay (``driver/stream.py``) and the verbatim one (``passthrough.py``) both cut an upstream that
stops sending for ``--stall-timeout``; only time spent waiting on the upstream counts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import aiohttp

#: The most bytes taken from the upstream per read. ``read(n)`` returns what has arrived, up to n,
#: without waiting for n (so no event is held back); the cap bounds what one stream holds while its
#: client is slow: a backlog is checked and written 16 KiB at a time, not as one 256 KiB+ block
#: (token-sized events arrive far below it, so it costs nothing in the ordinary case).
READ_MAX = 16 * 1024


class Body(Protocol):
    """What a relay reads an upstream body from: ``aiohttp.StreamReader``, or a continuation's splice."""

    async def read(self, n: int = -1) -> bytes:
        """What has arrived, at most ``n`` bytes; b"" at the end."""


def broke_off(exc: BaseException, received: int) -> str:
    """What the client is told when the upstream's body broke off after ``received`` bytes.

    A clean, typed sentence: aiohttp's own text (``ClientPayloadError: Response payload is not
    completed: <TransferEncodingError: 400, message='Not enough data …'>``) names the proxy's
    internals, not what happened to the client's answer; the record keeps that detail.
    """
    if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError
                  | ConnectionResetError):
        what = "reset"
    elif isinstance(exc, aiohttp.ClientConnectionError | OSError):
        what = "failed"
    else:
        what = "broke off"
    return f"upstream connection {what} after {received} bytes"


async def drain(watch: StallWatch, sink: Callable[[bytes], object]) -> str | None:
    """Read the rest of an upstream body into ``sink`` until its end or a stall; the transport error
    that cut it (unredacted), or None."""
    try:
        while True:
            chunk = await watch.read()
            if not chunk:
                return None
            sink(chunk)
    except Stalled:
        return None
    except (aiohttp.ClientError, OSError) as exc:
        return f"{type(exc).__name__}: {exc}"


class TimerHandle(Protocol):
    """A timer that may be cancelled (``asyncio.TimerHandle``)."""

    def cancel(self) -> None:
        """The timer will not fire."""


class Timers(Protocol):
    """Where the stall timers get their time and schedule their checks: the event loop, or a test's
    virtual clock (``tests/proxy/_virtual_time.py``), so that no test waits a real stall timeout."""

    def time(self) -> float:
        """Now, in the timers' own seconds."""

    def call_at(self, when: float, callback: Callable[[], object]) -> TimerHandle:
        """Call ``callback`` once ``time()`` reaches ``when``."""


class Stalled(Exception):
    """Set on the upstream body reader when it has been silent for the stall timeout."""


class StallWatch:
    """A lazy stall timer: one timer per stall period, not one per chunk.

    Only time spent *waiting on the upstream* counts: while the relay is blocked writing to a slow
    client, buffered upstream bytes are not silence. On a stall the reader gets a ``Stalled``
    exception, which ends the pending read at once.
    """

    __slots__ = ("_loop", "_reader", "_timeout", "fired", "reading", "since", "timer")

    #: ``loop``: the event loop, or any ``Timers`` (a test's virtual clock).

    def __init__(self, loop: Timers, timeout: float, reader: aiohttp.StreamReader) -> None:
        self._loop = loop
        self._timeout = timeout
        self._reader = reader
        #: The armed stall timer (None: none is armed; the next read arms it). Public so that the
        #: relay's per-read loop can test it without a call (``StreamDriver._pump``).
        self.timer: TimerHandle | None = None
        self.fired = False  # the stall ended the read (the relay may decide it was not a stall)
        self.reading = False
        self.since = loop.time()

    async def read(self) -> bytes:
        """What the upstream has sent since the last read (b"" at its end); a stall raises
        ``Stalled``."""
        self.start_read()
        try:
            return await self._reader.read(READ_MAX)
        finally:
            self.reading = False

    def start_read(self) -> None:
        self.since = self._loop.time()
        self.reading = True
        if self.timer is None:
            self.timer = self._loop.call_at(self.since + self._timeout, self._check)

    def _check(self) -> None:
        self.timer = None
        if not self.reading:
            return  # the next start_read() arms it again
        due = self.since + self._timeout
        if self._loop.time() >= due:
            self.fired = True
            self._reader.set_exception(Stalled(f"no byte for {self._timeout:g} s"))
        else:
            self.timer = self._loop.call_at(due, self._check)

    def shorten(self, timeout: float) -> None:
        """Use a shorter timeout from now on (it only ever shrinks)."""
        self._timeout = min(self._timeout, timeout)
        if self.timer is not None:  # armed for the longer timeout: re-arm on the next read
            self.timer.cancel()
            self.timer = None

    def close(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
