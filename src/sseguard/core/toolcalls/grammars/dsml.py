"""DeepSeek DSML markup (V3.2, V4, V4.1): one state machine, parameterised by tag names.

The three families differ only in their native block name (``function_calls``, ``tool_calls``,
`` calls``); every DSML family accepts every spelling, because V4 models emit V3.2 blocks and V4.1 models
unspaced ones (decision 1.6). The block opener picks the spelling for everything inside it.

Why the hot path is cheap: inside a ``string="true"`` value the only thing that can matter is a ``<``,
so a chunk without one is escaped and emitted as it is — one ``in`` test and one C-level escape
(``BaseParser._STRING``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sseguard.core.errors import UsageError
from sseguard.core.toolcalls.events import MarkupError, MarkupErrorKind
from sseguard.core.toolcalls.family import CallLike, Claim
from sseguard.core.toolcalls.grammars.base import Call
from sseguard.core.toolcalls.grammars.blocks import END, RESUME, SWALLOW, BlockParser
from sseguard.core.toolcalls.grammars.strict_json import ASCII_WS, json_string_body
from sseguard.core.toolcalls.schema import ToolSpec

MARK = "｜DSML｜"
OPEN = "<｜DSML｜"
CLOSE = "</｜DSML｜"
SEPARATOR = "\n\n"


@dataclass(frozen=True, slots=True)
class DsmlSpelling:
    """How a DSML version spells its tags: a space or none between the marker and the tag name,
    and the names its block may have (V3.2 and V4 spell them alike, V4.1 otherwise)."""

    spaced: bool  # V4.1 writes a space between the marker and the tag name
    blocks: tuple[str, ...]

    def tag(self, word: str, closing: bool = False) -> str:
        return f"{CLOSE if closing else OPEN}{' ' if self.spaced else ''}{word}"


UNSPACED = DsmlSpelling(False, ("function_calls", "tool_calls"))
SPACED = DsmlSpelling(True, ("calls",))

#: family name → its native block name (what its encoder writes; all spellings are accepted).
FAMILY_BLOCKS = {"dsml-v32": (UNSPACED, "function_calls"), "dsml-v4": (UNSPACED, "tool_calls"),
                 "dsml-v41": (SPACED, "calls")}


def family_markers(family: str) -> list[str]:
    """The marker texts of a family as its encoder writes them (for ``sseguard tokenizer``)."""
    spelling, block = FAMILY_BLOCKS[family]
    return [MARK, spelling.tag(block) + ">", spelling.tag(block, True) + ">", spelling.tag("invoke"),
            spelling.tag("invoke", True) + ">", spelling.tag("parameter"),
            spelling.tag("parameter", True) + ">"]


#: Markers that end reasoning implicitly (decision 1.10): any DSML opener.
REASONING_EXITS = (OPEN,)

_TAG_RE = re.compile(r"<(/?)｜DSML｜( ?)([A-Za-z_]+)([^>]*)>")
_WS_RE = re.compile(r"\s*")
_INVOKE_ATTRS = re.compile(r'\s+name="([^"]+)"\s*(/?)')
_PARAM_ATTRS = re.compile(r'\s+name="([^"]+)"(?:\s+string="([^"]*)")?\s*')

BLOCK, INVOKE, PARAMETER = "block", "invoke", "parameter"


@dataclass(frozen=True, slots=True)
class Tag:
    """A complete DSML tag, classified."""

    closing: bool
    spaced: bool
    kind: str  # block | invoke | parameter
    word: str
    name: str = ""
    flag: str | None = None
    self_closing: bool = False


def classify(tag: str) -> Tag | None:
    """Parse one tag text (marker to ``>``); ``None`` when it is no tag of any spelling."""
    m = _TAG_RE.fullmatch(tag)
    if m is None:
        return None
    closing, spaced, word, tail = m[1] == "/", m[2] == " ", m[3], m[4]
    spelling = SPACED if spaced else UNSPACED
    if word in spelling.blocks:
        kind = BLOCK
    elif word in (INVOKE, PARAMETER):
        kind = word
    else:
        return None
    if closing or kind == BLOCK:
        return Tag(closing, spaced, kind, word) if _WS_RE.fullmatch(tail) else None
    if kind == INVOKE:
        a = _INVOKE_ATTRS.fullmatch(tail)
        return Tag(False, spaced, kind, word, a[1], self_closing=a[2] == "/") if a else None
    a = _PARAM_ATTRS.fullmatch(tail)
    return Tag(False, spaced, kind, word, a[1], a[2]) if a else None


def find_marker(data: str, pos: int) -> tuple[int, str]:
    """(start, "") of the first complete ``<｜DSML｜`` or ``</｜DSML｜`` at or after ``pos``, or
    (-1, ""); the tag's text is read once it is complete (``classify``)."""
    i = data.find(MARK, pos)
    while i != -1:
        if i - 1 >= pos and data[i - 1] == "<":
            return i - 1, ""
        if i - 2 >= pos and data[i - 2] == "<" and data[i - 1] == "/":
            return i - 2, ""
        i = data.find(MARK, i + 1)
    return -1, ""


