"""What a protocol's chaos writer gives the server's one handler.

The server decides the fault, generates the answer (protocol-independent) and asks the request's
``Writer`` to parse the request, plan the stream or encode the whole body, and shape a 400. Where the
protocol is served, and its HTTP error bodies, are the protocol's own descriptor's
(``Protocol.routes``/``mounts``, ``Protocol.status_error``): the writer holds only what chaos adds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sseguard.chaos.config import ChaosConfig
from sseguard.chaos.faults import Decision, Fault
from sseguard.chaos.frames import Plan, ResponseIds
from sseguard.chaos.generate import GeneratedAnswer
from sseguard.chaos.request import BadRequest, ChatRequest
from sseguard.core.verdict import Api


@dataclass(frozen=True, slots=True)
class Writer:
    """One protocol as the chaos upstream speaks it."""

    api: Api
    parse: Callable[[bytes], ChatRequest]
    stream_plan: Callable[[ChaosConfig, ChatRequest, Decision, ResponseIds, list[GeneratedAnswer]], Plan]
    body: Callable[[ChaosConfig, ChatRequest, Decision, ResponseIds, list[GeneratedAnswer]], bytes]
    bad_request_body: Callable[[BadRequest], dict[str, Any]]
    id_prefix: str | None  # the default route's id prefix; None: the configured ``id_prefix``
    unsupported: frozenset[Fault]  # faults this protocol cannot carry (skipped, as inapplicable)
    unsupported_unstreamed: frozenset[Fault] = frozenset()
    #: Mounts chaos serves the protocol's routes on besides the protocol's own, each with the parse
    #: requests there get (chat's ``/beta``: DeepSeek's prefix completion).
    extra_mounts: tuple[tuple[str, Callable[[bytes], ChatRequest]], ...] = ()
    #: A stored (background) stream read again after sequence number ``after``, with the reading's own
    #: ending fault: ``resume(config, req, stored, reading, ids, answers, after)``. None: the protocol
    #: keeps no stream (only Responses' background mode does).
    resume: Callable[[ChaosConfig, ChatRequest, Decision, Decision, ResponseIds, list[GeneratedAnswer], int],
                     Plan] | None = None

    #: Faults of ``unsupported`` that one request can carry all the same (a Gemini request that asks
    #: for its calls' arguments streamed can have a call cut inside them).
    carries: Callable[[ChatRequest], frozenset[Fault]] = lambda req: frozenset()

    def cannot_carry(self, *, stream: bool, req: ChatRequest | None = None) -> frozenset[Fault]:
        """The faults a request of this protocol cannot carry, streamed or not."""
        base = self.unsupported if stream else self.unsupported | self.unsupported_unstreamed
        return base - self.carries(req) if req is not None and stream else base
