"""``--repair-markup auto``: find out which markup family a stream uses, then parse it with that family.

A proxy in front of a mixed fleet cannot know which model wrote a stream. This parser lets text through
until an opener of some registered family (``sseguard.toolcalls.FAMILIES``) shows up, then hands the
rest of the stream — from the whitespace just before the opener, which is the family's separator to
drop — to a fresh parser of that family. Until then it holds back only what the family parsers hold
back themselves: a possible opener prefix, and the newlines right before it.

Families whose openers look alike are told apart by the first characters after the opener
(DeepSeek V3 writes ``function<｜tool▁sep｜>``, V3.1 the name; Hermes puts JSON after ``<tool_call>``,
Qwen3-Coder ``<function=``). Every DSML family parses every DSML dialect, so any DSML opener picks one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sseguard.errors import UsageError
from sseguard.toolcalls import FAMILIES, Event, Parser, Text, parser_for

#: How far past an opener the choice may look before falling back to the opener's default family.
LOOKAHEAD_CAP = 256

_WS = " \t\r\n"
_NEWLINES = "\r\n"  # the separators families write before a block are newlines only


def _dsml(after: str) -> str | None:
    return "dsml-v4"


def _deepseek(after: str) -> str | None:
    sep = after.find("<｜tool▁sep｜>")
    if sep == -1:
        return None
    begin = after.rfind("<｜tool▁call▁begin｜>", 0, sep)
    name = after[begin + len("<｜tool▁call▁begin｜>"):sep] if begin != -1 else after[:sep]
    return "deepseek-v3" if name.strip() == "function" else "deepseek-v31"


def _tool_call(after: str) -> str | None:
    body = after.lstrip(_WS)
    if not body:
        return None
    return "qwen3-coder" if body.startswith("<") else "hermes"


#: opener → (chooser of the family from the text after it, fallback family when undecidable)
_OPENERS: dict[str, tuple[Callable[[str], str | None], str]] = {
    "<｜DSML｜": (_dsml, "dsml-v4"),
    "</｜DSML｜": (_dsml, "dsml-v4"),
    "<｜tool▁calls▁begin｜>": (_deepseek, "deepseek-v31"),
    "<｜tool▁call▁begin｜>": (_deepseek, "deepseek-v31"),
    "<tool_call>": (_tool_call, "hermes"),
}


def _registered() -> dict[str, tuple[Callable[[str], str | None], str]]:
    """The openers whose fallback family is registered (the others stay plain text, and the proxy's
    leak scan reports them)."""
    return {opener: spec for opener, spec in _OPENERS.items() if spec[1] in FAMILIES}


class AutoParser:
    """A ``Parser`` that picks its family from the stream itself (see the module docstring)."""

    def __init__(self, tools: list[dict[str, Any]] | None = None) -> None:
        self.family = "auto"
        self._tools = tools
        self._openers = _registered()
        self._held = ""
        self._inner: Parser | None = None
        self._closed = False

    @property
    def chosen(self) -> str | None:
        """The family picked, once an opener was seen."""
        return None if self._inner is None else self._inner.family

    def feed(self, text: str) -> list[Event]:
        if self._closed:
            raise UsageError("feed() after close()")
        if self._inner is not None:
            return self._inner.feed(text)
        data = self._held + text
        self._held = ""
        start, opener = self._first_opener(data)
        if start == -1:
            keep = self._hold_from(data)
            self._held = data[keep:]
            return [Text(data[:keep])] if keep else []
        chooser, fallback = self._openers[opener]
        after = data[start + len(opener):]
        family = chooser(after)
        if family is not None and family not in FAMILIES:
            family = fallback
        ws = _ws_start(data, start)
        if family is None:
            if len(after) < LOOKAHEAD_CAP:
                self._held = data[ws:]
                return [Text(data[:ws])] if ws else []
            family = fallback
        return self._hand_over(family, data[:ws], data[ws:])

    def close(self) -> list[Event]:
        if self._closed:
            raise UsageError("close() called twice")
        self._closed = True
        if self._inner is not None:
            return self._inner.close()
        held, self._held = self._held, ""
        if not held.strip(_WS):
            return [Text(held)] if held else []
        # A held opener prefix: its family's parser says what a cut-off opener means.
        start, opener = self._first_opener(held)
        family = self._openers[opener][1] if start != -1 else self._prefix_family(held)
        if family is None:
            return [Text(held)]
        inner = self._new(family)
        return [*inner.feed(held), *inner.close()]

    # ── helpers ────────────────────────────────────────────────────────────────────────────────
    def _new(self, family: str) -> Parser:
        try:
            return parser_for(family, self._tools)
        except UsageError:  # a malformed tools list: parse without names
            return parser_for(family)

    def _hand_over(self, family: str, before: str, rest: str) -> list[Event]:
        self._inner = self._new(family)
        out: list[Event] = [Text(before)] if before else []
        out.extend(self._inner.feed(rest))
        return out

    def _first_opener(self, data: str) -> tuple[int, str]:
        best, which = -1, ""
        for opener in self._openers:
            i = data.find(opener)
            if i != -1 and (best == -1 or i < best):
                best, which = i, opener
        return best, which

    def _hold_from(self, data: str) -> int:
        """Where the held-back suffix starts: a possible opener prefix and the whitespace before it,
        or trailing newlines alone (an opener may follow in the next delta)."""
        cut = len(data)
        lt = data.rfind("<", max(0, len(data) - max(map(len, self._openers), default=1)))
        if lt != -1 and any(op.startswith(data[lt:]) for op in self._openers):
            cut = lt
        return _ws_start(data, cut)

    def _prefix_family(self, held: str) -> str | None:
        lt = held.find("<")
        if lt == -1:
            return None
        tail = held[lt:]
        for opener, (_, fallback) in self._openers.items():
            if opener.startswith(tail):
                return fallback
        return None


def _ws_start(data: str, end: int) -> int:
    """Start of the run of newlines that ends at ``end`` (a family's separator lives there)."""
    i = end
    while i > 0 and data[i - 1] in _NEWLINES:
        i -= 1
    return i
