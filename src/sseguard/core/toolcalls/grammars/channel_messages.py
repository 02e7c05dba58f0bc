"""gpt-oss Harmony (``harmony``), docs/design/markup.md §2: the completion is a sequence of messages.

``[<|start|>assistant][ to=R]<|channel|>CHANNEL[ to=R][ <|constrain|>json | ' json']<|message|>BODY``
ended by ``<|end|>``, ``<|call|>`` or ``<|return|>`` (the first message has no ``<|start|>assistant``:
the prompt ends with it). A message with a recipient is a call named by the recipient minus one
leading ``functions.`` (decision 2.3), its body one JSON object streamed as it arrives (decision 2.4).
Without one, ``analysis`` is reasoning (``Reasoning`` events: the family's own, decision 2.10), ``final``
and ``commentary`` are visible text (decision 2.2). Headers and stop tokens are ``Markup``.

Servers usually cut the stop tokens, so a message also ends where the next header begins, and at end
of stream an open text message is complete and a call whose body is one complete JSON object is a call
(decision 2.8). Text outside any message is text: a server that strips special tokens leaves only that
(decision 2.11), and the leak check, not the parser, names it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from sseguard.core.toolcalls.events import MarkupError, MarkupErrorKind
from sseguard.core.toolcalls.family import CallLike
from sseguard.core.toolcalls.grammars.base import Call
from sseguard.core.toolcalls.grammars.blocks import END, RESUME, SWALLOW
from sseguard.core.toolcalls.grammars.json_args import JSONArgsParser
from sseguard.core.toolcalls.grammars.markers import TAG_CAP, Markers, split_partial_opener
from sseguard.core.toolcalls.grammars.strict_json import JSONProblem, strict_json
from sseguard.core.toolcalls.schema import ToolSpec

START = "<|start|>"
MESSAGE_END = "<|end|>"
MESSAGE = "<|message|>"
CHANNEL = "<|channel|>"
CONSTRAIN = "<|constrain|>"
RETURN = "<|return|>"
CALL = "<|call|>"
FAMILY_MARKERS = (START, MESSAGE_END, MESSAGE, CHANNEL, CONSTRAIN, RETURN, CALL)
MARKERS = Markers(FAMILY_MARKERS)
#: Harmony reasoning is a channel the parser reads itself, not ``<think>``: no opener ends it.
REASONING_EXITS: tuple[str, ...] = ()
_HEADS = frozenset((START, CHANNEL))  # what begins a message
_CLOSERS = frozenset((MESSAGE_END, CALL, RETURN))
_IN_HEADER = frozenset((CHANNEL, CONSTRAIN))

#: The recipient before the channel follows the role, or, in the first message (whose
#: ``<|start|>assistant`` ends the prompt), opens the completion.
_HEADER = re.compile(
    r"(?:<\|start\|>assistant(?: to=(?P<r1>[^\s<]+))?| ?to=(?P<r0>[^\s<]+))?"
    r"<\|channel\|>(?P<channel>analysis|commentary|final)"
    r"(?: to=(?P<r2>[^\s<]+))?(?: ?<\|constrain\|>json| json)?<\|message\|>")
_LEAD = re.compile(r"to=[^\s<]*")
_PREFIX = "functions."

CONTENT, HEADER, TEXT_BODY, THINK_BODY, ARGS, SKIP = range(6)


def may_open_header(text: str) -> bool:
    """Whether text at stream start (after its framing whitespace) may still be the recipient that
    opens the completion's first header, `` to=R<|channel|>`` (``auto`` holds it for the family)."""
    return len(text) <= TAG_CAP and (_LEAD.fullmatch(text) is not None or "to=".startswith(text))


