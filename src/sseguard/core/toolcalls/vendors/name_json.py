"""Mistral (``mistral``) and PLaMo 3 (``plamo3``): a name then its JSON arguments
(``grammars.name_then_json``).
"""

from __future__ import annotations

from sseguard.core.toolcalls.auto import builtin_rank
from sseguard.core.toolcalls.grammars.name_then_json import Grammar, NameThenJSONParser, name_then_json

#: What a Mistral call leaves when ``[TOOL_CALLS]`` and ``[ARGS]`` (control tokens) are stripped:
#: ``get_weather{"city": …`` (v11+) or `` [{"name": …`` (pre-v11). A name glued to a JSON object is
#: also Go's ``map[string]int{"a": 1}``, so it counts only where the answer starts (docs/design/markup.md
#: decision 2.11), up to the first key's colon (an empty object: its ``}``).
MISTRAL_LEAK_START = r'\s{0,8}(?:\[\{"name":|[A-Za-z_][\w.\-]{0,63}\{(?:"[^"\s\\]{1,64}":|\}))'
MISTRAL = name_then_json("mistral", "[TOOL_CALLS]", "[ARGS]", think=("[THINK]", "[/THINK]"),
                         brace_opens=True, array=True,
                         rank=builtin_rank("mistral"), leak_start=MISTRAL_LEAK_START)

_P = "<|plamo:{}:plamo|>"
PLAMO3 = name_then_json(
    "plamo3", _P.format("begin_tool_name"), _P.format("end_tool_name"),
    _P.format("end_tool_arguments"),
    preamble=(_P.format("begin_tool_arguments"), "<|plamo:constrain|>", "<|plamo:msg|>"),
    preamble_words=("json",),
    framing=(_P.format("begin_tool_requests"), _P.format("end_tool_requests"),
             _P.format("begin_tool_request"), _P.format("end_tool_request"), "<|plamo:tag|>"),
    think=(_P.format("begin_think"), _P.format("end_think")),
    exits=(_P.format("begin_tool_requests"), _P.format("begin_tool_request"),
           _P.format("begin_tool_name")),
    render_wrap=(_P.format("begin_tool_requests"), _P.format("begin_tool_request"),
                 _P.format("end_tool_request"), _P.format("end_tool_requests")),
    rank=builtin_rank("plamo3"))

__all__ = ["MISTRAL", "PLAMO3", "Grammar", "NameThenJSONParser", "name_then_json"]
