"""Before the first byte, the beginning of a 2xx attempt's body: is it worth another attempt?

With ``--retry`` the client's response headers wait for the upstream's first event, so that a body
that begins badly can still be replaced by another attempt (``attempts.Attempts`` decides whether it
is). This machine decides what "begins badly" means, with no socket and no clock: the driver
(``driver/guarded.py``) feeds it the upstream's reads (``receive``) and, should the body end, stall
or break before its first event, how (``ended``); it answers, once the beginning is known, with a
``Beginning``: the bytes read, the events the stream's checker found in them, and the attempt's
verdict when that beginning is a failure worth retrying — an empty body, a stall, a reset, or an
error event as the first event.

The bytes go through the stream's own checker, once: the stream machine forwards the events found
here without feeding them again (a second checker cost its setup on every stream, on the way to the
first chunk). A failed attempt's checker is dropped with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from sseguard.core.contract import Checker
from sseguard.core.sse import SSEEvent
from sseguard.core.verdict import Verdict
from sseguard.proxy.machines.attempts import BadStart
from sseguard.proxy.machines.retry import completion_tokens


@dataclass(frozen=True, slots=True)
class Beginning:
    """What a 2xx attempt's body began with: ``data`` (every byte read), ``events`` (what the checker
    found in them; None: none, the body ended first), and ``failed``, the attempt's verdict when the
    beginning is worth another attempt (None: relay it)."""

    data: bytes
    events: list[SSEEvent] | None
    failed: Verdict | None = None

    @property
    def bad_start(self) -> BadStart | None:
        """The failure the attempts' machine is told about, when the beginning is one."""
        verdict = self.failed
        if verdict is None:
            return None
        return BadStart(str(verdict.ending), verdict.error, completion_tokens(verdict))


class FirstEvent:
    """Reads a 2xx attempt's body up to its first event (keep-alive comments do not count) with the
    stream's ``checker``."""

    __slots__ = ("_read", "checker")

    def __init__(self, checker: Checker) -> None:
        self.checker = checker
        self._read: list[bytes] = []

    def receive(self, chunk: bytes) -> Beginning | None:
        """One read of the body (b"": its clean end); the beginning once it is known, else None
        (read on)."""
        if not chunk:
            return self.ended()
        read = self._read
        read.append(chunk)
        checker = self.checker
        events = checker.feed(chunk)
        if events:
            return Beginning(b"".join(read), events,
                             None if checker.error_message is None else checker.close())
        if read[0][:1] == b":" and b"\n\n" in chunk:
            # Keep-alive comments during a long prefill go out at once (holding them would defeat
            # them): the upstream is at work, and the client's body has begun, so no retry.
            return Beginning(b"".join(read), [])
        return None

    def ended(self, *, stalled: bool = False, transport_error: str | None = None) -> Beginning:
        """The body ended before its first event: cleanly, silent for the stall timeout
        (``stalled``), or broken off (``transport_error``, in the client's words)."""
        return Beginning(b"".join(self._read), None,
                         self.checker.close(transport_error=transport_error, stalled=stalled))
