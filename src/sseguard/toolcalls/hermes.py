"""JSON in tags: one JSON object ``{"name": …, "arguments": {…}}`` between an opener and a closer.

Hermes / Qwen 2.5 / Qwen 3 (``hermes``) write it between ``<tool_call>`` and ``</tool_call>`` (some
models write ``parameters`` for ``arguments``); ``json_in_tags(name, opener, closer)`` makes a complete
family of the same shape with other tags, which is what most third-party markups are. The scanner
follows JSON strings, so a closer inside a string value does not end the call.

In the order the chat templates write (name first, arguments last) the call is announced as soon as
the name is complete and the arguments stream verbatim as they arrive, holding back only the final
``}`` that may be the object's own; the whole block is validated at its closer (decision 4: a block
that fails is void). In any other order the name may come last, so the call goes out whole at the
closer, its arguments re-serialized from the strictly parsed object.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from functools import partial

from sseguard.errors import UsageError
from sseguard.toolcalls._engine import BaseParser
from sseguard.toolcalls._json import ASCII_WS, JSONProblem, JSONStrings, strict_json
from sseguard.toolcalls._markers import Markers, first_non_ws
from sseguard.toolcalls.events import MarkupError, MarkupErrorKind
from sseguard.toolcalls.family import CallLike, Claim, Family
from sseguard.toolcalls.schema import ToolSpec

TOOL_CALL = "<tool_call>"
TOOL_CALL_END = "</tool_call>"
REASONING_EXITS = (TOOL_CALL,)
FAMILY_MARKERS = (TOOL_CALL, TOOL_CALL_END)
SEPARATOR = "\n"

_HEAD = re.compile(r'\s*\{\s*"name"\s*:\s*("(?:[^"\\]|\\.)*")\s*,\s*"(arguments|parameters)"\s*:')
HEAD_CAP = 1024  # past this many characters without the usual head, the block is read whole

CONTENT, BODY = range(2)


class JSONInTagsParser(BaseParser):
    """Incremental parser for ``OPENER{json}CLOSER`` blocks (Hermes' ``<tool_call>`` by default)."""

    def __init__(self, tools: ToolSpec | None = None, *, family: str = "hermes",
                 opener: str = TOOL_CALL, closer: str = TOOL_CALL_END,
                 separator: str = SEPARATOR) -> None:
        super().__init__(tools)
        self.family = family
        self._open, self._close = opener, closer
        self._markers = markers = Markers((opener, closer))
        self._lead_char = markers.lead
        self._sep = separator
        self._buf: list[str] = []
        self._size = 0  # characters in _buf
        self._strings = JSONStrings(self._lead_char)
        self._streaming = False  # the head matched: the arguments stream as they arrive
        self._args_key = ""
        self._find, self._hold = markers.find, markers.hold
        self._handlers = (self._content, self._body)

    def _opener(self, data: str, pos: int, m: int, lit: str) -> int:
        if lit == self._close:
            self._text(data[pos:m])
            self._event(MarkupError(MarkupErrorKind.MALFORMED_TAG, lit))
            return m + len(lit)
        self._markup(data[pos:m])
        self._new_unit(lit, in_block=False)
        self._buf, self._size, self._strings = [], 0, JSONStrings(self._lead_char)
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
            if data.startswith(self._close, j):
                self._take_body(data, pos, j)
                call.raw.append(self._close)
                self._complete()
                return j + len(self._close)
            if data.startswith(self._open, j):  # a new block opened before this one closed
                self._take_body(data, pos, j)
                self._fail_call(MarkupErrorKind.MALFORMED_TAG)
                self._state = CONTENT
                return j
            if self._markers.hold(data, j) == j:  # a marker prefix at the very end: wait for more
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


class HermesParser(JSONInTagsParser):
    """Hermes / Qwen 2.5 / Qwen 3: ``\\n<tool_call>{json}</tool_call>``."""

    def __init__(self, tools: ToolSpec | None = None) -> None:
        super().__init__(tools)


def _claim(opener: str, held: str, final: bool) -> Claim:
    """Markup that starts with the opener is the family's when a JSON object follows (other families
    share ``<tool_call>``: Qwen3-Coder writes a tag after it, GLM a bare name)."""
    if not held.startswith(opener):
        return Claim.NO
    q = first_non_ws(held, len(opener), len(held))
    if q == -1:
        return Claim.YES if final else Claim.MORE
    return Claim.YES if held[q] == "{" else Claim.NO


def _render(opener: str, closer: str, separator: str, calls: Sequence[CallLike],
            malformed: bool) -> str:
    """One block per call, as the Hermes template writes it: the object on its own line."""
    return "".join(
        f"{separator}{opener}\n"
        + json.dumps({"name": c.name, "arguments": c.values}, ensure_ascii=False)
        + f"\n{closer}" for c in calls)


def json_in_tags(name: str, opener: str, closer: str, *, separator: str = "",
                 rank: int = 100) -> Family:
    """A complete family for one JSON object ``{"name": …, "arguments": {…}}`` between ``opener``
    and ``closer`` (Hermes-like): parser, leak markers, reasoning exit, ``auto`` claim and rendering.

    ``separator`` is what the template writes before each opener (removed from the visible text);
    ``rank`` where ``auto`` asks it (see ``Family``).
    The two tags must differ, start with the same character (the parsers hold back text only from
    there), neither may start with the other, and neither may start with a quote or a backslash.
    """
    if not (isinstance(opener, str) and isinstance(closer, str) and opener and closer):
        raise UsageError(f"family {name!r}: opener and closer must be non-empty strings")
    if opener.startswith(closer) or closer.startswith(opener):
        raise UsageError(f"family {name!r}: neither tag may start with the other")
    if opener[0] != closer[0] or opener[0] in '"\\':
        raise UsageError(f"family {name!r}: both tags must start with the same character, "
                         "not a quote or a backslash")
    make: Callable[[ToolSpec | None], JSONInTagsParser] = partial(
        JSONInTagsParser, family=name, opener=opener, closer=closer, separator=separator)
    return Family(name=name, make=make, markers=(opener, closer), leak_markers=(opener, closer),
                  reasoning_exits=(opener,), auto_markers=(opener, closer),
                  claim=partial(_claim, opener), render=partial(_render, opener, closer, separator),
                  rank=rank)


FAMILY = json_in_tags("hermes", TOOL_CALL, TOOL_CALL_END, separator=SEPARATOR, rank=30)
