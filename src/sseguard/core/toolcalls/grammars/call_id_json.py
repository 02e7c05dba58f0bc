"""Kimi K2 / K2-Thinking / K2.5 tool calls (``kimi-k2``), docs/design/markup.md §2.

``<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{…}
<|tool_call_end|>…<|tool_calls_section_end|>``; some checkpoints write the singular
``<|tool_call_section_begin|>``/``_end|>`` (either closer ends either section), some deployments put
``\\n`` around markers (whitespace between markers is markup). The header is the model's own call id,
kept verbatim on the call events; the name is the id minus one leading ``functions.`` and the last
``:DIGITS`` (decision 2.3). The arguments are the model's JSON, streamed as they arrive, and a marker
inside a JSON string is string text (decision 2.4). A call without a section is still a call
(decision 2.9). ``<think>``/``</think>`` are reserved (decision 2.1): outside reasoning they are
``malformed_tag``, never text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from sseguard.core.toolcalls.events import MarkupError, MarkupErrorKind
from sseguard.core.toolcalls.family import CallLike
from sseguard.core.toolcalls.grammars.base import Call
from sseguard.core.toolcalls.grammars.blocks import END, RESUME, SWALLOW
from sseguard.core.toolcalls.grammars.json_args import JSONArgsParser
from sseguard.core.toolcalls.grammars.markers import Markers
from sseguard.core.toolcalls.grammars.strict_json import ASCII_WS
from sseguard.core.toolcalls.schema import ToolSpec

SECTION_BEGIN = "<|tool_calls_section_begin|>"
SECTION_END = "<|tool_calls_section_end|>"
SECTION_BEGIN_1 = "<|tool_call_section_begin|>"  # the singular spelling of some checkpoints
SECTION_END_1 = "<|tool_call_section_end|>"
CALL_BEGIN = "<|tool_call_begin|>"
ARG_BEGIN = "<|tool_call_argument_begin|>"
CALL_END = "<|tool_call_end|>"
FAMILY_MARKERS = (SECTION_BEGIN, SECTION_END, SECTION_BEGIN_1, SECTION_END_1, CALL_BEGIN,
                  ARG_BEGIN, CALL_END)
#: The think tags are reserved too, but belong to no call: ``auto`` must not take them for Kimi's.
MARKERS = Markers((*FAMILY_MARKERS, "<think>", "</think>"))
REASONING_EXITS = (SECTION_BEGIN, SECTION_BEGIN_1, CALL_BEGIN)
_OPENERS = frozenset((SECTION_BEGIN, SECTION_BEGIN_1))
_CLOSERS = frozenset((SECTION_END, SECTION_END_1))

#: ``[functions.]NAME:DIGITS``; the name runs to the last colon, so it may hold colons and dots.
_CALL_ID = re.compile(r"(\S+):[0-9]+")
_PREFIX = "functions."

CONTENT, SECTION, HEAD, ARGS, SKIP = range(5)


def call_name(call_id: str) -> str | None:
    """The tool name in a Kimi call id, or ``None`` when it is no ``[functions.]NAME:DIGITS``."""
    m = _CALL_ID.fullmatch(call_id)
    if m is None:
        return None
    name = m.group(1)
    return name.removeprefix(_PREFIX) or None


class KimiK2Parser(JSONArgsParser):
    """Incremental parser for Kimi K2 tool-call sections."""

    family = "kimi-k2"
    _BLOCK, _SKIP, _ARGS = SECTION, SKIP, ARGS
    _ARGS_ENDS = frozenset((CALL_END,))
    _markers = MARKERS

    def __init__(self, tools: ToolSpec | None = None) -> None:
        super().__init__(tools)
        self._frame = True  # decision 2.2: the whitespace that frames the answer is not text
        self._find, self._hold = MARKERS.find, MARKERS.hold
        self._handlers = (self._content, self._between_calls, self._header, self._args,
                          self._skip)

    def _begin_call(self, lit: str, in_block: bool) -> int:
        self._new_unit(lit, in_block)
        self._begin_head()
        self._state = HEAD
        return len(lit)

    def _opener(self, data: str, pos: int, m: int, lit: str) -> int:
        if lit in _OPENERS:
            self._markup(lit)
            self._state = SECTION
        elif lit == CALL_BEGIN:  # a call without a section is still a call (decision 2.9)
            self._begin_call(lit, in_block=False)
        else:  # a stray closer or think tag: reported, the text around it stays (decision 2.1)
            self._event(MarkupError(MarkupErrorKind.MALFORMED_TAG, lit))
        return m + len(lit)

    def _block_marker(self, data: str, m: int, lit: str) -> int | None:
        if lit == CALL_BEGIN:
            return m + self._begin_call(lit, in_block=True)
        if lit in _CLOSERS:
            return self._close_block(lit, m + len(lit))
        return None

    def _head_marker(self, pos: int, lit: str, call: Call) -> int:
        """The header from ``<|tool_call_begin|>`` is the call id; its end, the argument begin."""
        call_id = "".join(self._head).strip(ASCII_WS)
        name = call_name(call_id) if lit == ARG_BEGIN else None
        if name is None:  # no :DIGITS, or a marker in the header (decision 2.3)
            self._void(MarkupErrorKind.MALFORMED_TAG)
            return pos
        call.raw.append(lit)
        self._name_call(name, call_id)
        self._begin_json_args()
        return pos + len(lit)

    def _skip_marker(self, data: str, m: int, lit: str, call: Call) -> tuple[int, int]:
        """A void call swallows up to the next call, or the section's closer; a bare one also up
        to its own end, so that it does not swallow the answer after it."""
        if lit == CALL_BEGIN or (lit in _CLOSERS if call.in_block else lit in _OPENERS):
            return m, RESUME
        if lit == CALL_END and not call.in_block:
            return m + len(lit), END
        return m + len(lit), SWALLOW


# ── the family descriptor ──────────────────────────────────────────────────────────────────────────


def render(calls: Sequence[CallLike], malformed: bool) -> str:
    """The header is the model's own call id, ``functions.NAME:IDX``; ``malformed`` misspells the
    first call's closer."""
    out = [SECTION_BEGIN]
    for i, call in enumerate(calls):
        end = "<|tool_call_ed|>" if malformed and i == 0 else CALL_END
        out.append(f"{CALL_BEGIN}{_PREFIX}{call.name}:{i}{ARG_BEGIN}{call.arguments}{end}")
    out.append(SECTION_END)
    return "".join(out)
