"""Class C of docs/design/markup.md: a name, then one JSON object of arguments (``mistral`` v11+, ``plamo3``).

```
mistral:  [TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time{"tz": "UTC"} text
          [TOOL_CALLS] [{"name": "get_weather", "arguments": {…}}]       (pre-v11: class B)
plamo3:   <|plamo:begin_tool_requests:plamo|><|plamo:begin_tool_request:plamo|>
          <|plamo:begin_tool_name:plamo|>NAME<|plamo:end_tool_name:plamo|>
          <|plamo:begin_tool_arguments:plamo|><|plamo:constrain|>json<|plamo:msg|>{…}
          <|plamo:end_tool_arguments:plamo|><|plamo:end_tool_request:plamo|>…
```

``name_then_json(name, opener, args_marker, closer=None, …)`` builds the family: the name runs from
the opener to the arguments marker (trimmed; empty → ``malformed_tag``), the arguments are one JSON
object streamed verbatim as they arrive, ended by the closer or, without one, by the object's own
``}`` (a string- and depth-aware scan, so a marker inside a string is string text). Text after a
call is visible (decisions 3.1 and 3.8: vLLM's mistral drops it). Framing markers (PLaMo's
request wrappers) are markup wherever they stand; a family's reasoning tags (``[THINK]``…``[/THINK]``)
give ``Reasoning`` events, and its call opener ends reasoning implicitly (decision 3.9).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from sseguard.core.errors import UsageError
from sseguard.core.toolcalls.events import Event, MarkupError, MarkupErrorKind
from sseguard.core.toolcalls.family import CallLike, Family, claim_openers
from sseguard.core.toolcalls.grammars.base import CONTENT, PLAIN, MarkedRawParser
from sseguard.core.toolcalls.grammars.json_array import JSONArrayParser
from sseguard.core.toolcalls.grammars.json_array_embed import finish_embedded, run_embedded
from sseguard.core.toolcalls.grammars.json_array_tables import Body, Opener
from sseguard.core.toolcalls.grammars.markers import TAG_CAP, Markers
from sseguard.core.toolcalls.grammars.strict_json import JSONProblem, strict_json
from sseguard.core.toolcalls.schema import ToolSpec

MALFORMED = MarkupErrorKind.MALFORMED_TAG
UNTERMINATED = MarkupErrorKind.UNTERMINATED

NAME, PRE, ARGS, AFTER_OBJ, REASON, SKIP, ARRAY = range(1, 8)
_WS = " \t\n\r"


@dataclass(frozen=True, slots=True)
class Grammar:
    """The markers of one class-C family.

    ``preamble``: markers that may stand (with whitespace) between the arguments marker and the
    object, and ``preamble_words`` plain words that may stand there too (PLaMo's ``json`` after its
    constrain token); ``brace_opens``: a ``{`` right after the name starts the arguments without the marker
    (Mistral, V ``parser/mistral.py`` L274-284); ``array``: after the opener, ``[`` opens a JSON array
    of call objects instead (Mistral before v11); ``framing``: markup wherever it stands;
    ``think``: the reasoning tags (open, close); ``exits``: openers that end reasoning.
    """

    opener: str
    args_marker: str
    closer: str | None = None
    preamble: tuple[str, ...] = ()
    brace_opens: bool = False
    array: bool = False
    framing: tuple[str, ...] = ()
    think: tuple[str, str] | None = None
    exits: tuple[str, ...] = ()
    preamble_words: tuple[str, ...] = ()

    @property
    def literals(self) -> tuple[str, ...]:
        closer = (self.closer,) if self.closer else ()
        return tuple(dict.fromkeys((self.opener, self.args_marker, *closer, *self.preamble,
                                    *self.framing, *(self.think or ()))))


class NameThenJSONParser(MarkedRawParser):
    """Incremental parser of one class-C family (see the module docstring)."""

    def __init__(self, tools: ToolSpec | None = None, *, family: str, grammar: Grammar) -> None:
        super().__init__(tools)
        self.family = family
        self._g = grammar
        self._markers = markers = Markers(grammar.literals)
        self._lead_char = markers.lead or grammar.opener[0]
        self._find, self._hold = markers.find, markers.hold
        lead = re.escape(markers.leads)
        self._out_re = re.compile(f'["{{}}\\[\\]{lead}]')
        self._mark = 0
        self._name: list[str] = []
        self._name_size = 0
        self._depth = 0
        self._inside = False
        self._escape = False
        self._array: JSONArrayParser | None = None
        self._handlers = (self._content, self._name_state, self._pre, self._args, self._after_obj,
                          self._reason, self._skip, self._array_state)

    _HOT = True
    _plain_escaped = False  # the arguments are the model's own JSON

    def _hot(self, text: str) -> list[Event] | None:
        """Inside a string of the arguments only a quote or a backslash ends plain text (the hot
        path)."""
        if (self._state == ARGS and self._inside and not self._escape and not self._quiet
                and '"' not in text and "\\" not in text):
            return PLAIN
        return None

    # content --------------------------------------------------------------------------------------

    def _opener(self, data: str, pos: int, m: int, lit: str) -> int:
        g = self._g
        self._text(data[pos:m])
        end = m + len(lit)
        if lit == g.opener:
            self._new_unit("", in_block=False)
            self._mark = m
            self._name, self._name_size = [], 0
            self._state = NAME
            return end
        if lit in g.framing:
            self._markup(lit)
            return end
        if g.think and lit == g.think[0]:
            self._markup(lit)
            self._state = REASON
            return end
        self._event(MarkupError(MALFORMED, lit))  # a marker out of place (decision 2.1)
        return end

    def _reason(self, data: str, pos: int) -> int:
        """Reasoning text up to its closer, or up to a call opener (which ends it implicitly)."""
        return self._reason_until(data, pos, self._g.think, self._g.exits)

    # the name -------------------------------------------------------------------------------------

    def _name_state(self, data: str, pos: int) -> int:
        g = self._g
        m, lit = self._find(data, pos)
        end = m if m != -1 else self._hold(data, pos)
        if g.brace_opens or g.array:
            b = data.find("{", pos, end)
            if g.array and not "".join(self._name).strip(_WS):
                q = _first_non_ws(data, pos, end)
                if q != -1 and data[q] == "[" and (b == -1 or q < b):
                    return self._to_array(data, q)
            if g.brace_opens and b != -1:
                self._name.append(data[pos:b])
                return self._named(data, b, b)
        self._name.append(data[pos:end])
        self._name_size += end - pos
        if self._name_size > TAG_CAP:
            return self._void(data, end)
        if m == -1:
            return ~end
        if lit == g.args_marker:
            return self._named(data, m, m + len(lit))
        return self._void(data, m)  # another marker inside the name

    def _named(self, data: str, at: int, then: int) -> int:
        """The name ends at ``at``; the arguments (or their preamble) start at ``then``."""
        name = "".join(self._name).strip(_WS)
        if not name or "\n" in name:
            return self._void(data, at)
        self._name_call(name)
        self._state = PRE
        return then

    def _void(self, data: str, at: int) -> int:
        """The unit is no call: with a closer it is swallowed up to it; without one it ends at
        ``at`` and what follows is read as content again."""
        assert self._call is not None
        self._call.error = self._call.error or MALFORMED
        self._quiet = False
        if self._g.closer is None:
            self._record(data, at)
            self._fail_call()
            self._state = CONTENT
            return at
        self._state = SKIP
        return at

    def _skip(self, data: str, pos: int) -> int:
        m, _ = self._find(data, pos)
        if m == -1:
            return ~self._hold(data, pos)
        lit = self._markers.match(data, m)
        call = self._call
        assert call is not None
        if lit == self._g.closer:
            self._record(data, m + len(lit))
            self._fail_call()
            self._state = CONTENT
            return m + len(lit)
        if lit in (self._g.opener, *self._g.framing):
            self._record(data, m)
            self._fail_call()
            self._state = CONTENT
            return m
        return m + len(lit)

    # the arguments --------------------------------------------------------------------------------

    def _pre(self, data: str, pos: int) -> int:
        """Between the arguments marker and the object: whitespace and preamble markers."""
        q = _first_non_ws(data, pos, len(data))
        if q == -1:
            return len(data)
        lit = self._markers.match(data, q)
        if lit in self._g.preamble:
            return q + len(lit)
        for word in self._g.preamble_words:
            if data.startswith(word, q):
                return q + len(word)
            if word.startswith(data[q:q + len(word)]):
                return ~q  # the word may be cut by the chunk's end
        if not lit and self._markers.hold(data, q) == q and data[q] in self._markers.leads:
            return ~q
        if data[q] != "{":
            if lit:
                return self._void(data, q)
            assert self._call is not None
            self._call.error = MarkupErrorKind.BAD_PARAM_JSON  # arguments that are no object
            if data[q] not in '["':
                return self._void(data, q)
            # another JSON value stands where the object is due: it is read whole, unstreamed,
            # and is part of the one error (docs/markup.md, "not JSON")
            self._quiet = True
        self._depth, self._inside, self._escape = 0, False, False
        self._state = ARGS
        return q

    _quiet = False  # the value being read is no object: read to its end, never streamed

    def _args(self, data: str, pos: int) -> int:
        """The object, streamed as it arrives; it ends at its own ``}``."""
        call = self._call
        assert call is not None
        i, n = pos, len(data)
        depth, inside, escape = self._depth, self._inside, self._escape
        result = n
        while i < n:
            if escape:
                escape = False
                i += 1
                continue
            if inside:
                j = _in_string(data, i)
                if j == -1:
                    i = n
                    break
                if data[j] == "\\":
                    escape = True
                else:
                    inside = False
                    if depth == 0:  # a string value (never the object) ended
                        self._depth, self._inside, self._escape = depth, inside, escape
                        return self._object_done(data, j + 1)
                i = j + 1
                continue
            hit = self._out_re.search(data, i)
            if hit is None:
                i = n
                break
            j = hit.start()
            c = data[j]
            if c in self._markers.leads:
                lit = self._markers.match(data, j)
                if lit or self._markers.hold(data, j) == j:
                    self._emit_args(data, pos, j)
                    self._depth, self._inside, self._escape = depth, inside, escape
                    if not lit:
                        return ~j
                    call.error = MALFORMED  # a marker inside the object (outside its strings)
                    return self._void(data, j)
            if c == '"':
                inside = True
            elif c in "{[":
                depth += 1
            elif c in "}]":
                depth -= 1
                if depth == 0:
                    result = j + 1
                    self._emit_args(data, pos, result)
                    self._depth, self._inside, self._escape = depth, inside, escape
                    return self._object_done(data, result)
            i = j + 1
        self._emit_args(data, pos, result)
        self._depth, self._inside, self._escape = depth, inside, escape
        return result

    def _emit_args(self, data: str, start: int, end: int) -> None:
        if end > start and not self._quiet:
            self._delta(data[start:end])

    def _object_done(self, data: str, end: int) -> int:
        """The object closed at ``end``: valid JSON ends the call (or waits for the closer)."""
        call = self._call
        assert call is not None
        if self._quiet:
            return self._void(data, end)
        try:
            value = strict_json("".join(call.frags))
            if not isinstance(value, dict):
                raise JSONProblem(MarkupErrorKind.BAD_PARAM_JSON)
        except JSONProblem as problem:
            call.error = problem.kind
            return self._void(data, end)
        if self._g.closer is None:
            self._record(data, end)
            self._end_call(close_object=False)
            self._state = CONTENT
            return end
        self._state = AFTER_OBJ
        return end

    def _after_obj(self, data: str, pos: int) -> int:
        """After the object of a family with a closer: whitespace, then the closer."""
        q = _first_non_ws(data, pos, len(data))
        if q == -1:
            return len(data)
        lit = self._markers.match(data, q)
        if lit == self._g.closer:
            self._record(data, q + len(lit))
            self._end_call(close_object=False)
            self._state = CONTENT
            return q + len(lit)
        if not lit and self._markers.hold(data, q) == q:
            return ~q
        assert self._call is not None
        self._call.error = MarkupErrorKind.BAD_PARAM_JSON  # text after the object
        return self._void(data, q)

    # Mistral's array (before v11): the class-B parser, driven from here ------------------------

    def _to_array(self, data: str, q: int) -> int:
        call = self._call
        assert call is not None
        self._record(data, q)
        self._call = None
        self._markup("".join(call.raw))  # the opener and the whitespace after it
        inner = self._array
        if inner is None:
            inner = self._array = JSONArrayParser(self._tools, family=self.family,
                                                  opener=self._g.opener)
        inner._next_index = self._next_index
        inner._begin_block(Opener(self._g.opener, Body.ARRAY, None), "")
        self._state = ARRAY
        return q

    def _array_state(self, data: str, pos: int) -> int:
        inner = self._array
        assert inner is not None
        pos, ended = run_embedded(self, inner, data, pos)
        if ended:
            self._state = CONTENT
        return pos

    # end of stream --------------------------------------------------------------------------------

    def _finish(self, rest: str) -> None:
        state = self._state
        if state == ARRAY:
            assert self._array is not None
            finish_embedded(self, self._array, rest)
        elif state == REASON:
            self._reasoning(rest)
        elif state == CONTENT:
            super()._finish(rest)
        else:
            call = self._call
            assert call is not None
            call.raw.append(rest)
            self._quiet = False
            self._fail_call(None if state == SKIP else UNTERMINATED)


def _first_non_ws(data: str, pos: int, end: int) -> int:
    for i in range(pos, end):
        if data[i] not in _WS:
            return i
    return -1


_STRING_STOP = re.compile(r'["\\]')


def _in_string(data: str, i: int) -> int:
    m = _STRING_STOP.search(data, i)
    return m.start() if m else -1


# ── the builder ──────────────────────────────────────────────────────────────────────────────────


def _render(g: Grammar, wrap: tuple[str, str, str, str], calls: Sequence[CallLike],
            malformed: bool) -> str:
    """The calls as the family's template writes them: ``wrap`` is (before the calls, before each,
    after each, after the calls)."""
    out = [wrap[0]]
    for call in calls:
        out.append(f"{wrap[1]}{g.opener}{call.name}{g.args_marker}{''.join(g.preamble[:-1])}"
                   f"{''.join(g.preamble_words)}{''.join(g.preamble[-1:])}"
                   f"{call.arguments}{g.closer or ''}{wrap[2]}")
    out.append(wrap[3])
    return "".join(out)


def name_then_json(name: str, opener: str, args_marker: str, closer: str | None = None, *,
                   preamble: tuple[str, ...] = (), framing: tuple[str, ...] = (),
                   preamble_words: tuple[str, ...] = (),
                   think: tuple[str, str] | None = None, exits: tuple[str, ...] = (),
                   brace_opens: bool = False, array: bool = False,
                   render_wrap: tuple[str, str, str, str] = ("", "", "", ""),
                   aliases: tuple[str, ...] = (), rank: int = 100,
                   leak_start: str | None = None) -> Family:
    """A complete class-C family: ``opener`` NAME ``args_marker`` [preamble] ``{…}`` [``closer``].

    ``preamble_words`` plain words allowed among the preamble markers; ``framing`` markers are
    markup wherever they stand (PLaMo's request wrappers); ``think`` the
    family's reasoning tags; ``exits`` the markers that end reasoning (default: the opener);
    ``brace_opens``: a ``{`` after the name starts the arguments without the
    marker; ``array``: ``opener`` followed by ``[`` is a JSON array of call objects (class B);
    ``render_wrap``: what the chaos rendering writes before the calls, before and after each, and
    after them; ``leak_start``: what a call leaves at an answer's start when a server strips the
    family's special tokens (``Family.leak_start``).
    """
    if not opener or not args_marker or opener == args_marker:
        raise UsageError(f"family {name!r}: opener and arguments marker must differ and be "
                         "non-empty")
    grammar = Grammar(opener, args_marker, closer, preamble, brace_opens, array, framing, think,
                      exits or (opener,), preamble_words)
    make: Callable[[ToolSpec | None], NameThenJSONParser] = partial(
        NameThenJSONParser, family=name, grammar=grammar)
    markers = grammar.literals
    # every marker is the family's own (none is shared), so markup starting with one is its
    return Family(name=name, make=make, markers=markers, leak_markers=markers,
                  reasoning_exits=grammar.exits, auto_markers=markers,
                  claim=claim_openers(markers), render=partial(_render, grammar, render_wrap),
                  aliases=aliases, rank=rank, grammar="B / C" if array else "C",
                  leak_start=leak_start, reasoning_spans=(think,) if think else ())


# ── the families ─────────────────────────────────────────────────────────────────────────────────
