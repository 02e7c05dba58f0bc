"""Helpers for the tool-call parser tests: feeding in given splits, checking the invariants every run
must keep, and hypothesis strategies that build valid documents of each family with the text and
calls a correct parser must find in them."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from hypothesis import assume
from hypothesis import strategies as st

from sseguard.core.toolcalls import (
    FAMILIES,
    Event,
    MarkupError,
    Reasoning,
    Text,
    ToolArgsDelta,
    ToolCallEnd,
    ToolCallStart,
    consumed_text,
    join_events,
    parser_for,
)
from sseguard.core.toolcalls.grammars import dsml
from sseguard.core.toolcalls.grammars import function_parameters as qwen3_coder
from sseguard.core.toolcalls.grammars import json_in_tags as hermes
from sseguard.core.toolcalls.grammars import tool_sep_json as deepseek_v3

#: Complete markers per family: none of them may ever appear in Text.
LEAK_MARKERS: dict[str, tuple[str, ...]] = {
    "dsml-v32": (dsml.OPEN, dsml.CLOSE), "dsml-v4": (dsml.OPEN, dsml.CLOSE),
    "dsml-v41": (dsml.OPEN, dsml.CLOSE),
    "deepseek-v3": deepseek_v3.FAMILY_MARKERS, "deepseek-v31": deepseek_v3.FAMILY_MARKERS,
    "hermes": hermes.FAMILY_MARKERS, "qwen3-coder": qwen3_coder.FAMILY_MARKERS,
    # written out here, not taken from the parsers: the spec's markers (docs/design/markup.md §2)
    "kimi-k2": ("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>",
                "<|tool_call_section_begin|>", "<|tool_call_section_end|>", "<|tool_call_begin|>",
                "<|tool_call_argument_begin|>", "<|tool_call_end|>"),
    "harmony": ("<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>",
                "<|return|>", "<|call|>"),
    "glm45": ("<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"),
    "glm47": ("<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"),
    "minimax-m2": ("<minimax:tool_call>", "</minimax:tool_call>"),
    # docs/design/markup.md classes C, D and E
    "pythonic": ("<|python_start|>", "<|python_end|>"),
    "olmo3": ("<function_calls>", "</function_calls>"),
    "lfm2": ("<|tool_call_start|>", "<|tool_call_end|>"),
    "mistral": ("[TOOL_CALLS]", "[ARGS]", "[THINK]", "[/THINK]"),
    "plamo3": (*(f"<|plamo:{t}:plamo|>" for t in (
        "begin_tool_name", "end_tool_name", "end_tool_arguments", "begin_tool_arguments",
        "begin_tool_requests", "end_tool_requests", "begin_tool_request", "end_tool_request",
        "begin_think", "end_think")), "<|plamo:constrain|>", "<|plamo:msg|>", "<|plamo:tag|>"),
    "functiongemma": ("<start_function_call>", "<end_function_call>", "<escape>"),
    "gemma4": ("<|tool_call>", "<tool_call|>", '<|"|>', "<|channel>thought", "<channel|>"),
}
#: Reserved outside reasoning for Kimi (decision 2.1): never text either, but no marker auto looks for.
THINK_TAGS = ("<think>", "</think>")

#: Markers a named parser never shows but auto does not look for: the Gemma families' value
#: delimiters, which mean something only inside a call (FunctionGemma's ``<escape>`` is a tag other
#: answers mention; auto must not take a Hermes answer for FunctionGemma).
NOT_AUTO = ("<escape>", '<|"|>')
LEAK_MARKERS["auto"] = tuple(sorted({m for ms in LEAK_MARKERS.values() for m in ms} - set(NOT_AUTO)))


@dataclass
class Run:
    """One parse: the events of each feed() and of close(), and the text fed."""

    text: str
    feeds: list[list[Event]] = field(default_factory=list)
    closing: list[Event] = field(default_factory=list)
    detected: str | None = None  # the family auto picked

    @property
    def events(self) -> list[Event]:
        return [ev for batch in self.feeds for ev in batch] + self.closing

    @property
    def joined(self) -> list[Event]:
        return join_events(self.events)


def pieces(text: str, cuts: list[int] | None) -> list[str]:
    """``text`` cut at the given positions (``None``: one piece)."""
    if not cuts:
        return [text] if text else []
    points = sorted({c for c in cuts if 0 < c < len(text)})
    bounds = [0, *points, len(text)]
    return [text[a:b] for a, b in pairwise(bounds)]


def run(family: str, text: str, cuts: list[int] | None = None,
        tools: list[dict[str, Any]] | None = None, size: int | None = None,
        markers_of: str | None = None) -> Run:
    """Feed ``text`` cut at ``cuts`` (or in pieces of ``size``) and close, checking the per-feed
    invariants on the way (for the markers of ``markers_of``, by default of ``family``)."""
    parser = parser_for(family, tools)
    result = Run(text)
    chunks = [text[i:i + size] for i in range(0, len(text), size)] if size else pieces(text, cuts)
    nfed = nconsumed = 0
    for chunk in chunks:
        batch = parser.feed(chunk)
        result.feeds.append(batch)
        nfed += len(chunk)
        piece = consumed_text(batch)
        nconsumed += len(piece)
        # the events account for a prefix of what was fed; the rest is held back
        assert text.startswith(piece, nconsumed - len(piece)) and nconsumed <= nfed
        # auto: once it picked a family, other families' markers are that family's text
        watch = markers_of or getattr(parser, "detected", None) or family
        assert_no_held_prefix_in_text(watch, batch, text[nconsumed:nfed])
    result.closing = parser.close()
    result.detected = getattr(parser, "detected", None)
    return result


def assert_no_held_prefix_in_text(family: str, batch: list[Event], held: str) -> None:
    """A feed() that ends with Text never lets out the start of what may still become a marker:
    the Text's end together with what the parser holds back is no marker prefix."""
    if batch and isinstance(batch[-1], Text):
        text = batch[-1].text
        for marker in LEAK_MARKERS[family]:
            for k in range(1, len(marker)):
                if text.endswith(marker[:k]):
                    assert not marker.startswith(marker[:k] + held), (
                        f"Text ends with {marker[:k]!r}, the start of {marker!r}")


