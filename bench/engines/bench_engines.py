"""The engines' own tool parsers vs ``sseguard-<family>``, side by side, for every family an engine
registers a parser for (by the family's name or one of its aliases, ``toolcalls.aliases()``).

Question: driven the way each engine drives its parsers, do clients get the right answer from ours
where they do not from the engine's own, and what does one long streamed call cost with each? Same
inputs for both, one run:

- vLLM 0.33: vLLM's real chat server (``build_app`` + ``init_app_state``, only ``generate()``
  scripted, tests/support/engines_vllm.py), vLLM's parser under its own name vs ``sseguard-<family>``;
- SGLang 0.5.23: no server. Vectors go through SGLang's chat tool-call step
  (``_process_tool_call_stream`` + ``_check_for_unstreamed_tool_args``, tests/support/engines_sglang.py,
  which builds the detector with ``FunctionCallParser``); the long call drives the detector alone
  (``FunctionCallParser.parse_stream_chunk`` per delta, ``parse_stream_end``), ours the same way.

1. vectors right: every example of the tool-call tests (tests/support/engines_harvest.py), cut into deltas
   at token boundaries of the local tokenizer (tests/support/engines_model.py), each at least 4 characters;
   right = the client gets exactly our parser's text, calls and finish reason (SGLang: reasoning not
   compared, its tool result has no field for it). Each wrong one is put in one class (``verdict``).
2. seconds per request for one ``write_file`` call whose ``content`` argument is 80/320 KB, same
   deltas; vLLM with no tool parser at all as the engine's own cost outside any parser.
3. ``--phase parsers``: the same long call with no server around either parser. vLLM's parser is
   built by its own serving code (``OpenAIServingChat._make_parser``, i.e. ``ParserManager`` over
   ``ToolParserManager``, the tokenizer of tests/support/engines_model.py) and driven per delta by vLLM's
   ``ChatStreamProcessor.step``, the call the serving loop makes (it keeps previous/current text and
   token ids and calls the tool parser's ``extract_tool_calls_streaming``); the seconds are those
   spent inside ``extract_tool_calls_streaming`` (and, apart, the whole ``step`` loop). Ours:
   ``parser_for(family).feed`` per delta, ``close``. Token ids per delta are the tokenizer's, as the
   server path's engine gives them. Both assemble the call; "same call" = byte-exact name and
   arguments.

Every engine request runs in a forked child with a budget: a synchronous parser cannot be
interrupted, so a child past the budget is killed and the figure reads "> budget"; where vLLM's own
parser takes more than a quarter of the budget at 80 KB, its 320 KB request is not made (a linear
parser would already exceed the budget there) and the row says so. ``--until`` stops starting new
rows at a UTC time, so a loaded machine cannot stretch the run without bound.

Run in the engines' venv (.ci/engines builds it):
    PYTHONPATH=tests VLLM_TARGET_DEVICE=cpu .venv-engines/bin/python -m bench.engines.bench_engines \
        --phase vectors [--vectors harvested.jsonl] [--engines vllm,sglang] [--families a,b] \
        --json vectors.json
    ... --phase speed [--sizes 80,320] [--budget 150] [--until 06:30] --json speed.json
    ... --phase parsers --engines vllm --families a,b [--sizes 80,320] [--own-budget 60] --json p.json
    ... --render vectors.json speed.json     # the Markdown tables of docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import select
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from sseguard.core.toolcalls import ToolCallEnd, aliases, families, family, parser_for

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
try:  # the engines tests' own harness, importable as pytest imports it: with tests/ on the path
    from support.engines import Expected, Vector, harvest, matches, reference, tools_for
    from support.engines_model import build_model_dir, token_pieces
except ModuleNotFoundError as missing:
    raise SystemExit(f"{missing}: run with PYTHONPATH=tests (this benchmark drives tests/_engines_*.py, "
                     "the engines tests' harness, which imports its parts by name)") from None

DELTA = 4  # the shortest delta in characters (deltas are whole tokens of at least this length)


# --------------------------------------------------------------------------------------- names


def engine_name(fam: str, registered: set[str]) -> str | None:
    """The engine's own parser for ``fam``: the family's name, then its aliases, as registered
    (``-``/``_`` spelt either way); None where the engine has none."""
    names = [fam, *(a for a, target in aliases().items() if target == fam)]
    for name in names:
        # the spellings the engines use (SGLang writes some without separators: ``deepseekv32``)
        for spelt in (name, name.replace("-", "_"), name.replace("_", "-"),
                      name.replace("_", "").replace("-", "")):
            if spelt in registered and not spelt.startswith("sseguard-"):
                return spelt
    return None


def vllm_registered() -> set[str]:
    from vllm.tool_parsers import ToolParserManager

    return set(ToolParserManager.list_registered())


def vllm_reasoning_registered() -> set[str]:
    from vllm.reasoning.abs_reasoning_parsers import ReasoningParserManager

    return set(ReasoningParserManager.list_registered())


def sglang_reasoning_registered() -> set[str]:
    from sglang.srt.parser.reasoning_parser import ReasoningParser

    return set(ReasoningParser.DetectorMap)


def sglang_registered() -> set[str]:
    from sglang.srt.function_call.function_call_parser import FunctionCallParser

    return set(FunctionCallParser.ToolCallParserEnum)


# ----------------------------------------------------------------------------- forked children


@dataclass
class Child:
    """What a forked child reported: its JSON lines, and whether it was killed past the budget."""

    lines: list[Any]
    killed: bool
    crashed: bool


def forked(work: Callable[[Callable[[Any], None]], None], budget: float) -> Child:
    """Run ``work(emit)`` in a forked child; each ``emit(obj)`` is one JSON line back. The child is
    killed when ``budget`` seconds pass without a line (a synchronous parser cannot be interrupted
    any other way)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the parent's code
        os.close(read_fd)
        out = os.fdopen(write_fd, "w", buffering=1)
        code = 0
        try:
            def emit(obj: Any) -> None:
                out.write(json.dumps(obj) + "\n")

            work(emit)
        except BaseException as exc:  # report it: the parent counts what was done
            out.write(json.dumps({"crash": f"{type(exc).__name__}: {exc}"[:300]}) + "\n")
            code = 1
        out.flush()
        os._exit(code)
    os.close(write_fd)
    lines: list[Any] = []
    held = b""
    killed = False
    with os.fdopen(read_fd, "rb", buffering=0) as pipe:
        while True:
            ready, _, _ = select.select([pipe], [], [], budget)
            if not ready:
                os.kill(pid, signal.SIGKILL)
                killed = True
                break
            data = pipe.read(1 << 16)
            if not data:
                break
            held += data
            *done, held = held.split(b"\n")
            lines.extend(json.loads(line) for line in done if line)
    os.waitpid(pid, 0)
    crashed = any(isinstance(x, dict) and "crash" in x for x in lines)
    return Child([x for x in lines if not (isinstance(x, dict) and "crash" in x)], killed, crashed)


