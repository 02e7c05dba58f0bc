"""Hermes / Qwen 2.5 / Qwen 3 tool calls (``hermes``): one JSON object per ``<tool_call>`` block.

``{"name": …, "arguments": {…}}`` (some models write ``parameters``). The scanner follows JSON strings,
so a ``</tool_call>`` inside a string value does not end the call.

In the order the chat templates write (name first, arguments last) the call is announced as soon as
the name is complete and the arguments stream verbatim as they arrive, holding back only the final
``}`` that may be the object's own; the whole block is validated at its closer (decision 4: a block
that fails is void). In any other order the name may come last, so the call goes out whole at the
closer, its arguments re-serialized from the strictly parsed object.
"""

from __future__ import annotations

import json
import re

from sseguard.toolcalls._base import (
    ASCII_WS,
    BaseParser,
    JSONProblem,
    JSONStrings,
    Markers,
    MarkupError,
    MarkupErrorKind,
    ToolSpec,
    strict_json,
)

TOOL_CALL = "<tool_call>"
TOOL_CALL_END = "</tool_call>"
MARKERS = Markers((TOOL_CALL, TOOL_CALL_END))
REASONING_EXITS = (TOOL_CALL,)
FAMILY_MARKERS = (TOOL_CALL, TOOL_CALL_END)
SEPARATOR = "\n"

_HEAD = re.compile(r'\s*\{\s*"name"\s*:\s*("(?:[^"\\]|\\.)*")\s*,\s*"(arguments|parameters)"\s*:')
HEAD_CAP = 1024  # past this many characters without the usual head, the block is read whole

CONTENT, BODY = range(2)


class HermesParser(BaseParser):
    """Incremental parser for Hermes-style ``<tool_call>{json}</tool_call>`` blocks."""

    family = "hermes"

    def __init__(self, tools: ToolSpec | None = None) -> None:
        super().__init__(tools)
        self._sep = SEPARATOR
        self._buf: list[str] = []
        self._size = 0  # characters in _buf
        self._strings = JSONStrings()
        self._streaming = False  # the head matched: the arguments stream as they arrive
        self._args_key = ""
        self._find, self._hold = MARKERS.find, MARKERS.hold
        self._handlers = (self._content, self._body)

    def _opener(self, data: str, pos: int, m: int, lit: str) -> int:
        if lit == TOOL_CALL_END:
            self._text(data[pos:m])
            self._event(MarkupError(MarkupErrorKind.MALFORMED_TAG, lit))
            return m + len(lit)
        self._markup(data[pos:m])
        self._new_unit(lit, in_block=False)
        self._buf, self._size, self._strings = [], 0, JSONStrings()
        self._streaming, self._started, self._tail = False, False, []
        self._state = BODY
        return m + len(lit)

    def _body(self, data: str, pos: int) -> int:
        call = self._call
        assert call is not None
        i, n = pos, len(data)
        while True:
            j = self._strings.next_lt(data, i, n)
            if j == n:
                break
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
        if end <= start:
            return
        seg = data[start:end]
        assert self._call is not None
        self._call.raw.append(seg)
        self._buf.append(seg)
        self._size += len(seg)
        if self._streaming:
            self._stream_args(seg, ASCII_WS, "}")  # the final "}" may be the object's own
        elif self._call.index is None and self._size - len(seg) < HEAD_CAP:
            body = "".join(self._buf)  # a bounded look at the head, not a rescan of the call
            m = _HEAD.match(body)
            if m is not None:
                try:
                    name = json.loads(m.group(1))
                except ValueError:
                    return
                self._name_call(name)
                self._streaming, self._args_key = True, m.group(2)
                self._stream_args(body[m.end():], ASCII_WS, "}")


    def _complete(self) -> None:
        call = self._call
        assert call is not None
        self._state = CONTENT
        try:
            obj = strict_json("".join(self._buf).strip(ASCII_WS))
            if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
                raise JSONProblem(MarkupErrorKind.BAD_PARAM_JSON)
            if self._streaming:
                # the streamed text must be exactly the arguments: the last member, then "}"
                if "".join(self._tail).strip(ASCII_WS) != "}" or strict_json(
                        "".join(call.frags)) != obj.get(self._args_key):
                    raise JSONProblem(MarkupErrorKind.BAD_PARAM_JSON)
                args = obj[self._args_key]
            else:
                args = obj.get("arguments", obj.get("parameters", {}))
            if not isinstance(args, dict):
                raise JSONProblem(MarkupErrorKind.BAD_PARAM_JSON)
        except JSONProblem as problem:
            self._fail_call(problem.kind)
            return
        if not self._streaming:
            self._name_call(obj["name"])
            self._delta(json.dumps(args, ensure_ascii=False))
        self._end_call(close_object=False)