class HarmonyParser(JSONArgsParser):
    """Incremental parser for gpt-oss Harmony completions."""

    family = "harmony"
    _SKIP, _ARGS = SKIP, ARGS
    # a body ends at its stop token, or, the stop token cut, where the next message begins
    _ARGS_ENDS, _ARGS_BREAKS = _CLOSERS, _HEADS
    _markers = MARKERS

    def __init__(self, tools: ToolSpec | None = None) -> None:
        super().__init__(tools)
        self._frame = True  # decision 2.2: whitespace before the first message is not text
        self._lead = True  # at stream start, where " to=R<|channel|>" may open the first header
        self._find, self._hold = MARKERS.find, MARKERS.hold
        self._handlers = (self._content, self._header, self._body, self._body, self._args,
                          self._skip)

    def _content(self, data: str, pos: int) -> int:
        if self._frame:
            pos = self._framing(data, pos)
            if pos == len(data):
                return pos
        if self._lead:
            r = self._lead_recipient(data, pos)
            if r is not None:
                return r
        return super()._content(data, pos)

    def _lead_recipient(self, data: str, pos: int) -> int | None:
        """The completion may open inside the first header, with the recipient before
        ``<|channel|>``: held until ``<|channel|>`` shows it is one (``None``: it is not)."""
        m = _LEAD.match(data, pos)
        end = m.end() if m else pos
        n = len(data)
        if m is None and not (n - pos < 3 and "to=".startswith(data[pos:])):
            self._lead = False
            return None
        if m is None or end == n or (data[end] == "<" and CHANNEL.startswith(data[end:])):
            if n - pos > TAG_CAP:  # no recipient is this long
                self._lead = False
                return None
            return ~pos
        self._lead = False
        if not data.startswith(CHANNEL, end) or end - pos == 3:
            return None
        self._new_unit(data[pos:end], in_block=False)
        self._begin_head(data[pos:end])
        self._state = HEADER
        return end

    def _opener(self, data: str, pos: int, m: int, lit: str) -> int:
        self._lead = False
        if lit in _HEADS:
            self._new_unit(lit, in_block=False)
            self._begin_head(lit)
            self._state = HEADER
        else:  # a stop token or header part outside any message (decision 2.1)
            self._event(MarkupError(MarkupErrorKind.MALFORMED_TAG, lit))
        return m + len(lit)

    def _block_marker(self, data: str, m: int, lit: str) -> int | None:
        """Harmony has no blocks: messages follow one another in content."""
        return None

    def _head_marker(self, pos: int, lit: str, call: Call) -> int:
        """The header runs from ``<|start|>`` or ``<|channel|>`` to ``<|message|>``."""
        if lit in _IN_HEADER:
            call.raw.append(lit)
            self._head.append(lit)
            return pos + len(lit)
        if lit != MESSAGE:  # a stop token or a second <|start|> inside a header
            self._void(MarkupErrorKind.MALFORMED_TAG)
            return pos
        call.raw.append(lit)
        self._head.append(lit)
        m = _HEADER.fullmatch("".join(self._head))
        before = m and (m["r1"] or m["r0"])
        if m is None or (before and m["r2"]):  # one recipient at most
            self._void(MarkupErrorKind.MALFORMED_TAG)
            return pos + len(lit)
        recipient = before or m["r2"]
        if recipient:
            name = recipient.removeprefix(_PREFIX)
            if not name:
                self._void(MarkupErrorKind.MALFORMED_TAG)
                return pos + len(lit)
            self._name_call(name)
            self._begin_json_args()
        else:
            self._markup("".join(call.raw))
            self._call = None
            self._state = THINK_BODY if m["channel"] == "analysis" else TEXT_BODY
        return pos + len(lit)

    def _body(self, data: str, pos: int) -> int:
        """A text or analysis message's body: everything up to a stop token or the next header."""
        m, lit = self._find(data, pos)
        end = m if m != -1 else self._hold(data, pos)
        if end > pos:
            (self._reasoning if self._state == THINK_BODY else self._text)(data[pos:end])
            return end if m != -1 else ~end
        if m == -1:
            return ~pos
        if lit in _CLOSERS:
            self._markup(lit)
            self._state = CONTENT
            return m + len(lit)
        if lit in _HEADS:  # the stop token was cut: the next message begins
            self._state = CONTENT
            return m
        self._event(MarkupError(MarkupErrorKind.MALFORMED_TAG, lit))
        return m + len(lit)

    def _skip_marker(self, data: str, m: int, lit: str, call: Call) -> tuple[int, int]:
        """A void message is swallowed up to its stop token, or up to the next header."""
        if lit in _HEADS:
            return m, RESUME
        if lit in _CLOSERS:
            return m + len(lit), END
        return m + len(lit), SWALLOW

    def _finish(self, rest: str) -> None:
        """Decision 2.8: an open text message is complete; a call whose body is one complete JSON
        object is a call (its stop token was cut); anything else open is unterminated."""
        state = self._state
        if state in (TEXT_BODY, THINK_BODY):
            text, raw = split_partial_opener(rest, "")
            (self._reasoning if state == THINK_BODY else self._text)(text)
            if raw:
                self._event(MarkupError(MarkupErrorKind.UNTERMINATED, raw))
            return
        call = self._call
        if state == ARGS and self._started:
            assert call is not None
            call.raw.append(rest)  # at most a cut stop token: outside the JSON, not part of it
            try:
                complete = isinstance(strict_json("".join(call.frags)), dict)
            except JSONProblem as problem:
                if problem.kind is MarkupErrorKind.DUPLICATE_PARAMETER:
                    self._fail_call(problem.kind)
                    return
                complete = False
            if complete:
                self._end_call(close_object=False)
            else:
                self._fail_call(MarkupErrorKind.UNTERMINATED)
            return
        super()._finish(rest)


# ── the family descriptor ──────────────────────────────────────────────────────────────────────────

_ROLE = START + "assistant"


def render(calls: Sequence[CallLike], malformed: bool) -> str:
    """One ``commentary`` message to ``functions.NAME`` per call, ended by the ``<|call|>`` stop
    token (a server cuts it only at the end of a completion); ``malformed`` misspells the first
    call's channel."""
    return "".join(
        f"{_ROLE}{CHANNEL}{'commentry' if malformed and i == 0 else 'commentary'} "
        f"to={_PREFIX}{c.name} {CONSTRAIN}json{MESSAGE}{c.arguments}{CALL}"
        for i, c in enumerate(calls))


def render_answer(reasoning: str, preface: str, markup: str) -> str:
    """A Harmony completion is nothing but messages: a server without its parser sends the
    ``analysis`` message (the reasoning) and the preface's ``commentary`` message as content too."""
    messages = []
    if reasoning:
        messages.append(f"{CHANNEL}analysis{MESSAGE}{reasoning}{MESSAGE_END}")
    if preface:
        messages.append(f"{CHANNEL}commentary{MESSAGE}{preface}{MESSAGE_END}")
    # the completion's first message has no <|start|>assistant: that ended the prompt
    return (_ROLE.join(messages) + markup).removeprefix(_ROLE)
