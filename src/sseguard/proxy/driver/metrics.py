"""The proxy's Prometheus metrics, in a registry of its own.

One registry per app (not the process-global default) so that two proxies in one process — tests, or an
embedding application — never share or double-register counters. Everything here is updated once per
stream, never per event, so it costs nothing on the hot path.

With ``--workers N`` each worker process writes its values to prometheus-client's multiprocess
directory (``PROMETHEUS_MULTIPROC_DIR``, set up by ``sseguard._serve``) and ``render`` sums every
worker's, so whichever worker answers a scrape reports the whole proxy.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.multiprocess import MultiProcessCollector

from sseguard.core.verdict import Verdict

_TTFT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)

CONTENT_TYPE = CONTENT_TYPE_LATEST

#: Distinct unknown kinds a worker names in ``/metrics`` per protocol, and the longest name it
#: names: the names come from the upstream's wire, and every label value is a series the scraper
#: keeps for good, so a misbehaving upstream must not grow them without end. Past either bound a
#: stream counts under ``UNKNOWN_OTHER`` (its record still names the kind).
UNKNOWN_LABELS_MAX = 64
UNKNOWN_NAME_MAX = 120
UNKNOWN_OTHER = "other"


class ProxyMetrics:
    """Streams by ending, findings by kind, what the proxy did, TTFT and duration, upstream errors."""

    def __init__(self, *, shared: bool = False) -> None:
        self.shared = shared  # sum the values of every worker process when rendering
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.streams = Counter("sseguard_proxy_streams", "Guarded streams by protocol (chat, "
                               "responses, messages) and how they ended (client_disconnect when the "
                               "client left first).", ["api", "ending"], registry=r)
        self.findings = Counter("sseguard_proxy_findings", "Findings in streams, by protocol and kind.",
                                ["api", "kind"], registry=r)
        self.actions = Counter("sseguard_proxy_bad_ends", "Streams that failed the policy, by what the "
                               "client got (error-event, abort, pass, markup-error).", ["action"],
                               registry=r)
        self.ttft = Histogram("sseguard_proxy_ttft_seconds", "Time from request to the first content, "
                              "reasoning or tool-call delta forwarded.", buckets=_TTFT_BUCKETS, registry=r)
        self.duration = Histogram("sseguard_proxy_stream_duration_seconds", "Time from request to the "
                                  "end of the stream.", buckets=_DURATION_BUCKETS, registry=r)
        self.upstream_errors = Counter("sseguard_proxy_upstream_errors", "Upstream failures: connect, "
                                       "timeout, http_<status>, transport, stalled.", ["kind"],
                                       registry=r)
        self.requests = Counter("sseguard_proxy_requests", "Requests by route kind (stream, "
                                "non_stream, passthrough) and the proxy's own rejections.", ["kind"],
                                registry=r)
        self.healed = Counter("sseguard_proxy_healed_streams", "Client streams that needed healing, by "
                              "protocol, how (retry, resume), the --resume dialect that continued "
                              "it (empty for a retry) and whether the client's stream then passed.",
                              ["api", "how", "dialect", "result"], registry=r)
        self.heal_attempts = Counter("sseguard_proxy_heal_attempts", "Upstream attempts the client never "
                                     "saw (replaced by a retry or a continuation), by protocol and how "
                                     "they ended.", ["api", "ending"], registry=r)
        self.unknown_kinds = Counter("sseguard_proxy_unknown_kinds", "Streams that carried an event, "
                                     "block or delta kind the protocol's tables do not know (passed "
                                     "through, never a failure), by protocol and kind.",
                                     ["api", "kind"], registry=r)
        self.retries = Counter("sseguard_proxy_retries", "Upstream retries sent (before the client "
                               "got a byte, or for a continuation), by protocol and the failure "
                               "retried.", ["api", "reason"], registry=r)
        self.retries_refused = Counter("sseguard_proxy_retries_refused", "Retries the retry budget "
                                       "(--retry-budget) refused: the failure went to the client at "
                                       "once.", ["api", "reason"], registry=r)
        self.dont_retry = Counter("sseguard_proxy_dont_retry_answers", "Error answers the proxy "
                                  "marked x-should-retry: false, by protocol and the failure.",
                                  ["api", "reason"], registry=r)
        self.active = Gauge("sseguard_proxy_active_streams", "Streams being relayed now.", registry=r,
                            multiprocess_mode="livesum")
        self._kinds: dict[str, Counter] = {}  # requests' children by kind: labels() locks and looks up
        self._unknown_named: dict[str, set[str]] = {}  # per protocol, the unknown kinds named so far

    def requested(self, kind: str) -> None:
        """One more request of ``kind`` (stream, non_stream, passthrough, rejected_*)."""
        child = self._kinds.get(kind)
        if child is None:
            child = self._kinds[kind] = self.requests.labels(kind)
        child.inc()

    def stream_ended(self, verdict: Verdict, *, client_gone: bool, ttft_s: float | None,
                     duration_s: float) -> None:
        api = str(verdict.api)
        self.streams.labels(api, "client_disconnect" if client_gone else str(verdict.ending)).inc()
        for finding in verdict.findings:
            self.findings.labels(api, str(finding.kind)).inc()
        for kind in verdict.unknown_kinds:
            self.unknown_kinds.labels(api, self._unknown_label(api, kind)).inc()
        if ttft_s is not None:
            self.ttft.observe(ttft_s)
        self.duration.observe(duration_s)

    def _unknown_label(self, api: str, kind: str) -> str:
        """``kind`` as its label: itself while the protocol's named kinds stay within the bounds
        (``UNKNOWN_LABELS_MAX``, ``UNKNOWN_NAME_MAX``), else ``UNKNOWN_OTHER``."""
        named = self._unknown_named.setdefault(api, set())
        if kind in named:
            return kind
        if len(named) >= UNKNOWN_LABELS_MAX or len(kind) > UNKNOWN_NAME_MAX:
            return UNKNOWN_OTHER
        named.add(kind)
        return kind

    def render(self) -> bytes:
        if not self.shared:
            return generate_latest(self.registry)
        summed = CollectorRegistry()
        MultiProcessCollector(summed)  # type: ignore[no-untyped-call]  # untyped in prometheus-client
        return generate_latest(summed)
