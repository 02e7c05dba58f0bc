"""A Gemini function call whose arguments stream (``functionCall.partialArgs``), assembled into one.

With ``toolConfig.functionCallingConfig.streamFunctionCallArguments`` a call arrives in pieces: the
first names the function and says ``willContinue``; each later piece carries ``partialArgs`` (a
``jsonPath`` such as ``$.location`` or ``$.stops[1].city`` and one value: ``stringValue``,
``numberValue``, ``boolValue`` or ``nullValue``) and no name; a string value may itself arrive in
pieces (its ``willContinue``); the last piece (often empty) no longer says ``willContinue``.
google-genai yields the pieces as they come and leaves the joining to its caller: this is that join.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["StreamedCall", "parse_path"]

_STEP = re.compile(r"\.([A-Za-z_][\w-]*)|\[(\d+)\]|\['((?:[^'\\]|\\.)*)'\]|\[\"((?:[^\"\\]|\\.)*)\"\]")
_VALUES = ("stringValue", "numberValue", "boolValue", "nullValue")
#: Whether a value fits its field (a JSON ``true`` is no number).
_VALUE_OK = {
    "stringValue": lambda v: isinstance(v, str),
    "numberValue": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolValue": lambda v: isinstance(v, bool),
}


def parse_path(path: str) -> list[str | int] | None:
    """The steps of a ``jsonPath`` (RFC 9535's normalized subset: names and indexes), or None."""
    if not path.startswith("$"):
        return None
    steps: list[str | int] = []
    pos = 1
    while pos < len(path):
        match = _STEP.match(path, pos)
        if match is None:
            return None
        name, index, quoted, dquoted = match.groups()
        if index is not None:
            steps.append(int(index))
        else:
            steps.append(name if name is not None else (quoted if quoted is not None
                                                         else dquoted or ""))
        pos = match.end()
    return steps


class StreamedCall:
    """One call's arguments as its pieces arrive: ``call`` is the part's ``functionCall`` object
    (``name`` and ``args``), filled in place, so the assembled answer holds one whole call."""

    __slots__ = ("_continuing", "args", "call", "name")

    def __init__(self, name: str, args: Any = None) -> None:
        self.name = name
        self.args: dict[str, Any] = dict(args) if isinstance(args, dict) else {}
        self.call: dict[str, Any] = {"name": name, "args": self.args}
        self._continuing: set[str] = set()  # paths of strings whose next piece is appended

    def add(self, pieces: Any) -> str | None:
        """Fold one piece's ``partialArgs``; what is wrong with them, or None."""
        if pieces is None:
            return None
        if not isinstance(pieces, list):
            return "partialArgs is not a list"
        for piece in pieces:
            problem = self._add_one(piece)
            if problem is not None:
                return problem
        return None

    def _add_one(self, piece: Any) -> str | None:
        if not isinstance(piece, dict):
            return "a partialArgs entry is not an object"
        path = piece.get("jsonPath")
        steps = parse_path(path) if isinstance(path, str) else None
        if not steps:
            return f"partialArgs jsonPath {path!r} is not a path into the arguments"
        assert isinstance(path, str)
        given = [key for key in _VALUES if key in piece]
        if len(given) > 1:
            return f"partialArgs at {path} carries {len(given)} values"
        value: Any = None
        if given:
            key = given[0]
            value = piece[key]
            if key == "nullValue":
                value = None
            elif not _VALUE_OK[key](value):
                return f"partialArgs {key} at {path} is a {type(value).__name__}"
        elif piece.get("willContinue") is not True and path not in self._continuing:
            return f"partialArgs at {path} carries no value"
        if isinstance(value, str) and path in self._continuing:
            old = self._get(steps)
            value = (old if isinstance(old, str) else "") + value
        if given or path not in self._continuing:
            problem = self._set(steps, value, path)
            if problem is not None:
                return problem
        if piece.get("willContinue") is True:
            self._continuing.add(path)
        else:
            self._continuing.discard(path)
        return None

    def _get(self, steps: list[str | int]) -> Any:
        node: Any = self.args
        for step in steps:
            if isinstance(step, int):
                node = node[step] if isinstance(node, list) and step < len(node) else None
            else:
                node = node.get(step) if isinstance(node, dict) else None
        return node

    def _set(self, steps: list[str | int], value: Any, path: str) -> str | None:
        node: Any = self.args
        if isinstance(steps[0], int):
            return f"partialArgs jsonPath {path} indexes the arguments object"
        for step, after in zip(steps, [*steps[1:], None], strict=True):
            fresh: Any = [] if isinstance(after, int) else {}
            if isinstance(step, int):
                if not isinstance(node, list):
                    return f"partialArgs jsonPath {path} indexes a non-list"
                while len(node) <= step:
                    node.append(None)
                if after is None:
                    node[step] = value
                    return None
                if not isinstance(node[step], list | dict):
                    node[step] = fresh
                node = node[step]
            else:
                if not isinstance(node, dict):
                    return f"partialArgs jsonPath {path} names a field of a non-object"
                if after is None:
                    node[step] = value
                    return None
                if not isinstance(node.get(step), list | dict):
                    node[step] = fresh
                node = node[step]
        return None