def check_invariants(family: str, result: Run) -> None:
    """What every run must satisfy, valid input or not."""
    family = result.detected or family
    events = result.events
    assert consumed_text(events) == result.text, "input lost or duplicated"
    # auto does not look for the Gemma delimiters (NOT_AUTO): text it passed on before it chose a
    # Gemma family may hold them
    markers = [m for m in LEAK_MARKERS[family]
               if result.detected is None or m not in NOT_AUTO]
    # Text runs are checked one by one: text on both sides of a call may spell a marker once the
    # call is taken out, but no marker ever went out as text in one piece.
    for ev in join_events(events):
        if isinstance(ev, Text | Reasoning):
            for marker in markers:
                assert marker not in ev.text, f"marker {marker!r} leaked into {ev}"
            if family == "kimi-k2" and result.detected is None:  # auto: text before the choice
                assert not any(tag in ev.text for tag in THINK_TAGS)
    started: dict[int, str] = {}
    frags: dict[int, list[str]] = {}
    finished: set[int] = set()
    for ev in events:
        if isinstance(ev, ToolCallStart):
            assert ev.index not in started, "index reused"
            started[ev.index] = ev.name
            frags[ev.index] = []
        elif isinstance(ev, ToolArgsDelta):
            assert ev.index in started and ev.index not in finished
            frags[ev.index].append(ev.fragment)
        elif isinstance(ev, ToolCallEnd):
            assert ev.index in started and ev.index not in finished
            assert started[ev.index] == ev.name
            assert "".join(frags[ev.index]) == ev.arguments, "deltas differ from arguments"
            assert isinstance(json.loads(ev.arguments), dict)
            finished.add(ev.index)
        elif isinstance(ev, MarkupError) and ev.index is not None and ev.kind != "undefined_function":
            assert ev.index in started and ev.index not in finished
            finished.add(ev.index)
    assert finished == set(started), "a call neither ended nor failed"


