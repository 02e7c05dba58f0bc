"""Our parsers inside a real vLLM generating real tokens, side by side with vLLM's own parser of the
same format: every family's forced answers (``support.real_forcing.CASES``) at 1, 8 and 32 concurrent
streams, through ``--tool-call-parser sseguard-<family>`` and through vLLM's parser.

Ours must be right in every stream with no markup in ``content``, apart from the known failures
below (each checked on its own, strict: it must still fail); vLLM's own are counted (the counts go
to ``SSEGUARD_REAL_RESULTS`` and docs/real-engines.md), not asserted, beyond each stream having
been served.
"""

from __future__ import annotations

import os
from dataclasses import asdict
from typing import Any

import pytest

from support.real_forcing import (
    CASES,
    FAMILIES,
    LEVELS,
    PARSERS,
    Stream,
    parser_names,
    run_wave,
    side_by_side,
    side_by_side_config,
)

#: Which parsers the side-by-side drives: ``SSEGUARD_REAL_PARSERS`` (default both). vLLM's own are
#: counted, never asserted, so CI (.ci/real-engine) runs ``ours`` alone to halve the suite's time;
#: their counts come from ``bench/engines/bench_real_engine.py`` (docs/real-engines.md).
WHICH = tuple(w for w in os.environ.get("SSEGUARD_REAL_PARSERS", ",".join(PARSERS)).split(",")
              if w in PARSERS)

# grouped by model so that the suite starts each model's server once
ORDER = sorted(FAMILIES, key=lambda name: (FAMILIES[name].model != "qwen2", list(FAMILIES).index(name)))

#: What our parsers get wrong on the real engine today: (family, case/shape) → why. Each is left
#: out of the side-by-side assertion and checked by ``test_known_failure_still_fails`` (xfail,
#: strict): a fix turns it into a failure there until its line is removed.
KNOWN: dict[tuple[str, str], str] = {}
# Emptied after issue 50's engine fixes: the side-by-side on vLLM 0.32 had found tool_choice none / no
# tools losing the whole answer in all 13 families, and the thought of thinking_first reaching content
# (Hermes, Qwen3-Coder, GLM-4.5: <think> opening the answer; GLM-4.7, MiniMax-M2, DSML V3.2/V4/V4.1:
# the prompt opening it). The same run after the fixes: every one of those cases right.


def _seen(got: Stream) -> tuple[Any, ...]:
    calls = [(c["name"], c["arguments"]) for _, c in sorted(got.calls.items())]
    return got.content, got.reasoning, calls, got.finish


@pytest.mark.timeout(1500)
async def test_the_parser_switch_gives_what_the_flags_give(real_server: Any) -> None:
    """The same answers through a server started with ``--tool-call-parser sseguard-hermes
    --reasoning-parser sseguard-hermes`` and through the side-by-side's server switched to them:
    the switch changes nothing a client sees.

    With ``--reasoning-parser`` given at start, vLLM's engine core also hands the reasoning parser to
    structured outputs, which then leave the first tokens unconstrained until they see reasoning end
    (``enable_in_reasoning`` false, vLLM 0.32 ``v1/structured_output``): a prompt not ending in
    ``<think>`` leaves that open, so the forced answer is not what is generated. The switched server
    started with no reasoning parser and forces from the first token. So the flags server here
    forces from the first token too (``enable_in_reasoning``), and the answers must then be the same
    for every shape (before, with a text before the call, a thought first or under tool_choice none,
    they differed: seen 2026-12-07)."""
    fam = FAMILIES["hermes"]
    cases = {c.name: c for c in CASES}
    items = [(cases["one_call"], "auto"), (cases["text_before"], "auto"),
             (cases["thinking_first"], "auto"), (cases["one_call"], "none")]
    flags = real_server(fam.model, tool_parser="sseguard-hermes", reasoning_parser="sseguard-hermes",
                        switch=False,
                        extra=("--structured-outputs-config", '{"enable_in_reasoning": true}'))
    by_flags = [_seen(got) for item in items for _, _, got in await run_wave(flags.url, fam, [item])]
    switched = real_server(fam.model, config=side_by_side_config)
    switched.use_parsers("sseguard-hermes", "sseguard-hermes")
    by_switch = [_seen(got) for item in items for _, _, got in await run_wave(switched.url, fam, [item])]
    assert by_switch == by_flags
    assert by_flags[0][2] == [("get_weather", '{"location": "Paris", "days": 2}')]


@pytest.mark.timeout(1200)
@pytest.mark.parametrize(("family", "which"),
                         [pytest.param(f, w, id=f"{f}-{w}") for f in ORDER for w in WHICH])
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
        wrong = [f for t in tallies.values() for f in t.failures
                 if (family, f.split("@")[0]) not in KNOWN]
        assert not wrong, f"{len(wrong)} stream(s) wrong or leaking, first: {wrong[:6]}"


@pytest.mark.parametrize(("family", "case"), [
    pytest.param(f, c, id=f"{f}-{c}", marks=pytest.mark.xfail(reason=why, strict=True))
    for (f, c), why in KNOWN.items()])
def test_known_failure_still_fails(side_by_side_results: Any, family: str, case: str) -> None:
    """Runs after the side-by-side of ``family`` (same session): every stream of ``case`` right."""
    entry = side_by_side_results.get(f"{family}/ours")
    if entry is None:
        pytest.skip(f"the side-by-side of {family} did not run in this session")
    counts = [level["by_case"][case] for level in entry["levels"].values() if case in level["by_case"]]
    assert counts and all(good == total for good, total in counts), counts
