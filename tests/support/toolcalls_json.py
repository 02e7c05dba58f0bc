"""Hypothesis strategies for the Kimi K2 and gpt-oss Harmony families (docs/design/markup.md §2): valid
documents with the text, reasoning and calls a correct parser must find. Their arguments are JSON objects
whose strings may hold any marker (decision 2.4: a marker inside a JSON string is string text).

The expected values come from what the strategy chose, with the markers written out in
``support.toolcalls.LEAK_MARKERS``, never from the parsers' own constants.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

import support.toolcalls as base

KIMI_RESERVED = (*base.LEAK_MARKERS["kimi-k2"], *base.THINK_TAGS)
#: Text inside JSON strings: markers there are string text (decision 2.4).
JSON_TEXT = st.one_of(base.RAW_VALUE, st.sampled_from([*base.LEAK_MARKERS["kimi-k2"],
                                                       *base.LEAK_MARKERS["harmony"], "<|", '"}']))
JSON_ARGS = st.dictionaries(st.one_of(base.PLAIN, JSON_TEXT), st.one_of(base.JSON_VALUE, JSON_TEXT),
                            max_size=3)


@st.composite
def kimi_docs(draw: Any) -> base.Doc:
    """Kimi K2 text and sections (plural or singular, ``\n`` around markers or not), bare calls,
    ids with or without ``functions.``, arguments whose strings hold markers."""
    content = base.RAW_VALUE.filter(base._free_of(KIMI_RESERVED))
    parts: list[str] = []
    visible: list[str] = []
    calls: list[tuple[str, dict[str, Any]]] = []
    for _ in range(draw(st.integers(0, 3))):
        before = draw(content)
        parts.append(before)
        visible.append(before)
        bare = draw(st.booleans()) and draw(st.booleans())
        nl = draw(st.sampled_from(["", "\n"]))
        if not bare:
            parts.append(draw(st.sampled_from(["<|tool_calls_section_begin|>",
                                               "<|tool_call_section_begin|>"])) + nl)
        for _ in range(draw(st.integers(1, 3))):
            name = draw(base.NAME.filter(lambda n: not n.startswith("functions.")))
            call_id = draw(st.sampled_from(["functions.", ""])) + f"{name}:{draw(st.integers(0, 99))}"
            args = draw(JSON_ARGS)
            body = json.dumps(args, ensure_ascii=draw(st.booleans()),
                              indent=draw(st.sampled_from([None, 2])))
            parts.append(f"<|tool_call_begin|>{nl}{call_id}{nl}<|tool_call_argument_begin|>"
                         f"{draw(base.ASCII_PAD)}{body}{draw(base.ASCII_PAD)}<|tool_call_end|>"
                         f"{'' if bare else nl}")  # after a bare call, text is text
            calls.append((name, args))
        if not bare:
            parts.append(draw(st.sampled_from(["<|tool_calls_section_end|>",
                                               "<|tool_call_section_end|>"])))
    tail = draw(content.filter(lambda t: base.ends_clean(t, "kimi-k2")))
    parts.append(tail)
    visible.append(tail)
    return base.Doc("".join(parts), base.framed(visible[0], visible), calls)


@st.composite
def harmony_docs(draw: Any) -> base.Doc:
    """gpt-oss Harmony: messages on every channel, recipients before or after the channel, every
    content-type spelling, stop tokens kept or cut, text outside messages."""
    markers = base.LEAK_MARKERS["harmony"]
    content = base.RAW_VALUE.filter(base._free_of(markers))
    parts: list[str] = []
    visible: list[str] = []
    reasoning: list[str] = []
    calls: list[tuple[str, dict[str, Any]]] = []
    closed = True  # the last message had its stop token: text may stand outside messages
    pad = draw(base.ASCII_PAD)  # whitespace before the first message frames the answer
    parts.append(pad)
    visible.append(pad)
    first = pad  # the visible text the stream starts with
    for k in range(draw(st.integers(0, 4))):
        if closed and draw(st.booleans()):
            outside = draw(content)
            parts.append(outside)
            visible.append(outside)
            first += outside if k == 0 else ""
        start = draw(st.sampled_from(["<|start|>assistant", ""]))
        channel = draw(st.sampled_from(["analysis", "commentary", "final"]))
        if draw(st.booleans()):
            name = draw(base.NAME.filter(lambda s: not s.startswith("functions.")))
            recipient = " to=" + draw(st.sampled_from(["functions.", ""])) + name
            ctype = draw(st.sampled_from(["", " json", " <|constrain|>json", "<|constrain|>json"]))
            # before the channel: after the role, or opening the completion (decision 2.3)
            before = draw(st.booleans()) and bool(start or "".join(parts).isspace()
                                                   or not "".join(parts))
            parts.append(f"{start}{recipient if before else ''}<|channel|>{channel}"
                         f"{'' if before else recipient}{ctype}<|message|>")
            args = draw(JSON_ARGS)
            parts.append(draw(base.ASCII_PAD) + json.dumps(args, ensure_ascii=draw(st.booleans()))
                         + draw(base.ASCII_PAD))
            calls.append((name, args))
        else:
            parts.append(f"{start}<|channel|>{channel}<|message|>")
            body = draw(content.filter(lambda t: base.ends_clean(t, "harmony")))
            parts.append(body)
            (reasoning if channel == "analysis" else visible).append(body)
        stop = draw(st.sampled_from(["<|end|>", "<|call|>", "<|return|>", ""]))
        parts.append(stop)
        closed = bool(stop)
    tail = draw(content.filter(lambda t: base.ends_clean(t, "harmony"))) if closed else ""
    parts.append(tail)
    visible.append(tail)
    first += tail if len(parts) == 2 else ""
    return base.Doc("".join(parts), base.framed(first, visible), calls, "".join(reasoning))


JSON_DOCS = {"kimi-k2": kimi_docs(), "harmony": harmony_docs()}
#: Pieces of both families' markup for the fuzz soup.
JSON_SOUP = [
    "<|tool_calls_section_begin|>", "<|tool_call_section_end|>", "<|tool_call_begin|>",
    "functions.f:0", "functions.:1", "<|tool_call_argument_begin|>", "<|tool_call_end|>",
    "<|tool_calls_section_end|>", "<|", "|>", "<|start|>assistant", "<|channel|>", "analysis",
    "final", "commentary to=functions.f", " json", "<|constrain|>", "<|message|>", "<|end|>",
    "<|call|>", "<|return|>", '{"a": "<|call|>"}',
]
