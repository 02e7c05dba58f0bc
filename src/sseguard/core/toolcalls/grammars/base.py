"""The parser base every grammar shares: emitting coalesced events, holding back only a marker
prefix, call bookkeeping, and the ``CONTENT`` state (visible text and the separator before an opener).

A family is a small state machine over text fed in arbitrary chunks; it keeps ``_state`` and one
handler per state, and says in ``_opener`` what its markers mean in content.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from json.encoder import encode_basestring  # the C escaper json.dumps itself uses

from sseguard.core.errors import UsageError
from sseguard.core.toolcalls.events import (
    Event,
    Markup,
    MarkupError,
    MarkupErrorKind,
    Reasoning,
    Text,
    ToolArgsDelta,
    ToolCallEnd,
    ToolCallStart,
)
from sseguard.core.toolcalls.grammars.json_array_tables import read_name_args
from sseguard.core.toolcalls.grammars.markers import TAG_CAP, first_non_ws, split_partial_opener
from sseguard.core.toolcalls.grammars.strict_json import ASCII_WS, JSONProblem, json_string_body, strict_json
from sseguard.core.toolcalls.schema import ToolSpec

_NOT_ASCII_WS = re.compile(f"[^{re.escape(ASCII_WS)}]")

_NONE, _TEXT, _DELTA, _MARKUP, _REASON = 0, 1, 2, 3, 4

#: Every family's first state: visible text outside any markup.
CONTENT = 0

#: What a grammar's hook ``_hot`` answers for "the whole chunk is plain argument text": ``feed``
#: streams it (one identity-compared object; never filled, never handed out).
PLAIN: list[Event] = []


class Call:
    """One call (or one void stretch of markup) being parsed: its raw text and emitted arguments."""

    __slots__ = ("error", "frags", "id", "in_block", "index", "keys", "name", "nemit", "raw",
                 "spaced")

    def __init__(self, index: int | None, name: str, in_block: bool, spaced: bool = False) -> None:
        self.index = index
        self.name = name
        self.id: str | None = None
        self.raw: list[str] = []
        self.frags: list[str] = []
        self.keys: set[str] = set()
        self.nemit = 0  # parameters already serialized into the arguments
        self.error: MarkupErrorKind | None = None
        self.in_block = in_block
        self.spaced = spaced

    def key_prefix(self, key: str) -> str:
        """The JSON that opens the next member: ``{"key": `` or ``, "key": ``."""
        lead = ", " if self.nemit else "{"
        self.nemit += 1
        return f"{lead}{encode_basestring(key)}: "

    def closing(self) -> str:
        return "}" if self.nemit else "{}"


class BaseParser(ABC):
    """The emitting, holding-back and call bookkeeping every family shares.

    A family keeps ``_state`` (an int) and ``_handlers`` (one bound method per state). A handler
    consumes from ``pos`` and returns the new position, or ``~pos`` ("stop; hold ``data[pos:]`` for
    the next chunk"). A handler may change state without consuming; the next state then must consume.

    State ``CONTENT`` (0) is handled here: a family binds ``_find`` and ``_hold`` (its marker search)
    and says in ``_opener`` what a marker in content opens. A family with blocks names its "between
    calls" and "swallowing a void call" states in ``_BLOCK`` and ``_SKIP`` (see ``BlockParser``).
    """

    family = "base"
    _BLOCK = -1  # state inside a block, between calls (-1: the family has no blocks)
    _SKIP = -1  # state swallowing a void call up to where parsing can resume (-1: none)
    # State in which text without the lead is the body of a JSON string value, streamed as it comes
    # (-1: none). Every marker of the family starts with ``_lead_char`` (its ``Markers.lead``: "<" for the
    # built-ins), so a chunk without one is one escape and one delta: the hot path in the middle of a
    # long string value.
    _STRING = -1
    _lead_char = "<"
    # Whether the plain argument text of the hot path is the body of a JSON string to escape (a raw
    # value) or JSON the model wrote itself, streamed as it is.
    _plain_escaped = True
    # Whether ``feed`` asks the grammar's hook ``_hot`` (a run other than ``_STRING``'s).
    _HOT = False
    # the family's marker search, bound in its __init__:
    _find: Callable[[str, int], tuple[int, str]]  # first marker at or after pos: (start, text), or -1
    _hold: Callable[[str, int], int]  # start of a suffix that could still become a marker

    def __init__(self, tools: ToolSpec | None = None) -> None:
        self._tools = tools
        self._out: list[Event] = []
        self._pk = _NONE  # kind of the pending mergeable piece (text, delta, markup)
        self._pp: list[str] = []
        self._pend = ""
        self._closed = False
        self._tagscan = 0  # characters of a pending tag already searched for ">" and "<"
        self._next_index = 0
        self._call: Call | None = None
        self._state = CONTENT
        self._handlers: tuple[Callable[[str, int], int], ...] = ()
        # what the encoder writes before an opener; removed from the text (docs/design/markup.md decision 1.8)
        self._sep = ""
        # decision 2.2: in its families the whitespace that frames the answer at stream start
        # (right after </think>) is markup, not text; such a family sets this in its __init__.
        self._frame = False
        # Arguments streamed as the model wrote them (_stream_args): whether their first
        # non-whitespace character went out, and trailing characters held until we know they are
        # not padding (a list: a long run of spaces inside a string must not be copied per chunk).
        self._started = False
        self._tail: list[str] = []

    # emitting -------------------------------------------------------------------------------------

    def _flush(self) -> None:
        if self._pk == _TEXT:
            self._out.append(Text("".join(self._pp)))
        elif self._pk == _REASON:
            self._out.append(Reasoning("".join(self._pp)))
        elif self._pk == _MARKUP:
            self._out.append(Markup("".join(self._pp)))
        elif self._pk == _DELTA:
            assert self._call is not None and self._call.index is not None
            self._out.append(ToolArgsDelta(self._call.index, "".join(self._pp)))
        self._pk = _NONE
        self._pp = []

    def _framing(self, data: str, pos: int) -> int:
        """Whitespace at stream start is markup; the first other character ends the framing."""
        q = _NOT_ASCII_WS.search(data, pos)
        end = q.start() if q else len(data)
        self._markup(data[pos:end])
        if q is not None:
            self._frame = False
        return end

    def _put(self, kind: int, s: str) -> None:
        """Add ``s`` to the pending piece of ``kind`` (one event per run of one kind)."""
        if s:
            if self._pk != kind:
                self._flush()
                self._pk = kind
            self._pp.append(s)

    def _text(self, s: str) -> None:
        self._put(_TEXT, s)

    def _reasoning(self, s: str) -> None:
        self._put(_REASON, s)

    def _markup(self, s: str) -> None:
        self._put(_MARKUP, s)

    def _delta(self, s: str) -> None:
        """Append to the current call's arguments, as a delta and to its record."""
        if s:
            assert self._call is not None
            self._call.frags.append(s)
            self._put(_DELTA, s)

    def _event(self, ev: Event) -> None:
        self._flush()
        self._out.append(ev)

    def _take(self) -> list[Event]:
        self._flush()
        out, self._out = self._out, []
        return out

    def mid_stream(self) -> None:
        """This parser starts after the stream's start (``auto`` replays from the first marker,
        after text went out): no answer framing is left to remove (decision 2.2)."""
        self._frame = False

    # calls ----------------------------------------------------------------------------------------

    def _new_unit(self, raw: str, in_block: bool, spaced: bool = False) -> Call:
        """Markup that may become a call once its name is known (no index, no Start yet)."""
        call = Call(None, "", in_block, spaced)
        call.raw.append(raw)
        self._call = call
        return call

    def _name_call(self, name: str, call_id: str | None = None) -> Call:
        """The unit is a call: give it the next index and announce it (with the model's own call id,
        for families that write one)."""
        call = self._call
        assert call is not None
        call.index, call.name, call.id = self._next_index, name, call_id
        self._next_index += 1
        self._event(ToolCallStart(call.index, name, call_id))
        if self._tools is not None and name not in self._tools.names:
            # decision 1.4's exception: the call is kept; dispatch policy belongs to the client
            self._event(MarkupError(MarkupErrorKind.UNDEFINED_FUNCTION, name, call.index))
        return call

    def _start_call(self, name: str, raw: str, in_block: bool, spaced: bool = False) -> Call:
        self._new_unit(raw, in_block, spaced)
        return self._name_call(name)

    def _void_unit(self, in_block: bool, spaced: bool = False) -> Call:
        """Markup that is not a call at all (junk in a block, a broken opener): no index, no Start."""
        call = Call(None, "", in_block, spaced)
        call.error = MarkupErrorKind.MALFORMED_TAG
        self._call = call
        return call

    def _end_call(self, close_object: bool = True) -> None:
        call = self._call
        assert call is not None and call.index is not None
        if close_object:
            self._delta(call.closing())
        self._event(ToolCallEnd(call.index, call.name, "".join(call.frags), "".join(call.raw),
                                call.id))
        self._call = None

    def _fail_call(self, kind: MarkupErrorKind | None = None) -> None:
        """Report the current call (or void unit) as not a call, with everything it consumed."""
        call = self._call
        assert call is not None
        self._event(MarkupError(kind or call.error or MarkupErrorKind.MALFORMED_TAG,
                                "".join(call.raw), call.index))
        self._call = None

    def _object_call(self, body: str) -> None:
        """The current call's whole body, written as one strict JSON object ``{"name": …,
        "arguments"|"parameters": {…}}`` (DSML-like JSON bodies of dots and K2-horizon): the call,
        whole; or not a call (a repeated key ``duplicate_parameter``, any other shape
        ``bad_param_json``), never text."""
        try:
            got = read_name_args(strict_json(body))
            if got is None:
                raise JSONProblem(MarkupErrorKind.BAD_PARAM_JSON)
        except JSONProblem as problem:
            self._fail_call(problem.kind)
            return
        name, args, _ = got
        self._name_call(name)
        self._delta(json.dumps(args, ensure_ascii=False))
        self._end_call(close_object=False)

    def _stream_args(self, seg: str, trail: str, last: str = "") -> None:
        """Stream the next piece of arguments JSON the model wrote itself, verbatim. Leading
        whitespace is dropped; what may prove to be padding after the JSON (characters of ``trail``,
        then one ``last`` character that may close it instead) is held in ``_tail`` until text after
        it shows that it was not."""
        if not self._started:
            q = first_non_ws(seg, 0, len(seg))
            if q == -1:
                return
            seg, self._started = seg[q:], True
        keep = len(seg.rstrip(trail))
        if not keep:
            self._tail.append(seg)
            return
        if last and seg[keep - 1] == last:
            keep -= 1
        self._delta("".join(self._tail) + seg[:keep])  # held padding was not padding after all
        self._tail = [seg[keep:]]

    def _gather(self, data: str, pos: int,
                into: Callable[[str], None] | None = None) -> tuple[int, str]:
        """Text up to the next marker joins the current call's raw text (and goes to ``into``).

        Returns (where to go on, ""), ``~k`` meaning "hold ``data[k:]``"; or, when a marker starts
        right at ``pos``, (``pos``, the marker) — the marker is "" where the family reads tags itself.
        """
        m, lit = self._find(data, pos)
        end = m if m != -1 else self._hold(data, pos)
        if end > pos:
            s = data[pos:end]
            assert self._call is not None
            self._call.raw.append(s)
            if into is not None:
                into(s)
            return (end if m != -1 else ~end), ""
        return (pos, lit) if m != -1 else (~pos, "")

    def _gather_ws(self, data: str, pos: int, into: Callable[[str], None]) -> tuple[int, str | None]:
        """Whitespace up to the next marker goes to ``into`` (markup, or a call's raw text).

        Returns what ``_gather`` does, or (``q``, None) when other text starts at ``q``: where tags
        are expected, the family judges it.
        """
        m, lit = self._find(data, pos)
        end = m if m != -1 else self._hold(data, pos)
        if end > pos:
            q = first_non_ws(data, pos, end)
            if q == -1:
                into(data[pos:end])
                return (end if m != -1 else ~end), ""
            into(data[pos:q])
            return q, None
        return (pos, lit) if m != -1 else (~pos, "")

    def _content(self, data: str, pos: int) -> int:
        """State ``CONTENT``: what is surely visible text goes out; a marker with nothing but the
        separator before it is the family's ``_opener`` to read — the separator goes with the tag
        once the family knows what the tag is (decision 1.8)."""
        if self._frame:
            pos = self._framing(data, pos)
            if pos == len(data):
                return pos
        m, lit = self._find(data, pos)
        if m == -1:
            k = self._hold(data, pos)
            if k > pos and data[k - 1] == "\n":  # maybe (part of) the separator of an opener to come
                n = len(self._sep)
                while n and k > pos and data[k - 1] == "\n":
                    k, n = k - 1, n - 1
            self._text(data[pos:k])
            return ~k
        sep = self._sep
        if m > pos and not (m - pos == len(sep) and data.startswith(sep, pos)):
            cut = m - len(sep)  # text first; a separator right before the marker waits for the tag
            if not (cut > pos and data.startswith(sep, cut)):
                cut = m
            self._text(data[pos:cut])
            return cut
        return self._opener(data, pos, m, lit)

    @abstractmethod
    def _opener(self, data: str, pos: int, m: int, lit: str) -> int:
        """At the marker ``lit`` at ``m`` in content; ``data[pos:m]`` is empty or the separator."""

    def _tag_end(self, data: str, pos: int) -> int:
        """End of the tag starting at ``pos`` (after its ``>``), or -1 if it is not complete yet.

        A ``<`` before the ``>`` ends the tag early (the ``<`` may start the next marker), and so does
        ``TAG_CAP``; the text up to the returned end then does not end with ``>`` and is no tag.
        The search resumes where the last one stopped, so a tag fed one character at a time is
        still scanned once.
        """
        start = pos + max(1, self._tagscan)
        gt = data.find(">", start)
        lt = data.find("<", start, gt if gt != -1 else len(data))
        if lt != -1:
            self._tagscan = 0
            return lt
        if gt == -1:
            if len(data) - pos >= TAG_CAP:
                self._tagscan = 0
                return pos + TAG_CAP
            self._tagscan = len(data) - pos
            return -1
        self._tagscan = 0
        return gt + 1

    # driving --------------------------------------------------------------------------------------

    def feed(self, text: str) -> list[Event]:
        """Parse more text; return the events it completes.

        The one ``feed`` of every grammar. Its hot path: in the middle of a long argument most
        chunks are plain argument text, taken whole without the state dispatch — in ``_STRING`` a
        chunk without the marker lead (tested here, the commonest case), elsewhere what the
        grammar's hook ``_hot`` takes (``_HOT``).
        """
        if self._closed:
            raise UsageError("feed() after close()")
        if not text:
            return []
        if not self._pend:
            call = self._call
            if (self._state == self._STRING and self._lead_char not in text and call is not None
                    and call.index is not None):
                call.raw.append(text)
                frag = json_string_body(text)
                call.frags.append(frag)
                return [ToolArgsDelta(call.index, frag)]
            if self._HOT:
                hot = self._hot(text)
                if hot is PLAIN:
                    if call is not None and call.index is not None:
                        call.raw.append(text)
                        frag = json_string_body(text) if self._plain_escaped else text
                        call.frags.append(frag)
                        return [ToolArgsDelta(call.index, frag)]
                elif hot is not None:
                    return hot
        data = self._pend + text if self._pend else text
        self._pend = ""
        self._run(data)
        return self._take()

    def _hot(self, text: str) -> list[Event] | None:
        """The hot path's hook (a grammar that sets ``_HOT``), asked with nothing held back: the
        events of ``text`` when the current state takes it without the dispatch; ``PLAIN`` when the
        whole chunk is plain argument text of the current call (``feed`` streams it, escaped as a
        string's body or, ``_plain_escaped`` false, as the model's own JSON); None when the state
        machine reads it. A grammar that follows JSON across strings takes the prefix it can, runs
        the state machine over the rest itself (``_run``) and answers the chunk's events."""
        return None

    def _run(self, data: str) -> None:
        pos, n = 0, len(data)
        handlers = self._handlers
        while pos < n:
            r = handlers[self._state](data, pos)
            if r < 0:
                pos = ~r
                break
            pos = r
        self._pend = data[pos:]

    def close(self) -> list[Event]:
        """End of stream: say what the held-back text and any unfinished markup mean."""
        if self._closed:
            raise UsageError("close() called twice")
        self._closed = True
        self._finish(self._pend)
        self._pend = ""
        return self._take()

    def _finish(self, rest: str) -> None:
        """End of stream in the current state; ``rest`` is the held-back text (decisions 1.7 and 1.9):
        in content a partial opener is unterminated, in a block the complete calls stay calls, and a
        call still open is not one."""
        state = self._state
        if state == CONTENT:
            text, raw = split_partial_opener(rest, self._sep, self._lead_char)
            self._text(text)
            if raw:
                self._event(MarkupError(MarkupErrorKind.UNTERMINATED, raw))
        elif state == self._BLOCK:
            self._event(MarkupError(MarkupErrorKind.UNTERMINATED, rest))
        else:
            assert self._call is not None
            self._call.raw.append(rest)
            self._fail_call(None if state == self._SKIP else MarkupErrorKind.UNTERMINATED)


#: What a block family does at a marker while swallowing a void call (``BlockParser._skip``).
RESUME, SWALLOW, END = range(3)  # leave it to the next state / swallow it / swallow it and stop


class MarkedRawParser(BaseParser):
    """A parser whose current call's raw text is the input between marks: ``_record(data, end)``
    keeps what ran since the last mark, and the end of each chunk keeps what was read of it (the
    part held back for the next chunk is the next chunk's). Families that read a call as scattered
    pieces (Gemma's ``call:NAME{…}``, Mistral's name then arguments) keep their raw text this way."""

    _mark = 0

    def _run(self, data: str) -> None:
        self._mark = 0
        super()._run(data)
        call = self._call
        if call is not None:
            end = len(data) - len(self._pend)
            if end > self._mark:
                call.raw.append(data[self._mark:end])

    def _record(self, data: str, end: int) -> None:
        """The current call's raw text runs to ``end``."""
        assert self._call is not None
        if end > self._mark:
            self._call.raw.append(data[self._mark:end])
        self._mark = end

    def _reason_until(self, data: str, pos: int, think: tuple[str, str] | None,
                      exits: tuple[str, ...]) -> int:
        """Reasoning text up to its closer (``think[1]``), or up to a marker of ``exits`` (a call
        opener, which ends it implicitly); any other marker of the family there is reported
        (``malformed_tag``), never reasoning text."""
        m, lit = self._find(data, pos)
        if m == -1:
            k = self._hold(data, pos)
            self._reasoning(data[pos:k])
            return ~k
        self._reasoning(data[pos:m])
        if think and lit == think[1]:
            self._markup(lit)
            self._state = CONTENT
            return m + len(lit)
        if lit in exits:
            self._state = CONTENT
            return m
        self._event(MarkupError(MarkupErrorKind.MALFORMED_TAG, lit))
        return m + len(lit)
