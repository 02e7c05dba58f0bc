"""The ``garbled`` fault on a relayed answer: a span of its text overwritten, the rest untouched.

What a prefix-cache race does to an answer (issue 39): a decode step reads positions another request
wrote, so a span of the answer comes out as another stream's text, or as no text at all, and the
stream around it stays perfect. ``chaos --upstream`` reproduces that on a real engine's answer: the
characters from ``after`` to ``after + span`` are replaced, position by position, with the text of
another stream the same chaos process relayed (the *donor*), or, without one, scrambled (each letter
shifted along the alphabet by a seeded amount: no word survives, case and punctuation do).

Position by position, so every delta keeps its length (usage, chunking and timing stay those of the
healthy stream), and a whole copy of the text (Responses' ``output_text.done``, its
``response.completed``) is garbled exactly as the deltas were: a client folding the deltas and one
reading the final object see the same corrupted answer. The rest of the answer after the span is
the engine's own: a garbled answer rejoins its healthy self, which no fluent alternative does by
chance (``probe.consistency`` reads that).
"""

from __future__ import annotations

import random

#: Characters of the answer left intact before the span, and the span's length, by default.
GARBLE_AFTER = 8
GARBLE_SPAN = 24


class Garbler:
    """Overwrites the characters ``after`` to ``after + span`` of one answer's text."""

    def __init__(self, seed: int, *, after: int = GARBLE_AFTER, span: int = GARBLE_SPAN,
                 donor: str = "") -> None:
        self.after = after
        self.span = span
        self.donor = donor
        self.shift = random.Random(seed).randint(3, 22)

    def _char(self, pos: int, char: str) -> str:
        i = pos - self.after
        if i < len(self.donor) and self.donor[i] != char:
            return self.donor[i]
        if "a" <= char <= "z":
            return chr((ord(char) - 97 + self.shift) % 26 + 97)
        if "A" <= char <= "Z":
            return chr((ord(char) - 65 + self.shift) % 26 + 65)
        return char

    def piece(self, text: str, start: int) -> str:
        """``text``, which begins at character ``start`` of the answer, with the span overwritten."""
        lo, hi = max(self.after, start), min(self.after + self.span, start + len(text))
        if lo >= hi:
            return text
        middle = "".join(self._char(pos, text[pos - start]) for pos in range(lo, hi))
        return text[:lo - start] + middle + text[hi - start:]
