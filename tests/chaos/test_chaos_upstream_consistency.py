"""The consistency workload through ``chaos --upstream``: garbled answers injected on the prompts a
prefix cache serves are named as the cache's corruption; the same upstream relayed without garbling
gives no finding. The probe and the analysis are the product's; the upstream is the generated chaos
(deterministic: every divergence here is one chaos injected)."""

from __future__ import annotations

from pathlib import Path

from sseguard.analyze.summary import analyze_sources
from sseguard.chaos import ChaosConfig, Fault, run_chaos
from sseguard.chaos.config import CachePattern
from sseguard.chaos.upstream_server import run_upstream_chaos
from sseguard.probe import consistency
from sseguard.probe.runner import execute
from support.probe import FAST, config


async def test_garbled_cached_answers_are_named_and_a_clean_relay_names_nothing(
        tmp_path: Path) -> None:
    # The incident's pattern: only cached prompts, only under load (another stream in flight), so
    # the references, taken one at a time, are whole.
    garbling = ChaosConfig(seed=8, patterns=(CachePattern(Fault.GARBLED, above=1, probability=0.7),))
    async with run_chaos(ChaosConfig(seed=3, pacing=FAST)) as engine, \
            run_upstream_chaos(garbling, engine.url) as bad, \
            run_upstream_chaos(ChaosConfig(seed=8), engine.url) as good:
        cfg = config([f"garbled={bad.url}", f"healthy={good.url}"], tmp_path, count=48,
                     concurrency="1,8", workload="consistency", stall_timeout=10.0, timeout=60.0)
        result = await execute(cfg, live=False)
    records = result.records
    compared = [r for r in records if r.consistency not in (None, "reference")]
    assert len(compared) >= 150
    diverged = [r for r in compared if consistency.is_diverged(r.consistency)]
    # Every divergence is an injected garbling, each on a long (cached) prompt, each an overwrite.
    assert diverged and all(r.injected == "garbled" and r.arm == "garbled" for r in diverged)
    assert all(r.cache == "most" for r in diverged)
    assert all(str(r.consistency).endswith(":overwritten") for r in diverged)
    assert not [r for r in compared if r.injected == "garbled" and r.consistency == "identical"]
    analysis = analyze_sources([str(tmp_path / "results.jsonl")])
    c = analysis.consistency
    assert c is not None
    assert c.garbled.failed == len(diverged)
    said = "\n".join(analysis.headlines)
    assert "cache corruption on arm garbled" in said, said
    assert "on arm healthy" not in said, said
    assert c.attributes["healthy"] == []
