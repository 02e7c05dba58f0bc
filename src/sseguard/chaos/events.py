"""The engine shared by the typed-event protocols (Responses, Messages): events, the faults that
insert a broken event, encoding, and the hand-over to the shared scheduler.

A protocol module turns a ``GeneratedAnswer`` into a list of ``Ev`` (its own event names and payloads)
and says how to break one delta; everything else — where a broken event goes, sequence numbers, which cuts are
clean, timing — is decided here once, the way h11 keeps one state machine and per-role tables.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from sseguard.chaos.config import ChaosConfig
from sseguard.chaos.faults import Decision, Fault
from sseguard.chaos.frames import Plan, schedule, tokens_from_tags

_enc = msgspec.json.encode


@dataclass(slots=True)
class Ev:
    """One event before encoding: its ``type`` (also the SSE ``event:`` name) and its fields.

    ``tag`` says what it does to a tool call (``open``, ``first``, ``last``, ``close``, see
    ``frames.tokens_from_tags``) and marks content deltas (``delta``); ``raw`` is a frame sent as is.
    """

    type: str
    data: dict[str, Any] = field(default_factory=dict)
    tag: str = ""
    raw: bytes | None = None


@dataclass(frozen=True, slots=True)
class Breakers:
    """How a protocol breaks one of its content deltas for ``chunk_schema`` and ``event_order``."""

    wrong_type: Callable[[dict[str, Any]], None]  # give the delta's text a non-string value
    unopened: Callable[[dict[str, Any]], None]  # point the delta at an item/block never opened


def frame(type_: str, payload: dict[str, Any]) -> bytes:
    """One SSE frame with an ``event:`` line, as both vendors send them."""
    return b"event: " + type_.encode() + b"\ndata: " + _enc(payload) + b"\n\n"


def _pick(at: float, positions: list[int]) -> int:
    return positions[min(len(positions) - 1, int(at * len(positions)))]


def insert_broken(body: list[Ev], decision: Decision, breakers: Breakers) -> None:
    """Apply the faults that add one broken event after a content delta picked by ``decision.at``."""
    fault = decision.fault
    if fault not in (Fault.BAD_CHUNK_JSON, Fault.CHUNK_SCHEMA, Fault.EVENT_ORDER):
        return
    deltas = [i for i, ev in enumerate(body) if "delta" in ev.tag]
    if not deltas:
        return
    pos = _pick(decision.at, deltas)
    ev = body[pos]
    if fault is Fault.BAD_CHUNK_JSON:
        payload = _enc({"type": ev.type, **ev.data})
        broken = Ev(ev.type, raw=b"event: " + ev.type.encode() + b"\ndata: "
                    + payload[: len(payload) // 2] + b"\n\n")
    else:
        broken = Ev(ev.type, copy.deepcopy(ev.data))
        (breakers.wrong_type if fault is Fault.CHUNK_SCHEMA else breakers.unopened)(broken.data)
    body.insert(pos + 1, broken)


@dataclass(slots=True)
class Encoded:
    """The frames of a stream, and the sequence number the event after the first k frames gets."""

    frames: list[bytes]
    next_seq: list[int]


def encode(events: list[Ev], *, sequenced: bool, gap_at: int | None = None) -> Encoded:
    """Encode every event; with ``sequenced`` each gets ``sequence_number`` (0, 1, …), skipping one
    number before event ``gap_at`` (the ``sequence_gap`` fault). A raw frame takes no number."""
    out = Encoded([], [0])
    seq = 0
    for i, ev in enumerate(events):
        if ev.raw is not None:
            out.frames.append(ev.raw)
        else:
            if i == gap_at:
                seq += 1
            payload = {"type": ev.type, **ev.data}
            if sequenced:
                payload["sequence_number"] = seq
                seq += 1
            out.frames.append(frame(ev.type, payload))
        out.next_seq.append(seq)
    return out


def plan_events(config: ChaosConfig, decision: Decision, body: list[Ev], trailer: list[Ev],
                error_frames: Callable[[int], list[bytes]], *, sequenced: bool,
                after: int | None = None) -> Plan:
    """Encode ``body`` (paced, where cuts strike) and ``trailer`` (sent at once) and schedule them.

    ``error_frames(next_seq)`` is the protocol's error event, given the sequence number it takes.
    ``after``: a stored stream read again (Responses' background mode): the events numbered up to
    ``after`` were read before, so the plan starts with the next one, numbers unchanged.
    """
    gap_at = None
    if decision.fault is Fault.SEQUENCE_GAP:
        deltas = [i for i, ev in enumerate(body) if "delta" in ev.tag] or [len(body) - 1]
        gap_at = _pick(decision.at, deltas)
    encoded = encode(body + trailer, sequenced=sequenced, gap_at=gap_at)
    if after is not None:
        # the first event whose number is past ``after``: everything before it was read already
        skip = next((k for k in range(len(encoded.frames)) if encoded.next_seq[k] > after
                     and encoded.next_seq[k + 1] > encoded.next_seq[k]), len(encoded.frames))
        skip = min(skip, len(body))
        body, encoded = body[skip:], Encoded(encoded.frames[skip:], encoded.next_seq[skip:])
    n = len(body)
    roles = next((i for i, ev in enumerate(body) if "delta" in ev.tag), n)
    ticks, count = [], 0
    for ev in body:
        count += "delta" in ev.tag
        ticks.append(count)
    toks = tokens_from_tags(encoded.frames[:n], [ev.tag for ev in body], roles, ticks)
    return schedule(config, decision, toks, encoded.frames[n:],
                    lambda k: error_frames(encoded.next_seq[k]))
