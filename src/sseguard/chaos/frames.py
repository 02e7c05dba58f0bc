"""What every protocol's chaos writer shares: timed writes, and the faults that only cut, stall or end.

Everything is encoded before the first byte goes out (a ``Plan``: timed writes plus how the body ends),
so the serving loop only sleeps and writes. A protocol's writer (``chaos/<protocol>.py``) turns the
answers into its own frames and tags what each does to a tool call (``tokens_from_tags``); ``schedule``
then paces them and applies the cut, stall, error and empty faults the same way for every protocol.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from sseguard.chaos.config import ChaosConfig
from sseguard.chaos.faults import Decision, Fault


class End(StrEnum):
    """How the body ends once the planned writes are out."""

    EOF = "eof"  # a clean end of the HTTP body
    ABORT = "abort"  # TCP reset
    HANG = "hang"  # silence until the client leaves (bounded), then reset


@dataclass(slots=True)
class Write:
    at: float  # seconds after the response headers
    data: bytes
    frames: int  # SSE frames in data (for the statistics)


@dataclass(slots=True)
class Plan:
    writes: list[Write] = field(default_factory=list)
    end: End = End.EOF

    @property
    def frames(self) -> int:
        return sum(w.frames for w in self.writes)


@dataclass(frozen=True, slots=True)
class ResponseIds:
    """The identifiers one response carries, derived from (seed, request number)."""

    response_id: str
    request_id: str
    trace_id: str
    span_id: str
    created: int


@dataclass(slots=True)
class Tokens:
    """Token frames (choices interleaved) and, per count k of frames sent, what a cut there leaves:
    ``clean[k]`` no call half-sent; ``partial[k]`` a call half-sent and every started call holding
    some arguments (a cut there is ``tool_call_unterminated`` and nothing else)."""

    frames: list[bytes]
    clean: list[bool]
    partial: list[bool]
    roles: int  # the first frames: one role delta per choice
    #: The token step each frame is paced at; None: one step per frame (chat). Event protocols pace
    #: only their content deltas: lifecycle events go out with the delta before them, as servers do.
    ticks: list[int] | None = None


def tokens_from_tags(frames: list[bytes], tags: list[str], roles: int,
                     ticks: list[int] | None = None) -> Tokens:
    """``Tokens`` for a protocol whose frames are tagged with what they do to a tool call.

    A tag holds any of ``open`` (a call's item or block starts), ``first``/``last`` (its first and last
    argument piece) and ``close`` (the item or block ends). A cut is clean when no call is open, and
    "partial" (``tool_call_unterminated`` and nothing else) when some call's arguments have begun but
    not ended and no open call is still without arguments.
    """
    out = Tokens([], [True], [False], roles, ticks)
    open_calls = empty_calls = unfinished = 0
    for frame, tag in zip(frames, tags, strict=True):
        out.frames.append(frame)
        if "open" in tag:
            open_calls += 1
            empty_calls += 1
        if "first" in tag:
            empty_calls -= 1
            unfinished += 1
        if "last" in tag:
            unfinished -= 1
        if "close" in tag:
            open_calls -= 1
        out.clean.append(open_calls == 0)
        out.partial.append(unfinished > 0 and empty_calls == 0)
    return out


def position(at: float, low: int, high: int) -> int:
    """An index in [low, high] picked by the decision's ``at``."""
    if high <= low:
        return low
    return low + min(high - low, int(at * (high - low + 1)))


def schedule(config: ChaosConfig, decision: Decision, toks: Tokens, trailer: list[bytes],
             error_frames: Callable[[int], list[bytes]]) -> Plan:
    """Time the frames of any protocol and apply the faults that only cut, stall or end a stream.

    ``error_frames(k)`` is the protocol's error event sent after the first ``k`` frames.
    """
    pacing = config.pacing
    ttft = pacing.ttft_ms / 1000.0
    step = pacing.inter_token_ms / 1000.0
    fault = decision.fault
    tokens = toks.frames
    frames = tokens + trailer
    # Where a cut-type fault strikes: after k frames, every role and one token sent, no call
    # half-sent (the bad-frame faults insert a frame but never combine with a cut).
    cuts = [k for k in range(toks.roles + 1, len(toks.clean)) if toks.clean[k]] or [len(tokens)]
    k = cuts[min(len(cuts) - 1, int(decision.at * len(cuts)))]
    plan = Plan()
    if fault is Fault.EMPTY:
        return plan
    if fault is Fault.TOOL_CALL_UNTERMINATED:
        inside = [i for i, partial in enumerate(toks.partial) if partial]
        k = inside[min(len(inside) - 1, int(decision.at * len(inside)))] if inside else len(tokens)
        frames = tokens[:k]
    elif fault is Fault.TRUNCATED or fault is Fault.TRANSPORT_ERROR:
        frames = tokens[:k]
    elif fault is Fault.CUT_MID_FRAME:
        nxt = frames[min(k, len(frames) - 1)]
        frames = [*frames[:k], nxt[: max(1, len(nxt) // 2)]]
    elif fault is Fault.ERROR_EVENT:
        frames = [*tokens[:k], *error_frames(k)]
    stall_before = k if fault is Fault.STALLED else None
    stall = config.options.stall_ms / 1000.0
    paced = min(len(frames), len(tokens))
    ticks = toks.ticks if toks.ticks is not None else range(len(tokens))
    extra = 0.0
    for i, frame in enumerate(frames[:paced]):
        if i == stall_before:
            if config.options.stall_then == "hang":
                plan.end = End.HANG
                return plan
            extra = stall
        at = ttft + max(0, ticks[i] - 1) * step + extra
        plan.writes.append(Write(at, frame, 1))
    rest = frames[paced:]
    if rest:
        if stall_before is not None and stall_before >= paced:
            if config.options.stall_then == "hang":
                plan.end = End.HANG
                return plan
            extra = stall
        at = ttft + (ticks[paced - 1] if paced else 0) * step + extra
        plan.writes.append(Write(at, b"".join(rest), len(rest)))
    if fault is Fault.TRANSPORT_ERROR:
        plan.end = End.ABORT
    return plan


def completion_plan(config: ChaosConfig, decision: Decision, body: bytes, tokens: int) -> Plan:
    """A non-streamed body arrives when the whole answer is "generated"; faults delay or cut it."""
    pacing = config.pacing
    at = (pacing.ttft_ms + max(0, tokens - 1) * pacing.inter_token_ms) / 1000.0
    plan = Plan()
    if decision.fault is Fault.STALLED:
        if config.options.stall_then == "hang":
            plan.end = End.HANG
            return plan
        at += config.options.stall_ms / 1000.0
    if decision.fault is Fault.TRANSPORT_ERROR:
        plan.writes.append(Write(at, body[: len(body) // 2], 0))
        plan.end = End.ABORT
        return plan
    plan.writes.append(Write(at, body, 0))
    return plan

