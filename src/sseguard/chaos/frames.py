"""Turn answers into the exact bytes a response sends, with the fault and the dialects applied.

Everything is encoded before the first byte goes out (a ``Plan``: timed writes plus how the body ends),
so the serving loop only sleeps and writes. Content chunks are spliced from a per-response prefix and
the JSON-encoded text instead of serializing a dict per chunk: most of a chunk is the same every time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import msgspec

from sseguard.chaos.config import ChaosConfig
from sseguard.chaos.faults import Decision, Dialect, Fault
from sseguard.chaos.generate import Answer
from sseguard.chaos.request import ChatRequest

_enc = msgspec.json.encode
DONE = b"data: [DONE]\n\n"


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


class ChunkEncoder:
    """Pre-encoded pieces of a ``chat.completion.chunk`` for one response id."""

    __slots__ = ("_base", "_head", "_null")

    def __init__(self, response_id: str, created: int, model: str, *, empty_finish: bool) -> None:
        self._base = (b'data: {"id":' + _enc(response_id)
                      + b',"object":"chat.completion.chunk","created":' + str(created).encode()
                      + b',"model":' + _enc(model) + b',"system_fingerprint":"fp_sseguard_chaos"')
        self._head = self._base + b',"choices":[{"index":'
        self._null = b',"logprobs":null,"finish_reason":""}]}\n\n' if empty_finish else \
            b',"logprobs":null,"finish_reason":null}]}\n\n'

    def delta(self, index: int, delta: bytes) -> bytes:
        return b"".join((self._head, str(index).encode(), b',"delta":', delta, self._null))

    def text(self, index: int, key: bytes, text: str) -> bytes:
        return b"".join((self._head, str(index).encode(), b',"delta":{"', key, b'":', _enc(text),
                         b"}", self._null))

    def finish(self, index: int, reason: str | None) -> bytes:
        value = b"null" if reason is None else _enc(reason)
        return b"".join((self._head, str(index).encode(),
                         b',"delta":{},"logprobs":null,"finish_reason":', value, b"}]}\n\n"))

    def usage(self, usage: dict[str, Any], *, choices_null: bool) -> bytes:
        choices = b',"choices":null' if choices_null else b',"choices":[]'
        return b"".join((self._base, choices, b',"usage":', _enc(usage), b"}\n\n"))


def usage_of(req: ChatRequest, answers: list[Answer]) -> dict[str, Any]:
    completion = sum(a.completion_tokens for a in answers)
    reasoning = sum(len(a.reasoning) for a in answers)
    return {"prompt_tokens": req.prompt_words, "completion_tokens": completion,
            "total_tokens": req.prompt_words + completion,
            "completion_tokens_details": {"reasoning_tokens": reasoning}}


def error_object(status: int, message: str) -> dict[str, Any]:
    """An OpenAI-style error body; ``type``/``code`` as the status suggests."""
    kind = {429: ("rate_limit_error", "rate_limit_exceeded"),
            503: ("server_error", "service_unavailable")}.get(status, ("server_error", None))
    return {"error": {"message": message, "type": kind[0], "param": None,
                      "code": kind[1] if kind[1] is not None else status}}


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


def _token_frames(enc: ChunkEncoder, answers: list[Answer]) -> Tokens:
    per_choice: list[list[tuple[bytes, str]]] = []
    for index, answer in enumerate(answers):
        frames: list[tuple[bytes, str]] = []  # (frame, what it does to the call being sent)
        frames.append((enc.delta(index, b'{"role":"assistant","content":""}'), ""))
        for piece in answer.reasoning:
            frames.append((enc.text(index, b"reasoning_content", piece), ""))
        for piece in answer.content:
            frames.append((enc.text(index, b"content", piece), ""))
        for ci, call in enumerate(answer.calls):
            opener = {"tool_calls": [{"index": ci, "id": call.id, "type": "function",
                                      "function": {"name": call.name, "arguments": ""}}]}
            frames.append((enc.delta(index, _enc(opener)), "open" if call.pieces else ""))
            for pi, piece in enumerate(call.pieces):
                delta = {"tool_calls": [{"index": ci, "function": {"arguments": piece}}]}
                # A chat call has no closing frame: its last argument piece closes it.
                tags = ("first " if pi == 0 else "") + (
                    "last close" if pi == len(call.pieces) - 1 else "")
                frames.append((enc.delta(index, _enc(delta)), tags))
        per_choice.append(frames)
    interleaved = [frames[step] for step in range(max(len(f) for f in per_choice))
                   for frames in per_choice if step < len(frames)]
    return tokens_from_tags([f for f, _ in interleaved], [t for _, t in interleaved],
                            len(answers))


def stream_plan(config: ChaosConfig, req: ChatRequest, decision: Decision, ids: ResponseIds,
                answers: list[Answer]) -> Plan:
    """The writes of a streamed response: token frames paced, the trailer sent at once."""
    dialects = config.dialects
    fault = decision.fault
    model = req.model or config.model
    enc = ChunkEncoder(ids.response_id, ids.created, model,
                       empty_finish=Dialect.EMPTY_FINISH_REASON in dialects)
    toks = _token_frames(enc, answers)
    tokens = toks.frames
    if fault is Fault.ID_CHANGED:
        # The second half comes from "another backend": same shape, another id.
        other = ChunkEncoder(ids.response_id + "b", ids.created, model,
                             empty_finish=Dialect.EMPTY_FINISH_REASON in dialects)
        half = max(toks.roles + 1, len(tokens) // 2)
        tokens[half:] = _token_frames(other, answers).frames[half:]
        enc = other
    finish_frames = []
    if fault is not Fault.NO_FINISH:
        for index, answer in enumerate(answers):
            reason = None if Dialect.NO_FINISH_REASON in dialects else answer.finish_reason
            finish_frames.append(enc.finish(index, reason))
    trailer = list(finish_frames)
    if req.include_usage and fault is not Fault.MISSING_USAGE:
        trailer.append(enc.usage(usage_of(req, answers),
                                 choices_null=Dialect.USAGE_CHOICES_NULL in dialects))
    if fault is not Fault.NO_DONE and Dialect.NO_DONE not in dialects:
        trailer.append(DONE)
    if fault is Fault.FRAME_AFTER_DONE:
        trailer.append(enc.delta(0, b"{}"))
    if fault is Fault.BAD_CHUNK_JSON:
        pos = _position(decision.at, 1, len(tokens) - 1)
        body = tokens[pos][len(b"data: "):-2]
        tokens.insert(pos + 1, b"data: " + body[: len(body) // 2] + b"\n\n")
    elif fault is Fault.CHUNK_SCHEMA:
        pos = _position(decision.at, 1, len(tokens) - 1)
        tokens.insert(pos + 1, enc.delta(0, b'{"content":42}'))
    def error_frames(k: int) -> list[bytes]:
        form = config.options.error_event_form
        if form == "both":
            form = "event" if decision.variant % 2 else "data"
        payload = _enc(error_object(500, "upstream model worker failed mid-stream"))
        if form == "event":
            return [b"event: error\ndata: " + payload + b"\n\n"]
        return [b"data: " + payload + b"\n\n", DONE]

    return schedule(config, decision, toks, trailer, error_frames)


def _position(at: float, low: int, high: int) -> int:
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


def completion_body(config: ChaosConfig, req: ChatRequest, decision: Decision, ids: ResponseIds,
                    answers: list[Answer]) -> bytes:
    """A non-streamed ``chat.completion`` with the content faults applied."""
    choices = []
    for index, answer in enumerate(answers):
        message: dict[str, Any] = {"role": "assistant",
                                   "content": "".join(answer.content) or None}
        if answer.reasoning:
            message["reasoning_content"] = "".join(answer.reasoning)
        if answer.calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name,
                                                               "arguments": c.arguments}}
                for c in answer.calls]
        reason = None if Dialect.NO_FINISH_REASON in config.dialects else answer.finish_reason
        choices.append({"index": index, "message": message, "logprobs": None,
                        "finish_reason": reason})
    body: dict[str, Any] = {"id": ids.response_id, "object": "chat.completion",
                            "created": ids.created, "model": req.model or config.model,
                            "system_fingerprint": "fp_sseguard_chaos", "choices": choices}
    if decision.fault is not Fault.MISSING_USAGE:
        body["usage"] = usage_of(req, answers)
    return _enc(body)


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

