"""A class-B array read inside another family's parser: LFM2's JSON branch and Mistral's pre-v11
array hand their block to a ``JSONArrayParser`` and drive it state by state until its block ends, so
that call indexes run on across blocks of both kinds.
"""

from __future__ import annotations

from sseguard.core.toolcalls.grammars.base import CONTENT, BaseParser
from sseguard.core.toolcalls.grammars.json_array import JSONArrayParser


def run_embedded(outer: BaseParser, inner: JSONArrayParser, data: str, pos: int) -> tuple[int, bool]:
    """Feed ``data`` from ``pos`` to ``inner`` until its block ends (it is back in text) or the data
    is used up, handing its events to ``outer`` in order; returns the position reached (negative:
    ``inner`` holds the rest for more input, as a handler's own return says) and whether the block
    ended. The calls go on numbering from where ``inner`` left them."""
    handlers = inner._handlers
    n = len(data)
    while pos < n and inner._state != CONTENT:
        r = handlers[inner._state](data, pos)
        if r < 0:
            take_embedded(outer, inner)
            return r, False
        pos = r
    take_embedded(outer, inner)
    return pos, inner._state == CONTENT


def finish_embedded(outer: BaseParser, inner: JSONArrayParser, rest: str) -> None:
    """The end of the stream inside an embedded array: ``inner`` says what the rest is."""
    inner._finish(rest)
    take_embedded(outer, inner)


def take_embedded(outer: BaseParser, inner: JSONArrayParser) -> None:
    """``inner``'s events so far, after ``outer``'s own, and its call count."""
    outer._flush()
    outer._out.extend(inner._take())
    outer._next_index = inner._next_index
