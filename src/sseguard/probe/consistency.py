"""The ``consistency`` workload: does the same request give the same answer at low and at high load?

A race in a serving engine's prefix cache corrupts the answers built on cached tokens, and only under
load: markup leaking into ``content`` is the visible part, garbled plain text the rest. With
deterministic sampling (temperature 0, ``top_p`` 1, a fixed ``seed`` where the API has one) an answer
should not depend on how many other streams share the batch. So the workload sends a fixed set of
prompts — half of them one long shared prefix (what a prefix cache serves) and a short question, half
a short question alone (what no cache serves) — first one at a time (the *reference*, at concurrency
1), then at every level of the run, and compares each answer with its prompt's reference: identical,
or diverged at a character (and about which token).

A divergence is a fact, never a failure: a healthy engine whose kernels are not batch-invariant
changes some answers too (the floating-point order of a bigger batch tips one near-tie token, and
the answer goes its own way from there, fluently — to the same alternative every time); a corrupting
one garbles them. So a diverged answer is recorded with what tells the two apart
(``divergence``): which prompt it answered, a digest of its text (the analysis counts a prompt's
distinct answers: repeats of one deterministic prompt are one observation, and a race does not write
the same bytes twice), whether a span of it was overwritten in place (``overwritten``: it disagrees
with the reference, then agrees again at the very same positions — what a decode step reading
another request's cache positions leaves, and what no fluent alternative does by chance), and
whether it carried text that no answer holds (the checker's garble findings, or tool-call markup
leaked into the text: the visible part of the same corruption). ``analyze`` judges from
these (``analyze.consistency``).

The references are written to the run directory (``REFERENCES``), so ``--resume`` and a later run in
the same directory compare with the same answers instead of collecting new ones.

Pure Python, no I/O library but the references file.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sseguard.core._renamed import renamed
from sseguard.core.contract.request import AssistantAnswer, Format, Turn

#: The file in the run directory holding each arm's reference answers.
REFERENCES = "references.json"
#: How many fixed prompts the workload cycles through.
PROMPTS = 16
#: The seed sent where the API has one (any fixed value does; this one is written in ``docs/probe.md``).
SEED = 1234
#: The shared prefix: long enough for a prefix cache to hold it (vLLM and SGLang cache whole blocks
#: of 16 or more tokens), the same for every prompt so that all but the first hit the cache.
_PREFIX = ("You answer questions about a small reference text. Answer in two plain sentences, without "
           "lists or markup.\n\nReference text:\n" + " ".join(
               f"Section {i}: the {w} of the harbour is measured every morning and written in the "
               f"ledger beside the {w} of the previous day." for i, w in enumerate(
                   ("depth", "tide", "salinity", "temperature", "current", "visibility", "wind",
                    "swell"))))
_QUESTIONS = ("What is measured every morning?", "Where are the measurements written?",
              "Which section speaks of the tide?", "How often is the depth measured?",
              "What is compared with the previous day?", "Name two things that are measured.",
              "Which section is the last one?", "What does section 3 measure?",
              "Is the wind measured?", "What is the reference text about?",
              "Which measurement comes first?", "Where is the ledger?",
              "Name the measurement of section 5.", "What is written beside each value?",
              "How many sections are there?", "Summarise the reference text.")
_TOKEN = re.compile(r"\w+|[^\w\s]")


def prompt(i: int) -> str:
    """The ``i``-th fixed prompt's user text. Even prompts are the shared prefix and a question (a
    prefix cache serves all but the first); odd ones the question alone, shorter than one cache block
    (16 tokens in vLLM and SGLang), so no prefix cache serves them: the run holds cached and uncached
    prompts side by side, and the analysis can tell a fault of the cache from one of the load."""
    question = _QUESTIONS[i % PROMPTS]
    return f"{_PREFIX}\n\nQuestion: {question}" if i % 2 == 0 else question


def prompt_body(fmt: Format, i: int) -> dict[str, Any]:
    """The request body of prompt ``i`` in the arm's format (model and settings come later)."""
    return fmt.render("You are a precise assistant.", [Turn("user", prompt(i))], ())


def answer_text(answer: AssistantAnswer | None) -> str | None:
    """What is compared: the text and the tool calls (name and arguments) of an answer."""
    if answer is None:
        return None
    calls = "".join(f"\n<call {c.name} {c.arguments}>" for c in answer.calls)
    return answer.text + calls


def token_position(text: str, at: int) -> int:
    """About how many tokens precede character ``at`` of ``text``: words and punctuation marks
    counted apart (a tokenizer splits finer, never coarser, so this under-counts if anything)."""
    return len(_TOKEN.findall(text, 0, at))


