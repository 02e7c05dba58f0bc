"""Tool-call parser cost on one long DSML string argument, against a rescanning baseline.

One ``write_file`` invoke whose ``content`` argument (``string="true"``) is 20 KB, 80 KB and 320 KB of
code-like text (HTML and C-like lines: ``<`` every ~25 characters, quotes, backslashes, newlines) is
streamed in 4-character chunks, as a serving engine sees tokens arrive. Ours is
``sseguard.core.toolcalls.parser_for("dsml-v32")``. The baseline is written the common way: keep a buffer,
and on every chunk re-run the regexes over the whole buffer, re-parse every parameter and re-serialize
the arguments, then stream the new suffix of that serialization (what SGLang's and vLLM's detectors
do, in less code). Both must end with the same arguments.

Reported per size: total time, µs per chunk, and how each grows when the input grows 4x. Targets
(docs/design/guarantees.md guarantee 3): ours linear (4x input => <= 4.5x time), >= 20x faster than the
baseline at 320 KB, and under 3 µs per chunk. The baseline is quadratic; when the 320 KB run is predicted to
take more than ``--baseline-budget`` seconds it is not run, and its time is extrapolated from the 20 -> 80 KB
growth (said so in the output).

The same argument is also streamed in every other registered family (``--families``, default: all
of ``sseguard.core.toolcalls.families()``, so a new family is measured without an edit here), with the
same targets (guarantee 3: a 320 KB argument costs <= 4.5x an 80 KB one, <= 3 us per chunk): as
Kimi K2 and gpt-oss Harmony markup it is one JSON object as those models write it, so the code is a JSON
string full of ``\"`` and ``\n`` escapes; as GLM-4.5, GLM-4.7 and MiniMax-M2 markup it is a raw value
typed as a string by the offered tool's schema; any other family writes the call as its own
``render`` does. Their figures are measured in the same run as the DSML parser's, their reference.

Run: .venv/bin/python -m bench.parsers.bench_parsers [--repeat 5] [--baseline-budget 300] [--families ...]
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import re
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from itertools import pairwise
from typing import Any

from bench.harness import load_average, machine
from sseguard.core.toolcalls import ToolArgsDelta, ToolCallEnd, families, family, parser_for

CHUNK = 4
SIZES_KB = (20, 80, 320)
LINES = [
    '<div class="row"><span>{}</span></div>',
    "if (a < b && c > d) {{ return \"{}\"; }}",
    "for (int i = 0; i < n; i++) sum += v[i]; // {}",
    'printf("%s\\n", "{}");',
    "<li><a href=\"/p/{}\">item</a></li>",
    "x = y << 2;  /* {} */",
    "    template <typename T> T max(T a, T b);  // {}",
    "    let s = 'quoted \\'{}\\' text';",
]


def make_value(kb: int, seed: int = 7) -> str:
    rng = random.Random(seed)
    out: list[str] = []
    size = 0
    while size < kb * 1024:
        line = rng.choice(LINES).format(rng.randint(0, 10**6)) + "\n"
        out.append(line)
        size += len(line)
    return "".join(out)[: kb * 1024]


def make_stream(value: str) -> str:
    return ('I will write the file.\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="write_file">\n'
            '<｜DSML｜parameter name="path" string="true">src/page.html</｜DSML｜parameter>\n'
            '<｜DSML｜parameter name="content" string="true">' + value + '</｜DSML｜parameter>\n'
            "</｜DSML｜invoke>\n</｜DSML｜function_calls>")


def make_json_stream(family: str, value: str) -> str:
    """The write_file call in a family whose arguments are one JSON object."""
    args = json.dumps({"path": "src/page.html", "content": value}, ensure_ascii=False)
    if family == "kimi-k2":
        return ("I will write the file.<|tool_calls_section_begin|><|tool_call_begin|>"
                "functions.write_file:0<|tool_call_argument_begin|>" + args
                + "<|tool_call_end|><|tool_calls_section_end|>")
    return ("<|channel|>analysis<|message|>Write the page.<|end|><|start|>assistant<|channel|>"
            "commentary to=functions.write_file <|constrain|>json<|message|>" + args + "<|call|>")


def make_glm_stream(value: str, spaced: bool) -> str:
    nl = "\n" if spaced else ""
    return (f"I will write the file.{nl}<tool_call>write_file{nl}<arg_key>path</arg_key>{nl}"
            f"<arg_value>src/page.html</arg_value>{nl}<arg_key>content</arg_key>{nl}<arg_value>"
            + value + f"</arg_value>{nl}</tool_call>")


def make_minimax_stream(value: str) -> str:
    return ('I will write the file.\n<minimax:tool_call>\n<invoke name="write_file">\n'
            '<parameter name="path">src/page.html</parameter>\n<parameter name="content">' + value
            + "</parameter>\n</invoke>\n</minimax:tool_call>")


#: family → how the write_file call is written in its markup
STREAMS: dict[str, Callable[[str], str]] = {
    "dsml-v32": make_stream, "kimi-k2": partial(make_json_stream, "kimi-k2"),
    "harmony": partial(make_json_stream, "harmony"), "glm45": partial(make_glm_stream, spaced=True),
    "glm47": partial(make_glm_stream, spaced=False), "minimax-m2": make_minimax_stream}
class WriteFile:
    """The write_file call, as a family's ``render`` takes it (``CallLike``)."""

    def __init__(self, value: str) -> None:
        self.name = "write_file"
        self.values = {"path": "src/page.html", "content": value}
        self.arguments = json.dumps(self.values, ensure_ascii=False)


