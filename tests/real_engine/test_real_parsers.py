"""Our parsers inside a real vLLM generating real tokens, side by side with vLLM's own parser of the
same format: every family's forced answers (``_real_forcing.CASES``) at 1, 8 and 32 concurrent
streams, through ``--tool-call-parser sseguard-<family>`` and through vLLM's parser.

Ours must be right in every stream with no markup in ``content``; vLLM's own are counted (the
counts go to ``SSEGUARD_REAL_RESULTS`` and docs/real-engines.md), not asserted, beyond each stream
having been served.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pytest

from _real_forcing import FAMILIES, LEVELS, PARSERS, parser_names, side_by_side, side_by_side_config

# grouped by model so that the suite starts each model's server once
ORDER = sorted(FAMILIES, key=lambda name: (FAMILIES[name].model != "qwen2", list(FAMILIES).index(name)))
#: what our parsers get wrong on the real engine today, each with its reason (strict: a fix must
#: remove its line here)
KNOWN: dict[tuple[str, str], str] = {}


def _combos() -> list[Any]:
    combos = []
    for family in ORDER:
        for which in PARSERS:
            marks = []
            if which == "ours" and (family, which) in KNOWN:
                marks.append(pytest.mark.xfail(reason=KNOWN[family, which], strict=True))
            combos.append(pytest.param(family, which, id=f"{family}-{which}", marks=marks))
    return combos


@pytest.mark.timeout(1200)
@pytest.mark.parametrize(("family", "which"), _combos())
async def test_forced_answers_through_the_real_server(real_server: Any, side_by_side_results: Any,
                                                      family: str, which: str) -> None:
    fam = FAMILIES[family]
    server = real_server(fam.model, config=side_by_side_config)
    tool, reasoning = parser_names(fam, which)
    switched = server.use_parsers(tool, reasoning)
    assert switched["tool"] == tool
    tallies = await side_by_side(server.url, fam)
    side_by_side_results[f"{family}/{which}"] = {
        "tool_parser": tool, "reasoning_parser": reasoning,
        "levels": {str(level): asdict(t) | {"failures": t.failures[:20]} for level, t in tallies.items()}}
    assert sorted(tallies) == list(LEVELS)
    assert all(t.streams for t in tallies.values())
    if which == "ours":
        wrong = [f for t in tallies.values() for f in t.failures]
        assert not wrong, f"{len(wrong)} stream(s) wrong or leaking, first: {wrong[:6]}"
