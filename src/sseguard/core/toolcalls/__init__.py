"""Incremental, leak-free tool-call parsers for the markup families of docs/design/markup.md §1 and §2.

``parser_for(family, tools=None)`` returns a fresh parser for one stream; ``feed(text)`` and ``close()``
return events. The guarantees (chunking invariance, no leaks, linear cost, monotonic arguments, no
shared state) are guarantees 1–5 of docs/design/guarantees.md; ``consumed_text(events)`` states the
accounting: every input character is in exactly one event's text or raw.

Each family is one ``Family`` descriptor; ``families()`` lists them all, the built-ins and those of
installed plugins (entry point group ``sseguard.families``), and ``json_in_tags`` makes a complete
family for the commonest third-party shape (``name_then_json`` for a name followed by a JSON object).
"""

from __future__ import annotations

from sseguard.core.toolcalls.events import (
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
from sseguard.core.toolcalls.family import CallLike, Claim, Family, UnknownFamily
from sseguard.core.toolcalls.grammars.json_in_tags import json_in_tags
from sseguard.core.toolcalls.grammars.name_then_json import name_then_json
from sseguard.core.toolcalls.registry import (
    GROUP,
    AllFamilies,
    FamilyPluginWarning,
    aliases,
    canonical,
    families,
    family,
    parser_for,
)
from sseguard.core.toolcalls.schema import ToolSpec

#: Every family by name, ``auto`` included, read-only and loaded on first use. New code calls
#: ``families()`` (the concrete families) or ``family(name)``.
FAMILIES = AllFamilies()

__all__ = [
    "FAMILIES",
    "GROUP",
    "CallLike",
    "Claim",
    "Event",
    "Family",
    "FamilyPluginWarning",
    "Markup",
    "MarkupError",
    "MarkupErrorKind",
    "Parser",
    "Reasoning",
    "Text",
    "ToolArgsDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolSpec",
    "UnknownFamily",
    "aliases",
    "canonical",
    "consumed_text",
    "event_to_dict",
    "families",
    "family",
    "join_events",
    "json_in_tags",
    "name_then_json",
    "parser_for",
]
