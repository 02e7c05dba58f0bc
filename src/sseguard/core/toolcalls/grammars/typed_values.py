"""Parameter values that carry no type flag, typed by the offered tool's schema (GLM, MiniMax-M2).

docs/design/markup.md decision 2.5: the schema's declared types say whether a value is the raw string, JSON,
or either. What is surely a string streams as it arrives (escaped piece by piece, the hot path of
``BaseParser._STRING``); what may be JSON is buffered up to its closer and decided there, once. A value
that may be either is buffered only until its first non-blank character: one that no accepted JSON
type can start with is a string from then on and streams too. MiniMax's exact ``null`` holds back at
most four characters.

Decision 2.6: inside a value only its own closer ends it; the family's call or block closers there make
the call void (both engines end the call early and lose the value); any other tag is value text.
"""

from __future__ import annotations

from sseguard.core.toolcalls.events import MarkupErrorKind
from sseguard.core.toolcalls.grammars.blocks import BlockParser
from sseguard.core.toolcalls.grammars.markers import first_non_ws
from sseguard.core.toolcalls.grammars.strict_json import json_string_body
from sseguard.core.toolcalls.schema import ToolSpec, ValueTyping


class TypedValueParser(BlockParser):
    """A family whose parameter values are untagged text typed by the tool's schema.

    A family names its two value states (``_VALUE``: buffered or undecided; ``_STRING``: streaming a
    string), the value's closer, the closers that may not stand inside a value, the state after a
    value, and its rule for values without a schema.
    """

    _VALUE = -1
    _VALUE_END = ""
    _VALUE_BREAKS: tuple[str, ...] = ()
    _AFTER_VALUE = -1
    _UNTYPED = ValueTyping(frozenset(), True)
    _NULL_LITERAL = False  # MiniMax: a value that is exactly "null" is null for any type

    def __init__(self, tools: ToolSpec | None = None) -> None:
        super().__init__(tools)
        self._key = ""
        self._typing = self._UNTYPED
        self._vbuf: list[str] = []
        self._undecided = False  # only blanks seen so far in a value that may be JSON or a string
        self._null_head: str | None = None  # a string value so far, while it may still be "null"

    def _open_value(self, key: str) -> None:
        """The value of ``key`` starts: choose how it is read from the schema's declared types."""
        call = self._call
        assert call is not None
        types = self._tools.types_of(call.name, key) if self._tools is not None else frozenset()
        typing = ValueTyping.of(types, self._UNTYPED, self._NULL_LITERAL)
        self._key, self._typing, self._vbuf, self._null_head = key, typing, [], None
        self._undecided = False
        if typing.plain_string:
            self._delta(call.key_prefix(key) + '"')
            self._state = self._STRING
            return
        if typing.raw and not typing.accept:  # a string, unless it is exactly "null"
            self._null_head = ""
        else:
            self._undecided = typing.raw
        self._state = self._VALUE

    def _value_text(self, s: str) -> None:
        call = self._call
        assert call is not None
        if self._state == self._STRING:
            self._delta(json_string_body(s))
            return
        if self._null_head is not None:
            head = self._null_head + s
            if "null".startswith(head):
                self._null_head = head
                return
            self._null_head = None
            self._delta(call.key_prefix(self._key) + '"' + json_string_body(head))
            self._state = self._STRING
            return
        self._vbuf.append(s)
        if self._undecided:
            q = first_non_ws(s, 0, len(s))
            if q != -1:
                self._undecided = False
                if not self._typing.may_be_json(s[q]):  # surely the raw string: stream it
                    head, self._vbuf = "".join(self._vbuf), []
                    self._delta(call.key_prefix(self._key) + '"' + json_string_body(head))
                    self._state = self._STRING

    def _value_done(self) -> None:
        """The value's closer was read: finish the streamed string or decide the buffered value."""
        call = self._call
        assert call is not None
        if self._state == self._STRING:
            self._delta('"')
            self._state = self._AFTER_VALUE
        elif self._null_head is not None:
            head, self._null_head = self._null_head, None
            self._delta(call.key_prefix(self._key) + self._typing.encode(head))
            self._state = self._AFTER_VALUE
        else:
            buf, self._vbuf = self._vbuf, []
            self._json_param(self._key, buf, self._AFTER_VALUE, self._typing)

    def _value(self, data: str, pos: int) -> int:
        """States ``_VALUE`` and ``_STRING``: value text up to the value's closer (decision 2.6)."""
        call = self._call
        assert call is not None
        r, lit = self._gather(data, pos, self._value_text)
        if r != pos:
            return r
        if lit in self._VALUE_BREAKS:
            self._void(MarkupErrorKind.MALFORMED_TAG)
            return pos
        call.raw.append(lit)
        if lit == self._VALUE_END:
            self._value_done()
        else:
            self._value_text(lit)
        return pos + len(lit)
