"""Events every tool-call parser emits, the parser protocol, and the machinery the families share.

Each family is a small state machine over text fed in arbitrary chunks. They share three habits, kept
here so that no family re-invents them:

* **hold back only a marker prefix** — text that cannot start a marker goes out at once; only the
  shortest suffix that could still become a marker waits for the next chunk;
* **coalesce per call** — adjacent ``Text`` (or ``ToolArgsDelta``, or ``Markup``) pieces produced by one
  ``feed()`` go out as one event, so event count follows chunk count, not character count;
* **account for every character** — each input character ends up in exactly one of ``Text.text``,
  ``Reasoning.text``, ``Markup.raw``, ``ToolCallEnd.raw`` or ``MarkupError.raw`` (see
  :func:`consumed_text`).

The steps that are the same logic in every family live here too, so that a family module only says
what its own markers mean: visible content and the separator before an opener (``BaseParser``),
arguments streamed as the model wrote them, whitespace between tags, strict JSON values and whole-
object arguments, and for families with blocks the "between calls" and "void call" states
(``BlockParser``).
"""

from __future__ import annotations

import json
import math
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from json.encoder import encode_basestring  # the C escaper json.dumps itself uses
from typing import Any, Protocol

from sseguard.errors import UsageError


class MarkupErrorKind(StrEnum):
    """Why markup could not become a call — the closed list of MARKUP.md."""

    UNTERMINATED = "unterminated"  # the stream ended inside markup (a partial opener included)
    MALFORMED_TAG = "malformed_tag"  # a tag or text that has no place where it stands
    INVALID_STRING_FLAG = "invalid_string_flag"  # DSML string="…" neither true nor false (or missing)
    BAD_PARAM_JSON = "bad_param_json"  # a JSON value or body that is not strict JSON of the right shape
    DUPLICATE_PARAMETER = "duplicate_parameter"  # a parameter name (or JSON key) given twice
    UNDEFINED_FUNCTION = "undefined_function"  # a call to a tool that was not offered (call kept)


@dataclass(frozen=True, slots=True)
class Text:
    """Visible text outside any tool-call markup, verbatim."""

    text: str


@dataclass(frozen=True, slots=True)
class Reasoning:
    """Reasoning text, verbatim: from ``ThinkSplitter`` (``<think>`` removed), or from a family whose
    reasoning is part of its own markup (Harmony's ``analysis`` channel)."""

    text: str


@dataclass(frozen=True, slots=True)
class Markup:
    """Tool-call structure that belongs to no single call: block openers and closers, the separator
    the encoder writes before a block, whitespace between calls.

    It carries no meaning for a client, but it proves that markup was there (an empty block is still
    markup in content) and lets every input character be accounted for.
    """

    raw: str


@dataclass(frozen=True, slots=True)
class ToolCallStart:
    """A call opened: its index (0, 1, … in stream order, void calls included) and tool name.

    ``id`` is the call id the model wrote itself, verbatim (Kimi's ``functions.NAME:IDX``); ``None``
    for families that write none.
    """

    index: int
    name: str
    id: str | None = None


@dataclass(frozen=True, slots=True)
class ToolArgsDelta:
    """The next piece of a call's arguments JSON; pieces are only ever appended, never retracted."""

    index: int
    fragment: str


@dataclass(frozen=True, slots=True)
class ToolCallEnd:
    """A call completed and valid: ``arguments`` is exactly the join of its ``ToolArgsDelta`` pieces.

    ``raw`` is the markup text of the call as received (excluded from equality: two calls are the same
    call whatever whitespace their tags had).
    """

    index: int
    name: str
    arguments: str
    raw: str = field(default="", compare=False, repr=False)
    id: str | None = None  # as on the call's ToolCallStart


@dataclass(frozen=True, slots=True)
class MarkupError:
    """Markup that is not a call, with the raw text it covered.

    With an ``index``, the call of that index is void (MARKUP.md decision 4): a consumer that already
    forwarded its deltas learns here that they do not form a call. ``undefined_function`` is the one
    exception — a finding about a kept call; its ``raw`` is the tool name, not consumed input.
    """

    kind: MarkupErrorKind
    raw: str
    index: int | None = None


