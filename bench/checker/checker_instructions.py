"""Instructions per body and per event of the checkers and parsers, by callgrind: before/after on a busy box.

Wall-clock benchmarks on a shared 2-core machine move ±40 % from run to run; callgrind counts
instructions, which do not depend on what else the machine is doing. Each figure is the difference
between a run that judges the body three times and one that judges it once, halved (for the
``answer`` cases: eleven answers and one, divided by ten), so interpreter start-up, imports and
one-time set-up (the family registry reading entry points) cancel out.

Run (valgrind from Debian's package; each TREE a checkout with its own .venv):
    python -m bench.checker.checker_instructions [--only answer,checker,parser] TREE [TREE …]
e.g. ``git worktree add /tmp/before <commit>``, then
``python -m bench.checker.checker_instructions /tmp/before .``; ``--python`` runs every tree with one
interpreter, importing ``sseguard`` from ``TREE/src``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from bench.checker.bench_checker import ANSWER_REQUESTS, ANSWERS, BODIES, frames_of
from bench.harness import callgrind_total, machine

#: One protocol's checker over the bench_checker body of that protocol, fed in 64-byte pieces (the
#: pieces read from the fixture this script writes, so that every tree judges the same bytes).
CHECKER = """
import json, sys
from sseguard.core.contract import checker_for
api, n = sys.argv[1], int(sys.argv[2])
pieces = [bytes.fromhex(h) for h in json.load(open(sys.argv[3]))["reads"]]
for _ in range(n):
    c = checker_for(api)
    for p in pieces:
        c.feed(p)
    events = c.close().chunks
print(events)
"""

#: One protocol's checker over the answers the probe reads (``bench_checker.ANSWERS``: ~100 text
#: deltas of two or three tokens, a tool call in fragments, usage, the terminal), one read per event,
#: a new checker per answer as the probe makes one per request. Prints the events of one answer.
ANSWER = """
import json, sys
from sseguard.core.contract import checker_for
api, n = sys.argv[1], int(sys.argv[2])
fixture = json.load(open(sys.argv[3]))
reads, request = [bytes.fromhex(h) for h in fixture["reads"]], fixture["request"]
for _ in range(n):
    c = checker_for(api, request)
    for r in reads:
        c.feed(r)
    verdict = c.close()
    assert verdict.ending == "complete" and not verdict.findings, verdict
print(len(reads))
"""

#: One family's parser over a 39 KB argument, fed in 4-character pieces.
PARSER = r'''
import sys
from sseguard.core.toolcalls import parser_for
fam, n = sys.argv[1], int(sys.argv[2])
value = "x = 1; y = 2\n" * 3000
escaped = value.replace("\n", "\\n")
text = {
    "dsml-v32": "Sure.\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"write\">\n<｜DSML｜parameter "
                "name=\"content\" string=\"true\">" + value + "</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
                "</｜DSML｜function_calls>",
    "hermes": "Sure.\n<tool_call>\n{\"name\": \"write\", \"arguments\": {\"content\": \"" + escaped
              + "\"}}\n</tool_call>",
    "harmony": "<|channel|>commentary to=functions.write <|constrain|>json<|message|>{\"content\":\""
               + escaped + "\"}<|call|>",
}[fam]
pieces = [text[i:i + 4] for i in range(0, len(text), 4)]
for _ in range(n):
    p = parser_for(fam)
    for piece in pieces:
        p.feed(piece)
    p.close()
'''

CHECKERS = ("chat", "responses", "messages", "gemini")
#: Answers judged in the long run of the ``answer`` cases (one answer is only ~25 KB).
ANSWER_ROUNDS = 11
CASES = [("answer", ANSWER, name) for name in CHECKERS] + [
    ("checker", CHECKER, name) for name in CHECKERS] + [
    ("parser", PARSER, name) for name in ("dsml-v32", "hermes", "harmony")]


def fixture(kind: str, name: str, directory: Path) -> Path:
    """The reads (and request) one case feeds, written once by this tree's ``bench_checker`` for every
    tree measured: a tree older than the bodies it is measured with still judges the same bytes."""
    path = directory / f"{kind}-{name}.json"
    if kind == "checker":
        body = BODIES[name](256 * 1024)
        data: dict[str, object] = {"reads": [body[i:i + 64].hex() for i in range(0, len(body), 64)]}
    elif kind == "answer":
        data = {"reads": [read.hex() for read in frames_of(ANSWERS[name](100))],
                "request": ANSWER_REQUESTS[name]}
    else:
        data = {}
    path.write_text(json.dumps(data))
    return path


def instructions(tree: Path, script: str, arg: str, rounds: int, data: Path,
                 python: str | None) -> tuple[int, str]:
    """The instructions callgrind counts for one run of ``script`` in ``tree``'s venv (or ``python``
    importing ``sseguard`` from ``tree/src``), and what the script printed (a checker prints the
    body's event count)."""
    command = [python or str(tree / ".venv/bin/python"), "-c", script, arg, str(rounds), str(data)]
    env = None if python is None else {**os.environ, "PYTHONPATH": str(tree.resolve() / "src")}
    return callgrind_total(command, cwd=tree, env=env)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trees", nargs="+", type=Path, help="checkouts, each with its own .venv")
    ap.add_argument("--only", default="", help="comma-separated kinds to run: answer, checker, parser")
    ap.add_argument("--python", help="one interpreter for every tree, importing sseguard from TREE/src "
                    "(default: each TREE's own .venv/bin/python)")
    args = ap.parse_args()
    trees, only = args.trees, set(filter(None, args.only.split(",")))
    print(machine())
    with tempfile.TemporaryDirectory() as tmp:
        table(trees, only, Path(tmp), args.python)
    sys.exit(0)


def table(trees: list[Path], only: set[str], tmp: Path, python: str | None) -> None:
    """One row a case, one column a tree, printed as each row is done."""
    print("| what | " + " | ".join(str(t) for t in trees) + " |")
    print("|---|" + "---|" * len(trees))
    for kind, script, arg in CASES:
        if only and kind not in only:
            continue
        cells = []
        data = fixture(kind, arg, tmp)
        for tree in trees:
            contract = tree / "src/sseguard/core/contract"
            if kind in ("checker", "answer") and not ((contract / f"{arg}.py").exists()
                                                      or (contract / arg).is_dir()):
                cells.append("–")  # a protocol this tree does not have
                continue
            more = ANSWER_ROUNDS if kind == "answer" else 3
            (many, printed), (one, _) = (instructions(tree, script, arg, more, data, python),
                                         instructions(tree, script, arg, 1, data, python))
            per_body = (many - one) // (more - 1)
            per_event = f", {per_body / int(printed):,.0f} per event" if printed.isdigit() else ""
            cells.append(f"{per_body / 1e6:.1f} M{per_event}")
        print(f"| {kind} {arg} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