def hold_start(data: str, pos: int) -> int:
    """Where a suffix that could still become a DSML marker starts (``len(data)`` if none)."""
    n = len(data)
    j = data.rfind("<", max(pos, n - 8))
    if j != -1:
        tail = data[j:]
        if OPEN.startswith(tail) or CLOSE.startswith(tail):
            return j
    return n


CONTENT, IN_BLOCK, IN_INVOKE, STRING_VALUE, JSON_VALUE, JSON_BODY, SKIP = range(7)


class DSMLParser(BlockParser):
    """Incremental parser for the DSML families; docs/design/markup.md §1 has the format and decisions."""

    _BLOCK, _SKIP, _STRING = IN_BLOCK, SKIP, STRING_VALUE

    def __init__(self, family: str = "dsml-v32", tools: ToolSpec | None = None) -> None:
        super().__init__(tools)
        if family not in FAMILY_BLOCKS:
            raise UsageError(f"not a DSML family: {family}")
        self.family = family
        self._sep = SEPARATOR
        self._block: str | None = None  # the open block's tag word, None outside blocks
        self._buf: list[str] = []  # a string="false" value or a JSON body, until its closer
        self._key = ""
        self._find, self._hold = find_marker, hold_start
        self._classify = classify  # a family with another marker binds its own three
        self._handlers = (self._content, self._between_calls, self._in_invoke, self._string_value,
                          self._json_value, self._json_body, self._skip)

    # tags -----------------------------------------------------------------------------------------

    def _open_invoke(self, tag: Tag, text: str, in_block: bool) -> None:
        self._start_call(tag.name, text, in_block, tag.spaced)
        if tag.self_closing:
            self._end_call()
            self._after_call(in_block)
        else:
            self._state = IN_INVOKE

    def _read_tag(self, data: str, m: int) -> tuple[int, str, Tag | None]:
        """The tag starting at ``m``: (its end, its text, what it is); end -1 while incomplete."""
        tend = self._tag_end(data, m)
        if tend < 0:
            return -1, "", None
        text = data[m:tend]
        return tend, text, self._classify(text)

    # states ---------------------------------------------------------------------------------------

    def _opener(self, data: str, pos: int, m: int, lit: str) -> int:
        end, text, tag = self._read_tag(data, m)
        if end < 0:
            return ~pos
        if tag is not None and not tag.closing and tag.kind in (BLOCK, INVOKE):
            if tag.kind == BLOCK:
                self._markup(data[pos:end])
                self._block, self._spaced = tag.word, tag.spaced
                self._state = IN_BLOCK
            else:
                self._markup(data[pos:m])
                self._open_invoke(tag, text, in_block=False)
            return end
        self._text(data[pos:m])  # a separator before a non-opener is ordinary text
        self._event(MarkupError(MarkupErrorKind.MALFORMED_TAG, text))
        return end

    def _block_marker(self, data: str, m: int, lit: str) -> int | None:
        tend, text, tag = self._read_tag(data, m)
        if tend < 0:
            return ~m
        if tag is not None and tag.spaced == self._spaced and not tag.closing and tag.kind == INVOKE:
            self._open_invoke(tag, text, in_block=True)
            return tend
        if tag is not None and tag.closing and tag.kind == BLOCK and tag.word == self._block:
            self._block = None
            return self._close_block(text, tend)
        return None

    def _in_invoke(self, data: str, pos: int) -> int:
        call = self._call
        assert call is not None
        r, lit = self._gather_ws(data, pos, call.raw.append)
        if lit is None:
            if call.keys:  # text after parameters has no place
                self._void(MarkupErrorKind.MALFORMED_TAG)
            else:  # an invoke whose body is one JSON object
                self._buf = []
                self._state = JSON_BODY
            return r
        if r != pos:
            return r
        tend, text, tag = self._read_tag(data, pos)
        if tend < 0:
            return ~pos
        if tag is not None and tag.spaced == call.spaced:
            if tag.kind == PARAMETER and not tag.closing:
                call.raw.append(text)
                if tag.flag not in ("true", "false"):
                    self._void(MarkupErrorKind.INVALID_STRING_FLAG)
                elif self._add_key(tag.name):
                    if tag.flag == "true":
                        self._delta(call.key_prefix(tag.name) + '"')
                        self._state = STRING_VALUE
                    else:
                        self._key, self._buf = tag.name, []
                        self._state = JSON_VALUE
                return tend
            if tag.kind == INVOKE and tag.closing:
                call.raw.append(text)
                self._end_call()
                self._after_call(call.in_block)
                return tend
        self._void(MarkupErrorKind.MALFORMED_TAG)
        return pos

    def _value_closer(self, data: str, m: int) -> int:
        """At the marker at ``m`` inside a value: the end of the parameter closer, read (the value
        ended); ``~m`` while the tag is incomplete; or ``m`` when it is any other tag: the marker is
        reserved inside values (decision 1.5), the call is void."""
        tend, text, tag = self._read_tag(data, m)
        if tend < 0:
            return ~m
        call = self._call
        assert call is not None
        if tag is not None and tag.closing and tag.kind == PARAMETER and tag.spaced == call.spaced:
            call.raw.append(text)
            return tend
        self._void(MarkupErrorKind.MALFORMED_TAG)
        return m

    def _string_value(self, data: str, pos: int) -> int:
        m, _ = self._find(data, pos)
        end = m if m != -1 else self._hold(data, pos)
        if end > pos:  # the value's text, inlined rather than _gather: this is the hot path
            s = data[pos:end]
            assert self._call is not None
            self._call.raw.append(s)
            self._delta(json_string_body(s))
            return end if m != -1 else ~end
        if m == -1:
            return ~pos
        r = self._value_closer(data, m)
        if r > m:
            self._delta('"')
            self._state = IN_INVOKE
        return r

    def _json_value(self, data: str, pos: int) -> int:
        r, _ = self._gather(data, pos, self._buf.append)
        if r != pos:
            return r
        r = self._value_closer(data, pos)
        if r > pos:
            buf, self._buf = self._buf, []
            self._json_param(self._key, buf, IN_INVOKE)
        return r

    def _json_body(self, data: str, pos: int) -> int:
        call = self._call
        assert call is not None
        r, _ = self._gather(data, pos, self._buf.append)
        if r != pos:
            return r
        tend, text, tag = self._read_tag(data, pos)
        if tend < 0:
            return ~pos
        if tag is None or not (tag.closing and tag.kind == INVOKE and tag.spaced == call.spaced):
            self._void(MarkupErrorKind.MALFORMED_TAG)
            return pos
        call.raw.append(text)
        body = "".join(self._buf).strip(ASCII_WS)
        self._buf = []
        self._end_object_call(body, emit=True)
        return tend

    def _skip_marker(self, data: str, m: int, lit: str, call: Call) -> tuple[int, int]:
        """Parsing resumes (decision 1.5) at the next invoke opener or the block closer; outside a
        block also after the invoke closer, so that a broken bare invoke does not swallow the answer
        after it."""
        tend, _, tag = self._read_tag(data, m)
        if tag is not None:
            if call.in_block:
                resume = ((tag.kind == INVOKE and not tag.closing and tag.spaced == call.spaced)
                          or (tag.kind == BLOCK and tag.closing and tag.word == self._block))
            else:
                resume = not tag.closing and tag.kind in (INVOKE, BLOCK)
            if resume:
                return tend, RESUME
            if (not call.in_block and tag.kind == INVOKE and tag.closing
                    and tag.spaced == call.spaced):
                return tend, END  # no block to resume in: the invoke's own closer ends the damage
        return tend, SWALLOW