Event = Text | Reasoning | Markup | ToolCallStart | ToolArgsDelta | ToolCallEnd | MarkupError


class Parser(Protocol):
    """One stream's incremental tool-call parser: feed text in any chunking, then close once."""

    family: str

    def feed(self, text: str) -> list[Event]:
        """Parse more text; return the events it completes (possibly none)."""
        ...

    def close(self) -> list[Event]:
        """End of stream: report what the held-back or unfinished text means."""
        ...


def consumed_text(events: list[Event]) -> str:
    """The input the events account for, in order. After ``close()`` it equals the whole input.

    Before ``close()`` it is a prefix of what was fed; the rest is held back (a possible marker prefix
    or an unfinished call). ``undefined_function`` errors annotate a call and consume nothing.
    """
    parts: list[str] = []
    for ev in events:
        if isinstance(ev, Text | Reasoning):
            parts.append(ev.text)
        elif isinstance(ev, Markup | ToolCallEnd):
            parts.append(ev.raw)
        elif isinstance(ev, MarkupError):
            parts.append("" if ev.kind is MarkupErrorKind.UNDEFINED_FUNCTION else ev.raw)
    return "".join(parts)


def _piece(ev: Event) -> tuple[object, str] | None:
    """(merge key, text) of a mergeable event; None for the others."""
    if isinstance(ev, Text):
        return Text, ev.text
    if isinstance(ev, Reasoning):
        return Reasoning, ev.text
    if isinstance(ev, Markup):
        return Markup, ev.raw
    if isinstance(ev, ToolArgsDelta):
        return ev.index, ev.fragment
    return None


def _rebuilt(head: Event, text: str) -> Event:
    if isinstance(head, Text):
        return Text(text)
    if isinstance(head, Reasoning):
        return Reasoning(text)
    if isinstance(head, Markup):
        return Markup(text)
    assert isinstance(head, ToolArgsDelta)
    return ToolArgsDelta(head.index, text)


def join_events(events: list[Event]) -> list[Event]:
    """Merge adjacent ``Text``, ``Reasoning``, ``Markup`` and same-call ``ToolArgsDelta`` events.

    Two chunkings of the same input give equal joined event lists (the chunking-invariance guarantee).
    Each run is joined once, so this is linear however many pieces a run has.
    """
    out: list[Event] = []
    run: list[str] = []
    head: Event | None = None
    key: object = None
    for ev in events:
        piece = _piece(ev)
        if head is not None and piece is not None and piece[0] == key:
            run.append(piece[1])
            continue
        if head is not None:
            out.append(_rebuilt(head, "".join(run)))
            head = None
        if piece is None:
            out.append(ev)
        else:
            head, (key, text) = ev, piece
            run = [text]
    if head is not None:
        out.append(_rebuilt(head, "".join(run)))
    return out


def event_to_dict(ev: Event) -> dict[str, Any]:
    """A JSON-able dict for one event (``type`` is the class name)."""
    if isinstance(ev, Text):
        return {"type": "Text", "text": ev.text}
    if isinstance(ev, Reasoning):
        return {"type": "Reasoning", "text": ev.text}
    if isinstance(ev, Markup):
        return {"type": "Markup", "raw": ev.raw}
    ident = {} if isinstance(ev, ToolArgsDelta | MarkupError) or ev.id is None else {"id": ev.id}
    if isinstance(ev, ToolCallStart):
        return {"type": "ToolCallStart", "index": ev.index, "name": ev.name, **ident}
    if isinstance(ev, ToolArgsDelta):
        return {"type": "ToolArgsDelta", "index": ev.index, "fragment": ev.fragment}
    if isinstance(ev, ToolCallEnd):
        return {"type": "ToolCallEnd", "index": ev.index, "name": ev.name,
                "arguments": ev.arguments, "raw": ev.raw, **ident}
    return {"type": "MarkupError", "kind": str(ev.kind), "raw": ev.raw, "index": ev.index}


