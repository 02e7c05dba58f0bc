"""Instructions per body and per event of the checkers and parsers, by callgrind: before/after on a busy box.

Wall-clock benchmarks on a shared 2-core machine move ±40 % from run to run; callgrind counts
instructions, which do not depend on what else the machine is doing. Each figure is the difference
between a run that judges the body three times and one that judges it once, halved (for the
``answer`` cases: eleven answers and one, divided by ten), so interpreter start-up, imports and
one-time set-up (the family registry reading entry points) cancel out.

Run (valgrind from Debian's package; each TREE a checkout with its own .venv):
    python bench/bench_instructions.py [--only answer,checker,parser] TREE [TREE …]
e.g. ``git worktree add /tmp/before <commit>`` then ``python bench/bench_instructions.py /tmp/before .``
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

#: One protocol's checker over the bench_checker body of that protocol, fed in 64-byte pieces.
CHECKER = """
import sys
sys.path.insert(0, "bench")
from bench_checker import BODIES
from sseguard.contract import checker_for
api, n = sys.argv[1], int(sys.argv[2])
body = BODIES[api](256 * 1024)
pieces = [body[i:i + 64] for i in range(0, len(body), 64)]
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
import sys
sys.path.insert(0, "bench")
from bench_checker import ANSWER_REQUESTS, ANSWERS, frames_of
from sseguard.contract import checker_for
api, n = sys.argv[1], int(sys.argv[2])
reads = frames_of(ANSWERS[api](100))
request = ANSWER_REQUESTS[api]
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
from sseguard.toolcalls import parser_for
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


def instructions(tree: Path, script: str, arg: str, rounds: int) -> tuple[int, str]:
    """The instructions callgrind counts for one run of ``script`` in ``tree``'s venv, and what the
    script printed (a checker prints the body's event count)."""
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
         str(tree / ".venv/bin/python"), "-c", script, arg, str(rounds)],
        cwd=tree, capture_output=True, text=True, check=True)
    match = re.search(r"Collected : (\d+)", out.stderr)
    if match is None:
        raise SystemExit(f"no callgrind total for {arg} in {tree}:\n{out.stderr[-500:]}")
    return int(match.group(1)), out.stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trees", nargs="+", type=Path, help="checkouts, each with its own .venv")
    ap.add_argument("--only", default="", help="comma-separated kinds to run: answer, checker, parser")
    args = ap.parse_args()
    trees, only = args.trees, set(filter(None, args.only.split(",")))
    print("| what | " + " | ".join(str(t) for t in trees) + " |")
    print("|---|" + "---|" * len(trees))
    for kind, script, arg in CASES:
        if only and kind not in only:
            continue
        cells = []
        for tree in trees:
            contract = tree / "src/sseguard/contract"
            if kind in ("checker", "answer") and not ((contract / f"{arg}.py").exists()
                                                      or (contract / arg).is_dir()):
                cells.append("–")  # a protocol this tree does not have
                continue
            more = ANSWER_ROUNDS if kind == "answer" else 3
            (many, printed), (one, _) = (instructions(tree, script, arg, more),
                                         instructions(tree, script, arg, 1))
            per_body = (many - one) // (more - 1)
            per_event = f", {per_body / int(printed):,.0f} per event" if printed.isdigit() else ""
            cells.append(f"{per_body / 1e6:.1f} M{per_event}")
        print(f"| {kind} {arg} | " + " | ".join(cells) + " |", flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