def compare(reference: str, answer: str) -> tuple[str, int | None, int | None]:
    """``("identical", None, None)`` or ``("diverged", character, token)``: where ``answer`` first
    differs from ``reference`` (an answer that stops early, or goes on, differs where one ends)."""
    if answer == reference:
        return "identical", None, None
    n = min(len(answer), len(reference))
    at = next((i for i in range(n) if answer[i] != reference[i]), n)
    return "diverged", at, token_position(reference, at)


#: A span overwritten in place: at least this many characters from its first difference to where
#: the answer agrees with the reference again, position for position, for ``REJOIN_CHARS``.
OVERWRITE_MIN = 8
REJOIN_CHARS = 16


def overwritten(reference: str, answer: str) -> bool:
    """Whether ``answer`` is ``reference`` with a span of ``OVERWRITE_MIN`` characters or more
    overwritten in place: from its first difference, the two disagree that long at least, then agree
    again at the same positions for ``REJOIN_CHARS`` characters (or, two texts of one length, to
    their end, ``OVERWRITE_MIN`` at least: a span near the end of a short answer), or, texts of one
    length, the span from the first difference to the last holds the reference's characters in
    another order (a span shuffled in place, ``OVERWRITE_MIN`` or more). A fluent
    alternative goes its own way after its first different token: its text shifts, and
    position-for-position agreement does not come back (a word swapped for one as long, ``depth``
    for ``swell``, is under the span)."""
    n = min(len(reference), len(answer))
    at = next((i for i in range(n) if answer[i] != reference[i]), n)
    if len(reference) == len(answer) and at < n:
        # Or a span shuffled in place: from the first difference to the last, the answer holds the
        # reference's very characters in another order (no fluent alternative is an anagram).
        last = next(i for i in range(n - 1, at - 1, -1) if answer[i] != reference[i])
        if last - at + 1 >= OVERWRITE_MIN and sorted(answer[at:last + 1]) == sorted(
                reference[at:last + 1]):
            return True
    for b in range(at, n):
        # Agreement again: for REJOIN_CHARS, or (texts of one length) to the end, OVERWRITE_MIN or more.
        run = REJOIN_CHARS if n - b >= REJOIN_CHARS or len(reference) != len(answer) \
            else max(OVERWRITE_MIN, n - b)
        if answer[b] == reference[b] and answer[b:b + run] == reference[b:b + run] \
                and b + run <= n:
            return b - at >= OVERWRITE_MIN
    return False


#: The prefix of the ``consistency`` value of a diverged answer.
DIVERGED = "diverged"


def divergence(prompt: int, reference: str, answer: str, *, nontext: bool) -> str:
    """The ``consistency`` value of a diverged answer: ``diverged:<prompt>:<digest>`` and the flags
    ``:overwritten`` (``overwritten``) and ``:nontext`` (the stream carried garble findings or leaked
    markup)."""
    digest = hashlib.blake2b(answer.encode(), digest_size=6).hexdigest()
    flags = (":overwritten" if overwritten(reference, answer) else "") + (
        ":nontext" if nontext else "")
    return f"{DIVERGED}:{prompt % PROMPTS}:{digest}{flags}"


def is_diverged(value: str | None) -> bool:
    """Whether a record's ``consistency`` value is a divergence (either form)."""
    return value is not None and (value == DIVERGED or value.startswith(DIVERGED + ":"))


@dataclass
class References:
    """Each arm's reference answer per prompt, kept in the run directory."""

    path: Path
    answers: dict[str, dict[str, str]] = field(default_factory=dict)  # arm → prompt index → text

    @classmethod
    def load(cls, out: str | Path) -> References:
        path = Path(out) / REFERENCES
        answers: dict[str, dict[str, str]] = {}
        if path.is_file():
            doc = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(doc, dict):
                answers = {str(arm): {str(k): str(v) for k, v in got.items()}
                           for arm, got in doc.items() if isinstance(got, dict)}
        return cls(path, answers)

    def get(self, arm: str, i: int) -> str | None:
        return self.answers.get(arm, {}).get(str(i % PROMPTS))

    def missing(self, arm: str) -> list[int]:
        """The prompts of ``arm`` without a reference yet."""
        have = self.answers.get(arm, {})
        return [i for i in range(PROMPTS) if str(i) not in have]

    def put(self, arm: str, i: int, text: str) -> None:
        self.answers.setdefault(arm, {})[str(i % PROMPTS)] = text

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.answers, ensure_ascii=False, indent=1, sort_keys=True),
                       encoding="utf-8")
        tmp.replace(self.path)

#: Old names → new (docs/design/vocabulary.md "Names").
__getattr__ = renamed(__name__, {"render": "prompt_body"})