# ── strict JSON ───────────────────────────────────────────────────────────────────────────────────

#: What decision 2 trims around a JSON value: ASCII whitespace only (a NBSP is content, not padding).
ASCII_WS = " \t\n\r\x0b\x0c"


class JSONProblem(Exception):
    """Internal: a value failed strict JSON; ``kind`` says which error it becomes."""

    def __init__(self, kind: MarkupErrorKind) -> None:
        super().__init__(str(kind))
        self.kind = kind


def _no_constant(name: str) -> Any:
    # NaN, Infinity and -Infinity are accepted by Python's json but are not JSON: a consumer in
    # another language fails on them, so they are rejected where they appear.
    raise JSONProblem(MarkupErrorKind.BAD_PARAM_JSON)


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):  # 1e400 parses to inf in Python and would re-serialize as Infinity
        raise JSONProblem(MarkupErrorKind.BAD_PARAM_JSON)
    return value


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise JSONProblem(MarkupErrorKind.DUPLICATE_PARAMETER)
        result[key] = value
    return result


_STRICT = json.JSONDecoder(object_pairs_hook=_unique_pairs, parse_constant=_no_constant,
                           parse_float=_finite_float)


def strict_json(text: str) -> Any:
    """Decode one strict JSON value (any type); raise ``JSONProblem`` with the error kind if not."""
    try:
        return _STRICT.decode(text)
    except JSONProblem:
        raise
    except (ValueError, RecursionError) as exc:
        raise JSONProblem(MarkupErrorKind.BAD_PARAM_JSON) from exc


def json_string_body(text: str) -> str:
    """``text`` escaped as the inside of a JSON string. Escaping is per character, so escaping the
    pieces of a value one by one gives exactly the escaping of the whole value."""
    escaped: str = encode_basestring(text)
    return escaped[1:-1]


# ── tools ─────────────────────────────────────────────────────────────────────────────────────────


#: JSON Schema's type names; anything else in a schema's ``type`` says nothing a parser can use.
JSON_TYPES = frozenset({"string", "integer", "number", "boolean", "object", "array", "null"})
_JSON_VALUE_TYPES = frozenset({"integer", "number", "boolean", "object", "array"})


def _type_of(value: Any) -> str:
    """The JSON Schema type name of a decoded JSON value (an integral float is a number)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def declared_types(schema: Any) -> frozenset[str]:
    """The types a parameter's schema allows (MARKUP2.md decision 5): its ``type`` (a name or a list),
    the types of its ``enum`` values, and those of its ``anyOf``/``oneOf`` members. Empty: untyped."""
    if not isinstance(schema, dict):
        return frozenset()
    found: set[str] = set()
    declared = schema.get("type")
    for name in declared if isinstance(declared, list) else [declared]:
        if name in JSON_TYPES:
            found.add(name)
    enum = schema.get("enum")
    if isinstance(enum, list):
        found.update(_type_of(value) for value in enum)
    for key in ("anyOf", "oneOf"):
        members = schema.get(key)
        if isinstance(members, list):
            for member in members:
                found |= declared_types(member)
    return frozenset(found)


def type_allows(types: frozenset[str], value: Any) -> bool:
    """Whether a decoded JSON value has one of ``types`` (``number`` takes integers too)."""
    kind = _type_of(value)
    return kind in types or (kind == "integer" and "number" in types)


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """The offered tools, reduced to what parsers need: the names and the types each parameter's
    schema allows (``declared_types``; empty when the schema says nothing usable)."""

    names: frozenset[str]
    param_types: dict[str, dict[str, frozenset[str]]] = field(default_factory=dict)

    @classmethod
    def from_openai(cls, tools: list[dict[str, Any]] | None) -> ToolSpec | None:
        """Read an OpenAI ``tools`` list; a list that is not one is the caller's error."""
        if tools is None:
            return None
        if not isinstance(tools, list):
            raise UsageError("tools must be a list of OpenAI tool objects")
        names: set[str] = set()
        types: dict[str, dict[str, frozenset[str]]] = {}
        for tool in tools:
            fn = tool.get("function") if isinstance(tool, dict) else None
            name = fn.get("name") if isinstance(fn, dict) else None
            if not isinstance(name, str):
                raise UsageError("each tool needs function.name (OpenAI tools format)")
            assert isinstance(fn, dict)
            names.add(name)
            params = fn.get("parameters")
            props = params.get("properties") if isinstance(params, dict) else None
            types[name] = {}
            if isinstance(props, dict):
                for pname, schema in props.items():
                    types[name][pname] = declared_types(schema)
        return cls(frozenset(names), types)

    def types_of(self, function: str, param: str) -> frozenset[str]:
        """The types the schema allows for one parameter; empty when untyped or unknown."""
        return self.param_types.get(function, {}).get(param, frozenset())

    def json_typed(self, function: str, param: str) -> bool:
        """True when the schema says the value is JSON (integer, number, boolean, object, array)."""
        kinds = self.types_of(function, param) - {"null"}
        return bool(kinds) and kinds <= _JSON_VALUE_TYPES


