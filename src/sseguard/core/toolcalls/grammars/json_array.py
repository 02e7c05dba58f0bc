"""The incremental parser of docs/design/markup.md class B: calls written as JSON objects after a marker — a
JSON array of call objects (``[{…}, {…}]``), objects separated by ``;`` (Llama 3) or by newlines
(MiniMax-M1), or one object with no closer (class A′).

One parser, parameterised by tables (``json_array_tables``): the ``Shape`` of an element (which members
hold the name, the arguments and the call id), the ``Opener`` markers with the body each opens and the
closer that ends it, the marker-less body a family may open at the very start of the answer, and
framing markers that are markup wherever they stand. Every element is one call, all or nothing
(decision 3.4). The families are built from the tables in ``json_array_family``.

Why it is linear: one scanner (``json_array_scan``) follows JSON strings and bracket depth across chunks
and stops only where something is decided — the first nested value of an element (where the head of
the usual ``{"name": …, "arguments": {`` order is tested, once), the end of the arguments, the end of
the element, a marker outside strings. The arguments of an element in the usual order stream verbatim
as they arrive; in any other order the call goes out whole when its element closes.

Three modules, one layer each: the scanner (``json_array_scan``), the states inside an open block
(``json_array_states``), and here the parser a family runs: its tables, content and openers, the
marker-less start, the hot path and the end of the stream.
"""

from __future__ import annotations

from collections.abc import Sequence

from sseguard.core.errors import UsageError
from sseguard.core.toolcalls.events import Event, MarkupError, MarkupErrorKind, ToolArgsDelta
from sseguard.core.toolcalls.grammars.base import CONTENT
from sseguard.core.toolcalls.grammars.json_array_states import (
    AFTER,
    AFTER_ONE,
    BARE,
    BEFORE,
    ELEM,
    LINE_JUNK,
    OPENED,
    SEP_HOLD,
    START,
    START_HOLD,
    VOID,
    JSONArrayStates,
)
from sseguard.core.toolcalls.grammars.json_array_tables import (
    NAME_ARGUMENTS,
    WS,
    Body,
    Opener,
    Shape,
    first_non_ws,
    start_char,
)
from sseguard.core.toolcalls.grammars.markers import MIN_PARTIAL, TAG_CAP, Markers
from sseguard.core.toolcalls.schema import ToolSpec

HEAD_CAP = 1024  # the longest head held at answer start before the text is released