def parsed(family: str, text: str, tools: list[dict[str, Any]] | None = None) -> list[Event]:
    """The joined events of ``text``, checked to be the same fed whole, by one and by three
    characters, and to keep the invariants."""
    whole = run(family, text, tools=tools)
    check_invariants(family, whole)
    for size in (1, 3):
        assert run(family, text, tools=tools, size=size).joined == whole.joined
    return whole.joined


def calls_of(events: list[Event]) -> list[tuple[str, Any]]:
    """(name, decoded arguments) of every completed call, in order."""
    return [(ev.name, json.loads(ev.arguments)) for ev in events if isinstance(ev, ToolCallEnd)]


def text_of(events: list[Event]) -> str:
    return "".join(ev.text for ev in events if isinstance(ev, Text))


def reasoning_of(events: list[Event]) -> str:
    return "".join(ev.text for ev in events if isinstance(ev, Reasoning))


def errors_of(events: list[Event]) -> list[tuple[str, int | None]]:
    return [(str(ev.kind), ev.index) for ev in events if isinstance(ev, MarkupError)]


# ── strategies: valid documents with their expected text and calls ──────────────────────────────

@dataclass
class Doc:
    text: str
    visible: str
    calls: list[tuple[str, dict[str, Any]]]
    reasoning: str = ""


NAME = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyzABC_0123456789-.:"), min_size=1,
               max_size=12).filter(lambda s: s.strip() == s)
TRICKY = st.sampled_from(["<", "｜", '"', "\n", "</parameter>", "<｜DSML", "<｜DSM", "</｜DSML",
                          "｜DSML", "|DSML|", "\\", "<invoke name=\"x\">", "  ", "\t", "é", "🙂",
                          "<tool_call>", "</tool_call>", "<｜tool▁", "<think>", "\r\n", "{", "}"])
PLAIN = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
RAW_VALUE = st.lists(st.one_of(PLAIN, TRICKY), max_size=6).map("".join)
JSON_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20),
                        st.floats(allow_nan=False, allow_infinity=False), PLAIN)
JSON_VALUE = st.recursive(JSON_SCALAR, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(PLAIN, inner, max_size=3)), max_leaves=6)
ASCII_PAD = st.text(st.sampled_from(" \t\n\r"), max_size=3)
ATTR_WS = st.sampled_from([" ", "  ", "\n", "\t", " \n "])
GT_WS = st.sampled_from(["", " ", "\n"])


def _free_of(markers: tuple[str, ...]) -> Any:
    return lambda s: not any(m in s for m in markers)


def ends_clean(text: str, family: str) -> bool:
    """No marker prefix of two or more characters at the very end (that would be a cut opener)."""
    return not any(text.endswith(m[:k]) for m in LEAK_MARKERS[family] for k in range(2, len(m)))


