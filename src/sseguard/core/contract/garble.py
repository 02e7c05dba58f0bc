"""Cheap signals of garbled text: corruption that leaves no markup behind.

The incident sseguard was built for ended in the serving engine's KV cache: a race that corrupted
answers built on cached prefixes. Markup leaking into ``content`` was only the visible part of that
damage; the same race garbles plain text, where no tool-call checker looks. Four signals cost almost
nothing per text delta and are never seen in a healthy answer:

- ``invalid_text``: U+FFFD, the replacement character. Bytes that are not UTF-8 decode to it (the SSE
  decoder replaces them), and a server that mis-detokenized a split multi-byte character sends it
  itself. A model has no reason to write it.
- ``control_character``: a C0/C1 control character or DEL other than tab, line feed and carriage
  return. Tokenizers do not produce them from natural text; a buffer read at the wrong offset does.
- ``repeated_token``: one token (a text delta, or a word within a delta of many) repeated
  ``REPEAT_BOUND`` times in a row ("the the the …"), the shape of a decode step that re-reads the same
  cached position. Only tokens with a letter count: a table of zeros or a rule of dashes is text.
- ``reasoning_after_answer``: reasoning text after the answer text began on the same stream (the
  reasoning channel written after its close), which no engine does on purpose.

``GarbleScanner`` is sans-IO and linear: each delta is looked at once, and only the last delta is
carried, so any chunking of the body's bytes gives the same findings. One finding per signal and
stream place is evidence enough. The engine (``contract._base``) calls it
beside the markup scanner for every text delta of every protocol; these findings are warnings under
the default policies and failures under ``--policy strict-text`` (``sseguard.core.policy``).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from sseguard.core.verdict import GARBLE_KINDS, FindingKind

__all__ = ["GARBLE_KINDS", "REASONING_PLACES", "REPEAT_BOUND", "GarbleScanner"]

#: Consecutive repeats of one word that no healthy answer reaches ("very very very" is three).
REPEAT_BOUND = 16
#: The text fields (the ``where`` of a text delta) that carry reasoning, in every protocol's words.
REASONING_PLACES = frozenset({"reasoning", "thinking", "thought"})

# Tab, LF and CR are whitespace; every other C0 control, DEL and the C1 controls are not text.
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_BAD = re.compile("[\ufffd\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_LETTER = re.compile(r"[^\W\d_]")

#: ``(kind, detail, index, where)``: what the scanner found, and where.
Report = Callable[[FindingKind, str, int, str], None]


class _Place:
    """What is carried for one (index, field): the last delta and how often it came in a row, the
    characters seen, whether it is reasoning, and the signals already reported there."""

    __slots__ = ("answered", "last", "owner", "reasoning", "reported", "run", "seen")

    def __init__(self, reasoning: bool, owner: int) -> None:
        self.last = ""
        self.run = 0
        self.seen = 0
        self.reasoning = reasoning
        self.owner = owner
        self.answered = False  # answer text began here (told to the scanner once)
        self.reported: set[FindingKind] = set()


class GarbleScanner:
    """Feeds on text deltas (``scan(index, where, text)``, the markup scanner's signature).

    A *token* here is a text delta, as servers stream one token per delta: a run of one token is the
    same delta ``REPEAT_BOUND`` times in a row; a delta that carries many words at once (a server that
    batches its deltas) is also looked into for a run of one word. The byte chunking of the body never
    changes the deltas, so it never changes the findings. The common delta costs one dictionary
    lookup, one regular-expression search and one comparison (the checker's budget is a few µs per
    event).

    ``shared_index``: whether a stream's reasoning and answer share one index (a chat choice, a
    Gemini candidate) or get their own (Responses items, Messages blocks): then reasoning after an
    answer is judged over the whole stream.
    """

    __slots__ = ("_answered", "_places", "_report", "_shared")

    def __init__(self, report: Report, *, shared_index: bool = True) -> None:
        self._report = report
        self._shared = shared_index
        self._places: dict[tuple[int, str], _Place] = {}
        self._answered: set[int] = set()  # indexes (or -1: the stream) whose answer text began

    def scan(self, index: int, where: str, text: str) -> None:
        """Look at one text delta of field ``where`` of stream place ``index``."""
        place = self._places.get((index, where))
        if place is None:
            if not text:
                return
            place = self._places[(index, where)] = _Place(where in REASONING_PLACES,
                                                          index if self._shared else -1)
        if place.reasoning:
            if text and place.owner in self._answered:
                self._once(place, FindingKind.REASONING_AFTER_ANSWER,
                           f"reasoning text at {place.seen} after the answer began", index, where)
        elif not place.answered and text and not text.isspace():
            place.answered = True
            self._answered.add(place.owner)
        if _BAD.search(text) is not None:
            self._bad(place, text, index, where)
        if text == place.last:
            place.run += 1
            if place.run == REPEAT_BOUND and _LETTER.search(text):
                self._once(place, FindingKind.REPEATED_TOKEN,
                           f"{text[:40]!r} {REPEAT_BOUND} times in a row before "
                           f"{place.seen + len(text)}", index, where)
        else:
            place.last = text
            place.run = 1
            if text.count(" ") >= REPEAT_BOUND:
                self._words(place, text, index, where)
        place.seen += len(text)

    def _bad(self, place: _Place, text: str, index: int, where: str) -> None:
        """U+FFFD and control characters, reported in text order (one finding per kind and place)."""
        found: list[tuple[int, FindingKind, str]] = []
        if (at := text.find("\ufffd")) != -1:
            found.append((at, FindingKind.INVALID_TEXT, "U+FFFD"))
        if bad := _CONTROL.search(text):
            found.append((bad.start(), FindingKind.CONTROL_CHARACTER, repr(bad.group())))
        for at, kind, what in sorted(found):
            self._once(place, kind, f"{what} at {place.seen + at}", index, where)

    def _words(self, place: _Place, text: str, index: int, where: str) -> None:
        """A delta of many words: a run of one word within it."""
        last, run = "", 0
        for word in text.split():
            if word == last:
                run += 1
                if run == REPEAT_BOUND and _LETTER.search(word):
                    self._once(place, FindingKind.REPEATED_TOKEN,
                               f"{word[:40]!r} {REPEAT_BOUND} times in a row in a delta at "
                               f"{place.seen}", index, where)
                    return
            else:
                last, run = word, 1

    def close(self) -> None:
        """The stream ended (nothing is carried between deltas: kept for the engine's symmetry)."""

    def _once(self, place: _Place, kind: FindingKind, detail: str, index: int, where: str) -> None:
        if kind not in place.reported:
            place.reported.add(kind)
            self._report(kind, detail, index, where)
