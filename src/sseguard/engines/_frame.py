"""The text around one call's arguments JSON in a family's markup, for constrained decoding.

SGLang builds ``tool_choice: required`` and structural tags from a detector's ``structure_info()``:
for a tool name, the text before the arguments (``begin``), after them (``end``) and the marker that
starts a call (``trigger``); the grammar puts a JSON object between ``begin`` and ``end``. That only
fits families whose arguments are one JSON object written verbatim (Hermes, Kimi K2, DeepSeek V3.x,
Harmony…); families that write each parameter as its own element have no such frame.

The frame is read off the family's own ``render`` (the markup a model of the family writes) and then
checked with the family's parser: a frame is offered only if the parser reads ``begin + {…} + end``
back as exactly that call. Engine-free.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sseguard.core.toolcalls import Family, ToolCallEnd, family

_PROBE = {"sseguard_probe": "value"}


@dataclass(frozen=True, slots=True)
class CallFrame:
    """``begin`` + arguments JSON + ``end`` is one call; ``trigger`` starts ``begin``."""

    begin: str
    end: str
    trigger: str


@dataclass(frozen=True, slots=True)
class _Call:
    name: str
    values: dict[str, Any]
    arguments: str


@lru_cache(maxsize=4096)
def call_frame(family_name: str, tool: str) -> CallFrame | None:
    """The frame of a call to ``tool`` in ``family_name``'s markup, or None where it has none."""
    fam = family(family_name)
    args = json.dumps(_PROBE, ensure_ascii=False)
    try:
        text = fam.render([_Call(tool, dict(_PROBE), args)], False)
    except Exception:  # a family that cannot render this name offers no frame
        return None
    frame = _split(fam, text, args) or _split(fam, text, json.dumps(_PROBE, separators=(",", ":")))
    return frame if frame is not None and _reads_back(fam, frame, tool) else None


def _split(fam: Family, text: str, args: str) -> CallFrame | None:
    at = text.find(args)
    if at == -1 or text.find(args, at + 1) != -1:
        return None
    begin, end = text[:at], text[at + len(args):]
    hits = [(begin.find(m), m) for m in fam.auto_markers if m in begin]
    if not hits:
        return None
    pos, trigger = min(hits)
    # what stands before the trigger is the template's separator, not part of the call
    return CallFrame(begin[pos:], end, trigger)


def _reads_back(fam: Family, frame: CallFrame, tool: str) -> bool:
    """Whether the family's parser reads the frame around other arguments as exactly one call."""
    args = '{"a": [1, "x"], "b": {"c": null}}'
    parser = fam.make(None)
    events = parser.feed(frame.begin + args + frame.end) + parser.close()
    ends = [ev for ev in events if isinstance(ev, ToolCallEnd)]
    return (len(ends) == 1 and ends[0].name == tool
            and json.loads(ends[0].arguments) == json.loads(args))
