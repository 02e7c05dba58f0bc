"""What the stream machine asks its driver to do: small immutable actions, as h11's events are.

The machine (``machines/stream.py``) decides; the driver (``driver/stream.py``) only performs. Writing
bytes, the one action of nearly every upstream read, is the machine's plain return value (``bytes``), so
the hot path allocates nothing more; the rest are these, returned as a list when a stream reaches a
decision point (the upstream ended, a continuation answered, the client left).
"""

from __future__ import annotations

from dataclasses import dataclass

from sseguard.core.verdict import Verdict
from sseguard.proxy.machines.frames import Frames
from sseguard.proxy.machines.outcome import StreamOutcome


@dataclass(frozen=True, slots=True)
class Write:
    """Send these bytes to the client."""

    data: bytes


@dataclass(frozen=True, slots=True)
class EndBody:
    """End the client's body cleanly (the last chunk of a chunked body)."""


@dataclass(frozen=True, slots=True)
class Reset:
    """Cut the client's connection with no terminal frame (its headers go out first if still held)."""


@dataclass(frozen=True, slots=True)
class CloseUpstream:
    """The upstream's body is not wanted any more: close its connection (engines abort on it)."""


@dataclass(frozen=True, slots=True)
class ReleaseUpstream:
    """The upstream's body ended cleanly: its connection may go back to the pool."""


@dataclass(frozen=True, slots=True)
class ShortenStall:
    """From now on, an upstream silence of ``seconds`` ends the read (a whole answer's grace)."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Drain:
    """Read the rest of the upstream's body into ``StreamMachine.absorb`` (the client is done), then
    tell the machine ``drained``."""


@dataclass(frozen=True, slots=True)
class AskContinuation:
    """Ask the upstream for the rest of the answer; answer with ``StreamMachine.continuation``.

    Most dialects post a new request (``body``) where the stream's own request went; a server that
    keeps the answer is read again instead (``method`` GET, ``path``: Responses' background mode,
    ``responses/{id}?stream=true&starting_after=N``), the path relative to the upstream's base URL
    (the continuation base with ``own_base``) and carrying its query."""

    body: bytes
    method: str = "POST"
    #: Where the continuation goes, relative to the upstream's base (None: the stream's own target).
    path: str | None = None


@dataclass(frozen=True, slots=True)
class RecordVerdict:
    """RecordVerdict ``verdict`` with how the relay ended (``outcome``) and what rewrote the frames
    (``frames``, whose facts the record keeps): the client stream's own record, or (``attempt``) an
    upstream attempt the client never saw as such, replaced by a continuation that reported
    ``tokens`` completion tokens."""

    verdict: Verdict
    outcome: StreamOutcome
    frames: Frames
    attempt: bool = False
    tokens: int = 0
    #: The client's stream ended without its whole answer while the upstream keeps generating it
    #: (``--resume openai-background``): send this request (its cancel) once, detached, since the
    #: client may be gone and the stream's handler with it.
    cancel: AskContinuation | None = None


#: Every action but ``Write``-as-bytes.
StreamAction = Write | EndBody | Reset | CloseUpstream | ReleaseUpstream | ShortenStall | Drain | \
    AskContinuation | RecordVerdict
