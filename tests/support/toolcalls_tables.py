"""Running a literal table case (input → visible text, calls, error kinds) the way docs/design/markup.md §3's
tests ask: whole, in 1-, 2-, 3- and 7-character chunks and in random-size chunks, every run keeping the
invariants and giving the same joined events."""

from __future__ import annotations

import random
from typing import Any

from sseguard.core.toolcalls import MarkupError
from support.toolcalls import calls_of, check_invariants, errors_of, reasoning_of, run, text_of


def random_cuts(text: str, seed: int) -> list[int]:
    rng = random.Random(seed)
    cuts, pos = [], 0
    while pos < len(text):
        pos += rng.randint(1, 11)
        cuts.append(pos)
    return cuts


def check_case(family: str, text: str, visible: str, calls: list[tuple[str, Any]],
               errors: list[str], reasoning: str = "",
               tools: list[dict[str, Any]] | None = None) -> None:
    """``text`` parsed by ``family`` gives exactly ``visible``, ``calls`` and error ``kinds``
    (in order), under every chunking; every MarkupError carries the raw text it covers."""
    whole = run(family, text, tools=tools)
    check_invariants(family, whole)
    assert text_of(whole.events) == visible
    assert calls_of(whole.events) == calls
    assert [kind for kind, _ in errors_of(whole.events)] == errors
    assert reasoning_of(whole.events) == reasoning
    for ev in whole.events:
        if isinstance(ev, MarkupError) and ev.kind != "undefined_function":
            assert ev.raw == "" or ev.raw in text
    for size in (1, 2, 3, 7):
        chunked = run(family, text, tools=tools, size=size)
        check_invariants(family, chunked)
        assert chunked.joined == whole.joined, size
    for seed in range(3):
        chunked = run(family, text, random_cuts(text, seed), tools=tools)
        check_invariants(family, chunked)
        assert chunked.joined == whole.joined, seed
