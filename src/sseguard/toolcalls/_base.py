"""The old home of the parser machinery, kept so that existing imports keep working.

The pieces now live in modules with one job each: ``events`` (the public events and parser protocol),
``schema`` (what the offered tools say), ``_json`` (strict JSON and JSON strings), ``_markers``
(marker search and holding back), ``_engine`` (``BaseParser``), ``_block`` (``BlockParser``) and
``_jsonargs`` (``JSONArgsParser``). New code imports from those.
"""

from __future__ import annotations

from sseguard.toolcalls._block import END, RESUME, SWALLOW, BlockParser
from sseguard.toolcalls._engine import CONTENT, BaseParser, Call
from sseguard.toolcalls._json import (
    ASCII_WS,
    JSONProblem,
    JSONStrings,
    json_string_body,
    strict_json,
)
from sseguard.toolcalls._jsonargs import JSONArgsParser
from sseguard.toolcalls._markers import (
    MIN_PARTIAL,
    TAG_CAP,
    THINK_TAGS,
    Markers,
    first_non_ws,
    split_partial_opener,
)
from sseguard.toolcalls.events import (
    Event,
    Markup,
    MarkupError,
    MarkupErrorKind,
    Parser,
    Reasoning,
    Text,
    ToolArgsDelta,
    ToolCallEnd,
    ToolCallStart,
    consumed_text,
    event_to_dict,
    join_events,
)
from sseguard.toolcalls.schema import (
    ANY_JSON,
    JSON_TYPES,
    STRICT_JSON,
    ToolSpec,
    ValueTyping,
    declared_types,
    type_allows,
)

__all__ = [
    "ANY_JSON", "ASCII_WS", "CONTENT", "END", "JSON_TYPES", "MIN_PARTIAL", "RESUME", "STRICT_JSON",
    "SWALLOW", "TAG_CAP", "THINK_TAGS", "BaseParser", "BlockParser", "Call", "Event", "JSONArgsParser",
    "JSONProblem", "JSONStrings", "Markers", "Markup", "MarkupError", "MarkupErrorKind", "Parser",
    "Reasoning", "Text", "ToolArgsDelta", "ToolCallEnd", "ToolCallStart", "ToolSpec", "ValueTyping",
    "consumed_text", "declared_types", "event_to_dict", "first_non_ws", "join_events",
    "json_string_body", "split_partial_opener", "strict_json", "type_allows",
]