# ----------------------------------------------------------------------------------- verdicts


def verdict(got: dict[str, Any], want: Expected, markers: tuple[str, ...]) -> str:
    """``right``, or the first way the client's message differs from our parser's answer."""
    if matches(got, want):
        return "right"
    calls, wanted = got["calls"], want.calls
    if len(calls) > len(wanted):
        return "extra call"
    if len(calls) < len(wanted):
        return "call missing"
    if any(c[1] != w[0] for c, w in zip(calls, wanted, strict=True)):
        return "name differs"
    if any(c[2] != w[1] for c, w in zip(calls, wanted, strict=True)):
        return "arguments differ"
    if got["content"] != want.content:
        if got["content"].strip() == want.content.strip():
            return "whitespace only"  # a template separator kept or dropped: text and calls right
        if any(m.strip() and m in got["content"] and m not in want.content for m in markers):
            return "markup in content"
        if len(got["content"]) < len(want.content):
            return "text dropped"
        return "content differs"
    if got["finish"] != want.finish:
        return "finish reason"
    if got["reasoning"] != want.reasoning:
        return "reasoning differs"
    return "id differs"


def emit_verdict(emit: Callable[[Any], None], seen: set[str], vector: Vector, got: dict[str, Any],
                 want: Expected, markers: tuple[str, ...]) -> None:
    """One example's class; the first example of each wrong class goes with it, as a sample of what
    the client got and what our parser says (for docs/markup.md)."""
    kind = verdict(got, want, markers)
    if kind == "right" or kind in seen:
        emit(kind)
        return
    seen.add(kind)
    emit({"kind": kind, "text": vector.text[:400], "got": {
        "content": got["content"][:300], "calls": [c[1:] for c in got["calls"]][:3], "finish": got["finish"]},
        "want": {"content": want.content[:300], "calls": [c[:2] for c in want.calls][:3],
                 "finish": want.finish}})


def load_vectors(path: Path | None, tmp: Path) -> list[Vector]:
    """The harvested examples: from ``path`` (the file an earlier part of the same run harvested;
    read as ``harvest`` reads it, examples/markup included) or harvested now."""
    if path is None:
        return list(harvest(tmp / "vectors.jsonl"))
    return list(harvest(path, run=False))


# ---------------------------------------------------------------------------------- vLLM side


def vllm_vectors(model: Path, parser: str, reasoning: str | None, fam: str, vectors: list[Vector],
                 emit: Callable[[Any], None]) -> None:
    from support.engines_vllm import Server, chat

    async def go() -> None:
        server = Server(model, parser, reasoning)
        server.engine.aligned = True
        await server.start()
        markers = family(fam).markers + family(fam).leak_markers
        seen: set[str] = set()
        for v in vectors:
            tools = tools_for(v)
            want = reference(fam, v.text, tools)
            try:
                got = await chat(server, (v.text, DELTA, "stop"), tools)
            except Exception:  # a parser that raises gives the client nothing right
                emit("raised")
                continue
            emit_verdict(emit, seen, v, got, want, markers)

    asyncio.run(go())


