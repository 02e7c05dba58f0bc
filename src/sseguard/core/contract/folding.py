"""What the checkers fold a stream into, whichever its protocol: blocks, joined text, ids, tool facts.

Small value types and helpers the protocol checkers and assemblers share; the engine that drives
them is ``_base.CheckerBase``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeGuard


def is_int(value: object) -> TypeGuard[int]:
    """A JSON integer (``bool`` is an ``int`` to Python, never to a protocol)."""
    return isinstance(value, int) and not isinstance(value, bool)


def error_text(data: str, obj: Any) -> str:
    """The human message of an error frame, whichever of the shapes servers send it in.

    Nested (``{"error": {"message": …}}``, chat and Anthropic) or flat (``{"type": "error", "code",
    "message"}``, the Responses ``error`` event); failing both, the raw data.
    """
    message = data
    if isinstance(obj, dict):
        err = obj.get("error", obj)
        if not isinstance(err, dict | str) or not err:
            err = obj
        if isinstance(err, dict):
            message = str(err.get("message") or err.get("type") or err.get("code") or data)
        elif isinstance(err, str):
            message = err
    return message or "error event"


class ToolFacts:
    """The tools a request offered, by name, with their JSON schema (None when it gave none).

    ``entry`` maps one element of the request's ``tools`` list onto ``(name, schema)``: each protocol
    spells a tool its own way (chat nests it under ``function``; Responses and Messages do not).
    """

    __slots__ = ("offered", "schemas")

    def __init__(self, tools: Any, entry: Callable[[dict[str, Any]], tuple[Any, Any]]) -> None:
        self.offered = isinstance(tools, list)
        self.schemas: dict[str, Any] = {}
        if isinstance(tools, list):
            for tool in tools:
                if isinstance(tool, dict):
                    name, schema = entry(tool)
                    if isinstance(name, str):
                        self.schemas[name] = schema


@dataclass(slots=True)
class IdWatch:
    """The first and last id a stream gave its answer, and whether it ever changed (a gateway that
    splices two upstream answers into one stream shows it here)."""

    first: str | None = None
    last: str | None = None
    changed: bool = False

    def see(self, value: Any) -> None:
        if not isinstance(value, str):
            return
        if self.first is None:
            self.first = value
        elif value != self.first:
            self.changed = True
        self.last = value

    def facts(self) -> tuple[str | None, str | None, bool]:
        return self.first, self.last, self.changed


@dataclass(slots=True)
class Block:
    """One output item (Responses) or content block (Messages) while it streams.

    ``snapshot`` is the object as the SDK accumulates it (text filled in at the end); ``arguments``
    holds a tool call's argument fragments, kept even without ``keep_text`` because they are checked.
    """

    index: int
    type: str
    snapshot: dict[str, Any]
    is_tool: bool = False
    name: str = ""
    open: bool = True
    arguments: list[str] = field(default_factory=list)
    flagged: bool = False  # already reported as unterminated


class Joined:
    """The deltas of one text field joined, or, without ``keep``, only enough to compare a final copy.

    A relay that does not keep text still has to tell whether a ``*.done`` event's full text equals the
    deltas it forwarded; a running digest answers that in constant memory.
    """

    __slots__ = ("_digest", "_parts")

    def __init__(self, keep: bool) -> None:
        self._parts: list[str] | None = [] if keep else None
        self._digest = None if keep else hashlib.blake2b(digest_size=16)

    def add(self, text: str) -> None:
        if self._parts is not None:
            self._parts.append(text)
        elif self._digest is not None:
            self._digest.update(text.encode("utf-8", "surrogatepass"))

    @property
    def text(self) -> str:
        return "".join(self._parts) if self._parts is not None else ""

    def equals(self, full: str) -> bool:
        if self._parts is not None:
            return "".join(self._parts) == full
        other = hashlib.blake2b(full.encode("utf-8", "surrogatepass"), digest_size=16)
        return self._digest is not None and self._digest.digest() == other.digest()


def schema_problem(instance: Any, schema: dict[str, Any]) -> str | None:
    """The first JSON-schema violation, or None; an invalid schema is the caller's, not a finding."""
    import jsonschema  # imported lazily: only requests with tool schemas pay for it

    try:
        validator_cls = jsonschema.validators.validator_for(schema)
        validator_cls.check_schema(schema)
        error = jsonschema.exceptions.best_match(validator_cls(schema).iter_errors(instance))
    except (jsonschema.exceptions.SchemaError, RecursionError):
        return None
    return None if error is None else error.message
