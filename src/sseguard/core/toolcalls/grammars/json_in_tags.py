"""JSON in tags: one JSON object ``{"name": …, "arguments": {…}}`` between an opener and a closer.

Hermes / Qwen 2.5 / Qwen 3 (``hermes``) write it between ``<tool_call>`` and ``</tool_call>`` (some
models write ``parameters`` for ``arguments``); ``json_in_tags(name, opener, closer)`` makes a complete
family of the same shape with other tags, which is what most third-party markups are. The scanner
follows JSON strings, so a closer inside a string value does not end the call.

In the order the chat templates write (name first, arguments last) the call is announced as soon as
the name is complete and the arguments stream verbatim as they arrive, holding back only the final
``}`` that may be the object's own; the whole block is validated at its closer (decision 1.4: a block
that fails is void). In any other order the name may come last, so the call goes out whole at the
closer, its arguments re-serialized from the strictly parsed object.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from functools import partial

from sseguard.core.errors import UsageError
from sseguard.core.toolcalls.events import Event, MarkupError, MarkupErrorKind, ToolArgsDelta
from sseguard.core.toolcalls.family import CallLike, Claim, Family
from sseguard.core.toolcalls.grammars.base import BaseParser
from sseguard.core.toolcalls.grammars.markers import Markers, first_non_ws
from sseguard.core.toolcalls.grammars.strict_json import ASCII_WS, JSONProblem, JSONStrings, strict_json
from sseguard.core.toolcalls.schema import ToolSpec

TOOL_CALL = "<tool_call>"
TOOL_CALL_END = "</tool_call>"
REASONING_EXITS = (TOOL_CALL,)
FAMILY_MARKERS = (TOOL_CALL, TOOL_CALL_END)
SEPARATOR = "\n"

ARGS_KEYS = ("arguments", "parameters")
HEAD_CAP = 1024  # past this many characters without the usual head, the block is read whole

CONTENT, BODY, AFTER_OPEN, REASON = range(4)
#: What a family does with its closer found outside any call (``stray``), and with a message whose
#: token after the opener is one of its ``channels`` (Inkling's text and thinking messages).
ERROR, TEXT, MARKUP, REASONING = "error", "text", "markup", "reasoning"


@functools.lru_cache(maxsize=16)
def _head(keys: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile(r'\s*\{\s*"name"\s*:\s*("(?:[^"\\]|\\.)*")\s*,\s*"('
                      + "|".join(map(re.escape, keys)) + r')"\s*:')


class JSONInTagsParser(BaseParser):
    """Incremental parser for ``OPENER{json}CLOSER`` blocks (Hermes' ``<tool_call>`` by default).

    The options of ``json_in_tags`` (docs/design/markup.md class A): ``follow``, a second token that must come
    after the opener (whitespace between allowed: InternLM's ``<|action_start|> <|plugin|>``; what
    else follows leaves the opener as text); ``channels``, other tokens after the opener that open a
    visible-text or reasoning message ended by the closer (Inkling); ``closers``, further closers;
    ``keys``, the members the arguments may be under; ``stray``, what a closer outside any call is;
    ``framing``, tags that wrap the answer (ERNIE's ``<response>``): markup wherever they stand
    outside a call, the text between them visible.
    """

    def __init__(self, tools: ToolSpec | None = None, *, family: str = "hermes",
                 opener: str = TOOL_CALL, closer: str = TOOL_CALL_END,
                 separator: str = SEPARATOR, follow: str = "",
                 channels: Mapping[str, str] | None = None, closers: tuple[str, ...] = (),
                 keys: tuple[str, ...] = ARGS_KEYS, stray: str = ERROR,
                 framing: tuple[str, ...] = ()) -> None:
        super().__init__(tools)
        self.family = family
        self._open, self._close = opener, closer
        self._closers = frozenset((closer, *closers))
        self._follow = follow
        self._channels = dict(channels or {})
        self._keys = keys
        self._head_re = _head(keys)
        self._stray = stray
        self._after_open: list[str] = []
        self._frames = frozenset(framing)
        literals = (opener, closer, *closers, *([follow] if follow else []), *self._channels,
                    *framing)
        self._markers = markers = Markers(tuple(dict.fromkeys(literals)))
        self._lead_char = markers.lead
        self._sep = separator
        self._buf: list[str] = []
        self._size = 0  # characters in _buf
        self._strings = JSONStrings(self._lead_char)
        self._streaming = False  # the head matched: the arguments stream as they arrive
        self._args_key = ""
        self._find, self._hold = markers.find, markers.hold
        self._handlers = (self._content, self._body, self._after_opener, self._reason)

    def _opener(self, data: str, pos: int, m: int, lit: str) -> int:
        if lit != self._open:
            self._text(data[pos:m])  # the separator is a call's only: before anything else, text
            if lit in self._frames:
                self._markup(lit)
            elif lit in self._closers and self._stray == TEXT:
                self._text(lit)
            elif lit in self._closers and self._stray == MARKUP:
                self._markup(lit)
            else:  # a stray closer or second token: reported, the text around it stays
                self._event(MarkupError(MarkupErrorKind.MALFORMED_TAG, lit))
            return m + len(lit)
        if self._follow or self._channels:
            self._after_open = [data[pos:m], lit]
            self._state = AFTER_OPEN
            return m + len(lit)
        self._markup(data[pos:m])
        self._begin_body(lit)
        return m + len(lit)

    def _after_opener(self, data: str, pos: int) -> int:
        """After an opener that needs a second token: whitespace, then the token decides."""
        q = first_non_ws(data, pos, len(data))
        if q == -1:
            self._after_open.append(data[pos:])
            if sum(map(len, self._after_open)) > HEAD_CAP:
                return self._not_opened(len(data))
            return len(data)
        self._after_open.append(data[pos:q])
        lit = self._markers.match(data, q)
        if not lit and self._markers.hold(data, q) == q:
            return ~q
        head = "".join(self._after_open[1:]) + lit
        if lit and lit == self._follow:
            self._markup(self._after_open[0])
            self._begin_body(head)
            return q + len(lit)
        kind = self._channels.get(lit)
        if kind is None:
            return self._not_opened(q)
        self._markup(self._after_open[0] + head)
        self._state = REASON if kind == REASONING else CONTENT
        return q + len(lit)

    def _not_opened(self, q: int) -> int:
        """The opener is not followed by its second token: it is text (InternLM's code blocks)."""
        self._text("".join(self._after_open))
        self._state = CONTENT
        return q

    def _reason(self, data: str, pos: int) -> int:
        """A reasoning message: its text is reasoning up to a closer (markup)."""
        m, lit = self._find(data, pos)
        if m == -1:
            k = self._hold(data, pos)
            self._reasoning(data[pos:k])
            return ~k
        self._reasoning(data[pos:m])
        if lit in self._closers:
            self._markup(lit)
            self._state = CONTENT
        else:  # other markup ends the message too (a cut message); the marker is content's
            self._state = CONTENT
            return m
        return m + len(lit)

    def _begin_body(self, lit: str) -> None:
        self._new_unit(lit, in_block=False)
        self._buf, self._size, self._strings = [], 0, JSONStrings(self._lead_char)
        self._streaming, self._started, self._tail = False, False, []
        self._state = BODY

    def _body(self, data: str, pos: int) -> int:
        call = self._call
        assert call is not None
        i, n = pos, len(data)
        while True:
            j = self._strings.next_lt(data, i, n)
            if j == n:
                break
            lit = self._markers.match(data, j)
            if lit in self._closers:
                self._take_body(data, pos, j)
                call.raw.append(lit)
                self._complete()
                return j + len(lit)
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

    _HOT = True

    def _hot(self, text: str) -> list[Event] | None:
        """The middle of streaming arguments, where only a marker lead outside a string can
        matter: what comes before one is arguments text, taken without the state dispatch; inside
        a string nothing is padding, so it goes out at once."""
        call = self._call
        if not (self._state == BODY and self._streaming and call is not None
                and call.index is not None):
            return None
        n = len(text)
        j = self._strings.next_lt(text, 0, n)
        seg = text[:j] if j < n else text
        if seg:
            call.raw.append(seg)
            self._buf.append(seg)
            self._size += len(seg)
            if self._strings.inside and self._started:
                frag = "".join(self._tail) + seg if self._tail else seg
                self._tail = []
                if j == n:  # the whole chunk: one delta, nothing pending before it
                    call.frags.append(frag)
                    return [ToolArgsDelta(call.index, frag)]
                self._delta(frag)
            else:
                self._stream_args(seg, ASCII_WS, "}")
                if self._strings.inside and self._tail:
                    self._delta("".join(self._tail))
                    self._tail = []
        if j < len(text):
            self._run(text[j:])
        return self._take()

    def _finish(self, rest: str) -> None:
        if self._state == AFTER_OPEN:  # an opener without its second token is text
            self._text("".join(self._after_open) + rest)
        elif self._state == REASON:
            self._reasoning(rest)
        else:
            super()._finish(rest)

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
            if self._strings.inside and self._tail:  # inside a string nothing is padding
                self._delta("".join(self._tail))
                self._tail = []
        elif self._call.index is None and self._size - len(seg) < HEAD_CAP:
            body = "".join(self._buf)  # a bounded look at the head, not a rescan of the call
            m = self._head_re.match(body)
            if m is not None:
                try:
                    name = json.loads(m.group(1))
                except ValueError:
                    return
                self._name_call(name)
                self._streaming, self._args_key = True, m.group(2)
                self._stream_args(body[m.end():], ASCII_WS, "}")
                if self._strings.inside and self._tail:
                    self._delta("".join(self._tail))
                    self._tail = []
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
                present = [k for k in self._keys if k in obj]
                if len(present) > 1:
                    raise JSONProblem(MarkupErrorKind.BAD_PARAM_JSON)
                args = obj[present[0]] if present else {}
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


def _claim(opener: str, follow: str, held: str, final: bool) -> Claim:
    """Markup that starts with the opener (and the second token, if the family has one) is the
    family's when a JSON object follows (other families share ``<tool_call>``: Qwen3-Coder writes a
    tag after it, GLM a bare name, Granite 3.1 an array)."""
    if not held.startswith(opener):
        return Claim.NO
    k = len(opener)
    if follow:
        q = first_non_ws(held, k, len(held))
        if q == -1 or follow.startswith(held[q:]):
            return Claim.NO if final else Claim.MORE
        if not held.startswith(follow, q):
            return Claim.NO
        k = q + len(follow)
    q = first_non_ws(held, k, len(held))
    if q == -1:
        return Claim.YES if final else Claim.MORE
    return Claim.YES if held[q] == "{" else Claim.NO


def _render(opener: str, closer: str, separator: str, key: str, calls: Sequence[CallLike],
            malformed: bool) -> str:
    """One block per call, as the Hermes template writes it: the object on its own line;
    ``malformed`` misspells the last closer."""
    broken = closer[:-1] + "_" + closer[-1:]
    return "".join(
        f"{separator}{opener}\n"
        + json.dumps({"name": c.name, key: c.values}, ensure_ascii=False)
        + f"\n{broken if malformed and i == len(calls) - 1 else closer}"
        for i, c in enumerate(calls))


def json_in_tags(name: str, opener: str, closer: str, *, separator: str = "",
                 rank: int = 100, follow: str = "", channels: Mapping[str, str] | None = None,
                 closers: tuple[str, ...] = (), keys: tuple[str, ...] = ARGS_KEYS,
                 stray: str = ERROR, aliases: tuple[str, ...] = (), grammar: str = "A",
                 leak_markers: tuple[str, ...] | None = None,
                 reasoning_exits: tuple[str, ...] | None = None,
                 malformable: bool = False, framing: tuple[str, ...] = ()) -> Family:
    """A complete family for one JSON object ``{"name": …, "arguments": {…}}`` between ``opener``
    and ``closer`` (Hermes-like): parser, leak markers, reasoning exit, ``auto`` claim and rendering.

    ``separator`` is what the template writes before each opener (removed from the visible text);
    ``rank`` where ``auto`` asks it (see ``Family``). The options docs/design/markup.md class A needs:
    ``follow``, a second token after the opener (whitespace allowed between; without it the opener is
    text); ``channels``, tokens after the opener that open a ``"text"`` or ``"reasoning"`` message
    instead of a call; ``closers``, further closers; ``keys``, the members that may hold the
    arguments (the first is the one rendered); ``stray``, what a closer outside a call is
    (``"error"``, ``"text"`` or ``"markup"``); ``aliases`` and ``grammar`` as on ``Family``;
    ``leak_markers`` and ``reasoning_exits`` where the tags alone are not the right ones;
    ``framing``, tags that wrap the answer and are removed as markup wherever they stand outside a
    call (ERNIE's ``<response>``; no leak when seen, they are no call markup).
    The two tags must differ, start with the same character (the parsers hold back text only from
    there), neither may start with the other, and neither may start with a quote or a backslash.
    """
    if not (isinstance(opener, str) and isinstance(closer, str) and opener and closer):
        raise UsageError(f"family {name!r}: opener and closer must be non-empty strings")
    if opener.startswith(closer) or closer.startswith(opener):
        raise UsageError(f"family {name!r}: neither tag may start with the other")
    tags = (opener, closer, *closers, *([follow] if follow else []), *(channels or {}), *framing)
    if any(t[0] != opener[0] for t in tags) or opener[0] in '"\\':
        raise UsageError(f"family {name!r}: both tags must start with the same character, "
                         "not a quote or a backslash")
    if not keys or stray not in (ERROR, TEXT, MARKUP) or any(
            k not in (TEXT, REASONING) for k in (channels or {}).values()):
        raise UsageError(f"family {name!r}: keys must be given, stray one of error/text/markup, "
                         "channels text or reasoning")
    make: Callable[[ToolSpec | None], JSONInTagsParser] = partial(
        JSONInTagsParser, family=name, opener=opener, closer=closer, separator=separator,
        follow=follow, channels=channels, closers=closers, keys=keys, stray=stray,
        framing=framing)
    markers = tuple(dict.fromkeys(tags))
    leaks = leak_markers if leak_markers is not None else (
        (follow, closer, *closers) if follow else (opener, closer, *closers))
    return Family(name=name, make=make, markers=markers, leak_markers=leaks,
                  reasoning_exits=(opener,) if reasoning_exits is None else reasoning_exits,
                  auto_markers=tuple(dict.fromkeys((opener, closer, *closers,
                                                    *([follow] if follow else [])))),
                  claim=partial(_claim, opener, follow),
                  render=partial(_render, opener + follow, closer, separator, keys[0]),
                  malformable=malformable, rank=rank, aliases=aliases, grammar=grammar)
