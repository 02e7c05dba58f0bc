"""Strict JSON for the parsers: decoding that rejects what other languages cannot read, escaping
that streams, and following JSON strings across chunks so that a marker inside a string is text."""

from __future__ import annotations

import json
import math
import re
from json.encoder import encode_basestring  # the C escaper json.dumps itself uses
from typing import Any

from sseguard.core.toolcalls.events import MarkupErrorKind

#: What decision 1.2 of docs/design/markup.md trims around a JSON value: ASCII whitespace only (a
#: NBSP is content, not padding).
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


_OUTSIDE_STRING = re.compile(r'["<]')  # outside a JSON string only a quote or a marker matters
_INSIDE_STRING = re.compile(r'["\\]')  # inside one, its end or an escape


class JSONStrings:
    """Where the strings of a JSON text are, followed across chunks, so that a marker inside a string
    value is string text (a file's contents may well hold ``</tool_call>`` or ``<|call|>``).

    The text need not be valid JSON: quotes and escapes are followed as they come.
    """

    __slots__ = ("_outside", "escape", "inside")

    def __init__(self, lead: str = "<") -> None:
        self.inside = False
        self.escape = False  # the last character read was a backslash inside a string
        # outside a string only a quote or the character the family's markers start with matters
        self._outside = _OUTSIDE_STRING if lead == "<" else re.compile(f'["{re.escape(lead)}]')

    def next_lt(self, data: str, i: int, n: int) -> int:
        """Index of the first lead (``<``) at or after ``i`` that stands outside any string, or
        ``n``; the state follows ``data[i:result]``."""
        while i < n:
            if self.escape:
                self.escape = False
                i += 1
                continue
            hit = (_INSIDE_STRING if self.inside else self._outside).search(data, i, n)
            if hit is None:
                return n
            i, char = hit.start(), hit.group()
            if char == '"':
                self.inside = not self.inside
            elif char == "\\":
                self.escape = True
            else:  # the lead, outside a string
                return i
            i += 1
        return n
