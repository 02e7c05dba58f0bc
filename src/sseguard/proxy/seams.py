"""What the guarded relay reports when a stream is over, and the seam ``--resume`` plugs into.

The relay (``relay.py``) tells ``StreamDone`` (``state.py``: metrics and the record) how each stream
ended (``Outcome``), and depends on ``Resumer`` only for ``--resume``, which ``heal.py`` implements (it
notes what the client got and, after a break, asks the upstream for the rest and splices it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import aiohttp

from sseguard.proxy.frames import Failure
from sseguard.proxy.stall import Body, StallWatch
from sseguard.verdict import Verdict

if TYPE_CHECKING:
    from sseguard.proxy.relay import StreamRelay


@dataclass(slots=True)
class Outcome:
    """How the relay ended, for the record and the metrics."""

    action: str = "forwarded"  # forwarded | error-event | abort | pass | completed-done
    code: str | None = None  # the error frame's code, when one was sent
    client_gone: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


#: Told once per stream, when it is over: the relay (its timings, outcome, frames) and the verdict.
StreamDone = Callable[["StreamRelay", Verdict], None]


class ResumedBody(Body, Protocol):
    """A continuation's body as the client's stream goes on (``heal.py`` splices it)."""

    def failure(self) -> Failure | None:
        """Why the continuation did not line up with what the client has (None: it did)."""


class Resumer(Protocol):
    """``--resume``: notes what the client got; after a break, the next upstream to relay, or None
    (the stream then ends as it would without ``--resume``)."""

    def note(self, data: bytes) -> None:
        """Bytes just written to the client."""

    async def next(self, relay: StreamRelay, upstream: aiohttp.ClientResponse, watch: StallWatch,
                   transport_error: str | None) -> tuple[aiohttp.ClientResponse, StallWatch,
                                                         ResumedBody] | None:
        """The continuation of ``relay``'s stream, whose ``upstream`` just ended or broke."""
