"""``sseguard probe`` against a healthy real engine: vLLM serving the real SmolLM2-135M (natural text),
workloads ``small``, ``reuse`` and ``tools`` at 1, 8 and 32 concurrent streams. A healthy engine must
give no false alarm: every stream complete, none failed under the strict policy.

vLLM's chunks carry its own extension fields (``prompt_token_ids``, ``token_ids``, …, vLLM's
``return_token_ids`` family): known fields of a known server, never a failure.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

COUNT = 8
LEVELS = "1,8,32"


def _probe(base_url: str, workload: str, out: Path) -> dict[str, Any]:
    argv = [sys.executable, "-m", "sseguard.cli", "probe", "--arm", f"vllm={base_url}", "--model", "m",
            "--workload", workload, "--count", str(COUNT), "--concurrency", LEVELS,
            "--max-tokens", "16", "--timeout", "300", "--json", "--no-live", "--out", str(out)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1200, check=False)
    assert done.returncode in (0, 1), f"probe exited {done.returncode}: {done.stderr[-2000:]}"
    start = done.stdout.index("{")
    summary: dict[str, Any] = json.loads(done.stdout[start:])
    summary["exit"] = done.returncode
    return summary


def _records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for path in out.rglob("results.jsonl")
            for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.timeout(1500)
@pytest.mark.parametrize("workload", ["small", "reuse", "tools"])
def test_probe_gives_no_false_alarm_on_a_healthy_real_engine(text_server: Any, tmp_path: Path,
                                                            workload: str) -> None:
    server = text_server
    summary = _probe(server.base_url, workload, tmp_path / workload)
    records = _records(tmp_path / workload)
    endings = sorted({str(r.get("ending")) for r in records})
    assert len(records) == 3 * COUNT, summary
    assert summary["failed"] == 0 and summary["exit"] == 0, (endings, summary.get("analysis"))
    assert endings == ["complete"], endings


def _wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95 % Wilson interval of k in n, written here (not the product's) as the test's oracle."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / (1 + z * z / n)
    return centre - half, centre + half


#: Faults put on the real engine's streams: 10 % truncated everywhere, and cuts mid-frame only under
#: load (none up to 8 streams in flight, half from 16 on: the "0 % at one session" shape).
TRUNCATED = 0.1
PER_LEVEL = 32


@pytest.mark.timeout(2400)
async def test_faults_injected_on_real_streams_are_recovered_and_the_cause_named(
        text_server: Any, tmp_path: Path) -> None:
    import asyncio

    from sseguard.analyze import analyze_sources
    from sseguard.chaos import ChaosConfig, Fault, LoadPattern
    from sseguard.chaos.upstream_server import run_upstream_chaos

    front = ChaosConfig(seed=11, faults={Fault.TRUNCATED: TRUNCATED},
                        patterns=(LoadPattern(Fault.CUT_MID_FRAME, ((8, 0.0), (16, 0.5))),))
    out = tmp_path / "faults"
    argv = [sys.executable, "-m", "sseguard.cli", "sweep", "--arm", "vllm=URL", "--model", "m",
            "--workload", "small", "--count", str(PER_LEVEL), "--concurrency", LEVELS,
            "--max-tokens", "16", "--timeout", "600", "--json", "--no-live", "--out", str(out)]
    async with run_upstream_chaos(front, text_server.base_url) as chaos:
        argv[argv.index("vllm=URL")] = f"vllm={chaos.url}"
        proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.PIPE)
        _, err = await asyncio.wait_for(proc.communicate(), timeout=2000)
        assert proc.returncode == 1, err.decode()[-2000:]  # streams failed: the probe says so
        injected = {f: chaos.stats.injected(f) for f in ("truncated", "cut_mid_frame")}
    records = _records(out)
    assert len(records) == 3 * PER_LEVEL
    seen = {f: sum(1 for r in records if r.get("ending") == f) for f in injected}
    # Every injected fault is seen as its own ending, and nothing else failed.
    assert seen == injected and injected["truncated"] > 0 and injected["cut_mid_frame"] > 0, seen
    assert sum(1 for r in records if r.get("ending") != "complete") == sum(seen.values())
    # Up to 8 in flight only the uniform fault is drawn: its rate there is recovered.
    calm = [r for r in records if r["concurrency"] in (1, 8)]
    cut = sum(1 for r in calm if r.get("ending") == "truncated")
    low, high = _wilson(cut, len(calm))
    assert low <= TRUNCATED <= high, (cut, len(calm), low, high)
    # The load-dependent cuts: none at 1 or 8 streams, and the analysis names the concurrency.
    assert {r["concurrency"] for r in records if r.get("ending") == "cut_mid_frame"} == {32}
    analysis = analyze_sources([str(out / "results.jsonl")])
    attrs = analysis.by_reason.get("cut_mid_frame") or analysis.attributes
    concurrency = next((a for a in attrs if a.key == "concurrency"), None)
    assert concurrency is not None and concurrency.significant and concurrency.best is not None
    assert "32" in concurrency.best.values and "1" not in concurrency.best.values, concurrency.best
