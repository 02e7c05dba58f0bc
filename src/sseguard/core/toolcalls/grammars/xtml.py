"""Kimi K3 XTML tool calls (``kimi-k3``; docs/design/markup.md classes G+I).

```
<|open|>think<|sep|>…<|close|>think<|sep|><|open|>response<|sep|>Let me check.<|close|>response<|sep|>
<|open|>tools<|sep|><|open|>call tool="get_weather" index="1"<|sep|>
<|open|>argument key="city" type="string"<|sep|>Paris<|close|>argument<|sep|>
<|close|>call<|sep|><|close|>tools<|sep|>
```

Every tag is ``<|open|>HEAD<|sep|>`` or ``<|close|>WORD<|sep|>`` (the three markers are special
tokens): channels ``think`` (reasoning, emitted as ``Reasoning``), ``response`` (visible text) and
``tools`` (the block of calls), a call's ``tool=`` and ``index=`` (kept as the call id, §4 decision
10), an argument's ``key=`` and ``type=``. The type is a flag as DSML's ``string=`` is (decision 3.6):
``string`` → the raw value, byte-exact; any other JSON Schema type name → strict JSON of that type;
anything else, or no type → ``invalid_string_flag``. Attribute values unescape ``&quot;`` and
``&amp;`` (how a quote gets into a name). The markers are reserved inside values: only the
argument's closer ends one, any other tag voids the call (decision 1.5).

Text outside any channel, which the template does not write, is shown rather than lost. A tools
opener inside the think channel ends it (decision 3.9: a call opener ends reasoning). A tag cut off by
``max_tokens`` before its ``<|sep|>`` is ``unterminated`` (decision 3.3).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from sseguard.core.toolcalls.events import MarkupError, MarkupErrorKind
from sseguard.core.toolcalls.family import CallLike
from sseguard.core.toolcalls.grammars.base import CONTENT, Call
from sseguard.core.toolcalls.grammars.blocks import END, RESUME, SWALLOW, BlockParser
from sseguard.core.toolcalls.grammars.markers import TAG_CAP, Markers, split_partial_opener
from sseguard.core.toolcalls.grammars.strict_json import ASCII_WS, JSONProblem, json_string_body, strict_json
from sseguard.core.toolcalls.schema import JSON_TYPES, ToolSpec, type_allows

OPEN, CLOSE, SEP = "<|open|>", "<|close|>", "<|sep|>"
MARKERS = Markers((OPEN, CLOSE, SEP))
_HEAD = re.compile(r'([A-Za-z_]+)((?:\s+[A-Za-z_]+="[^"]*")*)\s*')
_ATTR = re.compile(r'([A-Za-z_]+)="([^"]*)"')

_, TOOLS, CALL, STRING, JSON_VALUE, SKIP, THINK = range(7)


def _unescape(value: str) -> str:
    return value.replace("&quot;", '"').replace("&amp;", "&")


class Tag:
    """One complete XTML tag: opening or closing, its word and attributes."""

    __slots__ = ("attrs", "closing", "text", "word")

    def __init__(self, text: str, closing: bool, word: str, attrs: dict[str, str]) -> None:
        self.text, self.closing, self.word, self.attrs = text, closing, word, attrs


class KimiK3Parser(BlockParser):
    """Incremental parser for Kimi K3's XTML channels and calls."""

    family = "kimi-k3"
    _BLOCK, _SKIP, _STRING = TOOLS, SKIP, STRING

    def __init__(self, tools: ToolSpec | None = None) -> None:
        super().__init__(tools)
        self._find, self._hold = MARKERS.find, MARKERS.hold
        self._key = ""
        self._type = ""
        self._buf: list[str] = []
        self._handlers = (self._content, self._between_calls, self._in_call, self._value,
                          self._value, self._skip, self._think)

    def _read(self, data: str, m: int, lit: str) -> tuple[int, Tag | None]:
        """The tag whose marker ``lit`` stands at ``m``: (its end, the tag or None when it is
        malformed); end -1 while it is incomplete. Another marker before ``<|sep|>`` ends a
        malformed tag there (it may start the next one)."""
        start = m + len(lit)
        if lit == SEP:
            return start, None
        k = data.find("<|", start)
        while k != -1 and not (data.startswith(SEP, k) or data.startswith((OPEN, CLOSE), k)):
            if any(t.startswith(data[k:]) for t in (OPEN, CLOSE, SEP)):
                return -1, None  # a marker still arriving
            k = data.find("<|", k + 2)
        if k == -1:
            return (start + TAG_CAP, None) if len(data) - start >= TAG_CAP else (-1, None)
        if not data.startswith(SEP, k):
            return k, None
        end = k + len(SEP)
        h = _HEAD.fullmatch(data, start, k)
        if h is None:
            return end, None
        attrs = {a[1]: _unescape(a[2]) for a in _ATTR.finditer(h[2])}
        if lit == CLOSE and attrs:
            return end, None
        return end, Tag(data[m:end], lit == CLOSE, h[1], attrs)

    # content and channels -------------------------------------------------------------------------

    def _opener(self, data: str, pos: int, m: int, lit: str) -> int:
        end, tag = self._read(data, m, lit)
        if end < 0:
            return ~pos
        self._text(data[pos:m])
        if tag is not None:
            if not tag.closing and tag.word in ("response", "think", "tools") and not tag.attrs:
                self._markup(tag.text)
                self._state = {"response": CONTENT, "think": THINK, "tools": TOOLS}[tag.word]
                return end
            if tag.closing and tag.word in ("response", "message"):
                self._markup(tag.text)
                return end
            if not tag.closing and tag.word == "call" and self._open_call(tag, False):
                return end
        self._event(MarkupError(MarkupErrorKind.MALFORMED_TAG, data[m:end]))
        return end

    def _think(self, data: str, pos: int) -> int:
        """State ``THINK``: reasoning up to the channel's closer, or a tools opener."""
        m, lit = self._find(data, pos)
        end = m if m != -1 else self._hold(data, pos)
        if end > pos:
            self._reasoning(data[pos:end])
            return end if m != -1 else ~end
        if m == -1:
            return ~pos
        tend, tag = self._read(data, m, lit)
        if tend < 0:
            return ~pos
        if tag is not None and tag.word == "think" and tag.closing:
            self._markup(tag.text)
            self._state = CONTENT
        elif tag is not None and tag.word == "tools" and not tag.closing and not tag.attrs:
            self._markup(tag.text)
            self._state = TOOLS
        else:
            self._reasoning(data[m:tend])
        return tend

    def _finish(self, rest: str) -> None:
        if self._state == THINK:  # an open reasoning channel ended with the stream; a tag cut off
            text, raw = split_partial_opener(rest, "")  # in it is unterminated (decision 3.3)
            self._reasoning(text)
            if raw:
                self._event(MarkupError(MarkupErrorKind.UNTERMINATED, raw))
            return
        super()._finish(rest)

    # calls ----------------------------------------------------------------------------------------

    @staticmethod
    def _call_tag(tag: Tag | None) -> bool:
        """Whether ``tag`` opens a call: ``call`` with a ``tool=`` and at most an ``index=``."""
        return (tag is not None and not tag.closing and tag.word == "call"
                and bool(tag.attrs.get("tool")) and not set(tag.attrs) - {"tool", "index"})

    def _open_call(self, tag: Tag, in_block: bool) -> bool:
        if not self._call_tag(tag):
            return False
        self._new_unit(tag.text, in_block)
        self._name_call(tag.attrs["tool"], tag.attrs.get("index"))
        self._state = CALL
        return True

    def _block_marker(self, data: str, m: int, lit: str) -> int | None:
        end, tag = self._read(data, m, lit)
        if end < 0:
            return ~m
        if tag is not None and not tag.closing and tag.word == "call":
            return end if self._open_call(tag, True) else None
        if tag is not None and tag.closing and tag.word == "tools":
            return self._close_block(tag.text, end)
        return None

    def _in_call(self, data: str, pos: int) -> int:
        """State ``CALL``: whitespace, then an argument or the call's closer."""
        call = self._call
        assert call is not None
        r, lit = self._tag_in_call(data, pos)
        if lit is None:
            return r
        end, tag = self._read(data, pos, lit)
        if end < 0:
            return ~pos
        if tag is not None and tag.word == "argument" and not tag.closing:
            key, kind = tag.attrs.get("key"), tag.attrs.get("type")
            call.raw.append(tag.text)
            if not key or set(tag.attrs) - {"key", "type"}:
                self._void(MarkupErrorKind.MALFORMED_TAG)
            elif kind not in JSON_TYPES:
                self._void(MarkupErrorKind.INVALID_STRING_FLAG)
            elif self._add_key(key):
                self._key, self._type, self._buf = key, kind, []
                if kind == "string":
                    self._delta(call.key_prefix(key) + '"')
                    self._state = STRING
                else:
                    self._state = JSON_VALUE
            return end
        if tag is not None and tag.word == "call" and tag.closing:
            call.raw.append(tag.text)
            self._end_call()
            self._after_call(call.in_block)
            return end
        self._void(MarkupErrorKind.MALFORMED_TAG)
        return pos

    def _value(self, data: str, pos: int) -> int:
        """States ``STRING`` (streamed) and ``JSON_VALUE`` (buffered): up to the argument's closer;
        any other tag voids the call."""
        call = self._call
        assert call is not None
        m, lit = self._find(data, pos)
        end = m if m != -1 else self._hold(data, pos)
        if end > pos:
            s = data[pos:end]
            call.raw.append(s)
            if self._state == STRING:
                self._delta(json_string_body(s))
            else:
                self._buf.append(s)
            return end if m != -1 else ~end
        if m == -1:
            return ~pos
        tend, tag = self._read(data, m, lit)
        if tend < 0:
            return ~pos
        if tag is None or not (tag.closing and tag.word == "argument"):
            self._void(MarkupErrorKind.MALFORMED_TAG)
            return m
        call.raw.append(tag.text)
        if self._state == STRING:
            self._delta('"')
            self._state = CALL
            return tend
        text = "".join(self._buf).strip(ASCII_WS)
        try:
            ok = type_allows(frozenset({self._type}), strict_json(text))
        except JSONProblem as problem:
            self._void(problem.kind)
            return tend
        if not ok:
            self._void(MarkupErrorKind.BAD_PARAM_JSON)
            return tend
        self._delta(call.key_prefix(self._key) + text)
        self._state = CALL
        return tend

    def _skip_marker(self, data: str, m: int, lit: str, call: Call) -> tuple[int, int]:
        """A void call is swallowed up to its own closer, or up to the next call or the block's
        closer when it never closed."""
        end, tag = self._read(data, m, lit)
        if end < 0:
            return -1, SWALLOW
        if self._call_tag(tag):  # only where the next state accepts it
            return end, RESUME
        if tag is not None and tag.closing and tag.word == "tools" and call.in_block:
            return end, RESUME
        if tag is not None and tag.closing and tag.word == "call":
            return end, END
        return end, SWALLOW


