"""DeepSeek V3 / R1 (``deepseek-v3``) and V3.1 (``deepseek-v31``) tool-call markup
(docs/design/markup.md §1): the name, the tool separator token, then the model's JSON.

Both use the same five special markers; V3 writes ``function<｜tool▁sep｜>NAME\\n```json … ```\\n`` and
V3.1 ``NAME<｜tool▁sep｜>{…}``. The arguments are the model's own JSON, streamed verbatim as it
arrives and validated when the call ends (decision 1.4: a call that fails validation is void). Nothing
around the markers is removed from the visible text (decision 1.8).
"""

from __future__ import annotations

from collections.abc import Sequence

from sseguard.core.errors import UsageError
from sseguard.core.toolcalls.events import MarkupError, MarkupErrorKind
from sseguard.core.toolcalls.family import CallLike, Claim
from sseguard.core.toolcalls.grammars.base import Call
from sseguard.core.toolcalls.grammars.blocks import END, RESUME, SWALLOW, BlockParser
from sseguard.core.toolcalls.grammars.markers import Markers, first_non_ws
from sseguard.core.toolcalls.grammars.strict_json import ASCII_WS
from sseguard.core.toolcalls.schema import ToolSpec

CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
CALL_BEGIN = "<｜tool▁call▁begin｜>"
SEP = "<｜tool▁sep｜>"
CALL_END = "<｜tool▁call▁end｜>"
CALLS_END = "<｜tool▁calls▁end｜>"
MARKERS = Markers((CALLS_BEGIN, CALL_BEGIN, SEP, CALL_END, CALLS_END))
REASONING_EXITS = (CALLS_BEGIN, CALL_BEGIN)
FAMILY_MARKERS = (CALLS_BEGIN, CALL_BEGIN, SEP, CALL_END, CALLS_END)
FENCE = "```json"

CONTENT, SECTION, HEAD, NAME, FENCE_OPEN, ARGS, SKIP = range(7)


