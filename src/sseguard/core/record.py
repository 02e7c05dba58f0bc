"""One request's facts, in one schema shared by the probe's JSONL, Locust workers and the proxy's store.

A record keeps the full verdict facts (ending, every finding) whatever policy was in force, so the
analyzer can judge a run again under another policy. Times are given by the adapter that measured them:
``started_at`` is wall-clock epoch seconds (for time windows), durations are milliseconds measured on a
monotonic clock.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from sseguard.core.contract import protocol
from sseguard.core.contract.usage import cache_share
from sseguard.core.policy import Policy
from sseguard.core.redact import DEFAULT, Redactor
from sseguard.core.verdict import Api, Verdict

SCHEMA_VERSION = 1
TAIL_BYTES = 2048

#: Response headers worth keeping as attributes: ids, traces, the serving hop.
INTERESTING_HEADERS = (
    "server", "via", "x-request-id", "x-trace-id", "traceparent", "x-amzn-trace-id", "cf-ray",
    "x-served-by", "x-backend", "x-upstream", "x-model", "openai-processing-ms", "x-sseguard-fault",
    "x-sseguard-route", "content-type", "x-cache",
)

_INTERESTING = frozenset(INTERESTING_HEADERS)
_PREFIX = re.compile(r"([A-Za-z]+)[-_:.]")
_LETTERS = re.compile(r"[A-Za-z]+")


def id_prefix(response_id: str | None) -> str | None:
    """The route-like part of a response id: the leading letters before a separator, or ``numeric``.

    ``chatcmpl-9f…`` → ``chatcmpl``; ``gw-17`` → ``gw``; ``8731209`` → ``numeric``. Gateways that splice
    several backends often differ exactly here, which is why the analyzer ranks it.
    """
    if not response_id:
        return None
    if response_id.isdigit():
        return "numeric"
    m = _PREFIX.match(response_id)
    if m:
        return m.group(1)
    m = _LETTERS.match(response_id)
    return m.group(0) if m else "other"


class Record(msgspec.Struct, kw_only=True, omit_defaults=False):
    """One request, as stored: facts only, secrets already removed."""

    schema: int = SCHEMA_VERSION
    source: str = "probe"  # probe | proxy | locust
    api: str = Api.CHAT.value  # an ``Api`` value; records written before it existed are chat
    run_id: str = ""
    arm: str = "default"
    index: int = 0
    worker: str | None = None
    workload: str = "small"
    started_at: float = 0.0
    method: str = "POST"
    path: str = protocol(Api.CHAT).served_paths()[0]
    model: str | None = None
    stream: bool = True
    status: int | None = None
    ending: str = "empty"
    findings: list[dict[str, Any]] = msgspec.field(default_factory=list)
    passed: bool = False
    policy: str = "strict"
    error: str | None = None
    response_id: str | None = None
    last_response_id: str | None = None
    id_prefix: str | None = None
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    injected: str | None = None  # what a chaos upstream says it injected (x-sseguard-fault)
    ttfb_ms: float | None = None
    ttft_ms: float | None = None
    duration_ms: float | None = None
    max_gap_ms: float | None = None
    chunks: int = 0
    bytes: int = 0
    prompt_bytes: int = 0
    concurrency: int = 1
    # Requests sent on this connection before this one, and the connection's label. None means not
    # measured (a proxy, a refused connection): never "first request", which analysis would rank.
    reuse_index: int | None = None
    connection: str | None = None
    finish_reasons: list[str | None] = msgspec.field(default_factory=list)
    usage: dict[str, Any] | None = None
    tail: str = ""
    evidence: str | None = None
    extra: dict[str, Any] = msgspec.field(default_factory=dict)
    # Healing (the proxy's --retry/--resume). An upstream attempt the client never saw points at its
    # client stream's record (same run_id) by that record's index; the client stream's record says
    # how it was healed (retry | resume | none; None: healing off or not a proxy record), the
    # attempts beyond the first and the completion tokens those spent. Older records read as None/0.
    heal_of: int | None = None
    healed: str | None = None
    heal_attempts: int = 0
    heal_tokens: int = 0
    # What the server said about its cache (``contract.usage``, read by the protocol's descriptor):
    # the whole prompt and the part of it served from (and written to) the cache, in tokens, and the
    # serving build's fingerprint. None: the server did not say (older records read as None too).
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None
    fingerprint: str | None = None
    # The consistency workload (``probe.consistency``): this answer against its prompt's reference
    # answer at concurrency 1 — ``reference``, ``identical`` or a divergence,
    # ``diverged:<prompt>:<answer digest>`` with the flags ``:overwritten`` and ``:nontext``
    # (``probe.consistency.divergence``; records written before say ``diverged`` alone), and where
    # it diverged (a character of the answer text, and about which token). None: not compared. A
    # divergence is a fact to count, never a failed stream; ``analyze`` tells the benign from the
    # garbled.
    consistency: str | None = None
    diverged_at: int | None = None
    diverged_token: int | None = None
    #: Event, block and delta kinds the protocol's tables did not know (``Verdict.unknown_kinds``):
    #: passed through, never a failure; what an operator classifies next.
    unknown_kinds: list[str] = msgspec.field(default_factory=list)

    @property
    def cache(self) -> str | None:
        """How much of the prompt came from cache: none | partial | most (None: not reported)."""
        return cache_share(self.cached_tokens, self.prompt_tokens)

    @property
    def finding_kinds(self) -> list[str]:
        return [str(f.get("kind")) for f in self.findings]

    def failed_under(self, policy: Policy) -> bool:
        return not policy.passes_facts(self.ending, self.finding_kinds)


def record_from_verdict(verdict: Verdict, *, policy: Policy, headers: dict[str, str] | None = None,
                        redactor: Redactor = DEFAULT, **facts: Any) -> Record:
    """Fill a record from a verdict plus the adapter's own facts; every stored string is redacted.

    ``raw_record`` then ``redact_record``: an adapter that must not spend the redaction's time where
    it builds the record (the proxy's event loop) calls the two apart."""
    return redact_record(raw_record(verdict, policy=policy, headers=headers, **facts), redactor)


def raw_record(verdict: Verdict, *, policy: Policy, headers: dict[str, str] | None = None,
               **facts: Any) -> Record:
    """The record of a verdict before redaction: the facts copied, no secret searched for.

    It may hold secrets (a key echoed in the body's tail, an error, a header), so it must go through
    ``redact_record`` before it is stored, logged or shown. Only the headers a record keeps are
    copied: the others (Date, Transfer-Encoding, …) would cost ~6 µs of secret searches each, per
    stream, to be dropped."""
    kept = {low: str(v) for k, v in (headers or {}).items()
            if (low := k.lower()) in _INTERESTING or low.startswith("x-")}
    facts.setdefault("api", verdict.api)
    cache = protocol(verdict.api).usage_of(verdict.message)
    return Record(
        prompt_tokens=cache.prompt_tokens,
        cached_tokens=cache.cached_tokens,
        cache_write_tokens=cache.cache_write_tokens,
        fingerprint=cache.fingerprint,
        status=verdict.http_status,
        ending=str(verdict.ending),
        findings=[f.to_dict() for f in verdict.findings],
        passed=policy.passes(verdict),
        policy=policy.name,
        error=verdict.error or None,
        response_id=verdict.first_id,
        last_response_id=verdict.last_id,
        id_prefix=id_prefix(verdict.first_id),
        headers=kept,
        chunks=verdict.chunks,
        bytes=verdict.bytes,
        finish_reasons=finish_reasons(verdict),
        unknown_kinds=list(verdict.unknown_kinds),
        usage=usage if isinstance(usage := verdict.message.get("usage"), dict) else None,
        tail=verdict.tail[-TAIL_BYTES:].decode("utf-8", "replace"),
        model=model if isinstance(model := verdict.message.get("model"), str) else None,
        **facts,
    )


def redact_record(record: Record, redactor: Redactor = DEFAULT) -> Record:
    """``record`` (from ``raw_record``) with every free-text field redacted, in place; returned.

    The fields a peer or a client can put a secret in: the kept headers (by name and by value), the
    findings, the error, the body's tail, ``extra``, the model name and the serving fingerprint.
    ``injected`` is the redacted ``x-sseguard-fault`` header."""
    record.headers = redactor.headers(record.headers)
    record.injected = record.headers.get("x-sseguard-fault")
    record.findings = [redactor.obj(f) for f in record.findings]
    if record.error:
        record.error = redactor.text(record.error)
    record.tail = redactor.text(record.tail)
    if record.extra:
        record.extra = redactor.obj(record.extra)
    if record.model is not None:
        record.model = redactor.text(record.model)
    if record.fingerprint is not None:
        record.fingerprint = redactor.text(record.fingerprint)
    return record


def finish_reasons(verdict: Verdict) -> list[str | None]:
    """Why the answer stopped, in the verdict's own protocol (``Protocol.finish_of``): one entry per
    chat choice; for Responses the terminal status, or the ``incomplete_details.reason`` of an
    incomplete one; for Messages the ``stop_reason``. None where the stream never said."""
    return protocol(verdict.api).finish_of(verdict.message)


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Record)


def encode_record(record: Record) -> bytes:
    """One JSONL line (with the newline)."""
    return _encoder.encode(record) + b"\n"


def decode_record(line: bytes | str) -> Record:
    return _decoder.decode(line)
