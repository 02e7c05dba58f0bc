"""Marker literals: finding them, holding back a suffix that could still become one, and what a
partial one means at end of stream."""

from __future__ import annotations

import re

from sseguard.core.toolcalls.grammars.strict_json import ASCII_WS

#: At end of stream a held-back marker prefix this long or longer is an unterminated opener
#: (decision 1.7); a lone ``<`` is too common in prose and code to mean anything.
MIN_PARTIAL = 2

#: A tag with no ``>`` after this many characters is malformed: names are short, and holding an
#: endless "tag" back would hide the text after it for ever.
TAG_CAP = 4096

_NONWS = re.compile(r"\S")
_NOT_ASCII_WS = re.compile(f"[^{re.escape(ASCII_WS)}]")


def first_non_ws(data: str, pos: int, end: int) -> int:
    """Index of the first non-whitespace character in ``data[pos:end]``, or -1."""
    m = _NONWS.search(data, pos, end)
    return m.start() if m else -1


class Markers:
    """A family's marker literals, and the property of their shape that the hot paths read once.

    ``leads`` are the characters a marker can start with (``<`` for every built-in family). When there
    is one, and no literal holds it anywhere but at its start (``simple``), holding back is cheap: a
    suffix that could still become a marker starts at the last lead of the final few characters, so
    one ``rfind`` finds it. Other shapes (a plugin's ``<<call>>``, or markers with several leads) are
    checked at each lead of those final characters: still bounded by the longest marker.
    """

    def __init__(self, literals: tuple[str, ...]) -> None:
        if not literals or not all(literals):
            raise ValueError("markers must be non-empty strings")
        self.literals = literals
        ordered = sorted(literals, key=len, reverse=True)
        self._re = re.compile("|".join(re.escape(lit) for lit in ordered))
        self._window = max(map(len, literals)) - 1
        self.leads = "".join(sorted({lit[0] for lit in literals}))
        #: The one character every marker starts with ("" when they start with several).
        self.lead = self.leads if len(self.leads) == 1 else ""
        self.simple = bool(self.lead) and all(lit.count(self.lead) == 1 for lit in literals)
        # For the other shapes: every proper prefix of a literal, and where a lead stands, so that
        # holding back tests only the leads of the final characters, each with one set lookup
        # (with "f" and "[" among the leads, prose has several in every window).
        self._prefixes = frozenset(lit[:k] for lit in literals for k in range(1, len(lit) + 1))
        self._lead_re = re.compile(f"[{re.escape(self.leads)}]")

    def find(self, data: str, pos: int) -> tuple[int, str]:
        """The first complete marker at or after ``pos``: (start, literal), or (-1, "")."""
        m = self._re.search(data, pos)
        return (m.start(), m.group()) if m else (-1, "")

    def match(self, data: str, pos: int) -> str:
        """The complete marker starting exactly at ``pos``, or ""."""
        m = self._re.match(data, pos)
        return m.group() if m else ""

    def hold(self, data: str, pos: int) -> int:
        """Where the suffix that could still become a marker starts (``len(data)`` if none)."""
        n = len(data)
        if self.simple:
            j = data.rfind(self.lead, max(pos, n - self._window))
            if j != -1:
                tail = data[j:]
                for lit in self.literals:
                    if lit.startswith(tail):
                        return j
            return n
        start = n - self._window
        if start < pos:
            start = pos
        prefixes = self._prefixes
        for m in self._lead_re.finditer(data, start, n):
            j = m.start()
            if data[j:] in prefixes:
                return j
        return n


def split_partial_opener(rest: str, separator: str, lead: str = "<") -> tuple[str, str]:
    """Held-back content at end of stream → (visible text, unterminated raw).

    A marker prefix of ``MIN_PARTIAL`` characters or more (from the first ``lead``, the character the
    family's markers start with) is an opener cut off by the end of the stream (decision 1.7), and the
    separator right before it belongs to it, as it would to a whole opener.
    """
    j = rest.find(lead)
    if j == -1 or len(rest) - j < MIN_PARTIAL:
        return rest, ""
    head = rest[:j]
    if separator and head.endswith(separator):
        return head[: -len(separator)], rest[j - len(separator):]
    return head, rest[j:]


#: The reasoning tags, reserved in the families of docs/design/markup.md §2 (decision 2.1): outside a call
#: they are stray markers, never visible text.
THINK_TAGS = ("<think>", "</think>")
