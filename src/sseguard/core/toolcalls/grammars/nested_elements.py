"""MiniMax-M3 tool calls (``minimax-m3``; docs/design/markup.md class G′): nested parameter elements.

```
]<]minimax[>[<tool_call>]<]minimax[>[<invoke name="get_weather">]<]minimax[>[<city>Paris]<]minimax[>[</city>
]<]minimax[>[<filter>]<]minimax[>[<unit>C]<]minimax[>[</unit>]<]minimax[>[</filter>]<]minimax[>[</invoke>
]<]minimax[>[</tool_call>
```

Every tag is the namespace token ``]<]minimax[>[`` (a marker that starts with ``]``, not ``<``), then
optional whitespace, then an XML-like tag. A parameter is an element named by its key; an element
with child elements is an object (a repeated child name gathers its values in an array; a
parameter whose schema is an array takes its children's values as the items), a leaf is typed by
the schema of its parameter, with MiniMax's untyped rule (the raw string, byte-exact; exactly
``null`` is null). The schema of nested leaves is not known to the parser (``ToolSpec`` keeps each
parameter's own types), so nested leaves follow the untyped rule. Nesting deeper than 128 elements
is ``malformed_tag``. A parameter goes out as one delta when its element closes (its value is
decided by its shape). The invoke's name may stand in double, single or no quotes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from sseguard.core.toolcalls.events import MarkupError, MarkupErrorKind
from sseguard.core.toolcalls.family import CallLike
from sseguard.core.toolcalls.grammars.base import Call
from sseguard.core.toolcalls.grammars.blocks import RESUME, SWALLOW, BlockParser
from sseguard.core.toolcalls.grammars.markers import TAG_CAP, Markers
from sseguard.core.toolcalls.grammars.strict_json import ASCII_WS, JSONProblem
from sseguard.core.toolcalls.schema import ToolSpec, ValueTyping

NS = "]<]minimax[>["
MARKERS = Markers((NS,))
BLOCK, BLOCK_END, INVOKE_END = "tool_call", "/tool_call", "/invoke"
DEPTH_CAP = 128
_TAG = re.compile(r"[ \t\r\n]*<(/?)([^\s<>/=\"']+)(?:\s+name=(?:\"([^\"]*)\"|'([^']*)'|([^\s>]+)))?"
                  r"\s*>")
_UNTYPED = ValueTyping(frozenset(), True, null_literal=True)

_, IN_BLOCK, INVOKE, ELEM, SKIP = range(5)


class _Elem:
    __slots__ = ("children", "name", "text")

    def __init__(self, name: str) -> None:
        self.name = name
        self.text: list[str] = []
        self.children: list[tuple[str, Any]] = []


def _leaf(raw: str) -> Any:
    return None if raw == "null" else raw


def _object(children: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in children:
        if name in out:
            prev = out[name]
            out[name] = [*prev, value] if isinstance(prev, _Many) else _Many([prev, value])
        else:
            out[name] = value
    return {k: list(v) if isinstance(v, _Many) else v for k, v in out.items()}


class _Many(list[Any]):
    """Values gathered under a repeated child name (told apart from a value that is a list)."""


class MiniMaxM3Parser(BlockParser):
    """Incremental parser for ``minimax-m3``."""

    family = "minimax-m3"
    _BLOCK, _SKIP = IN_BLOCK, SKIP
    _lead_char = "]"

    def __init__(self, tools: ToolSpec | None = None) -> None:
        super().__init__(tools)
        self._find, self._hold = MARKERS.find, MARKERS.hold
        self._stack: list[_Elem] = []
        self._handlers = (self._content, self._between_calls, self._invoke, self._elem, self._skip)

    def _read(self, data: str, m: int) -> tuple[int, tuple[bool, str, str | None] | None]:
        """The tag after the token at ``m``: (its end, (closing, word, name attribute) or None when
        it is malformed); end -1 while it is incomplete."""
        start = m + len(NS)
        k = start
        while k < len(data) and data[k] in " \t\r\n":
            k += 1
        if k == len(data):
            return (-1 if k - start < TAG_CAP else k), None
        if data[k] != "<":
            return k, None
        gt = data.find(">", k)
        nxt = data.find(NS, k, gt if gt != -1 else len(data))
        if nxt != -1:
            return nxt, None
        if gt == -1:
            return (-1 if len(data) - k < TAG_CAP else k + TAG_CAP), None
        t = _TAG.fullmatch(data, start, gt + 1)
        if t is None:
            return gt + 1, None
        name = next((g for g in (t[3], t[4], t[5]) if g is not None), None)
        return gt + 1, (t[1] == "/", t[2], name)

    def _opener(self, data: str, pos: int, m: int, lit: str) -> int:
        end, tag = self._read(data, m)
        if end < 0:
            return ~pos
        self._text(data[pos:m])
        if tag == (False, BLOCK, None):
            self._markup(data[m:end])
            self._state = IN_BLOCK
            return end
        self._event(MarkupError(MarkupErrorKind.MALFORMED_TAG, data[m:end]))
        return end

    def _block_marker(self, data: str, m: int, lit: str) -> int | None:
        end, tag = self._read(data, m)
        if end < 0:
            return ~m
        if tag is not None and tag[:2] == (False, "invoke") and tag[2]:
            self._start_call(tag[2], data[m:end], in_block=True)
            self._stack = []
            self._state = INVOKE
            return end
        if tag == (True, BLOCK, None):
            return self._close_block(data[m:end], end)
        return None

    def _invoke(self, data: str, pos: int) -> int:
        """State ``INVOKE``: whitespace, then a parameter element or the invoke's closer."""
        call = self._call
        assert call is not None
        r, lit = self._tag_in_call(data, pos)
        if lit is None:
            return r
        end, tag = self._read(data, pos)
        if end < 0:
            return ~pos
        if tag is not None and not tag[0] and tag[2] is None and tag[1] not in ("invoke", BLOCK):
            call.raw.append(data[pos:end])
            if self._add_key(tag[1]):
                self._stack = [_Elem(tag[1])]
                self._state = ELEM
            return end
        if tag == (True, "invoke", None):
            call.raw.append(data[pos:end])
            self._end_call()
            self._after_call(True)
            return end
        self._void(MarkupErrorKind.MALFORMED_TAG)
        return pos

    def _elem(self, data: str, pos: int) -> int:
        """State ``ELEM``: inside a parameter's element tree, up to the closer of its root."""
        call = self._call
        assert call is not None
        top = self._stack[-1]
        r, _ = self._gather(data, pos, top.text.append)
        if r != pos:
            return r
        end, tag = self._read(data, pos)
        if end < 0:
            return ~pos
        if tag is None or tag[2] is not None:
            self._void(MarkupErrorKind.MALFORMED_TAG)
            return pos
        closing, word, _ = tag
        if not closing:
            if "".join(top.text).strip(ASCII_WS) or len(self._stack) >= DEPTH_CAP:
                self._void(MarkupErrorKind.MALFORMED_TAG)  # text beside children / too deep
                return pos
            top.text = []
            call.raw.append(data[pos:end])
            self._stack.append(_Elem(word))
            return end
        if word != top.name or (top.children and "".join(top.text).strip(ASCII_WS)):
            self._void(MarkupErrorKind.MALFORMED_TAG)  # another element's closer / text after children
            return pos
        call.raw.append(data[pos:end])
        self._stack.pop()
        if self._stack:
            parent = self._stack[-1]
            parent.children.append((word, _leaf("".join(top.text)) if not top.children
                                    else _object(top.children)))
            return end
        self._param_done(top)
        return end

    def _param_done(self, elem: _Elem) -> None:
        call = self._call
        assert call is not None
        types = self._tools.types_of(call.name, elem.name) if self._tools is not None else frozenset()
        try:
            if elem.children:
                if types and not types & {"object", "array"}:
                    raise JSONProblem(MarkupErrorKind.BAD_PARAM_JSON)
                value: Any = ([v for _, v in elem.children]
                              if "array" in types and "object" not in types
                              else _object(elem.children))
                text = json.dumps(value, ensure_ascii=False)
            else:
                text = ValueTyping.of(types, _UNTYPED, True).encode("".join(elem.text))
        except JSONProblem as problem:
            self._void(problem.kind)
            return
        self._delta(call.key_prefix(elem.name) + text)
        self._state = INVOKE

    def _skip_marker(self, data: str, m: int, lit: str, call: Call) -> tuple[int, int]:
        """A void call is swallowed up to the next invoke or the block's closer."""
        end, tag = self._read(data, m)
        if end < 0:
            return -1, SWALLOW
        if (tag is not None and tag[:2] == (False, "invoke") and tag[2]) or tag == (True, BLOCK,
                                                                                    None):
            return end, RESUME
        return end, SWALLOW


# ── the family descriptor ──────────────────────────────────────────────────────────────────────────


def _element(key: str, value: Any) -> str:
    if isinstance(value, dict):
        inner = "".join(_element(k, v) for k, v in value.items())
    elif isinstance(value, list):
        inner = "".join(_element("item", v) for v in value)
    else:
        inner = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return f"{NS}<{key}>{inner}{NS}</{key}>"


def render(calls: Sequence[CallLike], malformed: bool) -> str:
    """The block as the template writes it; ``malformed`` misspells the first invoke's closer."""
    out = [f"{NS}<tool_call>"]
    for i, call in enumerate(calls):
        out.append(f'{NS}<invoke name="{call.name}">')
        out.extend(_element(k, v) for k, v in call.values.items())
        out.append(f"{NS}</{'invok' if malformed and i == 0 else 'invoke'}>")
    out.append(f"{NS}</tool_call>")
    return "".join(out)
