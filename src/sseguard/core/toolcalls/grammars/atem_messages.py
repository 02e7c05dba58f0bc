"""Muse Spark / Muse Glimmer ("ATEM") tool calls (``muse``; docs/design/markup.md classes G+I).

```
<|start|>assistant to=self<|message|>Thinking.<|eom|><|start|>assistant to=user<|message|>Checking.<|eom|>
<|start|>assistant to=functions.get_weather<|message|><atem:function_calls><atem:invoke name="get_weather">
<atem:parameter name="city">Paris</atem:parameter></atem:invoke></atem:function_calls><|eom|>
```

Outside, messages (class I): a header ``<|start|>assistant to=RECIPIENT<|message|>`` and the end token
``<|eom|>`` are markup; a ``to=self`` message is reasoning (emitted as ``Reasoning``), a
``to=developer`` message is not shown (markup; *unverified*), any other message is the answer: its text
visible, its ``<atem:function_calls>`` blocks calls. A block opener inside a ``to=self`` message ends
the reasoning there (decision 3.9). Inside, MiniMax-M2's invoke/parameter body with
the ``atem:`` prefix (class G, ``invoke_parameters.MiniMaxM2Parser`` with a table): untyped values are the raw
string. A tool registered bare may come back as ``name.name``: with tools given, such a name is taken
as ``name`` when ``name`` is offered and ``name.name`` is not. Text outside any message is shown.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from sseguard.core.toolcalls.events import MarkupError, MarkupErrorKind
from sseguard.core.toolcalls.family import CallLike
from sseguard.core.toolcalls.grammars.base import CONTENT, Call
from sseguard.core.toolcalls.grammars.invoke_parameters import JSON_BODY, InvokeTags, MiniMaxM2Parser
from sseguard.core.toolcalls.grammars.invoke_parameters import render_tagged as render_invokes
from sseguard.core.toolcalls.grammars.markers import TAG_CAP, Markers
from sseguard.core.toolcalls.schema import ToolSpec

START, MESSAGE, EOM = "<|start|>", "<|message|>", "<|eom|>"
TAGS = InvokeTags(block="<atem:function_calls>", block_end="</atem:function_calls>",
                  invoke="atem:invoke", parameter="atem:parameter", separator="", frame=False,
                  messages=(START, MESSAGE, EOM))
_RECIPIENT = re.compile(r"\s*assistant\s+to=(\S+)\s*")

REASON, HIDDEN = JSON_BODY + 1, JSON_BODY + 2  # the states after MiniMaxM2Parser's
_EOM = Markers((EOM,))
_REASON_STOPS = Markers((EOM, "<atem:function_calls>"))


class MuseParser(MiniMaxM2Parser):
    """The message layer around ``MiniMaxM2Parser`` with Muse's table."""

    def __init__(self, tools: ToolSpec | None = None) -> None:
        super().__init__(tools, family="muse", tags=TAGS)
        self._handlers = (*self._handlers, self._reason, self._hidden)

    def _opener(self, data: str, pos: int, m: int, lit: str) -> int:
        if lit == START:
            k = data.find(MESSAGE, m + len(START))
            stop = data.find(START, m + len(START), k if k != -1 else len(data))
            if k == -1 and stop == -1:
                return ~pos if len(data) - m < TAG_CAP else self._stray(data, pos, m, m + TAG_CAP)
            if stop != -1:
                return self._stray(data, pos, m, stop)
            end = k + len(MESSAGE)
            head = _RECIPIENT.fullmatch(data, m + len(START), k)
            if head is None:
                return self._stray(data, pos, m, end)
            self._text(data[pos:m])
            self._markup(data[m:end])
            self._state = {"self": REASON, "developer": HIDDEN}.get(head[1], CONTENT)
            return end
        if lit == EOM:
            self._text(data[pos:m])
            self._markup(lit)
            return m + len(lit)
        return super()._opener(data, pos, m, lit)

    def _stray(self, data: str, pos: int, m: int, end: int) -> int:
        self._text(data[pos:m])
        self._event(MarkupError(MarkupErrorKind.MALFORMED_TAG, data[m:end]))
        return end

    def _until(self, data: str, pos: int, stops: Markers, emit: Callable[[str], None]) -> int:
        """A ``to=self`` or ``to=developer`` message: up to its ``<|eom|>`` (markup, back to the
        answer); a block opener in a reasoning message ends the reasoning there (decision 3.9: a call
        opener ends reasoning) and is read as in the answer."""
        m, lit = stops.find(data, pos)
        if m == -1:
            k = stops.hold(data, pos)
            emit(data[pos:k])
            return ~k
        emit(data[pos:m])
        self._state = CONTENT
        if lit == EOM:
            self._markup(EOM)
            return m + len(EOM)
        return m

    def _reason(self, data: str, pos: int) -> int:
        """State ``REASON``: a ``to=self`` message."""
        return self._until(data, pos, _REASON_STOPS, self._reasoning)

    def _hidden(self, data: str, pos: int) -> int:
        """State ``HIDDEN``: a ``to=developer`` message, markup."""
        return self._until(data, pos, _EOM, self._markup)

    def _finish(self, rest: str) -> None:
        if self._state == REASON:
            self._reasoning(rest)
        elif self._state == HIDDEN:
            self._markup(rest)
        else:
            super()._finish(rest)

    def _name_call(self, name: str, call_id: str | None = None) -> Call:
        """A bare-registered tool written back doubled (``name.name``) is ``name``."""
        tools = self._tools
        if tools is not None and name not in tools.names:
            half, dot, rest = name.partition(".")
            if dot and half == rest and half in tools.names:
                name = half
        return super()._name_call(name, call_id)


def render(calls: Sequence[CallLike], malformed: bool) -> str:
    """The tool message's body, the block of invokes: what a server that does not read Muse's
    messages leaves in content (``auto`` notices the family by it; the message header is
    Harmony's ``<|start|>`` to ``auto``, so name the family for whole Muse streams)."""
    return render_invokes(TAGS, calls, malformed)
