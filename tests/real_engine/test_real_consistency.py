"""The consistency workload against a real prefix cache: vLLM (CPU) serving the real SmolLM2-135M with
its prefix cache on, temperature 0, at 1, 8 and 32 streams in flight.

A healthy engine may answer a prompt another way under load (engines are not batch-invariant), which
the analysis must never call corruption: 0 corruption findings. Then the same sweep through
``chaos --upstream`` in front of the same engine, garbling half of the answers built on a cached
prefix while more than 8 streams are in flight (the incident's pattern): the garbled answers are
counted as corruption, every one, and the load they came under is named. (That they are the cache's is
not separable here: at this size nearly every prompt is served from the cache — measured 2026-12-07,
cache 18 % vs 0 % of the uncached, not significant; the analysis test with more uncached prompts shows
it, tests/analyze/test_analyze_consistency_benign.py.)
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from sseguard.analyze import analyze_sources

#: Answers per level (16 fixed prompts, the references first at concurrency 1), and their length.
COUNT = 24
MAX_TOKENS = 32
LEVELS = "1,8,32"


def _sweep_argv(base_url: str, out: Path) -> list[str]:
    return [sys.executable, "-m", "sseguard.cli", "sweep", "--arm", f"vllm={base_url}", "--model", "m",
            "--workload", "consistency", "--concurrency", LEVELS, "--count", str(COUNT),
            "--max-tokens", str(MAX_TOKENS), "--timeout", "600", "--json", "--no-live",
            "--out", str(out)]


def _records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()]


def _corruption_lines(headlines: list[str]) -> list[str]:
    return [line for line in headlines if "corrupt" in line]


async def _run(argv: list[str]) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout=2400)
    assert proc.returncode in (0, 1), f"sweep exited {proc.returncode}: {err.decode()[-2000:]}"
    return proc.returncode, out.decode()


@pytest.mark.timeout(3000)
async def test_a_healthy_real_prefix_cache_gives_no_corruption_finding(text_server: Any,
                                                                       tmp_path: Path) -> None:
    out = tmp_path / "healthy"
    code, _ = await _run(_sweep_argv(text_server.base_url, out))
    records = _records(out)
    compared = [r for r in records if r.get("consistency") not in (None, "reference")]
    assert code == 0 and len(compared) == 3 * COUNT
    # The prefix cache served some of them (vLLM's own count), so the cache was really in play.
    assert sum(1 for r in compared if (r.get("cached_tokens") or 0) > 0) >= COUNT, compared
    analysis = analyze_sources([str(out / "results.jsonl")])
    c = analysis.consistency
    assert c is not None and c.total.total == 3 * COUNT
    # Divergence, if any, is the engine's batch variance: each prompt's other answer is benign.
    assert c.garbled.failed == 0, [(a.prompt, a.answers, a.why) for a in c.alternatives]
    assert _corruption_lines(analysis.headlines) == [], analysis.headlines


@pytest.mark.timeout(3000)
async def test_garbled_cached_answers_in_front_of_the_real_engine_are_named(text_server: Any,
                                                                            tmp_path: Path) -> None:
    from sseguard.chaos import ChaosConfig, Fault
    from sseguard.chaos.config import CachePattern
    from sseguard.chaos.upstream_server import run_upstream_chaos

    # Half of the answers to prompts chaos's own prefix cache has served, only above 8 in flight:
    # never the references (concurrency 1) nor level 8, half the cached ones at level 32.
    front = ChaosConfig(seed=3, patterns=(CachePattern(Fault.GARBLED, above=8, probability=0.5),))
    out = tmp_path / "garbled"
    async with run_upstream_chaos(front, text_server.base_url) as chaos:
        await _run(_sweep_argv(chaos.url, out))
        injected = chaos.stats.injected("garbled")
    records = _records(out)
    by_fault: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_fault.setdefault(str(r.get("injected")), []).append(r)
    garbled = by_fault.get("garbled", [])
    assert injected == len(garbled) > 0, {k: len(v) for k, v in by_fault.items()}
    assert {r["concurrency"] for r in garbled} == {32}
    # Every garbled answer differs from its reference (a span overwritten in place).
    assert all(str(r.get("consistency", "")).startswith("diverged") for r in garbled), garbled
    analysis = analyze_sources([str(out / "results.jsonl")])
    c = analysis.consistency
    assert c is not None
    assert c.garbled.failed == len(garbled), c.garbled
    assert any(line.startswith("corrupted answers") for line in _corruption_lines(analysis.headlines)), \
        analysis.headlines
    concurrency = next(a for a in c.attributes["vllm"] if a.key == "concurrency")
    assert concurrency.significant and concurrency.best is not None
    assert concurrency.best.values == ("32",), concurrency.best