class JSONArrayParser(JSONArrayStates):
    """Incremental parser for calls written as JSON objects after markers (class B, B′ and A′).

    The simple form takes one ``opener`` and an optional ``closer`` (``JSONArrayParser(tools,
    family="jamba", shape=NAME_ARGUMENTS, opener="<tool_calls>", closer="</tool_calls>")``); a family
    with several openers passes ``openers``. ``start``: the body a family opens without any marker
    when it is the first thing in the answer (Llama 3's bare object, xLAM's bare array), with its
    ``start_separator``. ``framing``: markers that are markup wherever they stand in text (end-of-turn
    tokens, response wrappers).
    """

    def __init__(self, tools: ToolSpec | None = None, *, family: str, shape: Shape = NAME_ARGUMENTS,
                 opener: str | None = None, closer: str | None = None, body: Body = Body.ARRAY,
                 openers: Sequence[Opener] = (), start: Body | None = None,
                 start_separator: str = ",", framing: Sequence[str] = ()) -> None:
        ops = list(openers)
        if opener is not None:
            ops.append(Opener(opener, body, closer))
        if not ops and start is None:
            raise UsageError(f"family {family!r}: a JSON-array family needs an opener or a start")
        by_literal = {op.literal: op for op in ops}
        closers = frozenset(op.closer for op in ops if op.closer)
        literals = tuple(dict.fromkeys([*by_literal, *closers, *framing]))
        markers = Markers(literals) if literals else None
        super().__init__(tools, shape=shape, openers=by_literal, markers=markers)
        self.family = family
        self._frames = frozenset(framing)
        #: literals that are prefixes of longer ones: found complete, they wait for the longer one
        self._longer = {a: tuple(b for b in literals if b != a and b.startswith(a))
                        for a in literals if any(b != a and b.startswith(a) for b in literals)}
        self._start = Opener("", start, None, start_separator) if start is not None else None
        self._find = markers.find if markers else _find_none
        self._hold = markers.hold if markers else _hold_none
        self._handlers = (self._content, self._start_state, self._opened, self._before, self._elem,
                          self._after, self._sep_hold, self._after_array, self._void_state,
                          self._line_junk, self._after_one, self._start_hold, self._bare)
        if self._start is not None:
            self._state = START

    # content --------------------------------------------------------------------------------------

    def mid_stream(self) -> None:
        """Started after the answer's start (``auto``): no marker-less body can open any more."""
        super().mid_stream()
        if self._state == START:
            self._state = CONTENT

    def _opener(self, data: str, pos: int, m: int, lit: str) -> int:
        for longer in self._longer.get(lit, ()):  # "```" may still become "```json"
            if len(data) - m < len(longer) and longer.startswith(data[m:]):
                return ~m
        self._markup(data[pos:m])
        end = m + len(lit)
        if lit in self._frames:
            self._markup(lit)
            return end
        op = self._openers.get(lit)
        if op is None:  # a closer outside any block (decision 2.1): reported, not text
            self._event(MarkupError(MarkupErrorKind.MALFORMED_TAG, lit))
            return end
        self._begin_block(op, lit)
        return end

    def _begin_block(self, op: Opener, lit: str) -> None:
        self._op = op
        self._nelems = 0
        self._held = [lit]
        if op.opened:
            self._markup(lit)
            self._held = []
            self._state = BEFORE
        else:
            self._state = OPENED

    def _opened(self, data: str, pos: int) -> int:
        """After an opener: whitespace, then the body's first character decides."""
        op = self._op
        assert op is not None
        q = first_non_ws(data, pos)
        if q == -1:
            self._held.append(data[pos:])
            return self._hold_check(len(data))
        self._held.append(data[pos:q])
        held = "".join(self._held)
        self._held = []
        if data[q] == start_char(op.body):
            self._markup(held)
            return self._open_body(data, q, op)
        if op.soft:  # not calls after all: the marker was text
            self._text(held)
            self._state = CONTENT
            return q
        c = data[q]
        if op.body is not Body.ARRAY and c in '["':
            # a call's own JSON is due and another JSON value stands there: one element that is
            # no call (bad_param_json), read whole (docs/markup.md, "not JSON")
            self._markup(held)
            return self._begin_elem(data, q)
        self._new_unit(held, in_block=False)
        assert self._call is not None
        self._call.error = MarkupErrorKind.MALFORMED_TAG
        if op.closer is None and c not in '{["':
            # nothing delimits what follows: the marker alone is the error, the text stays text
            self._fail_call()
            self._op = None
            self._state = CONTENT
            return q
        # the wrong container: with a closer, void up to it; without one, the JSON value that
        # stands there is voided whole (nothing of it visible)
        self._void_value = op.closer is None
        self._depth, self._inside, self._escape = 0, False, False
        self._state = VOID
        return q

    def _hold_check(self, end: int) -> int:
        """Held whitespace longer than a tag can be is released (it bounds what is held)."""
        if sum(map(len, self._held)) > TAG_CAP:
            held = "".join(self._held)
            self._held = []
            if self._state == OPENED:
                assert self._op is not None
                self._new_unit(held, in_block=False)
                assert self._call is not None
                self._call.error = MarkupErrorKind.MALFORMED_TAG
                if self._op.closer is None:
                    self._fail_call()
                    self._state = CONTENT
                else:
                    self._state = VOID
            else:
                self._text(held)
                self._state = CONTENT
        return end

    def _open_body(self, data: str, q: int, op: Opener) -> int:
        """At the body's first character ``data[q]``."""
        if op.body is Body.ARRAY:
            self._markup("[")
            self._state = BEFORE
            return q + 1
        return self._begin_elem(data, q)

    # the marker-less start ------------------------------------------------------------------------

    def _start_state(self, data: str, pos: int) -> int:
        """At the answer's start: whitespace is held; a marker is content's; the body's first
        character is held until the next one says it opens calls (``{"``, ``[{``, ``[]``)."""
        q = first_non_ws(data, pos)
        if q == -1:
            self._held.append(data[pos:])
            return self._hold_check(len(data))
        self._held.append(data[pos:q])
        op = self._start
        assert op is not None
        if self._markers is not None and not self._markers.match(data, q) and \
                self._markers.hold(data, q) == q:
            return ~q  # a marker or the bare body ("[" of "[TOOL_CALLS]"): the next chunk says
        if data[q] != start_char(op.body) or (self._markers is not None
                                                and self._markers.match(data, q)):
            self._release_held()
            self._state = CONTENT
            return q
        self._held.append(data[q])
        self._state = START_HOLD
        return q + 1

    def _start_hold(self, data: str, pos: int) -> int:
        op = self._start
        assert op is not None
        q = first_non_ws(data, pos)
        if q == -1:
            self._held.append(data[pos:])
            return self._hold_check(len(data))
        follows = data[q]
        if (op.body is Body.ARRAY and follows in "{]") or (op.body is not Body.ARRAY
                                                           and follows == '"'):
            held = "".join(self._held)
            lead = len(held) - len(held.lstrip(WS)) if op.body is not Body.ARRAY else -1
            self._held = []
            self._op = op
            self._nelems = 0
            if op.body is Body.ARRAY:
                self._markup(held)
                self._state = BEFORE
                return pos
            # the held "{" (and the whitespace after it) is the element's first text
            self._markup(held[:lead])
            self._begin_elem(held, lead)
            assert self._call is not None
            self._call.raw.append(held[lead + 1:])  # the whitespace held after the "{"
            return pos
        self._release_held()
        self._state = CONTENT
        return pos

    def _after_one(self, data: str, pos: int) -> int:
        """After a class-A′ object: whitespace up to the next opener is markup, before other text
        it is text."""
        q = first_non_ws(data, pos)
        if q == -1:
            self._held.append(data[pos:])
            if sum(map(len, self._held)) > TAG_CAP:
                self._release_held()
                self._state = CONTENT
            return len(data)
        self._held.append(data[pos:q])
        held = "".join(self._held)
        self._held = []
        assert self._markers is not None
        lit = self._markers.match(data, q)
        if lit in self._openers or (not lit and self._markers.hold(data, q) == q):
            if not lit:  # maybe an opener: wait, keeping the whitespace
                self._held = [held]
                return ~q
            self._markup(held)
        else:
            self._text(held)
        self._state = CONTENT
        return q

    # driving --------------------------------------------------------------------------------------

    _HOT = True

    def _hot(self, text: str) -> list[Event] | None:
        """The middle of streaming arguments. Inside a string, a chunk with no quote and no
        backslash is string text; otherwise the scanner runs over it, and what it read before
        anything was decided is arguments text, taken without the state dispatch."""
        call = self._call
        if not self._args_open or call is None or call.index is None:
            return None
        if self._inside and not self._escape and '"' not in text and "\\" not in text:
            call.raw.append(text)
            call.frags.append(text)
            return [ToolArgsDelta(call.index, text)]
        stop, marker = self._scan(text, 0, len(text))
        if stop == -1:
            call.raw.append(text)
            call.frags.append(text)
            return [ToolArgsDelta(call.index, text)]
        if not marker:  # the arguments closed (the only stop while they are open, markers apart)
            self._args_open = False
        if stop:
            seg = text[:stop]
            call.raw.append(seg)
            call.frags.append(seg)
            self._out.append(ToolArgsDelta(call.index, seg))
        if stop < len(text):
            self._run(text[stop:])
        return self._take()

    def _finish(self, rest: str) -> None:
        """End of stream (decisions 1.7 and 1.9, decision 3.8): held text that
        decided nothing is text; a cut opener, an open element or an open block is unterminated,
        calls already closed stay calls."""
        state = self._state
        held = "".join(self._held) + rest
        self._held = []
        op = self._op
        if state in (START, START_HOLD, AFTER_ONE) or (
                state in (SEP_HOLD, AFTER) and op is not None and op.closer is None
                and op.body is not Body.ARRAY):
            self._text(held)
        elif state == CONTENT:
            text, raw = self._partial(rest)
            self._text(text)
            if raw:
                self._event(MarkupError(MarkupErrorKind.UNTERMINATED, raw))
        elif state == OPENED and op is not None and op.soft:
            self._text(held)
        elif state in (ELEM, VOID, LINE_JUNK, BARE):
            assert self._call is not None
            self._call.raw.append(rest)
            self._void_value = False
            self._fail_call(MarkupErrorKind.UNTERMINATED if state in (ELEM, BARE) else None)
        else:  # an opener, or a block between its calls: the closed calls stay calls
            self._event(MarkupError(MarkupErrorKind.UNTERMINATED, held))

    def _partial(self, rest: str) -> tuple[str, str]:
        """Held text at end of stream: a cut-off opener is unterminated (decision 3.3),
        unless it is still a word of prose (``functools``, ``function call``) or a soft marker."""
        if self._markers is None:
            return rest, ""
        k = self._hold(rest, 0)
        tail = rest[k:]
        if len(tail) < MIN_PARTIAL or tail.replace(" ", "").isalpha():
            return rest, ""
        soft = [op.literal for op in self._openers.values() if op.soft]
        if any(lit.startswith(tail) for lit in soft) and not any(
                lit.startswith(tail) for lit in self._markers.literals if lit not in soft):
            return rest, ""
        return rest[:k], tail


def _find_none(data: str, pos: int) -> tuple[int, str]:
    return -1, ""


def _hold_none(data: str, pos: int) -> int:
    return len(data)

