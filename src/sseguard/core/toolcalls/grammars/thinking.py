"""Reasoning spans a family parser reads itself: ``<seed:think>`` … ``</seed:think>`` (Seed-OSS),
``<ifm|think>`` … ``</ifm|think>`` (K2 Horizon).

Why in the parser and not in ``ThinkSplitter``: in these families a tool-call opener written inside
the reasoning is the model quoting the format while it thinks, and it stays reasoning text
(docs/design/markup.md decision 3.9: no implicit exit). Only the span's own closer ends it, so the span is one
state that searches for one literal; the tags themselves are markup.
"""

from __future__ import annotations

from collections.abc import Mapping

from sseguard.core.toolcalls.grammars.base import CONTENT, BaseParser
from sseguard.core.toolcalls.grammars.markers import Markers


class ReasoningTags(BaseParser):
    """A family whose reasoning is a tagged span in its own output. The family names the span's state
    (``_THINK``, bound to ``_in_reasoning`` in its handlers) and its tags (``_think_tags``: opener →
    closer); its ``_opener`` hands an opener to ``_enter_reasoning``."""

    _THINK = -1
    _think_tags: Mapping[str, str] = {}

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._closer: Markers | None = None

    def _enter_reasoning(self, data: str, pos: int, m: int, lit: str) -> int:
        """The opener ``lit`` at ``m`` (``data[pos:m]`` is text): reasoning starts after it."""
        self._text(data[pos:m])
        self._markup(lit)
        self._closer = Markers((self._think_tags[lit],))
        self._state = self._THINK
        return m + len(lit)

    def _in_reasoning(self, data: str, pos: int) -> int:
        """State ``_THINK``: everything up to the span's closer is reasoning, tags included."""
        closer = self._closer
        assert closer is not None
        m, lit = closer.find(data, pos)
        if m == -1:
            k = closer.hold(data, pos)
            self._reasoning(data[pos:k])
            return ~k
        self._reasoning(data[pos:m])
        self._markup(lit)
        self._closer = None
        self._state = CONTENT
        return m + len(lit)

    def _finish(self, rest: str) -> None:
        """An open span at end of stream is reasoning that ended there (open text is complete)."""
        if self._state == self._THINK:
            self._reasoning(rest)
            return
        super()._finish(rest)
