"""GLM-4.5/4.6 (``glm45``) and GLM-4.7/GLM-5.x (``glm47``) tool calls: one state machine, two families.

```
glm45:  text\\n<tool_call>NAME\\n<arg_key>K</arg_key>\\n<arg_value>V</arg_value>\\n</tool_call>
glm47:  text<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>
```

The tags are added tokens that are *not* special, so they survive ``skip_special_tokens`` and are the
GLM text users find in content. The two families differ only in spacing: GLM-4.5 writes a newline
after the name and one before each ``<tool_call>`` (its separator, removed from the visible text);
GLM-4.7 writes neither. Both parsers read both spacings (a name ends at the first newline,
``<arg_key>`` or ``</tool_call>``, decision 2.3), so the family only decides which newline is
the template's and which is the model's text.

Values carry no type flag: the offered tool's schema types them (``_typed``); without a schema a value
is strict JSON if it parses, else the raw string.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from sseguard.core.errors import UsageError
from sseguard.core.toolcalls.events import MarkupError, MarkupErrorKind
from sseguard.core.toolcalls.family import CallLike, Claim, Family, claim_openers
from sseguard.core.toolcalls.grammars.base import Call
from sseguard.core.toolcalls.grammars.blocks import END, RESUME, SWALLOW
from sseguard.core.toolcalls.grammars.markers import THINK_TAGS, Markers, first_non_ws
from sseguard.core.toolcalls.grammars.render import tag_values
from sseguard.core.toolcalls.grammars.strict_json import ASCII_WS
from sseguard.core.toolcalls.grammars.thinking import ReasoningTags
from sseguard.core.toolcalls.grammars.typed_values import TypedValueParser
from sseguard.core.toolcalls.schema import ANY_JSON, JSON_TYPES, ToolSpec, ValueTyping, type_of

TOOL_CALL = "<tool_call>"
TOOL_CALL_END = "</tool_call>"
ARG_KEY = "<arg_key>"
ARG_KEY_END = "</arg_key>"
ARG_VALUE = "<arg_value>"
ARG_VALUE_END = "</arg_value>"
FAMILY_MARKERS = (TOOL_CALL, TOOL_CALL_END, ARG_KEY, ARG_KEY_END, ARG_VALUE, ARG_VALUE_END)
REASONING_EXITS = (TOOL_CALL,)
#: family → the separator its template writes before each ``<tool_call>`` (decision 2.2)
SEPARATORS = {"glm45": "\n", "glm47": ""}


@dataclass(frozen=True, slots=True)
class KVTags:
    """The tags of one key/value family (docs/design/markup.md class H): GLM's, or another family's spelling
    of the same grammar. ``block``/``block_end``: a wrapper around the calls (Hunyuan's
    ``<tool_calls>``; a bare call without it is still a call); ``name_end``: a tag that may end the
    name (Hunyuan Hy3's ``<tool_sep>``); ``arg_type``/``arg_type_end``: an optional tag between a key
    and its value naming the value's type (K2 Horizon); ``reserved``: other tags that are never text
    (the reasoning tags); ``json_body``: a call's body may be one JSON object ``{"name", "arguments"}``
    instead of a name and key/value tags (K2 Horizon, docs/design/markup.md §3.3)."""

    call: str = TOOL_CALL
    call_end: str = TOOL_CALL_END
    key: str = ARG_KEY
    key_end: str = ARG_KEY_END
    value: str = ARG_VALUE
    value_end: str = ARG_VALUE_END
    block: str | None = None
    block_end: str | None = None
    name_end: str | None = None
    arg_type: str | None = None
    arg_type_end: str | None = None
    reserved: tuple[str, ...] = THINK_TAGS
    think: tuple[tuple[str, str], ...] = ()  # reasoning spans the parser reads (opener, closer)
    json_body: bool = False

    @property
    def family_markers(self) -> tuple[str, ...]:
        """Every tag of the grammar, as the template writes them."""
        optional = (self.block, self.block_end, self.name_end, self.arg_type, self.arg_type_end)
        return (self.call, self.call_end, self.key, self.key_end, self.value, self.value_end,
                *(t for t in optional if t is not None))

    @property
    def all_markers(self) -> tuple[str, ...]:
        """What the parser searches for: the grammar's tags, the reserved ones, the reasoning tags."""
        return tuple(dict.fromkeys((*self.family_markers, *self.reserved,
                                    *(t for pair in self.think for t in pair))))


GLM_TAGS = KVTags()
_MARKERS: dict[KVTags, Markers] = {}


def markers_of(tags: KVTags) -> Markers:
    """The marker search of a tag table (built once per table)."""
    found = _MARKERS.get(tags)
    if found is None:
        found = _MARKERS[tags] = Markers(tags.all_markers)
    return found


CONTENT, NAME, CALL, KEY, AFTER_KEY, VALUE, STRING, SKIP, BLOCK, ARG_TYPE, THINK, JSON_BODY = range(12)


class GLMParser(ReasoningTags, TypedValueParser):
    """Incremental parser for ``glm45`` and ``glm47`` (docs/design/markup.md §2 has the format and decisions),
    and for the families that spell the same grammar with other tags (``KVTags``)."""

    _SKIP, _VALUE, _STRING, _BLOCK, _THINK = SKIP, VALUE, STRING, BLOCK, THINK
    _AFTER_VALUE = CALL
    _UNTYPED = ValueTyping(ANY_JSON, True)  # strict JSON if it parses, else the raw string

    def __init__(self, family: str = "glm45", tools: ToolSpec | None = None, *,
                 tags: KVTags = GLM_TAGS, separator: str | None = None, frame: bool = True) -> None:
        super().__init__(tools)
        if separator is None:
            if family not in SEPARATORS:
                raise UsageError(f"not a GLM family: {family}")
            separator = SEPARATORS[family]
        self.family = family
        self._t = tags
        self._sep = separator
        self._VALUE_END = tags.value_end
        self._VALUE_BREAKS = tuple(t for t in (tags.call_end, tags.block_end) if t is not None)
        self._part: list[str] = []  # the name or key being read
        self._wire_type: str | None = None  # the value's type named by the arg_type tag
        # decision 2.2: the whitespace that frames the answer is not text (GLM's own families; the
        # families of docs/design/markup.md §3 keep visible text verbatim, decision 3.1)
        self._frame = frame
        markers = markers_of(tags)
        self._find, self._hold = markers.find, markers.hold
        self._handlers = (self._content, self._name, self._between_tags, self._key_text,
                          self._after_key, self._value, self._value, self._skip,
                          self._between_calls, self._arg_type, self._in_reasoning,
                          self._json_body)
        self._think_tags = dict(tags.think)
        self._body: list[str] = []  # a JSON-body call's text
        self._call_end = Markers((tags.call_end,)) if tags.json_body else None

    def _open_call(self, lit: str, in_block: bool) -> None:
        self._new_unit(lit, in_block=in_block)
        self._part = []
        self._state = NAME

    def _opener(self, data: str, pos: int, m: int, lit: str) -> int:
        t = self._t
        if lit == t.call:
            self._markup(data[pos:m])
            self._open_call(lit, False)
            return m + len(lit)
        if lit == t.block:
            self._markup(data[pos:m + len(lit)])
            self._state = BLOCK
            return m + len(lit)
        if lit in self._think_tags:
            return self._enter_reasoning(data, pos, m, lit)
        # decisions 2.1 and 2.9: a reserved marker outside a call (arg tags without <tool_call>, a
        # stray closer, a think tag) is reported; the text around it stays visible
        self._text(data[pos:m])
        self._event(MarkupError(MarkupErrorKind.MALFORMED_TAG, lit))
        return m + len(lit)

    def _block_marker(self, data: str, m: int, lit: str) -> int | None:
        """Between the calls of a block: the next call, or the block's closer."""
        if lit == self._t.call:
            self._open_call(lit, True)
            return m + len(lit)
        if lit == self._t.block_end:
            return self._close_block(lit, m + len(lit))
        return None

    def _name(self, data: str, pos: int) -> int:
        """State ``NAME``: from ``<tool_call>`` to the first newline, ``<arg_key>`` or
        ``</tool_call>``, trimmed (decision 2.3); another marker there is malformed (decision 2.7)."""
        call = self._call
        assert call is not None
        if self._t.json_body and not "".join(self._part).strip(ASCII_WS):
            r = self._json_or_name(data, pos)
            if r is not None:
                return r
        m, lit = self._find(data, pos)
        end = m if m != -1 else self._hold(data, pos)
        nl = data.find("\n", pos, end)
        if nl != -1:
            call.raw.append(data[pos:nl + 1])
            self._part.append(data[pos:nl])
            self._named()
            return nl + 1
        if end > pos:
            call.raw.append(data[pos:end])
            self._part.append(data[pos:end])
            return end if m != -1 else ~end
        if m == -1:
            return ~pos
        t = self._t
        if lit in (t.key, t.call_end):  # the name ends here; the tag is the next state's
            self._named()
        elif lit == t.name_end:  # Hy3's separator ends the name and belongs to the call
            call.raw.append(lit)
            self._named()
            return pos + len(lit)
        else:
            self._void(MarkupErrorKind.MALFORMED_TAG)
        return pos

    def _json_or_name(self, data: str, pos: int) -> int | None:
        """Before the name of a ``json_body`` family: whitespace is held until the first other
        character says whether the body is one JSON object (``{``) or a name; then the usual
        reading goes on as if the whitespace had been read by it (a newline in it ended an empty
        name: ``malformed_tag``). Returns where to go on, or ``None`` to read the name."""
        call = self._call
        assert call is not None
        q = first_non_ws(data, pos, len(data))
        ws = data[pos:] if q == -1 else data[pos:q]
        call.raw.append(ws)
        self._part.append(ws)
        if q == -1:
            return len(data)
        if data[q] == "{":
            self._body = []
            self._state = JSON_BODY
            return q
        if "\n" in "".join(self._part):
            self._named()  # an empty name: void
            return q
        return None if q == pos else q

    def _json_body(self, data: str, pos: int) -> int:
        """State ``JSON_BODY``: the object runs to the call's closer (reserved, in strings too, as
        DSML's JSON-body invoke), then it is the call if it is one strict JSON object
        ``{"name": …, "arguments"|"parameters": {…}}`` (duplicate keys ``duplicate_parameter``, any
        other shape ``bad_param_json``). The call goes out whole at the closer."""
        call = self._call
        ends = self._call_end
        assert call is not None and ends is not None
        m, lit = ends.find(data, pos)
        end = m if m != -1 else ends.hold(data, pos)
        call.raw.append(data[pos:end])
        self._body.append(data[pos:end])
        if m == -1:
            return ~end
        body, self._body = "".join(self._body), []
        call.raw.append(lit)
        self._object_call(body)
        self._after_call(call.in_block)
        return m + len(lit)

    def _named(self) -> None:
        name = "".join(self._part).strip(ASCII_WS)
        if name:
            self._name_call(name)
            self._state = CALL
        else:
            self._void(MarkupErrorKind.MALFORMED_TAG)

    def _between_tags(self, data: str, pos: int) -> int:
        """State ``CALL``: whitespace, then the next ``<arg_key>`` or the call's closer."""
        call = self._call
        assert call is not None
        r, lit = self._tag_in_call(data, pos)  # decision 2.7: only whitespace between tags
        if lit is None:
            return r
        t = self._t
        if lit == t.key:
            call.raw.append(lit)
            self._part = []
            self._state = KEY
            return pos + len(lit)
        if lit == t.call_end:
            call.raw.append(lit)
            self._end_call()
            self._after_call(call.in_block)
            return pos + len(lit)
        if lit == t.name_end and not call.keys and t.name_end not in call.raw:
            call.raw.append(lit)  # Hy3: the separator after a name that a newline ended
            return pos + len(lit)
        self._void(MarkupErrorKind.MALFORMED_TAG)
        return pos

    def _key_text(self, data: str, pos: int) -> int:
        """State ``KEY``: the key's text up to ``</arg_key>``, trimmed; no marker inside."""
        call = self._call
        assert call is not None
        r, lit = self._gather(data, pos, self._part.append)
        if r != pos:
            return r
        if lit != self._t.key_end:
            self._void(MarkupErrorKind.MALFORMED_TAG)
            return pos
        call.raw.append(lit)
        key = "".join(self._part).strip(ASCII_WS)
        if not key:
            self._void(MarkupErrorKind.MALFORMED_TAG)
        elif self._add_key(key):
            self._key = key
            self._wire_type = None
            self._state = AFTER_KEY
        return pos + len(lit)

    def _after_key(self, data: str, pos: int) -> int:
        """State ``AFTER_KEY``: whitespace, then the key's ``<arg_value>`` (or, where the family
        has one, the type tag before it)."""
        call = self._call
        assert call is not None
        r, lit = self._tag_in_call(data, pos)
        if lit is None:
            return r
        t = self._t
        if lit == t.value:
            call.raw.append(lit)
            self._open_value(self._key)
            return pos + len(lit)
        if lit == t.arg_type and self._wire_type is None:
            call.raw.append(lit)
            self._part = []
            self._state = ARG_TYPE
            return pos + len(lit)
        self._void(MarkupErrorKind.MALFORMED_TAG)
        return pos

    def _arg_type(self, data: str, pos: int) -> int:
        """State ``ARG_TYPE``: the value's type name up to its closer, trimmed; it must be a JSON
        Schema type name (decision 3.6: like DSML's string flag)."""
        call = self._call
        assert call is not None
        r, lit = self._gather(data, pos, self._part.append)
        if r != pos:
            return r
        if lit != self._t.arg_type_end:
            self._void(MarkupErrorKind.MALFORMED_TAG)
            return pos
        call.raw.append(lit)
        kind = "".join(self._part).strip(ASCII_WS)
        if kind not in JSON_TYPES:
            self._void(MarkupErrorKind.INVALID_STRING_FLAG)
        else:
            self._wire_type = kind
            self._state = AFTER_KEY
        return pos + len(lit)

    def _open_value(self, key: str) -> None:
        """A value whose type the wire named is typed by that name, not by the schema."""
        kind = self._wire_type
        if kind is None:
            super()._open_value(key)
            return
        call = self._call
        assert call is not None
        self._key, self._vbuf, self._null_head, self._undecided = key, [], None, False
        if kind == "string":
            self._typing = ValueTyping(frozenset(), True)
            self._delta(call.key_prefix(key) + '"')
            self._state = STRING
        else:
            self._typing = ValueTyping(frozenset({kind}), False)
            self._state = VALUE

    def _skip_marker(self, data: str, m: int, lit: str, call: Call) -> tuple[int, int]:
        """A void call is swallowed up to its ``</tool_call>``, or up to the next ``<tool_call>``
        when it never closed (in a block also up to the block's closer)."""
        t = self._t
        if lit == t.call or (call.in_block and lit == t.block_end):
            return m + len(lit), RESUME
        return m + len(lit), END if lit == t.call_end else SWALLOW


# ── the family descriptors ─────────────────────────────────────────────────────────────────────────

_ARG_TAGS = FAMILY_MARKERS[2:]  # <arg_key> and the other arg tags: GLM's alone


def auto_kind(held: str, final: bool) -> str | None:
    """GLM-4.5 or GLM-4.7 for markup starting with ``<tool_call>`` (``""``: not GLM; ``None``: not
    yet known). GLM writes a bare name after it (Hermes a JSON object, Qwen3-Coder a tag), ended
    by a newline in GLM-4.5 and by the next tag in GLM-4.7."""
    q = first_non_ws(held, len(TOOL_CALL), len(held))
    if q == -1:
        return "" if final else None
    if held[q] in "{[":  # Hermes' object, Granite 3.1's array (decision 3.3)
        return ""
    if held[q] == "<":  # a tag right away: a GLM call without a name, or Qwen3-Coder's function
        after = held[q:]
        if not any(after.startswith(t) or t.startswith(after) for t in _ARG_TAGS):
            return ""
        if not final and not after.startswith(_ARG_TAGS):
            return None
        return "glm45" if "\n" in held[len(TOOL_CALL):q] else "glm47"
    end = len(held)
    for stop in ("\n", "<"):
        k = held.find(stop, q)
        if k != -1:
            end = min(end, k)
    if end == len(held):
        return "glm45" if final else None
    return "glm45" if held[end] == "\n" else "glm47"


def claim(name: str, held: str, final: bool) -> Claim:
    if not held.startswith(TOOL_CALL):
        return Claim.NO
    kind = auto_kind(held, final)
    return Claim.MORE if kind is None else Claim.YES if kind == name else Claim.NO


def render(name: str, calls: Sequence[CallLike], malformed: bool) -> str:
    """GLM-4.5 (a newline after the name and after every tag) or GLM-4.7 (none); ``malformed``
    misspells the first call's last value closer (no value: a stray closer where it ends)."""
    nl = SEPARATORS[name]
    out = []
    for i, call in enumerate(calls):
        out.append(f"{nl}{TOOL_CALL}{call.name}{nl}")
        broken = malformed and i == 0
        out.extend(f"{ARG_KEY}{key}{ARG_KEY_END}{nl}{ARG_VALUE}{text}{closer}{nl}"
                   for key, text, closer in tag_values(call, broken, ARG_VALUE_END, "</arg_valu>"))
        out.append(f"{ARG_KEY_END}{TOOL_CALL_END}" if broken and not call.values else TOOL_CALL_END)
    return "".join(out)


def _make_tagged(name: str, tags: KVTags, tools: ToolSpec | None = None) -> GLMParser:
    return GLMParser(name, tools, tags=tags, separator="", frame=False)


def render_tagged(tags: KVTags, nl: str, calls: Sequence[CallLike], malformed: bool) -> str:
    """The calls as the template writes them (``nl`` between tags: Hunyuan writes newlines); with a
    block wrapper when the family has one, with ``<tool_sep>`` and the type tag where it has them.
    ``malformed`` misspells the first call's last value closer (no value: a stray key closer)."""
    out = [f"{tags.block}{nl}"] if tags.block else []
    for i, call in enumerate(calls):
        out.append(f"{tags.call}{call.name}{tags.name_end or ''}{nl}")
        broken = malformed and i == 0
        bad = tags.value_end.replace("value", "valu")
        for key, text, closer in tag_values(call, broken, tags.value_end, bad):
            typed = ""
            if tags.arg_type and tags.arg_type_end:
                typed = f"{tags.arg_type}{type_of(call.values[key])}{tags.arg_type_end}"
            out.append(f"{tags.key}{key}{tags.key_end}{typed}{tags.value}{text}{closer}{nl}")
        stray = tags.key_end if broken and not call.values else ""
        out.append(f"{stray}{tags.call_end}{nl}")
    if tags.block_end:
        out.append(tags.block_end)
    return "".join(out)


def claim_block(tags: KVTags, held: str, final: bool) -> Claim:
    """The block opener, then (after whitespace) the call tag: ``<tool_calls>`` is also Jamba's
    and MiniMax-M1's opener, which write ``[`` or a JSON object after it (decision 3.3)."""
    assert tags.block is not None
    if not held.startswith(tags.block):
        return Claim.NO
    q = first_non_ws(held, len(tags.block), len(held))
    if q == -1:
        return Claim.NO if final else Claim.MORE
    after = held[q:]
    if after.startswith(tags.call):
        return Claim.YES
    return Claim.MORE if tags.call.startswith(after) and not final else Claim.NO


def kv_family(name: str, tags: KVTags, nl: str = "", aliases: tuple[str, ...] = (),
           claim: Any = None, rank: int = 100) -> Family:
    """A class H family from its tag table. ``auto`` notices it by any of its tags (a stray one is
    reported by the first family that has it) and by its reasoning openers; ``claim`` (default: its
    openers) says which markup is its own."""
    markers = tags.family_markers
    reserved = tuple(t for pair in tags.think for t in pair)
    think_openers = tuple(pair[0] for pair in tags.think)
    openers = tuple(t for t in (tags.block, tags.call) if t)
    return Family(
        name=name, make=partial(_make_tagged, name, tags), markers=(*markers, *reserved),
        leak_markers=markers,
        # decision 3.9: K2 Horizon's reasoning keeps call markup; the others end it at an opener
        reasoning_exits=() if tags.think else openers,
        auto_markers=(*markers, *reserved), claim=claim or claim_openers(openers + think_openers),
        render=partial(render_tagged, tags, nl), malformable=True, rank=rank, aliases=aliases,
        grammar="H", reasoning_spans=tuple(tags.think))