# ── the family descriptor ──────────────────────────────────────────────────────────────────────────


def _escape(value: str) -> str:
    return value.replace("&", "&amp;").replace('"', "&quot;")


def _wire(value: object) -> tuple[str, str]:
    """(type name, text) of an argument value as the template writes it."""
    if isinstance(value, str):
        return "string", value
    if value is None:
        kind = "null"
    elif isinstance(value, bool):
        kind = "boolean"
    elif isinstance(value, int):
        kind = "integer"
    elif isinstance(value, float):
        kind = "number"
    else:
        kind = "array" if isinstance(value, list) else "object"
    return kind, json.dumps(value, ensure_ascii=False)


def render(calls: Sequence[CallLike], malformed: bool) -> str:
    """The tools channel; ``malformed`` misspells the first call's last argument closer (no
    argument: its call closer)."""
    out = [f"{OPEN}tools{SEP}"]
    for i, call in enumerate(calls, 1):
        broken = malformed and i == 1
        out.append(f'{OPEN}call tool="{_escape(call.name)}" index="{i}"{SEP}')
        for j, (key, value) in enumerate(call.values.items(), 1):
            kind, text = _wire(value)
            word = "argumen" if broken and j == len(call.values) else "argument"
            out.append(f'{OPEN}argument key="{_escape(key)}" type="{kind}"{SEP}{text}{CLOSE}{word}{SEP}')
        out.append(f"{CLOSE}{'cal' if broken and not call.values else 'call'}{SEP}")
    out.append(f"{CLOSE}tools{SEP}")
    return "".join(out)
