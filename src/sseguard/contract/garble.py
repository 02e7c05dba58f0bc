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
- ``repeated_token``: one word repeated ``REPEAT_BOUND`` times in a row ("the the the …"), the shape of
  a decode step that re-reads the same cached position. Only words with a letter count: a table of
  zeros or a rule of dashes is legitimate text.
- ``reasoning_after_answer``: reasoning text after the answer text began on the same stream (the
  reasoning channel written after its close), which no engine does on purpose.

``GarbleScanner`` is sans-IO and linear: each delta is looked at once, and only the word cut at a
delta's end is carried to the next one, so any chunking of the same text gives the same findings.
One finding per signal and stream place is evidence enough. The engine (``contract._base``) calls it
beside the markup scanner for every text delta of every protocol; these findings are warnings under
the default policies and failures under ``--policy strict-text`` (``sseguard.policy``).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from sseguard.verdict import FindingKind

#: Consecutive repeats of one word that no healthy answer reaches ("very very very" is three).
REPEAT_BOUND = 16
#: The text fields (the ``where`` of a text delta) that carry reasoning, in every protocol's words.
REASONING_PLACES = frozenset({"reasoning", "thinking", "thought"})
#: The finding kinds this module makes: the ``strict-text`` policy fails them, the others tolerate.
GARBLE_KINDS = frozenset({FindingKind.INVALID_TEXT, FindingKind.CONTROL_CHARACTER,
                          FindingKind.REPEATED_TOKEN, FindingKind.REASONING_AFTER_ANSWER})

# Tab, LF and CR are whitespace; every other C0 control, DEL and the C1 controls are not text.
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_LETTER = re.compile(r"[^\W\d_]")

#: ``(kind, detail, index, where)``: what the scanner found, and where.
Report = Callable[[FindingKind, str, int, str], None]


class _Place:
    """What is carried for one (index, field): the word cut at the last delta's end, the last whole
    word and its run, the characters seen, and the signals already reported there."""

    __slots__ = ("carry", "last", "reported", "run", "seen")

    def __init__(self) -> None:
        self.carry = ""
        self.last = ""
        self.run = 0
        self.seen = 0
        self.reported: set[FindingKind] = set()


class GarbleScanner:
    """Feeds on text deltas (``scan(index, where, text)``, the markup scanner's signature).

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
        if not text:
            return
        key = (index, where)
        place = self._places.get(key)
        if place is None:
            place = self._places[key] = _Place()
        owner = index if self._shared else -1
        if where in REASONING_PLACES:
            if owner in self._answered:
                self._once(place, FindingKind.REASONING_AFTER_ANSWER,
                           f"reasoning text at {place.seen} after the answer began", index, where)
        elif not text.isspace():
            self._answered.add(owner)
        reported = place.reported
        found: list[tuple[int, FindingKind, str]] = []
        if FindingKind.INVALID_TEXT not in reported and (at := text.find("\ufffd")) != -1:
            found.append((at, FindingKind.INVALID_TEXT, "U+FFFD"))
        if FindingKind.CONTROL_CHARACTER not in reported and (bad := _CONTROL.search(text)):
            found.append((bad.start(), FindingKind.CONTROL_CHARACTER, repr(bad.group())))
        for at, kind, what in sorted(found):  # (in text order, however the text was split)
            self._once(place, kind, f"{what} at {place.seen + at}", index, where)
        self._words(place, text, index, where)
        place.seen += len(text)

    def _words(self, place: _Place, text: str, index: int, where: str) -> None:
        """Count runs of one word; a word cut at the delta's end is finished by the next delta."""
        words = text.split()
        if place.carry:
            if text[0].isspace():
                words.insert(0, place.carry)
            elif words:
                words[0] = place.carry + words[0]
            else:  # (a delta of whitespace only was handled above: ``text[0].isspace()``)
                words = [place.carry]
            place.carry = ""
        if words and not text[-1].isspace():
            place.carry = words.pop()
        if FindingKind.REPEATED_TOKEN in place.reported:
            return
        last, run = place.last, place.run
        for word in words:
            if word == last:
                run += 1
                if run >= REPEAT_BOUND and _LETTER.search(word):
                    self._once(place, FindingKind.REPEATED_TOKEN,
                               f"{word[:40]!r} {run} times in a row before {place.seen + len(text)}",
                               index, where)
                    return
            else:
                last, run = word, 1
        place.last, place.run = last, run

    def close(self) -> None:
        """The stream ended: a word still carried is whole now."""
        for (index, where), place in self._places.items():
            if place.carry:
                carry, place.carry = place.carry, ""
                self._words(place, carry + " ", index, where)

    def _once(self, place: _Place, kind: FindingKind, detail: str, index: int, where: str) -> None:
        if kind not in place.reported:
            place.reported.add(kind)
            self._report(kind, detail, index, where)
