"""The incremental parser of docs/design/markup.md class B: calls written as JSON objects after a marker — a
JSON array of call objects (``[{…}, {…}]``), objects separated by ``;`` (Llama 3) or by newlines
(MiniMax-M1), or one object with no closer (class A′).

One parser, parameterised by tables (``json_array_tables``): the ``Shape`` of an element (which members
hold the name, the arguments and the call id), the ``Opener`` markers with the body each opens and the
closer that ends it, the marker-less body a family may open at the very start of the answer, and
framing markers that are markup wherever they stand. Every element is one call, all or nothing
(decision 3.4). The families are built from the tables in ``json_array``.

Why it is linear: one scanner follows JSON strings and bracket depth across chunks and stops only
where something is decided — the first nested value of an element (where the head of the usual
``{"name": …, "arguments": {`` order is tested, once), the end of the arguments, the end of the
element, a marker outside strings. The arguments of an element in the usual order stream verbatim as
they arrive; in any other order the call goes out whole when its element closes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from sseguard.core.errors import UsageError
from sseguard.core.toolcalls.events import Event, MarkupError, MarkupErrorKind, ToolArgsDelta
from sseguard.core.toolcalls.grammars.base import CONTENT, BaseParser
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
from sseguard.core.toolcalls.grammars.strict_json import JSONProblem, strict_json
from sseguard.core.toolcalls.schema import ToolSpec

# states
(START, OPENED, BEFORE, ELEM, AFTER, SEP_HOLD, AFTER_ARRAY, VOID, LINE_JUNK, AFTER_ONE,
 START_HOLD, BARE) = range(1, 13)
_IN_STRING = re.compile(r'["\\]')
HEAD_CAP = 1024  # the longest head held at answer start before the text is released


class JSONArrayParser(BaseParser):
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
        super().__init__(tools)
        self.family = family
        self._shape = shape
        ops = list(openers)
        if opener is not None:
            ops.append(Opener(opener, body, closer))
        if not ops and start is None:
            raise UsageError(f"family {family!r}: a JSON-array family needs an opener or a start")
        self._openers = {op.literal: op for op in ops}
        self._closers = frozenset(op.closer for op in ops if op.closer)
        self._frames = frozenset(framing)
        literals = tuple(dict.fromkeys([*self._openers, *self._closers, *framing]))
        self._markers = markers = Markers(literals) if literals else None
        self._leads = markers.leads if markers else ""
        #: literals that are prefixes of longer ones: found complete, they wait for the longer one
        self._longer = {a: tuple(b for b in literals if b != a and b.startswith(a))
                        for a in literals if any(b != a and b.startswith(a) for b in literals)}
        self._out_re = re.compile('["{}\\[\\]' + re.escape(self._leads) + "]")
        self._bare_re = re.compile('[",{}\\[\\]' + re.escape(self._leads) + "]")
        self._start = Opener("", start, None, start_separator) if start is not None else None
        self._find = markers.find if markers else _find_none
        self._hold = markers.hold if markers else _hold_none
        self._op: Opener | None = None  # the open block's opener
        # the scanner: bracket depth inside the element, in a string, after a backslash
        self._depth = 0
        self._inside = False
        self._escape = False
        self._head = True  # the element's head is still to be tested at its first nested value
        self._streaming = False  # the arguments stream as they arrive
        self._args_open = False
        self._held: list[str] = []  # whitespace (and a separator) held until what follows decides
        self._nelems = 0  # elements read in the open block
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

    def _release_held(self) -> None:
        self._text("".join(self._held))
        self._held = []

    # blocks ---------------------------------------------------------------------------------------

    def _before(self, data: str, pos: int) -> int:
        """In an array, before an element (or the ``]`` of an empty one)."""
        q = first_non_ws(data, pos)
        if q == -1:
            self._markup(data[pos:])
            return len(data)
        self._markup(data[pos:q])
        c = data[q]
        if c == "]" and self._nelems == 0:
            self._markup(c)
            return self._end_array(q + 1)
        if c in ",]}" or (self._markers is not None and (self._markers.match(data, q) or
                                                          self._markers.hold(data, q) == q)):
            return self._junk(data, q)
        return self._begin_elem(data, q)

    def _begin_elem(self, data: str, q: int) -> int:
        """An element starts at ``data[q]``: an object is a call candidate, anything else is read
        whole and reported (``bad_param_json``)."""
        self._nelems += 1
        c = data[q]
        self._new_unit("", in_block=True)
        self._head, self._streaming, self._args_open = c == "{", False, False
        if c == "{" or c == "[":
            self._depth, self._inside, self._escape = 1, False, False
            assert self._call is not None
            self._call.raw.append(c)
            self._state = ELEM
            return q + 1
        if c == '"':
            self._depth, self._inside, self._escape = 0, True, False
            assert self._call is not None
            self._call.raw.append(c)
            self._state = ELEM
            return q + 1
        # a scalar or text that is not JSON: one element up to the "," or "]" that ends it
        self._depth, self._inside, self._escape = 0, False, False
        self._state = BARE
        return q

    _void_value = False

    def _bare(self, data: str, pos: int) -> int:
        """State ``BARE``: an element that is no object, array or string (a number, a word, prose)
        runs to the ``,`` or ``]`` that ends it at its own depth, strings followed; it is no call
        (``bad_param_json``, once, whatever it holds). A marker inside it ends it too."""
        call = self._call
        assert call is not None
        n = len(data)
        i = pos
        while True:
            i, closed = self._follow(data, i, n, self._bare_re)
            if closed:
                continue
            if i == n:
                break
            c = data[i]
            if c in "{[":
                self._depth += 1
            elif c in "}]" and self._depth > 0:
                self._depth -= 1
            elif c in ",}]":
                call.raw.append(data[pos:i])
                self._fail_call(MarkupErrorKind.BAD_PARAM_JSON)
                self._state = AFTER
                return i
            else:
                assert self._markers is not None
                lit = self._markers.match(data, i)
                if lit or self._markers.hold(data, i) == i:
                    call.raw.append(data[pos:i])
                    if not lit:
                        return ~i
                    self._fail_call(MarkupErrorKind.BAD_PARAM_JSON)
                    return self._at_marker(i, lit, voided=True)
            i += 1
        call.raw.append(data[pos:n])
        return n

    def _follow(self, data: str, i: int, n: int, pattern: re.Pattern[str]) -> tuple[int, bool]:
        """From ``i``, follow JSON strings (their state across chunks in ``_inside`` and
        ``_escape``) to the next character of ``pattern`` outside a string: (its index, False); or
        just past a string's closing quote: (that index, True); or (``n``, False) at the chunk's end.
        What a bare element and a void block swallow is read this way; only what they do at each
        stop differs."""
        inside, escape = self._inside, self._escape
        while i < n:
            if inside:
                i, inside, escape = string_end(data, i, n, escape)
                if not inside:
                    self._inside, self._escape = inside, escape
                    return i, True
                continue
            hit = pattern.search(data, i)
            if hit is None:
                i = n
                break
            i = hit.start()
            if data[i] != '"':
                break
            inside = True
            i += 1
        self._inside, self._escape = inside, escape
        return i, False

    def _elem(self, data: str, pos: int) -> int:
        """Inside an element: follow strings and depth to the next point where something is
        decided."""
        call = self._call
        assert call is not None
        n = len(data)
        stop, marker = self._scan(data, pos, n)
        depth = self._depth
        end = stop if stop != -1 else n
        seg = data[pos:end]
        if seg:
            call.raw.append(seg)
            if self._args_open:
                self._delta(seg)
        if marker:
            if marker == "?":  # a marker may start here: wait for the next chunk
                return ~end
            return self._marker_in_elem(end, marker)
        if stop == -1:
            return end
        if self._head and depth == 2:
            self._test_head()
            return end
        if self._args_open and depth == 1:
            self._args_open = False
            return end
        if depth <= 0:
            self._finish_elem()
        return end

    def _scan(self, data: str, i: int, n: int) -> tuple[int, str]:
        """Follow strings and bracket depth over ``data[i:n]`` up to the first point where something
        is decided: (index just past it, "") — the first nested value opened while the head is
        untested, the arguments or the element closed —, (index of a marker's lead, the marker or
        "?" when only a prefix of one stands there), or (-1, "") when nothing was decided."""
        depth, inside, escape = self._depth, self._inside, self._escape
        target = 1 if self._args_open else 0
        out_re = self._out_re
        stop, marker = -1, ""
        while i < n:
            if escape:
                escape = False
                i += 1
                continue
            if inside:
                hit = _IN_STRING.search(data, i)
                if hit is None:
                    break
                i = hit.start()
                if data[i] == '"':
                    inside = False
                    i += 1
                    if depth == 0:  # a string element ends here
                        stop = i
                        break
                else:
                    escape = True
                    i += 1
                continue
            hit = out_re.search(data, i)
            if hit is None:
                break
            i = hit.start()
            c = data[i]
            if c == '"':
                inside = True
                i += 1
            elif c == "{" or c == "[":
                depth += 1
                i += 1
                if depth == 2 and self._head:
                    stop = i
                    break
            elif c == "}" or c == "]":
                depth -= 1
                i += 1
                if depth <= target:
                    stop = i
                    break
            else:  # the lead of a marker, outside strings
                assert self._markers is not None
                lit = self._markers.match(data, i)
                if lit or self._markers.hold(data, i) == i:
                    stop, marker = i, lit or "?"
                    break
                i += 1
        self._depth, self._inside, self._escape = depth, inside, escape
        return stop, marker

    def _test_head(self) -> None:
        """The element's first nested value just opened: if everything before it is the usual head,
        the call is announced and its arguments stream from this ``{``."""
        call = self._call
        assert call is not None
        self._head = False
        text = "".join(call.raw)
        m = self._shape.head.fullmatch(text)
        if m is None:
            return
        try:
            name = json.loads(m.group("name"))
            call_id = json.loads(m.group("id")) if "id" in m.groupdict() else None
        except ValueError:
            return
        call.raw = [text]
        self._name_call(name, call_id)
        self._streaming = self._args_open = True
        self._delta("{")

    def _finish_elem(self) -> None:
        """The element closed: it is a call if it is strict JSON of the family's shape."""
        call = self._call
        assert call is not None
        self._state = AFTER
        try:
            obj = strict_json("".join(call.raw))
        except JSONProblem as problem:
            self._fail_call(problem.kind)
            return
        got = self._shape.read(obj)
        if got is None:
            self._fail_call(MarkupErrorKind.BAD_PARAM_JSON)
            return
        name, args, call_id = got
        if call.index is None:
            self._name_call(name, call_id)
            self._delta(json.dumps(args, ensure_ascii=False))
        elif name != call.name or call_id != call.id:  # cannot be: the head was this element's
            self._fail_call(MarkupErrorKind.BAD_PARAM_JSON)
            return
        self._end_call(close_object=False)

    def _marker_in_elem(self, m: int, lit: str) -> int:
        """A marker outside strings inside an element: the element is void (markers are reserved);
        the marker is read where the block stands."""
        self._fail_call(MarkupErrorKind.MALFORMED_TAG)
        return self._at_marker(m, lit, voided=True)

    def _at_marker(self, m: int, lit: str, complete: bool = False, voided: bool = False) -> int:
        """A marker where the open block expected JSON. Its closer closes the block: markup when
        the calls before it were complete (``complete``) or an element was just voided
        (``voided``: one error is enough), else ``malformed_tag`` (a missing ``]``). Any other
        marker leaves the block unterminated and is content's to read."""
        op = self._op
        self._op = None
        self._state = CONTENT
        if op is not None and lit == op.closer:
            if complete or voided:
                self._markup(lit)
            else:
                self._event(MarkupError(MarkupErrorKind.MALFORMED_TAG, lit))
            return m + len(lit)
        if op is not None and op.closer is not None and not voided:
            self._event(MarkupError(MarkupErrorKind.UNTERMINATED, ""))
        return m

    def _after(self, data: str, pos: int) -> int:
        """After an element."""
        op = self._op
        assert op is not None
        if op.body is Body.ONE:
            self._op = None
            self._state = AFTER_ONE
            return pos
        if op.body is Body.OBJECTS:
            self._state, self._seen_sep = SEP_HOLD, False
            return pos
        q = first_non_ws(data, pos)
        if q == -1:
            self._markup(data[pos:])
            return len(data)
        self._markup(data[pos:q])
        c = data[q]
        if c == ",":
            self._markup(c)
            self._state = BEFORE
            return q + 1
        if c == "]":
            self._markup(c)
            return self._end_array(q + 1)
        return self._junk(data, q)

    def _end_array(self, end: int) -> int:
        op = self._op
        assert op is not None
        if op.closer is None:
            self._op = None
            self._state = CONTENT
        else:
            self._state = AFTER_ARRAY
        return end

    def _after_array(self, data: str, pos: int) -> int:
        """After the array's ``]``: whitespace, then the block's closer."""
        q = first_non_ws(data, pos)
        if q == -1:
            self._markup(data[pos:])
            return len(data)
        self._markup(data[pos:q])
        return self._junk(data, q)

    _seen_sep = False

    def _sep_hold(self, data: str, pos: int) -> int:
        """Between objects separated by ``;`` or newlines: whitespace and one separator. In a block
        (B′) they are markup and a line that is no object is junk; without a closer (Llama 3) they
        are held until the next object (markup) or other text (text, decision 3.1)
        decides."""
        op = self._op
        assert op is not None
        i, n = pos, len(data)
        sep, seen = op.separator, self._seen_sep
        while i < n:
            c = data[i]
            if c in WS:
                i += 1
            elif c == sep and not seen:
                seen = True
                i += 1
            else:
                break
        self._seen_sep = seen
        if op.closer is not None:
            self._markup(data[pos:i])
            if i == n:
                return n
            if data[i] == "{":
                return self._begin_elem(data, i)
            if self._markers is not None:
                lit = self._markers.match(data, i)
                if lit:
                    return self._at_marker(i, lit, complete=True)
                if self._markers.hold(data, i) == i:
                    return ~i
            self._new_unit("", in_block=True)
            self._state = LINE_JUNK
            return i
        self._held.append(data[pos:i])
        if i == n:
            if sum(map(len, self._held)) > TAG_CAP:
                self._release_held()
                self._op = None
                self._state = CONTENT
            return n
        if data[i] == "{":
            self._markup("".join(self._held))
            self._held = []
            return self._begin_elem(data, i)
        self._release_held()
        self._op = None
        self._state = CONTENT
        return i

    def _line_junk(self, data: str, pos: int) -> int:
        """A line in a block of one object per line that is not an object: ``malformed_tag`` for
        that line only (docs/design/markup.md §3, ``minimax-m1``); a marker ends it too."""
        call = self._call
        assert call is not None
        nl = data.find("\n", pos)
        m, lit = self._find(data, pos)
        if m != -1 and (nl == -1 or m < nl):
            call.raw.append(data[pos:m])
            self._fail_call(MarkupErrorKind.MALFORMED_TAG)
            return self._at_marker(m, lit, voided=True)
        if nl == -1:
            k = self._hold(data, pos)
            call.raw.append(data[pos:k])
            return ~k
        call.raw.append(data[pos:nl])
        self._fail_call(MarkupErrorKind.MALFORMED_TAG)
        self._state, self._seen_sep = SEP_HOLD, False
        return nl

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

    def _junk(self, data: str, q: int) -> int:
        """Something in a block where JSON was expected: the closer closes the block; anything
        else voids the rest of the block (``malformed_tag``), earlier calls kept."""
        op = self._op
        assert op is not None
        if self._markers is not None:
            lit = self._markers.match(data, q)
            if lit:
                return self._at_marker(q, lit, complete=self._state == AFTER_ARRAY)
            if self._markers.hold(data, q) == q:
                return ~q
        self._new_unit("", in_block=True)
        assert self._call is not None
        self._call.error = MarkupErrorKind.MALFORMED_TAG
        in_array = op.body is Body.ARRAY and self._state != AFTER_ARRAY
        self._depth, self._inside, self._escape = int(in_array), False, False
        self._state = VOID
        return q

    def _void_state(self, data: str, pos: int) -> int:
        """The rest of a void block, swallowed up to its closer (outside strings) or, without one,
        up to the ``]`` that closes the array; at end of stream it is reported as it stands."""
        call = self._call
        op = self._op
        assert call is not None and op is not None
        n = len(data)
        i = pos
        while True:
            i, closed = self._follow(data, i, n, self._out_re)
            if closed:
                if self._depth == 0 and self._void_value:  # the voided value: a string
                    return self._void_done(data, pos, i)
                continue
            if i == n:
                break
            c = data[i]
            if c in "{[":
                self._depth += 1
            elif c in "}]":
                self._depth -= 1
                if self._depth <= 0 and self._void_value:
                    return self._void_done(data, pos, i + 1)
                if self._depth <= 0 and op.closer is None and c == "]":
                    call.raw.append(data[pos:i + 1])
                    self._fail_call()
                    self._op = None
                    self._state = CONTENT
                    return i + 1
            else:
                assert self._markers is not None
                lit = self._markers.match(data, i)
                if lit == op.closer or lit in self._openers:
                    call.raw.append(data[pos:i])
                    if lit == op.closer:
                        call.raw.append(lit)
                        self._fail_call()
                        self._op = None
                        self._state = CONTENT
                        return i + len(lit)
                    self._fail_call()
                    self._op = None
                    self._state = CONTENT
                    return i
                if not lit and self._markers.hold(data, i) == i:
                    call.raw.append(data[pos:i])
                    return ~i
            i += 1
        call.raw.append(data[pos:n])
        return n

    def _void_done(self, data: str, pos: int, end: int) -> int:
        """The JSON value voided after a marker with no closer closed at ``end``."""
        assert self._call is not None
        self._call.raw.append(data[pos:end])
        self._void_value = False
        self._fail_call()
        self._op = None
        self._state = CONTENT
        return end

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


def string_end(data: str, i: int, n: int, escape: bool) -> tuple[int, bool, bool]:
    """Follow a JSON string from ``data[i]`` (``escape``: the last character read was its
    backslash): (index just past its closing quote, False, False), or (``n``, True, escape) when
    it goes on past ``data[:n]``."""
    while i < n:
        if escape:
            escape = False
            i += 1
            continue
        hit = _IN_STRING.search(data, i, n)
        if hit is None:
            return n, True, False
        i = hit.start() + 1
        if data[i - 1] == '"':
            return i, False, False
        escape = True
    return n, True, escape


def _find_none(data: str, pos: int) -> tuple[int, str]:
    return -1, ""


def _hold_none(data: str, pos: int) -> int:
    return len(data)

