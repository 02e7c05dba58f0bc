"""What one chaos server process counts and keeps: its live counters (``ChaosStats``, what
``/chaos/stats`` answers), its state on the aiohttp app (``ChaosState`` under ``STATE``), and the
background (Responses) streams it keeps for reading again (``StoredStream``).

Both chaos servers hold it: the answering one (``chaos.server``) and the relaying one
(``chaos.upstream_server``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from sseguard.chaos.cache import PrefixCache
from sseguard.chaos.config import ChaosConfig
from sseguard.chaos.conversations import ConversationLog
from sseguard.chaos.faults import Decision, Fault
from sseguard.chaos.frames import ResponseIds
from sseguard.chaos.generate import GeneratedAnswer
from sseguard.chaos.request import ChatRequest
from sseguard.chaos.writer import Writer
from sseguard.core.verdict import Api


@dataclass(slots=True)
class ChaosStats:
    """Live counters of one server; ``faults`` counts header values (``none`` included)."""

    requests: int = 0
    apis: Counter[str] = field(default_factory=Counter)  # requests per protocol (chat, responses, …)
    streams: int = 0
    inflight: int = 0
    max_inflight: int = 0
    frames: int = 0  # SSE frames written
    bad_requests: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)  # drawn, but the request could not carry it
    sources: Counter[str] = field(default_factory=Counter)  # base | load | routed | window | api | forced
    routes: Counter[str] = field(default_factory=Counter)
    statuses: Counter[int] = field(default_factory=Counter)
    retrievals: int = 0  # reads of a stored (background) response, streamed or not
    cancels: int = 0  # background responses cancelled (POST …/responses/{id}/cancel)
    conversations: int = 0  # conversations seen by ``first_answer`` (``chaos.conversations``)

    def injected(self, fault: Fault | str) -> int:
        return self.faults[str(fault)]

    def to_dict(self) -> dict[str, Any]:
        return {"requests": self.requests, "apis": dict(self.apis), "streams": self.streams,
                "retrievals": self.retrievals, "cancels": self.cancels,
                "conversations": self.conversations,
                "inflight": self.inflight,
                "max_inflight": self.max_inflight, "frames": self.frames,
                "bad_requests": self.bad_requests, "faults": dict(self.faults),
                "skipped": dict(self.skipped), "sources": dict(self.sources),
                "routes": dict(self.routes),
                "statuses": {str(k): v for k, v in self.statuses.items()}}


@dataclass(slots=True)
class ChaosState:
    config: ChaosConfig
    clock: Callable[[], float]
    started: float
    stats: ChaosStats = field(default_factory=ChaosStats)
    #: The next request's number, which seeds its decision and ids. With N worker processes, worker k
    #: numbers its requests k, k + N, k + 2N, …: every number is drawn once, by one worker.
    counter: int = 0
    step: int = 1
    #: The prefix cache (``chaos.cache``): which requests hit it, for the cache pattern and usage.
    cache: PrefixCache = field(default_factory=PrefixCache)
    #: Background (Responses) streams kept for reading again, by response id, oldest first.
    stored: dict[str, StoredStream] = field(default_factory=dict)
    #: Background responses cancelled (``POST …/responses/{id}/cancel``), by response id.
    cancelled: set[str] = field(default_factory=set)
    #: The conversations ``first_answer`` has seen: which one's first answer broke.
    conversations: ConversationLog = field(default_factory=ConversationLog)
    #: The load the patterns see, given the requests in flight measured (``run_chaos(load=)``).
    load: Callable[[int], int] | None = None

    def arrive(self, api: Api) -> tuple[int, int]:
        """Count a request of ``api`` in: its draw counter and the requests in flight with it. The
        caller takes it out again (``stats.inflight -= 1``) when its answer is over."""
        stats = self.stats
        counter = self.counter
        self.counter += self.step
        stats.requests += 1
        stats.apis[str(api)] += 1
        stats.inflight += 1
        stats.max_inflight = max(stats.max_inflight, stats.inflight)
        return counter, stats.inflight

    def load_of(self, inflight: int) -> int:
        """The load the load and cache patterns act on: the measured figure, unless the app was
        given its own signal."""
        return inflight if self.load is None else self.load(inflight)


@dataclass(frozen=True, slots=True)
class StoredStream:
    """What a background response's stream is made of: read again, it is made again, exactly."""

    writer: Writer
    req: ChatRequest
    decision: Decision
    ids: ResponseIds
    answers: list[GeneratedAnswer]


STATE = web.AppKey("sseguard_chaos", ChaosState)