@dataclass(frozen=True, slots=True)
class ValueTyping:
    """How one untagged parameter value becomes JSON (MARKUP2.md decision 5).

    ``accept``: the types a strictly parsed (trimmed) value may have to be taken as JSON; ``raw``:
    whether the raw text, byte-exact, is the fallback string (else a failure is ``bad_param_json``);
    ``null_literal``: a value that is exactly ``null`` is null whatever the types (MiniMax).
    """

    accept: frozenset[str]
    raw: bool
    null_literal: bool = False

    @classmethod
    def of(cls, types: frozenset[str], untyped: ValueTyping, null_literal: bool) -> ValueTyping:
        """The typing for a parameter with declared ``types`` (``untyped`` when there are none)."""
        if not types:
            return untyped
        if "string" not in types:
            return cls(types, False, null_literal)
        return cls(types - {"string"}, True, null_literal)

    @property
    def plain_string(self) -> bool:
        """True when the value is surely the raw string: it can stream as it arrives."""
        return self.raw and not self.accept and not self.null_literal

    def may_be_json(self, first: str) -> bool:
        """Whether a value whose first non-blank character is ``first`` could be taken as JSON."""
        if self.null_literal and first == "n":
            return True
        return any(first in _JSON_STARTS[t] for t in self.accept)

    def encode(self, raw: str) -> str:
        """The value's JSON text; ``JSONProblem`` when it is not of an accepted type and no string
        may stand in for it."""
        if self.null_literal and raw == "null":
            return raw
        if self.accept:
            text = raw.strip(ASCII_WS)
            try:
                if type_allows(self.accept, strict_json(text)):
                    return text
            except JSONProblem:
                pass
        if not self.raw:
            raise JSONProblem(MarkupErrorKind.BAD_PARAM_JSON)
        return f'"{json_string_body(raw)}"'


#: The characters a JSON value of each type can start with.
_JSON_STARTS = {"string": '"', "integer": "-0123456789", "number": "-0123456789",
                "boolean": "tf", "null": "n", "object": "{", "array": "["}

#: Any JSON value is accepted (the untyped GLM rule, and DSML's ``string="false"``).
ANY_JSON = frozenset(JSON_TYPES)
STRICT_JSON = ValueTyping(ANY_JSON, False)


# ── markers ───────────────────────────────────────────────────────────────────────────────────────

#: At end of stream a held-back marker prefix this long or longer is an unterminated opener
#: (decision 7); a lone ``<`` is too common in prose and code to mean anything.
MIN_PARTIAL = 2

#: A tag with no ``>`` after this many characters is malformed: names are short, and holding an
#: endless "tag" back would hide the text after it for ever.
TAG_CAP = 4096

_NONWS = re.compile(r"\S")
_NOT_ASCII_WS = re.compile(f"[^{re.escape(ASCII_WS)}]")


