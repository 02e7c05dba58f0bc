"""GLM-4.5/4.6 (``glm45``) and GLM-4.7/GLM-5.x (``glm47``) tool calls: one state machine, two families.

```
glm45:  text\\n<tool_call>NAME\\n<arg_key>K</arg_key>\\n<arg_value>V</arg_value>\\n</tool_call>
glm47:  text<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>
```

The tags are added tokens that are *not* special, so they survive ``skip_special_tokens`` and are the
GLM text users find in content. The two families differ only in spacing: GLM-4.5 writes a newline
after the name and one before each ``<tool_call>`` (its separator, removed from the visible text);
GLM-4.7 writes neither. Both parsers read both spacings (a name ends at the first newline,
``<arg_key>`` or ``</tool_call>``, MARKUP2.md decision 3), so the family only decides which newline is
the template's and which is the model's text.

Values carry no type flag: the offered tool's schema types them (``_typed``); without a schema a value
is strict JSON if it parses, else the raw string.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from sseguard.errors import UsageError
from sseguard.toolcalls._block import END, RESUME, SWALLOW
from sseguard.toolcalls._engine import Call
from sseguard.toolcalls._json import ASCII_WS
from sseguard.toolcalls._markers import THINK_TAGS, Markers, first_non_ws
from sseguard.toolcalls._render import tag_values
from sseguard.toolcalls._typed import TypedValueParser
from sseguard.toolcalls.events import MarkupError, MarkupErrorKind
from sseguard.toolcalls.family import CallLike, Claim, Family
from sseguard.toolcalls.schema import ANY_JSON, ToolSpec, ValueTyping

TOOL_CALL = "<tool_call>"
TOOL_CALL_END = "</tool_call>"
ARG_KEY = "<arg_key>"
ARG_KEY_END = "</arg_key>"
ARG_VALUE = "<arg_value>"
ARG_VALUE_END = "</arg_value>"
FAMILY_MARKERS = (TOOL_CALL, TOOL_CALL_END, ARG_KEY, ARG_KEY_END, ARG_VALUE, ARG_VALUE_END)
MARKERS = Markers((*FAMILY_MARKERS, *THINK_TAGS))
REASONING_EXITS = (TOOL_CALL,)
#: family → the separator its template writes before each ``<tool_call>`` (decision 2)
SEPARATORS = {"glm45": "\n", "glm47": ""}

CONTENT, NAME, CALL, KEY, AFTER_KEY, VALUE, STRING, SKIP = range(8)


class GLMParser(TypedValueParser):
    """Incremental parser for ``glm45`` and ``glm47``; see MARKUP2.md for the format and decisions."""

    _SKIP, _VALUE, _STRING = SKIP, VALUE, STRING
    _VALUE_END, _VALUE_BREAKS, _AFTER_VALUE = ARG_VALUE_END, (TOOL_CALL_END,), CALL
    _UNTYPED = ValueTyping(ANY_JSON, True)  # strict JSON if it parses, else the raw string

    def __init__(self, family: str = "glm45", tools: ToolSpec | None = None) -> None:
        super().__init__(tools)
        if family not in SEPARATORS:
            raise UsageError(f"not a GLM family: {family}")
        self.family = family
        self._sep = SEPARATORS[family]
        self._part: list[str] = []  # the name or key being read
        self._frame = True  # decision 2: the whitespace that frames the answer is not text
        self._find, self._hold = MARKERS.find, MARKERS.hold
        self._handlers = (self._content, self._name, self._between_tags, self._key_text,
                          self._after_key, self._value, self._value, self._skip)

    def _opener(self, data: str, pos: int, m: int, lit: str) -> int:
        if lit == TOOL_CALL:
            self._markup(data[pos:m])
            self._new_unit(lit, in_block=False)
            self._part = []
            self._state = NAME
            return m + len(lit)
        # decisions 1 and 9: a reserved marker outside a call (arg tags without <tool_call>, a
        # stray closer, a think tag) is reported; the text around it stays visible
        self._text(data[pos:m])
        self._event(MarkupError(MarkupErrorKind.MALFORMED_TAG, lit))
        return m + len(lit)

    def _block_marker(self, data: str, m: int, lit: str) -> int | None:
        """GLM calls stand alone: there is no block, so no state between calls of one."""
        return None

    def _name(self, data: str, pos: int) -> int:
        """State ``NAME``: from ``<tool_call>`` to the first newline, ``<arg_key>`` or
        ``</tool_call>``, trimmed (decision 3); another marker there is malformed (decision 7)."""
        call = self._call
        assert call is not None
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
        if lit in (ARG_KEY, TOOL_CALL_END):  # the name ends here; the tag is the next state's
            self._named()
        else:
            self._void(MarkupErrorKind.MALFORMED_TAG)
        return pos

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
        r, lit = self._tag_in_call(data, pos)  # decision 7: only whitespace between tags
        if lit is None:
            return r
        if lit == ARG_KEY:
            call.raw.append(lit)
            self._part = []
            self._state = KEY
            return pos + len(lit)
        if lit == TOOL_CALL_END:
            call.raw.append(lit)
            self._end_call()
            self._after_call(False)
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
        if lit != ARG_KEY_END:
            self._void(MarkupErrorKind.MALFORMED_TAG)
            return pos
        call.raw.append(lit)
        key = "".join(self._part).strip(ASCII_WS)
        if not key:
            self._void(MarkupErrorKind.MALFORMED_TAG)
        elif self._add_key(key):
            self._key = key
            self._state = AFTER_KEY
        return pos + len(lit)

    def _after_key(self, data: str, pos: int) -> int:
        """State ``AFTER_KEY``: whitespace, then the key's ``<arg_value>``."""
        call = self._call
        assert call is not None
        r, lit = self._tag_in_call(data, pos)
        if lit is None:
            return r
        if lit == ARG_VALUE:
            call.raw.append(lit)
            self._open_value(self._key)
            return pos + len(lit)
        self._void(MarkupErrorKind.MALFORMED_TAG)
        return pos

    def _skip_marker(self, data: str, m: int, lit: str, call: Call) -> tuple[int, int]:
        """A void call is swallowed up to its ``</tool_call>``, or up to the next ``<tool_call>``
        when it never closed."""
        if lit == TOOL_CALL:
            return m + len(lit), RESUME
        return m + len(lit), END if lit == TOOL_CALL_END else SWALLOW


