"""The seam between the relay and what rewrites frames: ``Frames``, one upstream frame in, bytes out.

The relay (``driver/stream.py``) depends on this interface only; the markup repair (``repair/``) implements
it. Neither imports the other, so the repair stays pure (no aiohttp, no app state) and the relay
knows nothing of tool-call markup.
"""

from __future__ import annotations

from typing import Any

from sseguard.core.sse import SSEEvent
from sseguard.core.verdict import Finding

#: Why a frame rewriter cannot go on: ``(code, message)``, the code naming the error frame's ``code``.
StopReason = tuple[str, str]


class Frames:
    """Turns one upstream frame into what the client gets. This one forwards it unchanged.

    The markup repair (``sseguard.proxy.repair``) is the other implementation: it rewrites content
    deltas and can fail mid-stream (``failure``), which ends the stream with an error frame.
    """

    failure: StopReason | None = None  # set by a rewriter that cannot go on

    def transform(self, event: SSEEvent) -> bytes:
        """The bytes the client gets for ``event`` (b"": nothing yet, or nothing at all)."""
        return event.raw

    def flush(self) -> bytes:
        """What is still held back when the upstream ended well (sent before the terminal event)."""
        return b""

    def findings(self) -> list[Finding]:
        """Findings about the stream the client got that the upstream checker cannot see."""
        return []

    def facts(self) -> dict[str, Any]:
        """What the stream's record says about the rewriting (empty: nothing was rewritten)."""
        return {}