def first_non_ws(data: str, pos: int, end: int) -> int:
    """Index of the first non-whitespace character in ``data[pos:end]``, or -1."""
    m = _NONWS.search(data, pos, end)
    return m.start() if m else -1


class Markers:
    """A family's marker literals, each starting with ``<`` and holding no other ``<``.

    That shape is what keeps holding back cheap: a suffix that could still become a marker must start
    at the last ``<`` of the final few characters, so one ``rfind`` finds it.
    """

    def __init__(self, literals: tuple[str, ...]) -> None:
        assert all(lit.startswith("<") and lit.count("<") == 1 for lit in literals)
        self.literals = literals
        ordered = sorted(literals, key=len, reverse=True)
        self._re = re.compile("|".join(re.escape(lit) for lit in ordered))
        self._window = max(map(len, literals)) - 1

    def find(self, data: str, pos: int) -> tuple[int, str]:
        """The first complete marker at or after ``pos``: (start, literal), or (-1, "")."""
        m = self._re.search(data, pos)
        return (m.start(), m.group()) if m else (-1, "")

    def match(self, data: str, pos: int) -> str:
        """The complete marker starting exactly at ``pos``, or ""."""
        m = self._re.match(data, pos)
        return m.group() if m else ""

    def hold(self, data: str, pos: int) -> int:
        """Where the suffix that could still become a marker starts (``len(data)`` if none)."""
        n = len(data)
        j = data.rfind("<", max(pos, n - self._window))
        if j != -1:
            tail = data[j:]
            for lit in self.literals:
                if lit.startswith(tail):
                    return j
        return n


def split_partial_opener(rest: str, separator: str) -> tuple[str, str]:
    """Held-back content at end of stream → (visible text, unterminated raw).

    A marker prefix of ``MIN_PARTIAL`` characters or more is an opener cut off by the end of the stream
    (decision 7), and the separator right before it belongs to it, as it would to a whole opener.
    """
    j = rest.find("<")
    if j == -1 or len(rest) - j < MIN_PARTIAL:
        return rest, ""
    head = rest[:j]
    if separator and head.endswith(separator):
        return head[: -len(separator)], rest[j - len(separator):]
    return head, rest[j:]


# ── shared parser machinery ───────────────────────────────────────────────────────────────────────

_NONE, _TEXT, _DELTA, _MARKUP, _REASON = 0, 1, 2, 3, 4

#: Every family's first state: visible text outside any markup.
CONTENT = 0

#: The reasoning tags, reserved in the families of MARKUP2.md (decision 1): outside a call they are
#: stray markers, never visible text.
THINK_TAGS = ("<think>", "</think>")


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
    # State in which text without "<" is the body of a JSON string value, streamed as it comes (-1:
    # none). Every marker of every family holds "<", so a chunk without one is one escape and one
    # delta: the hot path in the middle of a long string value.
    _STRING = -1
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
        self._sep = ""  # what the encoder writes before an opener; removed from the text (decision 8)
        # MARKUP2.md decision 2: in its families the whitespace that frames the answer at stream start
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
        after text went out): no answer framing is left to remove (MARKUP2.md decision 2)."""
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
            # decision 4's exception: the call is kept; dispatch policy belongs to the client
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
        once the family knows what the tag is (decision 8)."""
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
        """Parse more text; return the events it completes."""
        if self._closed:
            raise UsageError("feed() after close()")
        if not text:
            return []
        call = self._call
        if (self._state == self._STRING and not self._pend and "<" not in text
                and call is not None and call.index is not None):
            call.raw.append(text)
            frag = json_string_body(text)
            call.frags.append(frag)
            return [ToolArgsDelta(call.index, frag)]
        data = self._pend + text if self._pend else text
        self._pend = ""
        self._run(data)
        return self._take()

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
        """End of stream in the current state; ``rest`` is the held-back text (decisions 7 and 9):
        in content a partial opener is unterminated, in a block the complete calls stay calls, and a
        call still open is not one."""
        state = self._state
        if state == CONTENT:
            text, raw = split_partial_opener(rest, self._sep)
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