class DeepSeekV3Parser(BlockParser):
    """Incremental parser for ``deepseek-v3`` (``v31=False``) and ``deepseek-v31``."""

    _BLOCK, _SKIP = SECTION, SKIP

    def __init__(self, family: str = "deepseek-v3", tools: ToolSpec | None = None) -> None:
        super().__init__(tools)
        if family not in ("deepseek-v3", "deepseek-v31"):
            raise UsageError(f"not a DeepSeek V3 family: {family}")
        self.family = family
        self._v31 = family == "deepseek-v31"
        # What may trail the JSON before <｜tool▁call▁end｜> without being part of it.
        self._trail = ASCII_WS if self._v31 else ASCII_WS + "`"
        self._head: list[str] = []
        self._find, self._hold = MARKERS.find, MARKERS.hold
        self._handlers = (self._content, self._between_calls, self._header, self._name,
                          self._fence, self._args, self._skip)

    def _begin_call(self, raw: str, in_block: bool) -> None:
        self._new_unit(raw, in_block)
        self._head = []
        self._state = HEAD

    def _opener(self, data: str, pos: int, m: int, lit: str) -> int:
        end = m + len(lit)
        if lit == CALLS_BEGIN:
            self._markup(lit)
            self._state = SECTION
        elif lit == CALL_BEGIN:  # a call without the section around it is still a call
            self._begin_call(lit, in_block=False)
        else:
            self._event(MarkupError(MarkupErrorKind.MALFORMED_TAG, lit))
        return end

    def _block_marker(self, data: str, m: int, lit: str) -> int | None:
        if lit == CALL_BEGIN:
            self._begin_call(lit, in_block=True)
            return m + len(lit)
        if lit == CALLS_END:
            return self._close_block(lit, m + len(lit))
        return None

    def _header(self, data: str, pos: int) -> int:
        """Between <｜tool▁call▁begin｜> and <｜tool▁sep｜>: the word ``function`` (V3) or the name."""
        call = self._call
        assert call is not None
        r, lit = self._gather(data, pos, self._head.append)
        if r != pos:
            return r
        head = "".join(self._head)
        if lit != SEP or not head.strip(ASCII_WS) or (not self._v31 and head != "function"):
            self._void(MarkupErrorKind.MALFORMED_TAG)
            return pos
        call.raw.append(lit)
        if self._v31:
            self._name_call(head)
            self._state, self._started, self._tail = ARGS, False, []
        else:
            self._head = []
            self._state = NAME
        return pos + len(lit)

    def _name(self, data: str, pos: int) -> int:
        """V3: the name runs to the end of the line."""
        call = self._call
        assert call is not None
        m, _ = self._find(data, pos)
        nl = data.find("\n", pos, m if m != -1 else len(data))
        if nl == -1:
            end = m if m != -1 else self._hold(data, pos)
            call.raw.append(data[pos:end])
            self._head.append(data[pos:end])
            if m == -1:
                return ~end
            self._void(MarkupErrorKind.MALFORMED_TAG)
            return end
        call.raw.append(data[pos:nl + 1])
        self._head.append(data[pos:nl])
        name = "".join(self._head).strip(ASCII_WS)
        if not name:
            self._void(MarkupErrorKind.MALFORMED_TAG)
            return nl + 1
        self._name_call(name)
        self._state, self._started, self._tail = FENCE_OPEN, False, []
        return nl + 1

    def _fence(self, data: str, pos: int) -> int:
        """V3: an optional ```json line before the arguments."""
        call = self._call
        assert call is not None
        q = first_non_ws(data, pos, len(data))
        if q == -1:
            call.raw.append(data[pos:])
            return ~len(data)
        call.raw.append(data[pos:q])
        if data[q] != "`":
            self._state = ARGS
            return q
        if data.startswith(FENCE, q):
            call.raw.append(FENCE)
            self._state = ARGS
            return q + len(FENCE)
        if FENCE.startswith(data[q:]):
            return ~q
        self._void(MarkupErrorKind.MALFORMED_TAG)
        return q

    def _args(self, data: str, pos: int) -> int:
        call = self._call
        assert call is not None
        m, lit = self._find(data, pos)
        end = m if m != -1 else self._hold(data, pos)
        if end > pos:
            seg = data[pos:end]
            call.raw.append(seg)
            self._stream_args(seg, self._trail)
            return end if m != -1 else ~end
        if m == -1:
            return ~pos
        if lit != CALL_END:  # the markers are reserved inside the arguments
            self._void(MarkupErrorKind.MALFORMED_TAG)
            return pos
        call.raw.append(lit)
        tail, self._tail = "".join(self._tail), []
        padding = not tail.strip(ASCII_WS) or (
            not self._v31 and tail.strip(ASCII_WS).startswith("```")
            and not tail.strip(ASCII_WS)[3:].strip(ASCII_WS))
        self._end_object_call("".join(call.frags), emit=False, well_formed=padding)
        return m + len(lit)

    def _skip_marker(self, data: str, m: int, lit: str, call: Call) -> tuple[int, int]:
        if lit in ((CALL_BEGIN, CALLS_END) if call.in_block else (CALL_BEGIN, CALLS_BEGIN)):
            return m, RESUME
        if lit == CALL_END and not call.in_block:  # in a section, resume at the next call
            return m + len(lit), END
        return m + len(lit), SWALLOW


# ── the family descriptors ─────────────────────────────────────────────────────────────────────────

_V3_HEAD = "function" + SEP


def auto_kind(held: str, final: bool) -> str | None:
    """V3 or V3.1 for markup starting at ``held[0]`` (``None``: not yet known): V3.1 writes JSON
    right after the separator, V3 the word ``function``, the separator, a name and a newline."""
    begin = held.find(CALL_BEGIN)
    if begin == -1:
        return "deepseek-v3" if final else None
    after = held[begin + len(CALL_BEGIN):]
    if after.startswith(_V3_HEAD):
        rest = after[len(_V3_HEAD):]
        if rest:
            return "deepseek-v31" if rest[0] == "{" else "deepseek-v3"
        return "deepseek-v3" if final else None
    if _V3_HEAD.startswith(after):
        return "deepseek-v3" if final else None
    return "deepseek-v31"


def claim(name: str, held: str, final: bool) -> Claim:
    if not held.startswith((CALLS_BEGIN, CALL_BEGIN)):
        return Claim.NO
    kind = auto_kind(held, final)
    return Claim.MORE if kind is None else Claim.YES if kind == name else Claim.NO


def render_v3(calls: Sequence[CallLike], malformed: bool) -> str:
    body = "\n".join(f"{CALL_BEGIN}function{SEP}{c.name}\n```json\n{c.arguments}\n```{CALL_END}"
                     for c in calls)
    return f"{CALLS_BEGIN}{body}{CALLS_END}"


def render_v31(calls: Sequence[CallLike], malformed: bool) -> str:
    body = "".join(f"{CALL_BEGIN}{c.name}{SEP}{c.arguments}{CALL_END}" for c in calls)
    return f"{CALLS_BEGIN}{body}{CALLS_END}"
