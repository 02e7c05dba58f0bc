"""Policy: only the pass/fail judgement changes with the policy, never the verdict."""

from __future__ import annotations

import pytest

from sseguard.core.errors import ConfigError
from sseguard.core.policy import PRESETS, Policy
from sseguard.core.verdict import Ending, Finding, FindingKind, Verdict


def verdict(ending: Ending, *kinds: FindingKind) -> Verdict:
    return Verdict(ending=ending, findings=tuple(Finding(k) for k in kinds))


def test_strict_passes_only_complete_without_findings() -> None:
    strict = Policy.from_spec()
    assert strict.passes(verdict(Ending.COMPLETE))
    assert not strict.passes(verdict(Ending.COMPLETE, FindingKind.MISSING_USAGE))
    for ending in Ending:
        if ending is not Ending.COMPLETE:
            assert strict.failure(verdict(ending)) == ending


def test_dialect_presets_tolerate_exactly_their_dialect() -> None:
    assert Policy.from_spec("no-finish-ok").passes(verdict(Ending.NO_FINISH))
    assert not Policy.from_spec("no-finish-ok").passes(verdict(Ending.NO_DONE))
    assert Policy.from_spec("no-done-ok").passes(verdict(Ending.NO_DONE))
    lenient = Policy.from_spec("lenient")
    assert lenient.passes(verdict(Ending.NO_DONE, FindingKind.MISSING_USAGE))
    assert not lenient.passes(verdict(Ending.TRUNCATED))
    assert set(PRESETS) >= {"strict", "no-finish-ok", "no-done-ok", "lenient"}


def test_tolerate_list_adds_endings_and_findings() -> None:
    p = Policy.from_spec("strict", "no_done, markup_leak")
    assert p.passes(verdict(Ending.NO_DONE, FindingKind.MARKUP_LEAK))
    assert p.failure(verdict(Ending.NO_DONE, FindingKind.BAD_CHUNK_JSON)) == "bad_chunk_json"
    assert p.name == "strict+markup_leak,no_done"


def test_the_verdict_is_the_same_under_every_policy() -> None:
    v = verdict(Ending.NO_DONE)
    judged = {name: Policy.from_spec(name).passes(v) for name in PRESETS}
    assert judged == {"strict": False, "no-finish-ok": False, "no-done-ok": True, "lenient": True,
                      "agents": True, "strict-text": False}
    assert v == verdict(Ending.NO_DONE)


def test_facts_are_judged_like_verdicts() -> None:
    p = Policy.from_spec("no-done-ok")
    assert p.passes_facts("no_done", [])
    assert not p.passes_facts("no_done", ["markup_leak"])
    assert not p.passes_facts("truncated", [])


@pytest.mark.parametrize(("policy", "tolerate"), [("loose", None), ("strict", "no_such_ending")])
def test_unknown_names_are_a_config_error(policy: str, tolerate: str | None) -> None:
    with pytest.raises(ConfigError):
        Policy.from_spec(policy, tolerate)


def test_agents_passes_a_finished_answer_without_its_sentinel_and_completes_it() -> None:
    agents = Policy.from_spec("agents")
    assert agents.passes(verdict(Ending.NO_DONE)) and agents.complete
    for ending in (Ending.TRUNCATED, Ending.NO_FINISH, Ending.CUT_MID_FRAME, Ending.STALLED,
                   Ending.TRANSPORT_ERROR, Ending.EMPTY, Ending.ERROR_EVENT):
        assert agents.failure(verdict(ending)) == ending
    assert agents.failure(verdict(Ending.NO_DONE, FindingKind.MARKUP_LEAK)) == "markup_leak"
    with_usage = Policy.from_spec("agents", "missing_usage")
    assert with_usage.name == "agents+missing_usage" and with_usage.complete
    assert not any(Policy.from_spec(name).complete
                   for name in ("strict", "no-finish-ok", "no-done-ok", "lenient"))