def vllm_timed(model: Path, parser: str | None, text: str, tools: list[Any] | None,
               want: Expected | None, emit: Callable[[Any], None]) -> None:
    from support.engines_vllm import Server, chat

    async def go() -> None:
        server = Server(model, parser)
        server.engine.aligned = True
        await server.start()
        start = time.perf_counter()
        got = await chat(server, (text, DELTA, "stop"), tools)
        seconds = time.perf_counter() - start
        emit({"s": seconds, "chunks": len(got["chunks"]),
              "right": None if want is None else [c[1:] for c in got["calls"]] == [
                  [n, a] for n, a, _ in want.calls]})

    asyncio.run(go())


def vllm_warm(model: Path) -> None:
    """One request in the parent before any child forks: the serving modules vLLM imports lazily
    are then imported once, not in every child (measured: 46 s a cold child, 1 s a warm one)."""
    from support.engines_vllm import Server, chat

    async def go() -> None:
        server = Server(model, "sseguard-hermes")
        server.engine.aligned = True
        await server.start()
        await chat(server, ('<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>', DELTA, "stop"),
                   [{"type": "function", "function": {"name": "f"}}])

    asyncio.run(go())


def vllm_parser_timed(model: Path, parser: str, pieces: list[str], want: Expected, repeats: int,
                      emit: Callable[[Any], None]) -> None:
    """vLLM's tool parser without the server: built by vLLM's serving object as it builds one per
    request (``_make_parser``, after ``adjust_request`` on a parser of its own, as the renderer
    does), driven by ``ChatStreamProcessor.step`` per delta as the serving loop drives it. One line
    per repeat: seconds inside the tool parser's ``extract_tool_calls_streaming``, seconds of the
    whole ``step`` loop, and whether the folded call is ours byte for byte."""
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.entrypoints.openai.chat_completion.stream_processor import ChatStreamProcessor

    from support.engines_vllm import Server

    async def serve() -> Server:
        server = Server(model, parser)
        await server.start()
        return server

    server = asyncio.run(serve())
    serving = server.app.state.openai_serving_chat
    tokenizer = serving.renderer.tokenizer
    ids = [list(tokenizer.encode(p, add_special_tokens=False)) for p in pieces]  # what generate() gives
    prompt_ids = list(tokenizer.encode("<|user|>hi\n<|assistant|>", add_special_tokens=False))
    wanted = [(n, a) for n, a, _ in want.calls]
    for _ in range(repeats):
        request = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "hi"}],
                                        tools=TOOLS, stream=True)
        kwargs = serving._effective_chat_template_kwargs(request)
        request = serving._make_parser(request, tokenizer, kwargs).adjust_request(request=request)
        processor = ChatStreamProcessor(request, serving._make_parser(request, tokenizer, kwargs),
                                        enable_auto_tools=serving.enable_auto_tools,
                                        parser_cls=serving.parser_cls)
        tool = processor.parser.tool_parser
        inner = [0.0]
        own = tool.extract_tool_calls_streaming

        def timed(*args: Any, _own: Any = own, _inner: list[float] = inner, **kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return _own(*args, **kw)
            finally:
                _inner[0] += time.perf_counter() - t0

        tool.extract_tool_calls_streaming = timed
        names: dict[int, str] = {}
        parts: dict[int, list[str]] = {}
        content: list[str] = []
        last = len(pieces) - 1
        start = time.perf_counter()
        for n, (piece, tids) in enumerate(zip(pieces, ids, strict=True)):
            delta = processor.step(piece, tids, "stop" if n == last else None, prompt_ids).delta
            if delta is None:
                continue
            content.append(delta.content or "")
            for tc in delta.tool_calls or []:
                fn = tc.function
                if fn is not None and fn.name:
                    names[tc.index] = fn.name
                parts.setdefault(tc.index, []).append((fn.arguments if fn is not None else None) or "")
        whole = time.perf_counter() - start
        got = [(names.get(i, ""), "".join(parts[i])) for i in sorted(parts)]
        emit({"s": inner[0], "step_s": whole, "right": got == wanted, "calls": len(got),
              "content_chars": len("".join(content)), "content_right": "".join(content) == want.content})


def ours_parser_timed(fam: str, pieces: list[str], want: Expected, repeats: int,
                      emit: Callable[[Any], None]) -> None:
    """``parser_for(fam)`` fed the same deltas, ``close``; the call as our API delivers it."""
    wanted = [(n, a) for n, a, _ in want.calls]
    for _ in range(repeats):
        parser = parser_for(fam, TOOLS)
        feed = parser.feed
        events: list[object] = []
        keep = events.extend
        start = time.perf_counter()
        for piece in pieces:
            keep(feed(piece))
        keep(parser.close())
        seconds = time.perf_counter() - start
        got = [(e.name, e.arguments) for e in events if isinstance(e, ToolCallEnd)]
        emit({"s": seconds, "right": got == wanted})


# -------------------------------------------------------------------------------- SGLang side


def sglang_vectors(parser: str, reasoning: str | None, fam: str, vectors: list[Vector], tok: Any,
                   emit: Callable[[Any], None]) -> None:
    from support.engines_sglang import serving, stream

    async def go() -> None:
        chat = serving(parser, reasoning)
        markers = family(fam).markers + family(fam).leak_markers
        seen: set[str] = set()
        for v in vectors:
            tools = tools_for(v)
            want = reference(fam, v.text, tools)
            want = Expected(want.content, "", want.calls, want.finish)  # no reasoning field in SGLang
            try:
                got = await stream(chat, v.text, DELTA, tools, pieces=token_pieces(tok, v.text, DELTA))
            except Exception:
                emit("raised")
                continue
            got["reasoning"] = ""  # what its reasoning parser split off is not compared (see above)
            emit_verdict(emit, seen, v, got, want, markers)

    asyncio.run(go())


def sglang_timed(parser: str, pieces: list[str], tools: list[Any], want: Expected,
                 emit: Callable[[Any], None]) -> None:
    """The detector alone: ``parse_stream_chunk`` per delta, ``parse_stream_end``; the calls folded
    by index as the server folds them (a named item opens a call, the others append arguments)."""
    from sglang.srt.entrypoints.openai.protocol import Tool
    from sglang.srt.function_call.function_call_parser import FunctionCallParser

    fcp = FunctionCallParser([Tool(**t) for t in tools], parser)
    content: list[str] = []
    names: dict[int, str] = {}
    parts: dict[int, list[str]] = {}  # joined once at the end: ``+=`` on a held string is quadratic
    start = time.perf_counter()
    for piece in [*pieces, None]:
        text, items = fcp.parse_stream_chunk(piece) if piece is not None else fcp.parse_stream_end()
        content.append(text)
        for item in items:
            names[item.tool_index] = item.name or names.get(item.tool_index, "")
            parts.setdefault(item.tool_index, []).append(item.parameters or "")
    seconds = time.perf_counter() - start
    got = [(names[i], "".join(parts[i])) for i in sorted(parts)]
    emit({"s": seconds, "right": got == [(n, a) for n, a, _ in want.calls]})


# --------------------------------------------------------------------------------- long call


@dataclass(frozen=True)
class _Call:
    name: str
    values: dict[str, Any]
    arguments: str


TOOLS = [{"type": "function", "function": {"name": "write_file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}}}]


def long_call(fam: str, kb: int, bare: bool = False) -> str:
    """One ``write_file`` call with ``kb`` KB of content, as the family's template writes it, after
    a sentence of text where the family reads markup there (unmarked grammars, and ``bare``: the
    markup alone, at the start of the answer)."""
    values = {"path": "src/app.py", "content": ("def f(x):\n    return x + 1\n" * (kb * 1024 // 28 + 1))
              [:kb * 1024]}
    fm = family(fam)
    markup = fm.render([_Call("write_file", values, json.dumps(values))], False)
    texts: list[str] = [markup] if bare else ["I will write it.\n" + markup, markup]
    for text in texts:
        want = reference(fam, text, TOOLS)
        if [(n, json.loads(a)) for n, a, _ in want.calls] == [("write_file", values)]:
            return text
    raise SystemExit(f"{fam}: our parser does not read its own rendering of the long call")


# ------------------------------------------------------------------------------------- phases


def utc() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def past(until: str | None) -> bool:
    return until is not None and time.strftime("%H:%M", time.gmtime()) >= until


def vectors_phase(opts: argparse.Namespace, model: Path, tmp: Path, report: dict[str, Any]) -> None:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(model / "tokenizer.json"))
    vectors = load_vectors(opts.vectors, tmp)
    for fam in opts.family_list:
        mine = [v for v in vectors if v.family == fam]
        row: dict[str, Any] = {"n": len(mine),
                               **{f"{e}_name": report["names"][fam][e] for e in opts.engine_list}}
        if past(opts.until):
            row["skipped"] = "time"
            report["vectors"][fam] = row
            continue
        for eng in opts.engine_list:
            own = report["names"][fam][eng]
            think = report["reasoning"][fam][eng]
            runs = ([("own_think", own)] if think else []) if opts.with_reasoning else \
                [("own", own), ("sseguard", f"sseguard-{fam}")]
            for label, parser in runs:
                if parser is None:
                    continue
                # --with-reasoning: the engine's own reasoning parser in front of its tool parser, for
                # the families whose markup carries reasoning our parser reads itself (ours needs none)
                split = think if label == "own_think" else None
                work = (partial(vllm_vectors, model, parser, split, fam, mine) if eng == "vllm" else
                        partial(sglang_vectors, parser, split, fam, mine, tok))
                started = time.perf_counter()
                child = forked(work, opts.budget)
                classes: dict[str, int] = {}
                samples: list[Any] = []
                each: list[str] = []
                for v in child.lines:
                    if isinstance(v, dict):
                        samples.append(v)
                        v = v["kind"]
                    classes[v] = classes.get(v, 0) + 1
                    each.append(v)
                lost = len(mine) - len(child.lines)
                if lost:
                    classes["timed out" if child.killed else "not run (crash)"] = lost
                row[f"{eng}_{label}"] = {"right": classes.pop("right", 0), "wrong": classes,
                                         "seconds": round(time.perf_counter() - started, 1),
                                         "samples": samples, "each": each}
        report["vectors"][fam] = row
        print(fam, json.dumps({k: ({"right": c["right"], "wrong": c["wrong"]} if isinstance(c, dict) else c)
                               for k, c in row.items()}), flush=True)


def speed_configs(eng: str, own: str | None, fam: str) -> Iterator[tuple[str, str | None]]:
    if eng == "vllm":
        yield "engine", None
    if own is not None:
        yield "own", own
    yield "hold", f"sseguard-{fam}"
    yield "stream", f"sseguard-{fam}-stream"


def speed_phase(opts: argparse.Namespace, model: Path, report: dict[str, Any]) -> None:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(model / "tokenizer.json"))
    for kb in (int(s) for s in opts.sizes.split(",")):  # every family at 80 KB before any at 320
        for fam in opts.family_list:
            if kb > 80 and opts.families_320 and fam not in opts.families_320.split(","):
                continue
            names = report["names"][fam]
            text = long_call(fam, kb, opts.bare)
            want = reference(fam, text, TOOLS)
            pieces = token_pieces(tok, text, DELTA)
            for eng in opts.engine_list:
                if names[eng] is None:
                    continue
                row: dict[str, Any] = {"chars": len(text), "deltas": len(pieces), "utc": utc(),
                                       "load": os.getloadavg()[0]}
                slot = report["speed"].setdefault(eng, {}).setdefault(fam, {})
                slot[f"{kb}KB"] = row
                if past(opts.until):
                    row["skipped"] = "time"
                    continue
                smaller = slot.get(f"{kb // 4}KB", {})
                for label, parser in speed_configs(eng, names[eng], fam):
                    engine_ones = opts.engine_families.split(",") if opts.engine_families else None
                    if label == "engine" and engine_ones is not None and fam not in engine_ones:
                        continue
                    limit = opts.own_budget if label == "own" else opts.budget
                    before = smaller.get(label)
                    if kb > 80 and isinstance(before, dict) and (before.get("killed") or
                                                                 before["s"] > limit / 4):
                        row[label] = {"skipped": "80 KB took more than budget/4"}
                        continue
                    work = (partial(vllm_timed, model, parser, text, None if parser is None else TOOLS,
                                    None if parser is None else want) if eng == "vllm" else
                            partial(sglang_timed, str(parser), pieces, TOOLS, want))
                    child = forked(work, limit)
                    row[label] = (child.lines[0] if child.lines else
                                  {"killed": child.killed, "crashed": child.crashed, "s": limit})
                print(eng, fam, kb, json.dumps(row), flush=True)
                if opts.json:  # kept as it grows: a run stopped early still has its rows
                    opts.json.write_text(json.dumps(report, indent=2), encoding="utf-8")


def best(child: Child, budget: float) -> dict[str, Any]:
    """The fastest repeat a child reported; past the budget with none: killed at the budget."""
    if not child.lines:
        return {"killed": child.killed, "crashed": child.crashed, "s": budget}
    top = dict(min(child.lines, key=lambda x: float(x["s"])))
    top["repeats"] = len(child.lines)
    return top


def parsers_phase(opts: argparse.Namespace, model: Path, report: dict[str, Any]) -> None:
    """The long call, vLLM's tool parser and ours each alone (see the module's docstring, 3.).
    Every vLLM run in a forked child with ``--own-budget`` seconds; ours repeated ``--repeats``
    times, vLLM's too where one run takes under a second (the fastest run is kept)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(model / "tokenizer.json"))
    slot_all = report.setdefault("parsers", {})
    for kb in (int(s) for s in opts.sizes.split(",")):  # every family at 80 KB before any at 320
        for fam in opts.family_list:
            name = report["names"][fam]["vllm"]
            if name is None:
                continue
            text = long_call(fam, kb, opts.bare)
            want = reference(fam, text, TOOLS)
            pieces = token_pieces(tok, text, DELTA)
            row: dict[str, Any] = {"chars": len(text), "deltas": len(pieces), "utc": utc(),
                                   "load": os.getloadavg()[0]}
            slot = slot_all.setdefault(fam, {})
            slot[f"{kb}KB"] = row
            if past(opts.until):
                row["skipped"] = "time"
                continue
            row["ours"] = best(forked(partial(ours_parser_timed, fam, pieces, want, opts.repeats),
                                      opts.budget), opts.budget)
            before = slot.get(f"{kb // 4}KB", {}).get("vllm")
            if kb > 80 and isinstance(before, dict) and before.get("killed"):
                row["vllm"] = {"skipped": f"past {opts.own_budget:.0f} s at {kb // 4} KB"}
            else:
                # a run under a second is repeated (the fastest kept); a longer one is run once
                first = forked(partial(vllm_parser_timed, model, name, pieces, want, 1), opts.own_budget)
                if first.lines and float(first.lines[0]["s"]) < 1.0 and opts.repeats > 1:
                    more = forked(partial(vllm_parser_timed, model, name, pieces, want, opts.repeats - 1),
                                  opts.own_budget)
                    first.lines.extend(more.lines)
                row["vllm"] = best(first, opts.own_budget)
            print("parsers", fam, kb, json.dumps(row), flush=True)
            if opts.json:  # kept as it grows: a run stopped early still has its rows
                opts.json.write_text(json.dumps(report, indent=2), encoding="utf-8")


# ------------------------------------------------------------------------------------- tables


def secs(cell: Any) -> str:
    if not isinstance(cell, dict):
        return "—"
    if "skipped" in cell:
        return "skipped"
    if cell.get("killed"):
        return f"> {cell['s']:.0f}"
    if cell.get("crashed"):
        return "raised"
    mark = "" if cell.get("right", True) is not False else " ✗"
    return f"{cell['s']:.2f}{mark}"


def ratio(theirs: Any, ours: Any) -> float | None:
    """Theirs ÷ ours; none where either has no time or theirs did not deliver the call (a parser
    that gives up early is fast for nothing). Theirs killed past the budget: at least this much."""
    if not isinstance(theirs, dict) or not isinstance(ours, dict) or "s" not in theirs or "s" not in ours:
        return None
    if ours.get("killed") or ours.get("crashed") or theirs.get("crashed") or theirs.get("right") is False:
        return None
    return float(theirs["s"]) / float(ours["s"])


def render(paths: list[Path]) -> None:
    data: dict[str, Any] = {}
    for path in paths:
        d = json.loads(path.read_text(encoding="utf-8"))
        for key, value in d.items():
            if key in ("vectors", "names") and isinstance(data.get(key), dict):
                for fam, row in value.items():  # a later run adds engines to a family's row
                    data[key].setdefault(fam, {}).update(
                        {k: v for k, v in row.items() if v is not None or k not in data[key][fam]})
            elif key == "speed" and isinstance(data.get(key), dict):
                for eng, fams in value.items():  # a later run adds families and sizes
                    for fam, sizes in fams.items():
                        data[key].setdefault(eng, {}).setdefault(fam, {}).update(sizes)
            elif key == "parsers" and isinstance(data.get(key), dict):
                for fam, sizes in value.items():  # a later run adds families and sizes
                    data[key].setdefault(fam, {}).update(sizes)
            elif isinstance(value, dict) and isinstance(data.get(key), dict):
                data[key].update(value)
            else:
                data.setdefault(key, value)
    if data.get("parsers"):
        render_parsers(data)
        if not data.get("vectors") and not data.get("speed"):
            return
        print()
    vec = data.get("vectors", {})
    print("| family | vLLM name | SGLang name | examples | vLLM's own | `sseguard-` in vLLM "
          "| SGLang's own | `sseguard-` in SGLang |")
    print("|---|---|---|---|---|---|---|---|")
    total = {"n": 0}
    for fam, row in vec.items():
        def cell(key: str, r: dict[str, Any] = row) -> str:
            c = r.get(key)
            if not isinstance(c, dict):
                return "—"
            if key.endswith("_own") and isinstance(r.get(key + "_think"), dict):
                think = r[key + "_think"]
                return f"{plain(key, c, r)}; {think['right']} with its reasoning parser"
            return plain(key, c, r)

        def plain(key: str, c: dict[str, Any], r: dict[str, Any] = row) -> str:
            if c["wrong"].get("not run (crash)") == r["n"]:
                return "not run (raised)"
            if r.get(key.split("_")[0] + "_name"):  # totals over the families the engine names
                total[key] = total.get(key, 0) + c["right"]
            lost = c["wrong"].get("timed out", 0)
            space = c["wrong"].get("whitespace only", 0)
            return (f"{c['right']}" + (f" (+{space} whitespace only)" if space else "")
                    + (f" ({lost} timed out)" if lost else ""))
        for eng in ("vllm", "sglang"):
            if row.get(f"{eng}_name"):
                total[f"{eng}_n"] = total.get(f"{eng}_n", 0) + row["n"]
        print(f"| {fam} | {row.get('vllm_name') or '—'} | {row.get('sglang_name') or '—'} | {row['n']} | "
              f"{cell('vllm_own')} | {cell('vllm_sseguard')} | {cell('sglang_own')} | "
              f"{cell('sglang_sseguard')} |")
    print(f"| **all** | | | vLLM {total.get('vllm_n', 0)}, SGLang {total.get('sglang_n', 0)} | "
          f"**{total.get('vllm_own', 0)}** | **{total.get('vllm_sseguard', 0)}** | "
          f"**{total.get('sglang_own', 0)}** | **{total.get('sglang_sseguard', 0)}** |")
    print()
    print("Wrong answers by class (first difference found):")
    print()
    print("| family | vLLM's own | SGLang's own |")
    print("|---|---|---|")
    for fam, row in vec.items():
        parts = []
        for key in ("vllm_own", "sglang_own"):
            c = row.get(key)
            parts.append("—" if not isinstance(c, dict) else
                         (", ".join(f"{k} {n}" for k, n in sorted(c["wrong"].items(), key=lambda kv: -kv[1]))
                          or "none"))
        print(f"| {fam} | {parts[0]} | {parts[1]} |")
    for eng, label in (("vllm", "vLLM"), ("sglang", "SGLang")):
        speed = data.get("speed", {}).get(eng, {})
        if not speed:
            continue
        print()
        cols = ["engine alone", f"{label}'s own", "ours hold", "ours -stream"] if eng == "vllm" else \
            [f"{label}'s own", "ours hold", "ours -stream"]
        keys = ["engine", "own", "hold", "stream"] if eng == "vllm" else ["own", "hold", "stream"]
        print(f"| family | {label} name | size | deltas | load | " + " | ".join(cols)
              + " | own ÷ hold | own ÷ stream |")
        print("|---|---|---|---|---|" + "---|" * (len(cols) + 2))
        for fam, sizes in speed.items():
            for size, row in sizes.items():
                if row.get("skipped"):
                    print(f"| {fam} | {data['names'][fam][eng]} | {size} | — | — | " + " | ".join(
                        "not run (time)" for _ in cols) + " | | |")
                    continue
                r1, r2 = ratio(row.get("own"), row.get("hold")), ratio(row.get("own"), row.get("stream"))
                own = row.get("own", {})
                at_least = "≥ " if isinstance(own, dict) and own.get("killed") else ""
                print(f"| {fam} | {data['names'][fam][eng]} | {size} | {row['deltas']:,} "
                      + f"| {row['load']:.1f} | " + " | ".join(secs(row.get(k)) for k in keys)
                      + f" | {'' if r1 is None else f'{at_least}{r1:.1f}×'} "
                      + f"| {'' if r2 is None else f'{at_least}{r2:.1f}×'} |")


def render_parsers(data: dict[str, Any]) -> None:
    """The parser-level table: per family, ours and vLLM's tool parser at each size, the ratio,
    80 → 320 KB growth of each, and whether vLLM's parser delivered the same call."""
    found = sorted({int(k[:-2]) for sizes in data["parsers"].values() for k in sizes})
    lo, hi = f"{found[0]}KB", f"{found[-1]}KB"  # the smallest and the largest size measured
    a, b = f"{found[0]} KB", f"{found[-1]} KB"
    if lo == hi:  # one size: no growth columns
        print(f"| family | vLLM parser | deltas | load | {a} ours | {a} vLLM's | vLLM ÷ ours "
              "| vLLM `step` loop | same call |")
        print("|---|---|---|---|---|---|---|---|---|")
    else:
        print(f"| family | vLLM parser | deltas {a} / {b} | load | {a} ours | {a} vLLM's | vLLM ÷ ours "
          f"| {b} ours | {b} vLLM's | vLLM ÷ ours | growth ours | growth vLLM's "
              f"| vLLM `step` loop {a} / {b} | same call |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")

    def cell(c: Any) -> str:
        if not isinstance(c, dict):
            return "—"
        if "skipped" in c:
            return "not run"
        if c.get("killed"):
            return f"> {c['s']:.0f}"
        if c.get("crashed"):
            return "raised"
        return f"{c['s']:.3f}" if c["s"] < 1 else f"{c['s']:.2f}"

    def times(theirs: Any, ours: Any) -> str:
        if not isinstance(theirs, dict) or not isinstance(ours, dict) or "s" not in theirs \
                or "s" not in ours or theirs.get("crashed") or ours.get("killed"):
            return ""
        r = float(theirs["s"]) / float(ours["s"])
        return f"{'≥ ' if theirs.get('killed') else ''}{r:,.0f}×" if r >= 100 else \
            f"{'≥ ' if theirs.get('killed') else ''}{r:.1f}×"

    for fam, sizes in data["parsers"].items():
        small, large = sizes.get(lo, {}), (sizes.get(hi, {}) if hi != lo else {})
        o1, o4, v1, v4 = small.get("ours"), large.get("ours"), small.get("vllm"), large.get("vllm")
        same = []
        for c in (v1, v4):
            if isinstance(c, dict) and "right" in c:
                same.append("yes" if c["right"] else "✗ no")
        steps = " / ".join(f"{c['step_s']:.2f}" if isinstance(c, dict) and "step_s" in c else "—"
                           for c in (v1, v4))
        loads = "–".join(f"{r['load']:.1f}" for r in (small, large) if "load" in r)
        deltas = " / ".join(f"{r['deltas']:,}" for r in (small, large) if "deltas" in r)
        if lo == hi:
            print(f"| {fam} | {data['names'][fam]['vllm']} | {deltas} | {loads} | {cell(o1)} | {cell(v1)} "
                  f"| {times(v1, o1)} | {steps.split(' / ')[0]} | {' / '.join(same) or '—'} |")
            continue
        print(f"| {fam} | {data['names'][fam]['vllm']} | {deltas} | {loads} | {cell(o1)} | {cell(v1)} "
              f"| {times(v1, o1)} | {cell(o4)} | {cell(v4)} | {times(v4, o4)} | {times(o4, o1)} "
              f"| {times(v4, v1) if not (isinstance(v1, dict) and v1.get('killed')) else ''} "
              f"| {steps} | {' / '.join(same) or '—'} |")


# --------------------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--phase", choices=("vectors", "speed", "parsers"), default="vectors")
    ap.add_argument("--engines", default="vllm,sglang")
    ap.add_argument("--families", default="", help="default: every family an engine has a parser for")
    ap.add_argument("--vectors", type=Path, help="a harvested vectors file (default: harvest now)")
    ap.add_argument("--with-reasoning", action="store_true",
                    help="vectors: only the engines' own tool parsers, each with the engine's reasoning "
                         "parser of the same name (for families whose markup carries reasoning)")
    ap.add_argument("--sizes", default="80,320")
    ap.add_argument("--engine-families", default="",
                    help="families whose engine-alone request is timed (default: every one); it costs "
                         "the same for every family of a similar number of deltas")
    ap.add_argument("--families-320", default="", help="families timed above 80 KB (default: every one)")
    ap.add_argument("--budget", type=float, default=150.0,
                    help="seconds a request (vectors: one example) may take before its child is killed")
    ap.add_argument("--bare", action="store_true",
                    help="speed: the long call alone at the start of the answer, no sentence before it")
    ap.add_argument("--own-budget", type=float, default=40.0,
                    help="seconds the engines' own parsers get for one long request (speed phase)")
    ap.add_argument("--repeats", type=int, default=3,
                    help="parsers: runs per parser, the fastest kept (vLLM's: only where one is under 1 s)")
    ap.add_argument("--until", help="UTC HH:MM after which no new row starts")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--render", nargs="+", type=Path, help="print the Markdown tables of these reports")
    opts = ap.parse_args()
    if opts.render:
        render(opts.render)
        return
    opts.engine_list = [e for e in opts.engines.split(",") if e]
    registered = {"vllm": vllm_registered() if "vllm" in opts.engine_list else set(),
                  "sglang": sglang_registered() if "sglang" in opts.engine_list else set()}
    if "sglang" in opts.engine_list:
        import support.engines_sglang  # noqa: F401  (loads the plugins before any child forks)
    names = {fam: {eng: engine_name(fam, registered[eng]) for eng in opts.engine_list} for fam in families()}
    thinking = {"vllm": vllm_reasoning_registered() if "vllm" in opts.engine_list else set(),
                "sglang": sglang_reasoning_registered() if "sglang" in opts.engine_list else set()}
    reasoning = {fam: {eng: engine_name(fam, thinking[eng]) for eng in opts.engine_list}
                 for fam in families()}
    opts.family_list = [f for f in (opts.families.split(",") if opts.families else families())
                        if f and any(names[f].values())]
    tmp = Path(tempfile.mkdtemp(prefix="bench-engines-"))
    model = build_model_dir(tmp / "model")
    if "vllm" in opts.engine_list:
        vllm_warm(model)
    report: dict[str, Any] = {
        "utc_start": utc(), "machine": f"{platform.machine()} {os.cpu_count()} cores",
        "load_start": os.getloadavg(), "deltas": f"whole tokens, >= {DELTA} chars", "budget": opts.budget,
        "own_budget": opts.own_budget, "bare": getattr(opts, "bare", False),
        "names": names, "reasoning": reasoning, "vectors": {}, "speed": {}}
    if opts.phase == "vectors":
        vectors_phase(opts, model, tmp, report)
    elif opts.phase == "parsers":
        parsers_phase(opts, model, report)
    else:
        speed_phase(opts, model, report)
    report["utc_end"], report["load_end"] = utc(), os.getloadavg()
    if opts.json:
        opts.json.write_text(json.dumps(report, indent=2), encoding="utf-8")
    print(json.dumps({k: report[k] for k in ("utc_start", "utc_end", "load_start", "load_end")}))


if __name__ == "__main__":
    main()
