"""How the guarded relay ended a stream: what the record and the metrics get, what the client is told.

Pure (no I/O): ``driver/stream.py`` fills an ``StreamOutcome`` per stream and words its error frames here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from sseguard.core.verdict import Ending, Verdict


@dataclass(slots=True)
class StreamOutcome:
    """How the relay ended, for the record and the metrics."""

    action: str = "forwarded"  # forwarded | error-event | abort | pass | completed-done
    code: str | None = None  # the error frame's code, when one was sent
    client_gone: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RecordIdentity:
    """Which record a verdict becomes, built once per client stream and derived from there: the
    stream's own (``index``: its record index, None for the next free one; what healing it needed)
    or an upstream attempt the client never saw as such, linked to its stream by ``heal_of``."""

    index: int | None = None
    heal_of: int | None = None
    healed: str | None = None  # retry | resume | none; None when healing is off, or an attempt
    heal_attempts: int = 0
    heal_tokens: int = 0

    def attempt(self) -> RecordIdentity:
        """The identity of one of this stream's upstream attempts: linked to it, no healing of its
        own."""
        return RecordIdentity(heal_of=self.index)

    def resumed(self, tokens: int) -> RecordIdentity:
        """This stream's identity once a continuation replaced an attempt that reported ``tokens``
        completion tokens."""
        return replace(self, healed="resume", heal_attempts=self.heal_attempts + 1,
                       heal_tokens=self.heal_tokens + tokens)


def failure_message(verdict: Verdict, failure: str, *, policy: str, stall_timeout: float,
                    broke: str | None, messages: Mapping[Ending, str]) -> str:
    """What the client's error frame says about a stream that failed the policy with ``failure``
    (``broke``: how the upstream connection broke off, ``messages``: the protocol's own words)."""
    if failure != str(verdict.ending):
        detail = next((f.detail for f in verdict.findings if str(f.kind) == failure), "")
        return f"the stream failed the {policy} policy: {failure}" + (f": {detail}" if detail else "")
    if verdict.ending is Ending.STALLED:
        return f"the upstream sent nothing for {stall_timeout:g} s; the stream was cut"
    if verdict.ending is Ending.TRANSPORT_ERROR:
        return f"the upstream connection failed mid-stream: {broke or 'connection lost'}"
    return messages.get(verdict.ending, f"the upstream stream ended badly: {failure}")
