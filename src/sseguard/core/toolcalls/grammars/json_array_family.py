"""Class B, B′ and A′ families of docs/design/markup.md §3, built from tables: ``json_array_family(name,
openers, shape=…)`` gives a whole ``Family`` (parser, markers, leak markers, reasoning exits, ``auto`` claim,
rendering) whose calls are JSON objects after markers, ``json_after_marker`` the one-object-no-closer
case. The parser they run is ``json_array.JSONArrayParser``; the tables they take (``Opener``,
``Body``, the element ``Shape``s) are re-exported here, the vocabulary of a builder call.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from functools import partial

from sseguard.core.errors import UsageError
from sseguard.core.toolcalls.family import CallLike, Claim, Family, Render
from sseguard.core.toolcalls.grammars.json_array import JSONArrayParser
from sseguard.core.toolcalls.grammars.json_array_tables import (
    COHERE,
    NAME_ARGUMENTS,
    NAME_KEY,
    NAME_PARAMETERS,
    WS,
    Body,
    Opener,
    Shape,
    first_non_ws,
    start_char,
)
from sseguard.core.toolcalls.schema import ToolSpec

__all__ = ["COHERE", "NAME_ARGUMENTS", "NAME_KEY", "NAME_PARAMETERS", "Body", "Opener", "Shape",
           "json_after_marker", "json_array_family", "render_calls"]

def _claim(openers: tuple[Opener, ...], held: str, final: bool) -> Claim:
    """Markup at one of the family's openers is its own when the body's first character follows
    (other families share ``<tool_call>`` and ``<tool_calls>``: decision 3.3)."""
    for op in openers:
        if not held.startswith(op.literal):
            continue
        if op.opened:
            return Claim.YES
        q = first_non_ws(held, len(op.literal))
        if q == -1:
            return Claim.NO if final else Claim.MORE
        return Claim.YES if held[q] == start_char(op.body) else Claim.NO
    return Claim.NO


def render_calls(shape: Shape, op: Opener, calls: Sequence[CallLike], malformed: bool,
                 ids: bool = False) -> str:
    """``calls`` as a model of the family writes them after ``op``; ``malformed`` misspells the
    closer (or, without one, leaves the last object open)."""
    objs = [json.dumps(shape.write(c.name, c.values, str(i) if ids else None), ensure_ascii=False)
            for i, c in enumerate(calls)]
    if malformed and op.closer is None and objs:
        objs[-1] = objs[-1][:-1]
    closer = op.closer or ""
    if malformed and closer:
        closer = closer[:-1] + "_" + closer[-1:]
    lead = op.literal[:-1] if op.opened else op.literal
    if op.body is Body.ARRAY:
        return f"{lead}[{', '.join(objs)}]{closer}"
    if op.body is Body.OBJECTS:
        sep = op.separator if op.separator in WS else f"{op.separator} "
        inner = sep.join(objs)
        return f"{lead}\n{inner}\n{closer}" if op.closer else f"{lead}{inner}"
    return "".join(f"{lead}{o}{closer}" for o in objs)


def json_array_family(name: str, openers: Sequence[Opener], *, shape: Shape = NAME_ARGUMENTS,
                      start: Body | None = None, start_separator: str = ",",
                      framing: Sequence[str] = (), leak_markers: tuple[str, ...] | None = None,
                      reasoning_exits: tuple[str, ...] | None = None, rank: int = 100,
                      aliases: tuple[str, ...] = (), grammar: str = "B", auto: bool = True,
                      render: Render | None = None) -> Family:
    """A complete family whose calls are JSON objects after markers (docs/design/markup.md classes B, B′, A′):
    parser, markers, leak markers, reasoning exits, ``auto`` claim and rendering, from the tables.

    The first opener is the one rendered. ``leak_markers`` default to the openers and closers that are
    not ``soft``; ``reasoning_exits`` to the hard openers. ``auto``: whether ``auto`` may claim the
    family (a family whose markers all belong to others first says no).
    """
    ops = tuple(openers)
    hard = tuple(op.literal for op in ops if not op.soft)
    if not hard:
        raise UsageError(f"family {name!r}: at least one opener that is not soft")
    closers = tuple(dict.fromkeys(op.closer for op in ops if op.closer))
    make: Callable[[ToolSpec | None], JSONArrayParser] = partial(
        JSONArrayParser, family=name, shape=shape, openers=ops, start=start,
        start_separator=start_separator, framing=tuple(framing))
    literals = tuple(dict.fromkeys([*(op.literal for op in ops), *closers, *framing]))
    ids = shape is COHERE
    return Family(
        name=name, make=make, markers=literals,
        leak_markers=leak_markers if leak_markers is not None else tuple(
            dict.fromkeys([*hard, *closers])),
        reasoning_exits=hard if reasoning_exits is None else reasoning_exits,
        # a stray closer is the family's too (reported, never text), but not a soft one (a fence)
        auto_markers=tuple(dict.fromkeys([*hard, *(op.closer for op in ops
                                                   if op.closer and not op.soft)])),
        claim=partial(_claim, ops) if auto else _never,
        render=render or partial(_render_first, shape, ops[0], ids),
        malformable=ops[0].closer is not None, rank=rank, aliases=aliases, grammar=grammar)


def _render_first(shape: Shape, op: Opener, ids: bool, calls: Sequence[CallLike],
                  malformed: bool) -> str:
    return render_calls(shape, op, calls, malformed, ids)


def _never(held: str, final: bool) -> Claim:
    return Claim.NO


def json_after_marker(name: str, opener: str, *more: str, shape: Shape = NAME_ARGUMENTS,
                      framing: Sequence[str] = (), rank: int = 100,
                      aliases: tuple[str, ...] = (), grammar: str = "A′") -> Family:
    """Class A′ of docs/design/markup.md §3: ``opener`` (or any of ``more``), then one call object, no closer
    — the call ends where its object closes (string-aware brace depth); what follows is text or the
    next opener (whitespace between two calls is markup)."""
    return json_array_family(name, [Opener(lit, Body.ONE) for lit in (opener, *more)], shape=shape,
                             framing=framing, rank=rank, aliases=aliases, grammar=grammar)