@st.composite
def dsml_docs(draw: Any, family: str = "dsml-v32") -> Doc:
    """A stream of text and DSML blocks (any dialect, bare invokes, every invoke shape)."""
    markers = LEAK_MARKERS[family]
    content = RAW_VALUE.filter(_free_of(markers))
    parts: list[str] = []
    visible: list[str] = []
    calls: list[tuple[str, dict[str, Any]]] = []
    for _ in range(draw(st.integers(0, 3))):
        _before_opener(draw, content, "\n\n", parts, visible)
        dialect, word = draw(st.sampled_from([(dsml.UNSPACED, "function_calls"),
                                              (dsml.UNSPACED, "tool_calls"),
                                              (dsml.SPACED, "calls")]))
        bare = draw(st.booleans()) and draw(st.booleans())
        if not bare:
            parts.append(dialect.tag(word) + draw(GT_WS) + ">" + draw(ASCII_PAD))
        for _ in range(draw(st.integers(1 if bare else 0, 3))):
            name = draw(NAME)
            args: dict[str, Any] = {}
            opener = f'{dialect.tag("invoke")}{draw(ATTR_WS)}name="{name}"{draw(GT_WS)}'
            shape = draw(st.sampled_from(["params", "params", "empty", "self", "json"]))
            if shape == "self":
                parts.append(opener + "/>")
            else:
                parts.append(opener + ">" + draw(ASCII_PAD))
                if shape == "json":
                    args = draw(st.dictionaries(PLAIN, JSON_VALUE, max_size=3))
                    body = json.dumps(args, ensure_ascii=draw(st.booleans()))
                    assume(_free_of(markers)(body))
                    parts.append(draw(ASCII_PAD) + body + draw(ASCII_PAD))
                elif shape == "params":
                    for key in draw(st.lists(NAME, unique=True, max_size=3)):
                        flag = draw(st.sampled_from(["true", "false"]))
                        if flag == "true":
                            value: Any = draw(content)
                            body = value
                        else:
                            value = draw(JSON_VALUE)
                            body = draw(ASCII_PAD) + json.dumps(value) + draw(ASCII_PAD)
                        args[key] = value
                        parts.append(f'{dialect.tag("parameter")}{draw(ATTR_WS)}name="{key}"'
                                     f'{draw(ATTR_WS)}string="{flag}"{draw(GT_WS)}>{body}'
                                     f'{dialect.tag("parameter", True)}>{draw(ASCII_PAD)}')
                parts.append(dialect.tag("invoke", True) + ">")
            if not bare:
                parts.append(draw(ASCII_PAD))
            calls.append((name, args))
        if not bare:
            parts.append(dialect.tag(word, True) + draw(GT_WS) + ">")
    tail = draw(content.filter(lambda t: ends_clean(t, family)))
    parts.append(tail)
    visible.append(tail)
    return Doc("".join(parts), "".join(visible), calls)


def _before_opener(draw: Any, content: Any, separator: str, parts: list[str],
                   visible: list[str]) -> None:
    """Text before an opener, maybe with the separator; exactly one separator right before the
    opener is removed from the visible text (decision 1.8), wherever it came from."""
    before = draw(content) + (separator if separator and draw(st.booleans()) else "")
    parts.append(before)
    cut = bool(separator) and before.endswith(separator)
    visible.append(before[: -len(separator)] if cut else before)


@st.composite
def v3_docs(draw: Any, family: str = "deepseek-v3") -> Doc:
    markers = LEAK_MARKERS[family]
    content = RAW_VALUE.filter(_free_of(markers))
    parts: list[str] = []
    visible: list[str] = []
    calls: list[tuple[str, dict[str, Any]]] = []
    for _ in range(draw(st.integers(0, 3))):
        _before_opener(draw, content, "", parts, visible)
        bare = draw(st.booleans()) and draw(st.booleans())
        if not bare:
            parts.append(deepseek_v3.CALLS_BEGIN + draw(ASCII_PAD))
        for _ in range(draw(st.integers(1, 3))):
            name = draw(NAME)
            args = draw(st.dictionaries(PLAIN, JSON_VALUE, max_size=3).filter(
                lambda a: _free_of(markers)(json.dumps(a, ensure_ascii=False))))
            body = json.dumps(args, ensure_ascii=draw(st.booleans()), indent=draw(
                st.sampled_from([None, 2])))
            if family == "deepseek-v3":
                fence = draw(st.sampled_from(["```json\n", "```json", ""]))
                close = "\n```" if fence else draw(ASCII_PAD)
                parts.append(f"{deepseek_v3.CALL_BEGIN}function{deepseek_v3.SEP}{name}\n{fence}"
                             f"{body}{close}{deepseek_v3.CALL_END}")
            else:
                parts.append(f"{deepseek_v3.CALL_BEGIN}{name}{deepseek_v3.SEP}{draw(ASCII_PAD)}"
                             f"{body}{draw(ASCII_PAD)}{deepseek_v3.CALL_END}")
            if not bare:
                parts.append(draw(ASCII_PAD))
            calls.append((name, args))
        if not bare:
            parts.append(deepseek_v3.CALLS_END)
    tail = draw(content.filter(lambda t: ends_clean(t, family)))
    parts.append(tail)
    visible.append(tail)
    return Doc("".join(parts), "".join(visible), calls)


