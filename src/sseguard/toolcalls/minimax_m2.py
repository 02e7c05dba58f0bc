"""MiniMax-M2 / M2.1 / M2.5 / M2.7 tool calls (``minimax-m2``).

```
Let me check.
<minimax:tool_call>
<invoke name="get_weather">
<parameter name="city">Paris</parameter>
</invoke>
</minimax:tool_call>
```

``<minimax:tool_call>`` and its closer are single special tokens; ``<invoke …>``, ``<parameter …>`` and
their closers are plain text, so they are markup only inside a block (MARKUP2.md decision 9: an invoke
without the wrapper is the model's text). The parser therefore searches two marker sets: the block
tokens (and the reserved think tags) in content, every tag inside a block. One ``\\n`` before each
block is the template's separator (decision 2).

Values carry no type flag: the offered tool's schema types them (``_typed``); without a schema a value
is the raw string, and a value that is exactly ``null`` is null whatever its type (both engines).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from sseguard.toolcalls._block import RESUME, SWALLOW
from sseguard.toolcalls._engine import Call
from sseguard.toolcalls._markers import THINK_TAGS, Markers
from sseguard.toolcalls._render import tag_values
from sseguard.toolcalls._typed import TypedValueParser
from sseguard.toolcalls.events import MarkupError, MarkupErrorKind
from sseguard.toolcalls.family import CallLike, Family, claim_openers
from sseguard.toolcalls.schema import ToolSpec, ValueTyping

BLOCK = "<minimax:tool_call>"
BLOCK_END = "</minimax:tool_call>"
INVOKE = "<invoke"
INVOKE_END = "</invoke>"
PARAMETER = "<parameter"
PARAMETER_END = "</parameter>"
#: The special tokens: never text, wherever they stand.
FAMILY_MARKERS = (BLOCK, BLOCK_END)
#: What ``sseguard tokenizer`` checks: the tokens, and the plain-text tags as the template writes them.
TOKENIZER_MARKERS = (BLOCK, BLOCK_END, '<invoke name="', INVOKE_END, '<parameter name="',
                     PARAMETER_END)
CONTENT_MARKERS = Markers((BLOCK, BLOCK_END, *THINK_TAGS))
BLOCK_MARKERS = Markers((BLOCK, BLOCK_END, INVOKE, INVOKE_END, PARAMETER, PARAMETER_END,
                         *THINK_TAGS))
REASONING_EXITS = (BLOCK,)
SEPARATOR = "\n"

_INVOKE_TAG = re.compile(r'<invoke\s+name="([^"]+)"\s*>')
_PARAMETER_TAG = re.compile(r'<parameter\s+name="([^"]+)"\s*>')

CONTENT, IN_BLOCK, INVOKE_BODY, VALUE, STRING, SKIP = range(6)


class MiniMaxM2Parser(TypedValueParser):
    """Incremental parser for ``minimax-m2``; see MARKUP2.md for the format and the decisions."""

    family = "minimax-m2"
    _BLOCK, _SKIP, _VALUE, _STRING = IN_BLOCK, SKIP, VALUE, STRING
    _VALUE_END, _VALUE_BREAKS, _AFTER_VALUE = PARAMETER_END, (INVOKE_END, BLOCK_END), INVOKE_BODY
    _UNTYPED = ValueTyping(frozenset(), True, null_literal=True)
    _NULL_LITERAL = True

    def __init__(self, tools: ToolSpec | None = None) -> None:
        super().__init__(tools)
        self._sep = SEPARATOR
        self._frame = True  # decision 2: the whitespace that frames the answer is not text
        self._find, self._hold = CONTENT_MARKERS.find, CONTENT_MARKERS.hold
        self._handlers = (self._content, self._between_calls, self._invoke_body, self._value,
                          self._value, self._skip)

    def _read_tag(self, data: str, m: int, pattern: re.Pattern[str]) -> tuple[int, str | None]:
        """The ``<invoke …>``/``<parameter …>`` tag at ``m``: (its end, its name or None when it is
        malformed); end -1 while the tag is incomplete."""
        end = self._tag_end(data, m)
        if end < 0:
            return -1, None
        a = pattern.fullmatch(data, m, end)
        return end, a[1] if a else None

    def _opener(self, data: str, pos: int, m: int, lit: str) -> int:
        if lit == BLOCK:
            self._markup(data[pos:m + len(lit)])
            self._find, self._hold = BLOCK_MARKERS.find, BLOCK_MARKERS.hold
            self._state = IN_BLOCK
            return m + len(lit)
        # decision 1: a stray block closer or think tag is reported; the text around it stays
        self._text(data[pos:m])
        self._event(MarkupError(MarkupErrorKind.MALFORMED_TAG, lit))
        return m + len(lit)

    def _close_block(self, closer: str, end: int) -> int:
        self._find, self._hold = CONTENT_MARKERS.find, CONTENT_MARKERS.hold
        return super()._close_block(closer, end)

    def _block_marker(self, data: str, m: int, lit: str) -> int | None:
        if lit == INVOKE:
            tend, name = self._read_tag(data, m, _INVOKE_TAG)
            return self._call_opener(data, m, tend, name, INVOKE_BODY)
        if lit == BLOCK_END:
            return self._close_block(lit, m + len(lit))
        return None

    def _invoke_body(self, data: str, pos: int) -> int:
        """State ``INVOKE_BODY``: whitespace, then a parameter or the invoke's closer."""
        call = self._call
        assert call is not None
        r, lit = self._tag_in_call(data, pos)  # decision 7: only whitespace between tags
        if lit is None:
            return r
        if lit == PARAMETER:
            tend, key = self._read_tag(data, pos, _PARAMETER_TAG)
            if tend < 0:
                return ~pos
            if key is not None:
                call.raw.append(data[pos:tend])
                if self._add_key(key):
                    self._open_value(key)
                return tend
        elif lit == INVOKE_END:
            call.raw.append(lit)
            self._end_call()
            self._after_call(True)
            return pos + len(lit)
        self._void(MarkupErrorKind.MALFORMED_TAG)
        return pos

    def _skip_marker(self, data: str, m: int, lit: str, call: Call) -> tuple[int, int]:
        """Parsing resumes at the next well-formed invoke or at the block's closer."""
        if lit == INVOKE:
            tend, name = self._read_tag(data, m, _INVOKE_TAG)
            return tend, RESUME if name is not None else SWALLOW
        return m + len(lit), RESUME if lit == BLOCK_END else SWALLOW


# ── the family descriptor ──────────────────────────────────────────────────────────────────────────


def _render(calls: Sequence[CallLike], malformed: bool) -> str:
    """``malformed`` misspells the first call's last value closer (no value: its invoke closer)."""
    out = [f"{SEPARATOR}{BLOCK}\n"]
    for i, call in enumerate(calls):
        out.append(f'{INVOKE} name="{call.name}">\n')
        broken = malformed and i == 0
        out.extend(f'{PARAMETER} name="{key}">{text}{closer}\n'
                   for key, text, closer in tag_values(call, broken, PARAMETER_END, "</parametr>"))
        out.append("</invok>\n" if broken and not call.values else f"{INVOKE_END}\n")
    out.append(BLOCK_END)
    return "".join(out)


FAMILY = Family(name="minimax-m2", make=MiniMaxM2Parser, markers=TOKENIZER_MARKERS,
                # the block tokens are special; stripped, they leave the plain-text invoke tag
                leak_markers=(BLOCK, BLOCK_END, '<invoke name="'), reasoning_exits=REASONING_EXITS,
                auto_markers=FAMILY_MARKERS, claim=claim_openers((BLOCK,)), render=_render,
                malformable=True, rank=80, aliases=("minimax_m2",),
                grammar="G")
