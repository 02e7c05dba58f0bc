"""Is parsing linear for the docs/design/markup.md §3 families of classes C, D and E?

One ``write_file`` call whose ``content`` argument is 80 KB and 320 KB of the code-like text of
``bench_parsers.py`` (a ``<`` every ~25 characters, quotes, backslashes, newlines), written as each
family writes it — a Python string literal with its escapes (``pythonic``, ``olmo3``, ``lfm2``), a JSON
string (``mistral``, ``plamo3``, ``lfm2`` JSON branch), a delimited raw string (``functiongemma`` with
the tool's schema typing ``content`` as a string, ``gemma4``) — fed in 4-character chunks. Reported per
family: µs per chunk at 320 KB and the time growth from 80 to 320 KB (targets: ≤ 3 µs, ≤ 4.5×), with
``dsml-v32`` measured in the same run as the reference the older families were measured against.

``bench_parsers.py`` is being extended to every registered family (issue 36); this script answers the
question for these seven until then.

Run: .venv/bin/python -m bench.parsers.bench_parsers_cde [--repeat 5]
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from collections.abc import Callable

from bench.harness import machine
from bench.parsers.bench_parsers import make_stream, make_value
from sseguard.core.toolcalls import ToolCallEnd, parser_for

CHUNK = 4
TOOLS = [{"type": "function", "function": {"name": "write_file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"},
                                     "content": {"type": "string"}}}}}]


def _json_args(value: str) -> str:
    return json.dumps({"path": "src/page.html", "content": value}, ensure_ascii=False)


def _py_call(value: str) -> str:
    return f"write_file(path='src/page.html', content={value!r})"


STREAMS: dict[str, Callable[[str], str]] = {
    "dsml-v32": make_stream,
    "pythonic": lambda v: f"[{_py_call(v)}]",
    "olmo3": lambda v: f"I will write it.\n<function_calls>{_py_call(v)}</function_calls>",
    "lfm2": lambda v: f"<|tool_call_start|>[{_py_call(v)}]<|tool_call_end|>",
    "lfm2 (JSON)": lambda v: ("<|tool_call_start|>"
                              + json.dumps([{"name": "write_file",
                                             "arguments": json.loads(_json_args(v))}],
                                           ensure_ascii=False) + "<|tool_call_end|>"),
    "mistral": lambda v: f"[TOOL_CALLS]write_file[ARGS]{_json_args(v)}",
    "plamo3": lambda v: ("<|plamo:begin_tool_requests:plamo|><|plamo:begin_tool_request:plamo|>"
                         "<|plamo:begin_tool_name:plamo|>write_file<|plamo:end_tool_name:plamo|>"
                         "<|plamo:begin_tool_arguments:plamo|><|plamo:constrain|>json"
                         f"<|plamo:msg|>{_json_args(v)}<|plamo:end_tool_arguments:plamo|>"
                         "<|plamo:end_tool_request:plamo|><|plamo:end_tool_requests:plamo|>"),
    "functiongemma": lambda v: ("<start_function_call>call:write_file{path:<escape>src/page.html"
                                f"<escape>,content:<escape>{v}<escape>}}<end_function_call>"),
    "gemma4": lambda v: ('<|tool_call>call:write_file{path:<|"|>src/page.html<|"|>,'
                         f'content:<|"|>{v}<|"|>}}<tool_call|>'),
}


def run(family: str, chunks: list[str]) -> tuple[float, str]:
    """Seconds to feed every chunk and close, and the arguments of the call."""
    parser = parser_for(family.split(" ")[0], TOOLS)
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter()
        events = []
        for chunk in chunks:
            events.extend(parser.feed(chunk))
        events.extend(parser.close())
        elapsed = time.perf_counter() - t0
    finally:
        gc.enable()
    ends = [e for e in events if isinstance(e, ToolCallEnd)]
    assert len(ends) == 1, (family, [e for e in events if not isinstance(e, ToolCallEnd)][:3])
    return elapsed, ends[0].arguments


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print(machine())
    values = {kb: make_value(kb) for kb in (80, 320)}
    best: dict[tuple[str, int], float] = {}
    for _ in range(args.repeat):  # families and sizes interleaved, best of the repeats
        for family, make in STREAMS.items():
            for kb, value in values.items():
                text = make(value)
                chunks = [text[i:i + CHUNK] for i in range(0, len(text), CHUNK)]
                elapsed, arguments = run(family, chunks)
                assert json.loads(arguments)["content"] == value, family
                key = (family, kb)
                best[key] = min(best.get(key, elapsed), elapsed)
                best[(family, -kb)] = len(chunks)
    print(f"{'family':<15} {'80 KB ms':>9} {'320 KB ms':>10} {'growth':>7} {'µs/chunk':>9}  met")
    for family in STREAMS:
        small, large = best[(family, 80)], best[(family, 320)]
        per_chunk = large / best[(family, -320)] * 1e6
        growth = large / small
        met = "yes" if growth <= 4.5 and per_chunk <= 3 else "NO"
        print(f"{family:<15} {small * 1e3:9.1f} {large * 1e3:10.1f} {growth:6.2f}x {per_chunk:9.2f}"
              f"  {met}")


if __name__ == "__main__":
    main()