# ── the family descriptors ─────────────────────────────────────────────────────────────────────────


def auto_kind(held: str, final: bool) -> str | None:
    """Which DSML family markup starting at ``held[0]`` is (``None``: not yet known). Any DSML
    family reports a marker that is no tag the same way, so such markup is ``dsml-v4``'s."""
    gt = held.find(">")
    if held.find("<", 1, gt if gt != -1 else len(held)) != -1 or (gt == -1 and final):
        return "dsml-v4"
    if gt == -1:
        return None
    tag = classify(held[:gt + 1])
    if tag is not None and tag.spaced:
        return "dsml-v41"
    return "dsml-v32" if tag is not None and tag.word == "function_calls" else "dsml-v4"


def claim(name: str, held: str, final: bool) -> Claim:
    if not held.startswith((OPEN, CLOSE)):  # a partial marker at the end: reported as V4 does
        partial_marker = final and (OPEN.startswith(held) or CLOSE.startswith(held))
        return Claim.YES if partial_marker and name == "dsml-v4" else Claim.NO
    kind = auto_kind(held, final)
    return Claim.MORE if kind is None else Claim.YES if kind == name else Claim.NO


def _value(value: Any) -> tuple[str, str]:
    """(string flag, text): strings verbatim with no escaping; anything else as JSON."""
    if isinstance(value, str):
        return "true", value
    return "false", json.dumps(value, ensure_ascii=False)


def render(name: str, calls: Sequence[CallLike], malformed: bool) -> str:
    """The block as the encoder writes it, after its ``\\n\\n``; ``malformed`` misspells the first
    string parameter's closer, else the first invoke's."""
    spelling, block = FAMILY_BLOCKS[name]
    sp = " " if spelling.spaced else ""
    target = next(((i, k) for i, c in enumerate(calls) for k, v in c.values.items()
                   if isinstance(v, str)), None)
    bad_invoke = malformed and target is None
    out = [f"{SEPARATOR}<{MARK}{sp}{block}>\n"]
    for i, call in enumerate(calls):
        out.append(f'<{MARK}{sp}invoke name="{call.name}">\n')
        for key, value in call.values.items():
            flag, text = _value(value)
            closer = "parametr" if malformed and target == (i, key) else "parameter"
            out.append(f'<{MARK}{sp}parameter name="{key}" string="{flag}">{text}'
                       f"</{MARK}{sp}{closer}>\n")
        out.append(f"</{MARK}{sp}{'invok' if bad_invoke and i == 0 else 'invoke'}>\n")
    out.append(f"</{MARK}{sp}{block}>")
    return "".join(out)