class BlockParser(BaseParser):
    """A family whose calls stand in blocks: the "between calls" and "void call" steps they share.

    Inside a block only whitespace, the next call and the block's closer may stand (decision 5); junk
    there, like a broken call, becomes a void unit swallowed up to the next place parsing can resume.
    A family says, in ``_block_marker`` and ``_skip_marker``, what its markers mean in those two
    states.
    """

    def __init__(self, tools: ToolSpec | None = None) -> None:
        super().__init__(tools)
        self._spaced = False  # dialect of the open block (only DSML has two)

    def _after_call(self, in_block: bool) -> None:
        """Back to where the call stood: between calls of its block, or in content."""
        self._state = self._BLOCK if in_block else CONTENT

    def _void(self, kind: MarkupErrorKind) -> None:
        """The current call is not a call (its first error counts); swallow it up to a resume point."""
        assert self._call is not None
        self._call.error = self._call.error or kind
        self._state = self._SKIP

    def _close_block(self, closer: str, end: int) -> int:
        """The block's closer (ending at ``end``) is read: back to content."""
        self._markup(closer)
        self._state = CONTENT
        return end

    def _junk(self, pos: int) -> int:
        """Something in a block that is neither a call nor the closer: a void unit from ``pos``."""
        self._void_unit(True, self._spaced)
        self._state = self._SKIP
        return pos

    def _between_calls(self, data: str, pos: int) -> int:
        """State ``_BLOCK``: whitespace is markup; a marker is the family's to read."""
        r, lit = self._gather_ws(data, pos, self._markup)
        if lit is None:  # junk between calls: not text, not a call
            return self._junk(r)
        if r != pos:
            return r
        end = self._block_marker(data, pos, lit)
        return self._junk(pos) if end is None else end

    def _call_opener(self, data: str, m: int, tend: int, name: str | None,
                     state: int) -> int | None:
        """The call-opening tag at ``m``, read up to ``tend`` (-1 while incomplete) with its ``name``
        (None: malformed), between calls: the call starts in ``state``. Returns what
        ``_block_marker`` does."""
        if tend < 0:
            return ~m
        if name is None:
            return None
        self._start_call(name, data[m:tend], in_block=True)
        self._state = state
        return tend

    def _add_key(self, key: str) -> bool:
        """A parameter's name is read: a repeated one voids the call (``duplicate_parameter``).
        Returns whether the name is new."""
        call = self._call
        assert call is not None
        if key in call.keys:
            self._void(MarkupErrorKind.DUPLICATE_PARAMETER)
            return False
        call.keys.add(key)
        return True

    def _tag_in_call(self, data: str, pos: int) -> tuple[int, str | None]:
        """Inside a call, between its tags: whitespace joins the call's raw text; other text voids
        the call (only whitespace may stand between tags). Returns (where to go on, None), or
        (``pos``, the marker there) for the family to judge."""
        call = self._call
        assert call is not None
        r, lit = self._gather_ws(data, pos, call.raw.append)
        if lit is None:
            self._void(MarkupErrorKind.MALFORMED_TAG)
            return r, None
        return (r, None) if r != pos else (pos, lit)

    @abstractmethod
    def _block_marker(self, data: str, m: int, lit: str) -> int | None:
        """At the marker ``lit`` at ``m``, between calls: open the next call or close the block and
        return the new position (``~m`` while the tag is incomplete), or ``None``: it is junk."""

    def _skip(self, data: str, pos: int) -> int:
        """State ``_SKIP``: a void call or void markup, swallowed up to where parsing can resume."""
        call = self._call
        assert call is not None
        r, lit = self._gather(data, pos)
        if r != pos:
            return r
        tend, action = self._skip_marker(data, pos, lit, call)
        if tend < 0:
            return ~pos
        if action == RESUME:  # the tag is the next state's to read
            self._fail_call()
            self._after_call(call.in_block)
            return pos
        call.raw.append(data[pos:tend])
        if action == END:
            self._fail_call()
            self._after_call(call.in_block)
        return tend

    @abstractmethod
    def _skip_marker(self, data: str, m: int, lit: str, call: Call) -> tuple[int, int]:
        """At the marker ``lit`` at ``m`` inside a void call: (end of its tag, -1 while incomplete;
        ``RESUME``, ``SWALLOW`` or ``END``)."""

    def _json_param(self, key: str, buf: list[str], then: int,
                    typing: ValueTyping | None = None) -> None:
        """A buffered parameter's value is complete: by default trimmed of ASCII whitespace, strict
        JSON of any type (decision 2), else as ``typing`` says; it goes into the arguments and parsing
        goes on in state ``then``. A value that fails voids the call."""
        try:
            value = (typing or STRICT_JSON).encode("".join(buf))
        except JSONProblem:  # any failure of a value, duplicate keys included
            self._void(MarkupErrorKind.BAD_PARAM_JSON)
            return
        assert self._call is not None
        self._delta(self._call.key_prefix(key) + value)
        self._state = then

    def _end_object_call(self, args: str, emit: bool, well_formed: bool = True) -> None:
        """The call's whole arguments are ``args`` (already streamed unless ``emit``): one strict JSON
        object ends the call, anything else (or ``well_formed`` False) makes it void (decision 4)."""
        call = self._call
        assert call is not None
        try:
            if not well_formed:
                raise JSONProblem(MarkupErrorKind.BAD_PARAM_JSON)
            value = strict_json(args)
            if not isinstance(value, dict):
                raise JSONProblem(MarkupErrorKind.BAD_PARAM_JSON)
        except JSONProblem as problem:  # duplicate keys are duplicate parameters (decision 3)
            self._void(problem.kind)
            self._fail_call()
        else:
            if emit:
                self._delta(args)
            self._end_call(close_object=False)
        self._after_call(call.in_block)


