"""The proxy's streams as OpenTelemetry calls (``--otel``): one span per client stream.

``ProxyState.stream_done`` hands every finished stream here. An upstream attempt the client never
saw as such (a retried failure, or an answer a continuation carried on) is kept until its client
stream's own record comes, and becomes an event of that stream's span; the span's parent is the
trace context the client sent (``traceparent``), so the proxy's span joins the caller's trace.
Nothing here imports OpenTelemetry: the ``Emitter`` does (``sseguard.telemetry.otel``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sseguard.core.policy import Policy
from sseguard.core.verdict import Verdict
from sseguard.telemetry.genai import Attempt, Emitter, MeasuredCall, request_model

if TYPE_CHECKING:
    from sseguard.proxy.driver.stream import StreamDriver
    from sseguard.proxy.machines.outcome import RecordIdentity

#: Client streams whose attempts are held at most: a stream whose own record never comes (its
#: handler cancelled in between) must not grow the table for good.
PENDING_MAX = 4096


class ProxyTraces:
    """Turns each finished stream of the proxy into a ``MeasuredCall`` for its ``emitter``."""

    def __init__(self, emitter: Emitter, policy: Policy, *, server: tuple[str, int | None]) -> None:
        self.emitter = emitter
        self.policy = policy
        self.server = server
        self._attempts: dict[int, list[Attempt]] = {}

    def stream_done(self, relay: StreamDriver, verdict: Verdict, duration_s: float,
                    identity: RecordIdentity) -> None:
        """The stream's span (``identity``: its own record), or an event of its span to come (one
        of its upstream attempts)."""
        if identity.heal_of is not None:  # an attempt the client never saw: an event of its stream
            if identity.heal_of not in self._attempts and len(self._attempts) >= PENDING_MAX:
                del self._attempts[next(iter(self._attempts))]
            self._attempts.setdefault(identity.heal_of, []).append(
                Attempt(str(verdict.ending), verdict.bytes))
            return
        attempts = () if identity.index is None else tuple(self._attempts.pop(identity.index, ()))
        request = relay.request
        call = MeasuredCall(
            verdict=verdict, policy=self.policy,
            start_ns=round(relay.started_at * 1e9), duration_s=duration_s,
            request_model=request_model(verdict.api, relay.request_obj, request.path),
            ttfc_s=relay.ttft, server_address=self.server[0], server_port=self.server[1],
            client_gone=relay.outcome.client_gone, healed=identity.healed,
            heal_attempts=identity.heal_attempts, heal_tokens=identity.heal_tokens,
            heal_dialect=relay.heal_dialect if identity.healed == "resume" else None,
            attempts=attempts)
        self.emitter.emit(call, self.emitter.parent_from_headers(request.headers))