@st.composite
def hermes_docs(draw: Any) -> Doc:
    markers = LEAK_MARKERS["hermes"]
    content = RAW_VALUE.filter(_free_of(markers))
    parts: list[str] = []
    visible: list[str] = []
    calls: list[tuple[str, dict[str, Any]]] = []
    for _ in range(draw(st.integers(0, 3))):
        _before_opener(draw, content, "\n", parts, visible)
        name = draw(NAME)
        # string values may hold </tool_call>: it does not end the call inside a JSON string
        args = draw(st.dictionaries(PLAIN, st.one_of(JSON_VALUE, RAW_VALUE), max_size=3))
        key = draw(st.sampled_from(["arguments", "parameters"]))
        obj = {"name": name, key: args} if draw(st.booleans()) else {key: args, "name": name}
        parts.append(f"<tool_call>{draw(ASCII_PAD)}{json.dumps(obj, ensure_ascii=False)}"
                     f"{draw(ASCII_PAD)}</tool_call>")
        calls.append((name, args))
    tail = draw(content.filter(lambda t: ends_clean(t, "hermes")))
    parts.append(tail)
    visible.append(tail)
    return Doc("".join(parts), "".join(visible), calls)


QWEN_RESERVED = ("</parameter>", "<parameter=", "</function>")
QWEN_VALUE = RAW_VALUE.filter(_free_of(QWEN_RESERVED))
QWEN_TOOLS = [{"type": "function", "function": {"name": "typed", "parameters": {
    "type": "object", "properties": {"n": {"type": "integer"}, "o": {"type": "object"},
                                     "s": {"type": "string"}, "b": {"type": "boolean"}}}}}]


@st.composite
def qwen_docs(draw: Any, typed: bool = False) -> Doc:
    """Qwen3-Coder documents; ``typed`` uses QWEN_TOOLS and its schema-typed parameters."""
    markers = LEAK_MARKERS["qwen3-coder"]
    content = RAW_VALUE.filter(_free_of(markers))
    parts: list[str] = []
    visible: list[str] = []
    calls: list[tuple[str, dict[str, Any]]] = []
    first = True
    for _ in range(draw(st.integers(0, 3))):
        _before_opener(draw, content, "\n\n" if first else "\n", parts, visible)
        first = False
        bare = draw(st.booleans()) and draw(st.booleans())
        if not bare:
            parts.append("<tool_call>" + draw(ASCII_PAD))
        name = "typed" if typed else draw(NAME)
        parts.append(f"<function={name}>{draw(ASCII_PAD)}")
        args: dict[str, Any] = {}
        keys = draw(st.lists(st.sampled_from(["n", "o", "s", "b", "x"]) if typed else NAME,
                             unique=True, max_size=3))
        for key in keys:
            if typed and key in ("n", "o", "b"):
                value: Any = draw({"n": st.integers(-1000, 1000), "b": st.booleans(),
                                   "o": st.dictionaries(PLAIN, JSON_SCALAR, max_size=2)}[key])
                if draw(st.booleans()):
                    value = None
                body = json.dumps(value)
                assume(_free_of(QWEN_RESERVED)(body))
            else:
                value = draw(QWEN_VALUE)
                assume(not typed or value != "null")
                body = value
                if typed and draw(st.booleans()):
                    value, body = None, "null"
            args[key] = value
            # a missing closer ends the value at the next tag, so no padding may follow it
            closer = draw(st.sampled_from(["</parameter>", "</parameter>", ""]))
            pad = draw(ASCII_PAD) if closer else ""
            parts.append(f"<parameter={key}>\n{body}\n{closer}{pad}")
        parts.append("</function>")
        if not bare:
            parts.append(draw(ASCII_PAD) + "</tool_call>")
        calls.append((name, args))
    tail = draw(content.filter(lambda t: ends_clean(t, "qwen3-coder")))
    parts.append(tail)
    visible.append(tail)
    return Doc("".join(parts), "".join(visible), calls)


