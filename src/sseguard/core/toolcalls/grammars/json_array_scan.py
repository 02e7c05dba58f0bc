"""The scanner under the class-B parser (``json_array``): it follows one JSON value's extent across
chunks — strings, their escapes, bracket depth — and stops only where the parser has something to
decide. Its state is three fields (depth, in a string, after a backslash), so a chunk boundary may fall
anywhere, and it reads each character once: the parser is linear because of it.

The parser's element states (``json_array_states``) and its hot path (``json_array``) run it; what
they do at each stop is theirs.
"""

from __future__ import annotations

import re

from sseguard.core.toolcalls.grammars.base import BaseParser
from sseguard.core.toolcalls.grammars.markers import Markers
from sseguard.core.toolcalls.schema import ToolSpec

_IN_STRING = re.compile(r'["\\]')


class JSONScanner(BaseParser):
    """A parser that follows JSON values across chunks: the bracket depth inside the element, whether
    a string is open and whether its last character was a backslash, and the markers (reserved
    outside strings) that stop it. The class-B parser is built on it (``JSONArrayParser``)."""

    def __init__(self, tools: ToolSpec | None, markers: Markers | None) -> None:
        super().__init__(tools)
        self._markers = markers
        leads = markers.leads if markers else ""
        # where the scanner stops outside strings: a quote, a bracket, a marker's lead (and in a bare
        # element, the comma that ends it)
        self._out_re = re.compile('["{}\\[\\]' + re.escape(leads) + "]")
        self._bare_re = re.compile('[",{}\\[\\]' + re.escape(leads) + "]")
        # the scanner: bracket depth inside the element, in a string, after a backslash
        self._depth = 0
        self._inside = False
        self._escape = False
        self._head = True  # the element's head is still to be tested at its first nested value
        self._streaming = False  # the arguments stream as they arrive
        self._args_open = False

    def _follow(self, data: str, i: int, n: int, pattern: re.Pattern[str]) -> tuple[int, bool]:
        """From ``i``, follow JSON strings (their state across chunks in ``_inside`` and
        ``_escape``) to the next character of ``pattern`` outside a string: (its index, False); or
        just past a string's closing quote: (that index, True); or (``n``, False) at the chunk's end.
        What a bare element and a void block swallow is read this way; only what they do at each
        stop differs."""
        inside, escape = self._inside, self._escape
        while i < n:
            if inside:
                i, inside, escape = string_end(data, i, n, escape)
                if not inside:
                    self._inside, self._escape = inside, escape
                    return i, True
                continue
            hit = pattern.search(data, i)
            if hit is None:
                i = n
                break
            i = hit.start()
            if data[i] != '"':
                break
            inside = True
            i += 1
        self._inside, self._escape = inside, escape
        return i, False

    def _scan(self, data: str, i: int, n: int) -> tuple[int, str]:
        """Follow strings and bracket depth over ``data[i:n]`` up to the first point where something
        is decided: (index just past it, "") — the first nested value opened while the head is
        untested, the arguments or the element closed —, (index of a marker's lead, the marker or
        "?" when only a prefix of one stands there), or (-1, "") when nothing was decided."""
        depth, inside, escape = self._depth, self._inside, self._escape
        target = 1 if self._args_open else 0
        out_re = self._out_re
        stop, marker = -1, ""
        while i < n:
            if escape:
                escape = False
                i += 1
                continue
            if inside:
                hit = _IN_STRING.search(data, i)
                if hit is None:
                    break
                i = hit.start()
                if data[i] == '"':
                    inside = False
                    i += 1
                    if depth == 0:  # a string element ends here
                        stop = i
                        break
                else:
                    escape = True
                    i += 1
                continue
            hit = out_re.search(data, i)
            if hit is None:
                break
            i = hit.start()
            c = data[i]
            if c == '"':
                inside = True
                i += 1
            elif c == "{" or c == "[":
                depth += 1
                i += 1
                if depth == 2 and self._head:
                    stop = i
                    break
            elif c == "}" or c == "]":
                depth -= 1
                i += 1
                if depth <= target:
                    stop = i
                    break
            else:  # the lead of a marker, outside strings
                assert self._markers is not None
                lit = self._markers.match(data, i)
                if lit or self._markers.hold(data, i) == i:
                    stop, marker = i, lit or "?"
                    break
                i += 1
        self._depth, self._inside, self._escape = depth, inside, escape
        return stop, marker


def string_end(data: str, i: int, n: int, escape: bool) -> tuple[int, bool, bool]:
    """Follow a JSON string from ``data[i]`` (``escape``: the last character read was its
    backslash): (index just past its closing quote, False, False), or (``n``, True, escape) when
    it goes on past ``data[:n]``."""
    while i < n:
        if escape:
            escape = False
            i += 1
            continue
        hit = _IN_STRING.search(data, i, n)
        if hit is None:
            return n, True, False
        i = hit.start() + 1
        if data[i - 1] == '"':
            return i, False, False
        escape = True
    return n, True, escape

