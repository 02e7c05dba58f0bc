"""Hermes / Qwen 2.5 / Qwen 3 tool calls (``hermes``): one JSON object per ``<tool_call>`` block.

``{"name": …, "arguments": {…}}`` (some models write ``parameters``). The scanner follows JSON strings,
so a ``</tool_call>`` inside a string value does not end the call. The name can come after the
arguments in a JSON object, so a call is announced when its block is complete: its arguments go out as
one delta, re-serialized from the strictly parsed object.
"""

from __future__ import annotations

import json
import re

from sseguard.toolcalls._base import (
    ASCII_WS,
    BaseParser,
    JSONProblem,
    Markers,
    MarkupError,
    MarkupErrorKind,
    ToolSpec,
    split_partial_opener,
    strict_json,
)

TOOL_CALL = "<tool_call>"
TOOL_CALL_END = "</tool_call>"
MARKERS = Markers((TOOL_CALL, TOOL_CALL_END))
REASONING_EXITS = (TOOL_CALL,)
FAMILY_MARKERS = (TOOL_CALL, TOOL_CALL_END)
SEPARATOR = "\n"

_OUTSIDE = re.compile(r'["<]')  # outside a JSON string only a quote or a marker matters
_INSIDE = re.compile(r'["\\]')  # inside one, its end or an escape

CONTENT, BODY = range(2)


class HermesParser(BaseParser):
    """Incremental parser for Hermes-style ``<tool_call>{json}</tool_call>`` blocks."""

    family = "hermes"

    def __init__(self, tools: ToolSpec | None = None) -> None:
        super().__init__(tools)
        self._buf: list[str] = []
        self._in_string = False
        self._escape = False
        self._handlers = (self._content, self._body)

    def _content(self, data: str, pos: int) -> int:
        m, lit = MARKERS.find(data, pos)
        if m == -1:
            k = MARKERS.hold(data, pos)
            if k > pos and data[k - 1] == "\n":  # maybe the separator of an opener to come
                k -= 1
            self._text(data[pos:k])
            return ~k
        if m > pos and not (m - pos == 1 and data[pos] == "\n"):
            cut = m - 1 if m - 1 > pos and data[m - 1] == "\n" else m
            self._text(data[pos:cut])
            return cut
        if lit == TOOL_CALL_END:
            self._text(data[pos:m])
            self._event(MarkupError(MarkupErrorKind.MALFORMED_TAG, lit))
            return m + len(lit)
        self._markup(data[pos:m])
        self._new_unit(lit, in_block=False)
        self._buf, self._in_string, self._escape = [], False, False
        self._state = BODY
        return m + len(lit)

    def _body(self, data: str, pos: int) -> int:
        call = self._call
        assert call is not None
        i, n = pos, len(data)
        while i < n:
            if self._in_string:
                if self._escape:
                    self._escape = False
                    i += 1
                    continue
                hit = _INSIDE.search(data, i)
                if hit is None:
                    i = n
                    break
                i = hit.end()
                if hit.group() == "\\":
                    self._escape = True
                else:
                    self._in_string = False
                continue
            hit = _OUTSIDE.search(data, i)
            if hit is None:
                i = n
                break
            j = hit.start()
            if hit.group() == '"':
                self._in_string = True
                i = j + 1
                continue
            if data.startswith(TOOL_CALL_END, j):
                self._take_body(data, pos, j)
                call.raw.append(TOOL_CALL_END)
                self._complete()
                return j + len(TOOL_CALL_END)
            if data.startswith(TOOL_CALL, j):  # a new block opened before this one closed
                self._take_body(data, pos, j)
                self._fail_call(MarkupErrorKind.MALFORMED_TAG)
                self._state = CONTENT
                return j
            if MARKERS.hold(data, j) == j:  # a marker prefix at the very end: wait for more
                self._take_body(data, pos, j)
                return ~j
            i = j + 1
        self._take_body(data, pos, n)
        return ~n

    def _take_body(self, data: str, start: int, end: int) -> None:
        if end > start:
            assert self._call is not None
            self._call.raw.append(data[start:end])
            self._buf.append(data[start:end])

    def _complete(self) -> None:
        call = self._call
        assert call is not None
        self._state = CONTENT
        try:
            obj = strict_json("".join(self._buf).strip(ASCII_WS))
            if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
                raise JSONProblem(MarkupErrorKind.BAD_PARAM_JSON)
            args = obj.get("arguments", obj.get("parameters", {}))
            if not isinstance(args, dict):
                raise JSONProblem(MarkupErrorKind.BAD_PARAM_JSON)
        except JSONProblem as problem:
            self._fail_call(problem.kind)
            return
        self._name_call(obj["name"])
        self._delta(json.dumps(args, ensure_ascii=False))
        self._end_call(close_object=False)

    def _finish(self, rest: str) -> None:
        if self._state == CONTENT:
            text, raw = split_partial_opener(rest, SEPARATOR)
            self._text(text)
            if raw:
                self._event(MarkupError(MarkupErrorKind.UNTERMINATED, raw))
        else:
            assert self._call is not None
            self._call.raw.append(rest)
            self._fail_call(MarkupErrorKind.UNTERMINATED)