# ── the family descriptors ─────────────────────────────────────────────────────────────────────────

_ARG_TAGS = FAMILY_MARKERS[2:]  # <arg_key> and the other arg tags: GLM's alone


def auto_kind(held: str, final: bool) -> str | None:
    """GLM-4.5 or GLM-4.7 for markup starting with ``<tool_call>`` (``""``: not GLM; ``None``: not
    yet known). GLM writes a bare name after it (Hermes a JSON object, Qwen3-Coder a tag), ended
    by a newline in GLM-4.5 and by the next tag in GLM-4.7."""
    q = first_non_ws(held, len(TOOL_CALL), len(held))
    if q == -1:
        return "" if final else None
    if held[q] in "{[":  # Hermes' object, Granite 3.1's array (MARKUP3.md §4 decision 3)
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


def _claim(name: str, held: str, final: bool) -> Claim:
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


#: The engines' names for each family (MARKUP3.md): SGLang's ``glm`` (GLM-4.5), and the grammars
#: that are GLM-4.5's with either spacing (``poolside_v1``, ``ling3``, ``spark25``), which ``glm45``
#: reads.
ALIASES = {"glm45": ("glm", "poolside_v1", "ling3", "spark25"), "glm47": ()}


def _family(name: str) -> Family:
    return Family(name=name, make=partial(GLMParser, name), markers=FAMILY_MARKERS,
                  leak_markers=FAMILY_MARKERS, reasoning_exits=REASONING_EXITS,
                  auto_markers=FAMILY_MARKERS, claim=partial(_claim, name),
                  render=partial(render, name), malformable=True, rank=40,
                  aliases=ALIASES[name], grammar="H")


GLM45 = _family("glm45")
GLM47 = _family("glm47")