# ── JSON arguments written by the model (Hermes, Kimi, Harmony) ────────────────────────────────────

_OUTSIDE_STRING = re.compile(r'["<]')  # outside a JSON string only a quote or a marker matters
_INSIDE_STRING = re.compile(r'["\\]')  # inside one, its end or an escape


class JSONStrings:
    """Where the strings of a JSON text are, followed across chunks, so that a marker inside a string
    value is string text (a file's contents may well hold ``</tool_call>`` or ``<|call|>``).

    The text need not be valid JSON: quotes and escapes are followed as they come.
    """

    __slots__ = ("escape", "inside")

    def __init__(self) -> None:
        self.inside = False
        self.escape = False  # the last character read was a backslash inside a string

    def next_lt(self, data: str, i: int, n: int) -> int:
        """Index of the first ``<`` at or after ``i`` that stands outside any string, or ``n``; the
        state follows ``data[i:result]``."""
        while i < n:
            if self.escape:
                self.escape = False
                i += 1
                continue
            hit = (_INSIDE_STRING if self.inside else _OUTSIDE_STRING).search(data, i, n)
            if hit is None:
                return n
            i, char = hit.start(), hit.group()
            if char == "<":
                return i
            if char == "\\":
                self.escape = True
            else:
                self.inside = not self.inside
            i += 1
        return n


