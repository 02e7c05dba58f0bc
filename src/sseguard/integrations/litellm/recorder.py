"""The guardrail's records: one ``Record`` per stream, in the store the proxy writes (``sseguard.store``).

A record says what the judge concluded (ending, findings, policy) and what the guardrail did
(``extra.action``: ``forwarded`` or ``error-event``), like the proxy's own records, so ``sseguard
analyze`` reads a LiteLLM deployment's streams next to the proxy's. The records are written off the
request's path by a ``BatchWriter`` (a thread); the secrets are searched for there, not on LiteLLM's
event loop. Without a store nothing is written (the guardrail still ends bad streams).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

from sseguard.core.policy import Policy
from sseguard.core.record import raw_record
from sseguard.core.redact import DEFAULT, RedactingFilter
from sseguard.integrations.litellm.judge import Judgement
from sseguard.store import BatchWriter, open_store

log = logging.getLogger("sseguard.litellm")
log.addFilter(RedactingFilter())


@dataclass(slots=True)
class StreamFacts:
    """What the guardrail measured about one stream besides the verdict."""

    path: str
    model: str | None
    started_at: float  # epoch seconds
    prompt_bytes: int = 0
    ttft_ms: float | None = None
    duration_ms: float | None = None
    #: The upstream's response headers, where LiteLLM keeps them (the record keeps a few, redacted).
    headers: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


class Recorder:
    """Writes one record per judged stream to ``store`` (a path or URL, ``open_store``'s), or nowhere.

    The store opens on the first record, so a LiteLLM proxy that never streams never creates it.
    """

    def __init__(self, store: str | None, *, run_id: str | None = None) -> None:
        self.target = store
        self.run_id = run_id or f"litellm-{uuid.uuid4().hex[:12]}"
        self._writer: BatchWriter | None = None
        self._index = 0

    def record(self, judgement: Judgement, facts: StreamFacts, *, policy: Policy) -> None:
        """Queue the stream's record (unredacted: the writer's thread redacts it before storing)."""
        if judgement.failure is not None:
            log.warning("stream on %s failed the %s policy: %s", facts.path, policy.name,
                        judgement.failure)
        if self.target is None:
            return
        writer = self._writer
        if writer is None:
            writer = self._writer = BatchWriter(open_store(self.target))
        self._index += 1
        action = "forwarded" if judgement.passed else "error-event"
        extra = {"action": action, **facts.extra}
        if judgement.failure is not None:
            extra["error_code"] = judgement.failure
        record = raw_record(
            judgement.verdict, policy=policy, headers=facts.headers, source="litellm",
            run_id=self.run_id, index=self._index, workload="litellm", started_at=facts.started_at,
            path=facts.path, stream=True, ttft_ms=facts.ttft_ms, duration_ms=facts.duration_ms,
            prompt_bytes=facts.prompt_bytes, extra=extra,
        )
        if record.model is None:
            record.model = facts.model
        writer.put(record, DEFAULT)

    def flush(self) -> None:
        """Wait until every record queued so far is in the store (tests, shutdown)."""
        if self._writer is not None:
            self._writer.flush()

    def close(self) -> None:
        """Write what is queued and close the store."""
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
            writer.store.close()
