"""What the table tests of docs/design/markup.md §3's families share: a case is an input with the visible
text, the calls and the error kinds a correct parser finds in it, checked whole and in chunks of 1, 2, 3
and 7 characters and of random sizes; malformed input cut at every position; a render → parse
round trip."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from sseguard.core.toolcalls import FAMILIES, Markup, Reasoning, consumed_text, parser_for
from support.toolcalls import (
    NAME,
    PLAIN,
    Run,
    calls_of,
    check_invariants,
    errors_of,
    reasoning_of,
    run,
    text_of,
)


@dataclass(frozen=True)
class Case:
    """One table row: ``text`` in; the visible text, calls (name, arguments) and error kinds out."""

    id: str
    text: str
    visible: str
    calls: list[tuple[str, dict[str, Any]]]
    errors: list[str] = field(default_factory=list)
    reasoning: str = ""
    tools: list[dict[str, Any]] | None = None
    quoted: bool = False  # the reasoning quotes call markup (decision 3.9): not a leak


def _checked(family: str, result: Run, quoted: bool) -> None:
    """The invariants; where reasoning quotes call markup, reasoning is not searched for markers
    (it is still accounted for, as the markup it is to the leak check)."""
    if quoted:
        result = Run(result.text, [[Markup(e.text) if isinstance(e, Reasoning) else e
                                    for e in batch] for batch in result.feeds],
                     [Markup(e.text) if isinstance(e, Reasoning) else e for e in result.closing],
                     result.detected)
    check_invariants(family, result)


SIZES = (1, 2, 3, 7)


def random_cuts(text: str, seed: int) -> list[int]:
    """Cut points of random chunk sizes (1 to 12 characters), the same for a seed."""
    rnd = random.Random(seed)
    cuts, pos = [], 0
    while pos < len(text):
        pos += rnd.randint(1, 12)
        cuts.append(pos)
    return cuts


def check_case(family: str, case: Case) -> None:
    """The case's expectations hold whole, and every chunking gives the same events."""
    whole = run(family, case.text, tools=case.tools)
    _checked(family, whole, case.quoted)
    events = whole.joined
    assert text_of(events) == case.visible
    assert calls_of(events) == case.calls
    assert [kind for kind, _ in errors_of(events)] == case.errors
    assert reasoning_of(events) == case.reasoning
    for size in SIZES:
        split = run(family, case.text, tools=case.tools, size=size)
        _checked(family, split, case.quoted)
        assert split.joined == events, f"chunks of {size}"
    for seed in range(3):
        split = run(family, case.text, random_cuts(case.text, seed), tools=case.tools)
        _checked(family, split, case.quoted)
        assert split.joined == events, f"random chunks, seed {seed}"


def check_every_cut(family: str, text: str, quoted: bool = False) -> None:
    """Every prefix of ``text`` (a stream cut off there) parses without an exception, loses no
    character and shows no marker."""
    for k in range(len(text) + 1):
        _checked(family, run(family, text[:k]), quoted)


def check_garbled(family: str, text: str) -> None:
    """Malformed input: the invariants hold whole and by single characters, and each error carries
    raw text that is part of the input."""
    whole = run(family, text)
    check_invariants(family, whole)
    assert run(family, text, size=1).joined == whole.joined
    for kind, raw in [(e.kind, e.raw) for e in whole.events if hasattr(e, "raw")
                      and hasattr(e, "kind")]:
        assert raw in text, (kind, raw)


# ── render → parse ────────────────────────────────────────────────────────────────────────────────

#: A tool whose parameters are typed, so every family reads back what was rendered: "s" a string,
#: "n" an integer, "o" an object.
ROUND_TOOLS = [{"type": "function", "function": {"name": name, "parameters": {
    "type": "object", "properties": {"s": {"type": "string"}, "n": {"type": "integer"},
                                     "o": {"type": "object"}}}}} for name in ("f", "g")]


@dataclass(frozen=True)
class RenderCall:
    name: str
    values: dict[str, Any]

    @property
    def arguments(self) -> str:
        return json.dumps(self.values, ensure_ascii=False)


def round_calls(reserved: tuple[str, ...]) -> Any:
    """Lists of calls to render: string values free of the family's ``reserved`` closers (and not
    ``null``, which MiniMax's rule reads as null), integers, small objects."""
    string = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20).filter(
        lambda s: s != "null" and not any(r in s for r in reserved))
    obj = st.dictionaries(PLAIN, st.one_of(st.integers(-99, 99), st.booleans()), max_size=2)
    values = st.fixed_dictionaries({}, optional={"s": string, "n": st.integers(-10**6, 10**6),
                                                 "o": obj})
    return st.lists(st.builds(RenderCall, st.sampled_from(["f", "g"]), values), min_size=1,
                    max_size=3)


def check_round_trip(family: str, calls: list[RenderCall], cuts: list[int]) -> None:
    """What the family's ``render`` writes parses back to the same calls, under any chunking."""
    rendered = FAMILIES[family].render(calls, False)
    result = run(family, rendered, cuts, tools=ROUND_TOOLS)
    check_invariants(family, result)
    assert calls_of(result.joined) == [(c.name, c.values) for c in calls]
    assert errors_of(result.joined) == []
    assert text_of(result.joined) == ""
    parser = parser_for(family, ROUND_TOOLS)
    assert consumed_text([*parser.feed(rendered), *parser.close()]) == rendered


__all__ = ["NAME"]