def stream_for(name: str) -> Callable[[str], str]:
    """How the write_file call is written in family ``name``: the hand-written streams above for
    the families measured before, else what the family's own ``render`` writes."""
    if name in STREAMS:
        return STREAMS[name]
    fam = family(name)
    return lambda value: "I will write the file." + fam.render([WriteFile(value)], False)


#: the tool offered, so that schema-typed families read ``content`` as the string it is
TOOLS: list[dict[str, Any]] = [{"type": "function", "function": {"name": "write_file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}}}]


def run_ours(chunks: list[str], family: str = "dsml-v32") -> str:
    parser = parser_for(family, TOOLS)
    feed = parser.feed
    events: list[object] = []
    keep = events.extend  # a consumer takes every event; so does this loop
    for chunk in chunks:
        keep(feed(chunk))
    keep(parser.close())
    return next(e.arguments for e in events if isinstance(e, ToolCallEnd))


class RescanningParser:
    """The common reference design: buffer everything, re-derive everything on every chunk."""

    BLOCK = "<｜DSML｜function_calls>"
    INVOKE = re.compile(r'<｜DSML｜invoke\s+name="([^"]+)"\s*>(.*?)(</｜DSML｜invoke>|$)', re.S)
    PARAM = re.compile(r'<｜DSML｜parameter\s+name="([^"]+)"\s+string="(true|false)"\s*>(.*?)'
                       r"(</｜DSML｜parameter>|$)", re.S)

    def __init__(self) -> None:
        self.buf = ""
        self.sent: dict[int, str] = {}
        self.done: dict[int, str] = {}

    def feed(self, chunk: str) -> list[ToolArgsDelta]:
        self.buf += chunk
        start = self.buf.find(self.BLOCK)
        if start == -1:
            return []
        out = []
        for i, inv in enumerate(self.INVOKE.finditer(self.buf, start)):
            if i in self.done:
                continue
            params: dict[str, object] = {}
            for p in self.PARAM.finditer(inv.group(2)):
                if p.group(2) == "false":
                    try:
                        params[p.group(1)] = json.loads(p.group(3))
                    except ValueError:
                        continue
                else:
                    params[p.group(1)] = p.group(3)
            args = json.dumps(params, ensure_ascii=False)
            if not inv.group(3):  # still open: hold back the provisional closing quote and brace
                args = args[:-2] if args.endswith('"}') else args[:-1]
            else:
                self.done[i] = args
            sent = self.sent.get(i, "")
            if args.startswith(sent) and len(args) > len(sent):
                out.append(ToolArgsDelta(i, args[len(sent):]))
                self.sent[i] = args
        return out


def run_baseline(chunks: list[str]) -> str:
    parser = RescanningParser()
    for chunk in chunks:
        parser.feed(chunk)
    return parser.done[0]


#: what ``timed`` reads: wall time, or the process's CPU time (``--clock cpu``: on a shared machine
#: whose load is far above its cores, the time the parser itself ran, not the time it waited)
CLOCK: Callable[[], float] = time.perf_counter


def timed(fn: Callable[[list[str]], str], chunks: list[str]) -> tuple[float, str]:
    gc.collect()
    gc.disable()
    try:
        t0 = CLOCK()
        result = fn(chunks)
        return CLOCK() - t0, result
    finally:
        gc.enable()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="runs of ours per size (median)")
    ap.add_argument("--baseline-budget", type=float, default=300.0,
                    help="seconds the 320 KB baseline may take before it is extrapolated instead")
    ap.add_argument("--families", default="all",
                    help="comma-separated registered families, or all (the baseline is DSML's)")
    ap.add_argument("--no-baseline", action="store_true",
                    help="skip the rescanning baseline (minutes at 80 KB)")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="wall time (default) or the process's CPU time (a busy shared machine)")
    args = ap.parse_args()
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    known = list(families())
    chosen = known if args.families == "all" else [
        f.strip() for f in args.families.split(",") if f.strip()]
    unknown = [f for f in chosen if f not in known]
    if unknown or not chosen:
        ap.error(f"unknown family {', '.join(unknown)}; known: {', '.join(known)}")
    measure(chosen, args)


def measure(families: list[str], args: argparse.Namespace) -> None:
    """Ours per family and size, then the DSML baseline."""

    print(machine())
    print(f"one string argument, {CHUNK}-char chunks")
    runs: dict[tuple[str, int], tuple[list[str], str]] = {}
    for kb in SIZES_KB:
        value = make_value(kb)
        expected = json.dumps({"path": "src/page.html", "content": value}, ensure_ascii=False)
        for name in families:
            stream = stream_for(name)(value)
            runs[name, kb] = ([stream[i:i + CHUNK] for i in range(0, len(stream), CHUNK)],
                              expected)
    print("'<' per 100 chars of the argument: "
          f"{100 * make_value(20).count('<') / (20 * 1024):.1f}")

    # Ours: one warm-up, then families and sizes interleaved round by round, so that load from
    # other work on the machine falls on every one alike; median per family and size.
    samples: dict[tuple[str, int], list[float]] = {key: [] for key in runs}
    for key, (chunks, _) in runs.items():
        timed(partial(run_ours, family=key[0]), chunks)
    for _ in range(args.repeat):
        for key, (chunks, expected) in runs.items():
            t, result = timed(partial(run_ours, family=key[0]), chunks)
            assert json.loads(result) == json.loads(expected), f"{key[0]}: other arguments"
            samples[key].append(t)
    for name in families:
        _report_family(name, {kb: samples[name, kb] for kb in SIZES_KB},
                       {kb: len(runs[name, kb][0]) for kb in SIZES_KB})
    print(f"load average at the end {load_average():.1f}")
    _summary(families, samples, {key: len(runs[key][0]) for key in runs})
    if "dsml-v32" not in families or args.no_baseline:
        return
    ours = {kb: statistics.median(samples["dsml-v32", kb]) for kb in SIZES_KB}
    streams = {kb: runs["dsml-v32", kb] for kb in SIZES_KB}
    nchunks = {kb: len(streams[kb][0]) for kb in SIZES_KB}

    base: dict[int, float] = {}
    measured_base: set[int] = set()
    for kb in SIZES_KB:
        chunks, expected = streams[kb]
        if kb == SIZES_KB[-1]:
            # The baseline's per-chunk work grows with the buffer, so its total grows with the
            # square of the input: 16x per 4x. That is the extrapolation (a lower bound when the
            # measured growth is steeper).
            a, b = SIZES_KB[0], SIZES_KB[1]
            predicted = base[b] * 16
            if predicted > args.baseline_budget:
                base[kb] = predicted
                print(f"{kb:>4} KB baseline not run: predicted {predicted:.0f} s > budget "
                      f"{args.baseline_budget:.0f} s; extrapolated as {b} KB time x 16 (quadratic; "
                      f"measured {a}->{b} KB growth {base[b] / base[a]:.1f}x)")
        if kb not in base:
            t, result = timed(run_baseline, chunks)
            assert json.loads(result) == json.loads(expected), "baseline produced other arguments"
            base[kb] = t
            measured_base.add(kb)
        sys.stdout.flush()
    for kb in SIZES_KB:
        print(f"{kb:>4} KB, {nchunks[kb]:>6} chunks: ours {ours[kb] * 1e3:9.1f} ms "
              f"({ours[kb] / nchunks[kb] * 1e6:5.2f} us/chunk, median of {args.repeat})   "
              f"baseline {base[kb]:8.2f} s ({base[kb] / nchunks[kb] * 1e6:8.1f} us/chunk"
              f"{'' if kb in measured_base else ', extrapolated'})   "
              f"speedup {base[kb] / ours[kb]:,.0f}x")
    for a, b in pairwise(SIZES_KB):
        print(f"growth {a}->{b} KB (4x input): ours {ours[b] / ours[a]:.2f}x, "
              f"baseline {base[b] / base[a]:.2f}x")
    top = SIZES_KB[-1]
    per_chunk = max(ours[kb] / nchunks[kb] * 1e6 for kb in SIZES_KB)
    growth = max(ours[b] / ours[a] for a, b in pairwise(SIZES_KB))
    print(f"targets: linear (<= 4.5x per 4x): {'met' if growth <= 4.5 else 'NOT met'} "
          f"(worst {growth:.2f}x); >= 20x faster at {top} KB: "
          f"{'met' if base[top] / ours[top] >= 20 else 'NOT met'} ({base[top] / ours[top]:,.0f}x); "
          f"< 3 us/chunk: {'met' if per_chunk < 3 else 'NOT met'} (worst {per_chunk:.2f} us)")


def _summary(families: list[str], samples: dict[tuple[str, int], list[float]],
             nchunks: dict[tuple[str, int], int]) -> None:
    """One table row per family (best of the runs): us per chunk at 80 and 320 KB, the 80 -> 320 KB
    growth, and whether guarantee 3's targets are met (the figures docs/benchmarks.md shows)."""
    a, b = SIZES_KB[-2], SIZES_KB[-1]
    print(f"| family | us/chunk {a} KB | us/chunk {b} KB | {a}->{b} KB | targets |")
    print("|---|---|---|---|---|")
    for fam in families:
        ta, tb = min(samples[fam, a]), min(samples[fam, b])
        ua, ub = ta / nchunks[fam, a] * 1e6, tb / nchunks[fam, b] * 1e6
        ok = tb / ta <= 4.5 and max(ua, ub) <= 3
        print(f"| {fam} | {ua:.2f} | {ub:.2f} | {tb / ta:.2f}x | {'met' if ok else 'NOT met'} |")


def _report_family(family: str, samples: dict[int, list[float]], nchunks: dict[int, int]) -> None:
    """One family's per-chunk cost and growth, and the targets it meets.

    Judged on the fastest of the runs per size (the least disturbed by other work on the machine, as
    ``timeit`` advises); the median is shown beside it.
    """
    best = {kb: min(samples[kb]) for kb in SIZES_KB}
    for kb in SIZES_KB:
        med = statistics.median(samples[kb])
        print(f"{family:>10} {kb:>4} KB, {nchunks[kb]:>6} chunks: best {best[kb] * 1e3:7.1f} ms "
              f"({best[kb] / nchunks[kb] * 1e6:5.2f} us/chunk), median {med * 1e3:7.1f} ms "
              f"({med / nchunks[kb] * 1e6:5.2f} us/chunk) of {len(samples[kb])}")
    growth = max(best[b] / best[a] for a, b in pairwise(SIZES_KB))
    per_chunk = max(best[kb] / nchunks[kb] * 1e6 for kb in SIZES_KB)
    print(f"{family:>10} growth per 4x input: "
          + ", ".join(f"{best[b] / best[a]:.2f}x" for a, b in pairwise(SIZES_KB))
          + f"; targets: linear {'met' if growth <= 4.5 else 'NOT met'}, < 3 us/chunk "
          f"{'met' if per_chunk < 3 else 'NOT met'} (worst {per_chunk:.2f} us)")


if __name__ == "__main__":
    main()