#: Families whose answer framing (whitespace at stream start) is markup (decision 2.2).
FRAMED = ("kimi-k2", "harmony", "glm45", "glm47", "minimax-m2")
ASCII_WS = " \t\n\r\x0b\x0c"


def framed(first: str, visible: list[str]) -> str:
    """The visible text of a framed family: the whitespace at stream start is markup (decision 2.2), up
    to the first other character; ``first`` is the visible text the stream starts with."""
    return "".join(visible)[len(first) - len(first.lstrip(ASCII_WS)):]


from support.toolcalls_json import JSON_DOCS, JSON_SOUP  # noqa: E402 - uses the above
from support.toolcalls_jsoncalls import PART3_DOCS, PART3_SOUP  # noqa: E402 - uses the above
from support.toolcalls_markup2 import MARKUP2_DOCS, MARKUP2_SOUP  # noqa: E402 - uses the above
from support.toolcalls_python import PY_DOCS, PY_SOUP  # noqa: E402 - uses the above
from support.toolcalls_xml import XML_DOCS, XML_LEAK_MARKERS, XML_SOUP  # noqa: E402

LEAK_MARKERS.update(XML_LEAK_MARKERS)
# every family's markers but the Gemma delimiters auto does not look for (NOT_AUTO, above)
LEAK_MARKERS["auto"] = tuple(sorted({m for f, ms in LEAK_MARKERS.items() if f != "auto" for m in ms}
                                    - set(NOT_AUTO)))

DOCS = {
    "dsml-v32": dsml_docs("dsml-v32"), "dsml-v4": dsml_docs("dsml-v4"),
    "dsml-v41": dsml_docs("dsml-v41"), "deepseek-v3": v3_docs("deepseek-v3"),
    "deepseek-v31": v3_docs("deepseek-v31"), "hermes": hermes_docs(), "qwen3-coder": qwen_docs(),
    **JSON_DOCS, **MARKUP2_DOCS, **PART3_DOCS, **PY_DOCS, **XML_DOCS,
}
assert set(DOCS) == set(FAMILIES) - {"auto"}

#: Soup for the fuzz test: pieces of every family's markup, whitespace and random characters.
SOUP_PIECES = st.sampled_from([
    "<", ">", "/", "\n", "\n\n", " ", '"', "=", "｜", "DSML", "<｜DSML｜", "</｜DSML｜", "<｜DSML｜ ",
    "function_calls>", "tool_calls>", " calls>", "invoke", " invoke", "parameter", " parameter",
    ' name="f"', ' string="true"', ' string="false"', ' string="maybe"', "/>", ">", "{}",
    '{"a": 1}', "[1,", "NaN", "x", "é", "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>",
    "<｜tool▁sep｜>", "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>", "function", "```json", "```",
    "<tool_call>", "</tool_call>", "<function=f>", "</function>", "<parameter=p>", "</parameter>",
    '{"name": "f", "arguments": {}}', "<think>", "</think>", "\\", "null", *JSON_SOUP,
    *MARKUP2_SOUP, *PART3_SOUP, *PY_SOUP, *XML_SOUP,
])
SOUP = st.lists(st.one_of(SOUP_PIECES, PLAIN), max_size=40).map("".join)
