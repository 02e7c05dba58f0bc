"""``sseguard probe`` against a healthy real engine: vLLM serving the real SmolLM2-135M (natural text),
workloads ``small`` and ``tools`` at 1, 8 and 32 concurrent streams. A healthy engine must give no
false alarm: every stream complete, none failed under the strict policy.

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
@pytest.mark.parametrize("workload", ["small", "tools"])
def test_probe_gives_no_false_alarm_on_a_healthy_real_engine(real_server: Any, tmp_path: Path,
                                                            workload: str) -> None:
    server = real_server("smollm2", tool_parser="sseguard-hermes")
    summary = _probe(server.base_url, workload, tmp_path / workload)
    records = _records(tmp_path / workload)
    endings = sorted({str(r.get("ending")) for r in records})
    assert len(records) == 3 * COUNT, summary
    assert summary["failed"] == 0 and summary["exit"] == 0, (endings, summary.get("analysis"))
    assert endings == ["complete"], endings