class JSONArgsParser(BlockParser):
    """A family whose call arguments are one JSON object the model writes itself, ended by a marker
    (Kimi, Harmony): the arguments stream verbatim as they arrive (leading whitespace dropped,
    trailing whitespace held until more follows), and a marker counts only outside JSON strings
    (MARKUP2.md decision 4).

    The family's arguments state is ``_ARGS`` (handler ``_args``); it says which markers end the
    arguments (``_ARGS_ENDS``, part of the call) and which end them because the next thing begins
    (``_ARGS_BREAKS``, left to the next state); any other marker voids the call.
    """

    _ARGS = -1
    _ARGS_ENDS: frozenset[str] = frozenset()
    _ARGS_BREAKS: frozenset[str] = frozenset()
    _markers: Markers

    def __init__(self, tools: ToolSpec | None = None) -> None:
        super().__init__(tools)
        self._strings = JSONStrings()
        self._head: list[str] = []  # the call's header (Kimi's call id, a Harmony header)
        self._head_size = 0

    def _begin_head(self, first: str = "") -> None:
        self._head, self._head_size = [first] if first else [], 0

    def _collect_head(self, seg: str) -> None:
        self._head.append(seg)
        self._head_size += len(seg)

    def _header(self, data: str, pos: int) -> int:
        """The header state: its text up to the next marker joins the unit's raw text and
        ``_head``, and the family's ``_head_marker`` reads the marker. A header longer than
        ``TAG_CAP`` is none (no call id or message header is that long): the unit is void."""
        call = self._call
        assert call is not None
        r, lit = self._gather(data, pos, self._collect_head)
        if self._head_size > TAG_CAP:
            self._void(MarkupErrorKind.MALFORMED_TAG)
            return r
        if r != pos:
            return r
        return self._head_marker(pos, lit, call)

    @abstractmethod
    def _head_marker(self, m: int, lit: str, call: Call) -> int:
        """At the marker ``lit`` at ``m`` in the header of ``call``: where to go on."""

    def _begin_json_args(self) -> None:
        self._state, self._started, self._tail = self._ARGS, False, []
        self._strings = JSONStrings()

    def feed(self, text: str) -> list[Event]:
        """Parse more text; return the events it completes."""
        call = self._call
        if (self._state != self._ARGS or self._pend or not text or self._closed or call is None
                or call.index is None):
            return super().feed(text)
        # The hot path: the middle of the arguments, where only a "<" outside a string can end
        # them. What comes before it is arguments text, taken here without the state dispatch.
        n = len(text)
        j = self._strings.next_lt(text, 0, n)
        if j:
            seg = text[:j] if j < n else text
            call.raw.append(seg)
            if self._strings.inside and self._started:  # inside a string nothing is padding
                frag = "".join(self._tail) + seg if self._tail else seg
                self._tail = []
                call.frags.append(frag)
                return [ToolArgsDelta(call.index, frag)]
            self._stream_args(seg, ASCII_WS)
        if j < n:
            self._run(text[j:])
        return self._take()

    def _json_args(self, data: str, pos: int) -> tuple[int, str]:
        """Stream the arguments from ``pos`` to the first marker outside a string: (its start, the
        marker), the text before it consumed; or (``~k``, "") to hold ``data[k:]``."""
        call = self._call
        assert call is not None
        i, n = pos, len(data)
        markers = self._markers
        while True:
            j = self._strings.next_lt(data, i, n)
            lit = markers.match(data, j) if j < n else ""
            if lit or (j < n and markers.hold(data, j) == j):
                end = j
            elif j < n:
                i = j + 1  # a "<" that is no marker: the JSON check at the end judges it
                continue
            else:
                end = n
            if end > pos:
                seg = data[pos:end]
                call.raw.append(seg)
                self._stream_args(seg, ASCII_WS)
            return (j, lit) if lit else (~end, "")

    def _args(self, data: str, pos: int) -> int:
        r, lit = self._json_args(data, pos)
        if not lit:
            return r
        if lit in self._ARGS_BREAKS:
            self._end_json_args()
            return r
        if lit not in self._ARGS_ENDS:  # the markers are reserved outside JSON strings
            self._void(MarkupErrorKind.MALFORMED_TAG)
            return r
        assert self._call is not None
        self._call.raw.append(lit)
        self._end_json_args()
        return r + len(lit)

    def _end_json_args(self) -> None:
        """The arguments are complete: one strict JSON object ends the call, whitespace only is
        ``{}``, anything else voids it (decision 4)."""
        call = self._call
        assert call is not None
        if self._started:
            self._end_object_call("".join(call.frags), emit=False)
        else:
            self._end_object_call("{}", emit=True)
