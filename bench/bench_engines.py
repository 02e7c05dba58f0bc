"""vLLM 0.33's own tool parsers vs ``sseguard-<family>``, side by side on vLLM's real chat server.

Question: inside vLLM, do our parsers give clients the right answer where vLLM's own do not, and what
does a long streamed call cost with each? Both run on the same path (vLLM's app from ``build_app`` +
``init_app_state``, only ``generate()`` scripted, tests/_engines_vllm.py), the same inputs, in one run:

1. vectors right: every example of the tool-call tests (tests/_engines_harvest.py) in 4-character
   deltas; right = the client gets exactly our parser's text, calls and finish reason;
2. time per request for one call whose ``content`` argument is 20/80/320 KB, in 4-character deltas,
   with no tool parser at all as the engine's own cost outside any parser.

Run in the engines' venv (.ci/engines builds it):
    VLLM_TARGET_DEVICE=cpu .venv-engines/bin/python bench/bench_engines.py [--sizes 20,80,320]
        [--families hermes,glm47,qwen3-coder,kimi-k2] [--budget 300] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

from _engines_model import build_model_dir
from _engines_support import harvest, matches, reference, tools_for
from _engines_vllm import Server, chat
from sseguard.toolcalls import aliases, families, family

#: vLLM 0.33's parser names for the families (``Family.aliases`` once the registry carries them)
VLLM_NAMES = {"hermes": "hermes", "qwen3_coder": "qwen3-coder", "glm45": "glm45", "glm47": "glm47",
              "kimi_k2": "kimi-k2", "deepseek_v3": "deepseek-v3", "deepseek_v31": "deepseek-v31",
              "deepseek_v32": "dsml-v32", "deepseek_v4": "dsml-v4", "deepseek_v41": "dsml-v41",
              "minimax_m2": "minimax-m2", "openai": "harmony"}


def vllm_name(fam: str) -> str | None:
    for name, target in {**VLLM_NAMES, **aliases()}.items():
        if target == fam:
            return name
    return None


@dataclass(frozen=True)
class _Call:
    name: str
    values: dict[str, Any]
    arguments: str


def long_call(fam: str, kb: int) -> tuple[str, list[dict[str, Any]]]:
    """One ``write_file`` call with ``kb`` KB of content, as the family's template writes it."""
    values = {"path": "src/app.py", "content": ("def f(x):\n    return x + 1\n" * (kb * 1024 // 28 + 1))
              [:kb * 1024]}
    text = "I will write it.\n" + family(fam).render([_Call("write_file", values, json.dumps(values))], False)
    tools = [{"type": "function", "function": {"name": "write_file", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}}}]
    return text, tools


ALIGNED = True


def made(model: Path, parser: str | None) -> Server:
    server = Server(model, parser)
    server.engine.aligned = ALIGNED
    return server


async def timed(server: Server, text: str, tools: list[dict[str, Any]] | None, budget: float) -> float | None:
    start = time.perf_counter()
    try:
        await asyncio.wait_for(chat(server, (text, 4, "stop"), tools), budget)
    except TimeoutError:
        return None
    return time.perf_counter() - start


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="20,80,320")
    ap.add_argument("--families", default="hermes,glm47,qwen3-coder,kimi-k2")
    ap.add_argument("--budget", type=float, default=300.0, help="seconds one request may take")
    ap.add_argument("--skip-vectors", action="store_true")
    ap.add_argument("--chars", action="store_true",
                    help="cut deltas every 4 characters instead of at token boundaries (>= 4 chars)")
    ap.add_argument("--json", type=Path)
    opts = ap.parse_args()
    global ALIGNED
    ALIGNED = not opts.chars
    tmp = Path(tempfile.mkdtemp(prefix="bench-engines-"))
    model = build_model_dir(tmp / "model")
    report: dict[str, Any] = {"utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              "machine": f"{platform.machine()} {os.cpu_count()} cores",
                              "load": os.getloadavg(), "deltas": "4 chars" if opts.chars else
                              "whole tokens, >= 4 chars", "vectors": {}, "timing": {}}
    if not opts.skip_vectors:
        vectors = harvest(tmp / "vectors.jsonl")
        for fam in families():
            own = vllm_name(fam)
            mine = [v for v in vectors if v.family == fam]
            row: dict[str, Any] = {"n": len(mine)}
            for label, parser in (("vllm", own), ("sseguard", f"sseguard-{fam}")):
                if parser is None:
                    continue
                server = made(model, parser)
                await server.start()
                right = 0
                for v in mine:
                    tools = tools_for(v)
                    try:
                        got = await chat(server, (v.text, 4, "stop"), tools)
                    except Exception:  # a parser that raises gives the client nothing right
                        continue
                    right += matches(got, reference(fam, v.text, tools))
                row[label] = right
            row["vllm_name"] = own
            report["vectors"][fam] = row
            print(fam, row, flush=True)
    none = made(model, None)
    await none.start()
    for fam in filter(None, opts.families.split(",")):
        own = vllm_name(fam)
        rows: dict[str, Any] = {}
        for kb in (int(s) for s in opts.sizes.split(",")):
            text, tools = long_call(fam, kb)
            row: dict[str, Any] = {"chars": len(text),
                                   "engine_only": await timed(none, text, None, opts.budget)}
            for label, parser in (("vllm", own), ("sseguard", f"sseguard-{fam}"),
                                  ("sseguard_stream", f"sseguard-{fam}-stream")):
                if parser is None:
                    continue
                server = made(model, parser)
                await server.start()
                row[label] = await timed(server, text, tools, opts.budget)
            rows[f"{kb}KB"] = row
            print(fam, kb, row, flush=True)
        report["timing"][fam] = {"vllm_name": own, **rows}
    if opts.json:
        opts.json.write_text(json.dumps(report, indent=2), encoding="utf-8")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
