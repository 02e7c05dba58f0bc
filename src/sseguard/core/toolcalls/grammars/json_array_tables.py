"""The tables of docs/design/markup.md class B: what an element of a JSON array of calls looks like
(``Shape``), what a marker opens (``Opener``, ``Body``), and the shapes the shipped families write.

They are the vocabulary shared by the parser (``json_array``) and the family builders
(``json_array_family``); a family is these tables, nothing more.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

_JSON_STR = r'"(?:[^"\\]|\\.)*"'


class Body(Enum):
    """What an opener opens."""

    ARRAY = "array"  # ``[`` elements separated by ``,`` ``]``
    OBJECTS = "objects"  # objects one after another, separated by the opener's ``separator``
    ONE = "one"  # exactly one object (class A′)


@dataclass(frozen=True, slots=True)
class Shape:
    """How one element of the array is a call.

    ``head`` matches the start of an element in the order templates write it, up to and including the
    ``{`` that opens its arguments (named groups ``name`` and, optionally, ``id``, each a JSON string);
    only then can the arguments stream. ``read`` takes the whole parsed element and returns (name,
    arguments, call id), or ``None`` when the element is no call of this shape (``bad_param_json``).
    ``write`` builds the element a model writes for a call (rendering).
    """

    head: re.Pattern[str]
    read: Callable[[Any], tuple[str, dict[str, Any], str | None] | None]
    write: Callable[[str, dict[str, Any], str | None], dict[str, Any]]


def read_name_args(obj: Any, keys: tuple[str, ...] = ("arguments", "parameters"),
                   ) -> tuple[str, dict[str, Any], str | None] | None:
    """A call object ``{"name": …, "arguments"|"parameters": {…}}`` as (name, arguments, None), or
    ``None`` when it is none (decision 3.4: missing, both, or not an object)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    present = [k for k in keys if k in obj]
    if len(present) != 1 or not isinstance(obj[present[0]], dict):
        return None  # missing, both, or not an object (a JSON string holding one included)
    return obj["name"], obj[present[0]], None


def _read_name_key(obj: Any) -> tuple[str, dict[str, Any], str | None] | None:
    if not isinstance(obj, dict) or len(obj) != 1:
        return None
    ((name, args),) = obj.items()
    return (name, args, None) if isinstance(args, dict) else None


def _read_cohere(obj: Any) -> tuple[str, dict[str, Any], str | None] | None:
    if not isinstance(obj, dict) or not isinstance(obj.get("tool_name"), str):
        return None
    args, call_id = obj.get("parameters"), obj.get("tool_call_id")
    if not isinstance(args, dict) or not (call_id is None or isinstance(call_id, str)):
        return None
    return obj["tool_name"], args, call_id


def _name_args_head(keys: str = "arguments|parameters") -> re.Pattern[str]:
    return re.compile(rf'\{{\s*"name"\s*:\s*(?P<name>{_JSON_STR})\s*,\s*"(?:{keys})"\s*:\s*\{{')


#: ``{"name": …, "arguments"|"parameters": {…}}``: most families.
NAME_ARGUMENTS = Shape(_name_args_head(), read_name_args,
                       lambda name, args, _id: {"name": name, "arguments": args})
#: The same, written with ``parameters`` (Llama 3's template).
NAME_PARAMETERS = Shape(_name_args_head(), read_name_args,
                        lambda name, args, _id: {"name": name, "parameters": args})
#: ``{"NAME": {args}}``: Apertus.
NAME_KEY = Shape(re.compile(rf"\{{\s*(?P<name>{_JSON_STR})\s*:\s*\{{"), _read_name_key,
                 lambda name, args, _id: {name: args})
#: ``{"tool_call_id": …, "tool_name": …, "parameters": {…}}``: Cohere Command; the id is kept.
COHERE = Shape(re.compile(rf'\{{\s*"tool_call_id"\s*:\s*(?P<id>{_JSON_STR})\s*,\s*"tool_name"\s*:\s*'
                          rf'(?P<name>{_JSON_STR})\s*,\s*"parameters"\s*:\s*\{{'), _read_cohere,
               lambda name, args, call_id: {"tool_call_id": call_id or "0", "tool_name": name,
                                            "parameters": args})


@dataclass(frozen=True, slots=True)
class Opener:
    """A marker that opens calls: the ``body`` it opens, the ``closer`` that ends the block after the
    calls (``None``: the calls' own JSON ends it, decision 3.8), the ``separator`` between
    objects (``Body.OBJECTS``: ``;`` or a newline; whitespace around it is markup).

    ``opened``: the literal already holds the body's first character (Phi-4-mini's ``functools[``).
    ``soft``: when what follows is not the body, the marker is ordinary text (a Markdown fence before
    code is not xLAM's fence before calls); otherwise it is ``malformed_tag``.
    """

    literal: str
    body: Body = Body.ARRAY
    closer: str | None = None
    separator: str = ","
    opened: bool = False
    soft: bool = False



def start_char(body: Body) -> str:
    """The character a body opens with: ``[`` for an array, ``{`` for objects."""
    return "[" if body is Body.ARRAY else "{"


#: JSON's whitespace (RFC 8259), what may stand between a marker and its body.
WS = " \t\n\r"
_NOT_WS = re.compile(r"[^ \t\n\r]")


def first_non_ws(data: str, pos: int) -> int:
    """Index of the first character of ``data[pos:]`` that is not JSON whitespace, or -1."""
    m = _NOT_WS.search(data, pos)
    return m.start() if m else -1
