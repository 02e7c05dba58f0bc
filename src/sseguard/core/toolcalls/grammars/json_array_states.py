"""The states of the class-B parser (``json_array``) inside an open block: before, in and after each
element, the separators between objects, the end of the array, and the void rest of a block that broke
off. Every element is one call, all or nothing (decision 3.4 of docs/design/markup.md): an object is
read with the scanner (``json_array_scan``) and decided when it closes; anything else is read whole and
reported.

The states around the blocks — content, the openers, the marker-less start, the end of the stream —
and the hot path are the parser's own (``json_array``).
"""

from __future__ import annotations

import json

from sseguard.core.toolcalls.events import MarkupError, MarkupErrorKind
from sseguard.core.toolcalls.grammars.base import CONTENT
from sseguard.core.toolcalls.grammars.json_array_scan import JSONScanner
from sseguard.core.toolcalls.grammars.json_array_tables import WS, Body, Opener, Shape, first_non_ws
from sseguard.core.toolcalls.grammars.markers import TAG_CAP, Markers
from sseguard.core.toolcalls.grammars.strict_json import JSONProblem, strict_json
from sseguard.core.toolcalls.schema import ToolSpec

# states
(START, OPENED, BEFORE, ELEM, AFTER, SEP_HOLD, AFTER_ARRAY, VOID, LINE_JUNK, AFTER_ONE,
 START_HOLD, BARE) = range(1, 13)


class JSONArrayStates(JSONScanner):
    """The element and block states of the class-B parser, on the family's element ``shape`` and its
    ``openers`` (by literal). ``_op`` is the open block's opener; ``_held`` the whitespace (and a
    separator) held until what follows decides."""

    def __init__(self, tools: ToolSpec | None, *, shape: Shape, openers: dict[str, Opener],
                 markers: Markers | None) -> None:
        super().__init__(tools, markers)
        self._shape = shape
        self._openers = openers
        self._op: Opener | None = None  # the open block's opener
        self._held: list[str] = []  # whitespace (and a separator) held until what follows decides
        self._nelems = 0  # elements read in the open block

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

