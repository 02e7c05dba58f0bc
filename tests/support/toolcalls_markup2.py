"""Hypothesis strategies for the GLM and MiniMax-M2 families (docs/design/markup.md §2): valid documents with
the text and calls a correct parser must find, with or without the tools whose schemas type the values.

The expected values are computed here from what the strategy chose (a JSON value it serialized, or a
raw string it checked is no JSON), never by the parser's own typing code.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import assume
from hypothesis import strategies as st

import support.toolcalls as base

GLM_RESERVED = ("</arg_value>", "</tool_call>")  # the only text that may not stand in a GLM value
MINIMAX_RESERVED = ("</parameter>", "</invoke>", "</minimax:tool_call>")
THINK = ("<think>", "</think>")
TRICKY = st.one_of(base.TRICKY, st.sampled_from([
    "<arg_key>", "</arg_key>", "<arg_value>", "<minimax:tool_call>", '<parameter name="p">',
    "<invoke", "</invok", "null", " null", "nul", "1", " 2 ", "[", "true"]))
VALUE = st.lists(st.one_of(base.PLAIN, TRICKY), max_size=6).map("".join)
PAD = st.text(st.sampled_from(" \t\n\r"), max_size=3)
NAME_PAD = st.sampled_from(["", " ", "\t", "  "])


def _not_json(text: str) -> bool:
    try:
        json.loads(text.strip(" \t\n\r\x0b\x0c"))
    except ValueError:
        return True
    return False


GLM_TOOLS = [{"type": "function", "function": {"name": "typed", "parameters": {
    "type": "object", "properties": {
        "s": {"type": "string"}, "n": {"type": "integer"}, "b": {"type": "boolean"},
        "o": {"type": "object"}, "u": {"anyOf": [{"type": "string"}, {"type": "integer"},
                                               {"type": "null"}]}}}}}]
MINIMAX_TOOLS = GLM_TOOLS


def _value(draw: Any, key: str, family: str, typed: bool) -> tuple[str, Any]:
    """(text written between the value tags, the value a parser must find)."""
    body, value = _typed_value(draw, key, family, typed)
    assume(base._free_of(MINIMAX_RESERVED if family == "minimax-m2" else GLM_RESERVED)(body))
    return body, value


def _typed_value(draw: Any, key: str, family: str, typed: bool) -> tuple[str, Any]:
    glm = family != "minimax-m2"
    raw = VALUE.filter(base._free_of(GLM_RESERVED if glm else MINIMAX_RESERVED))
    kind = key if typed else None
    if kind in ("n", "b", "o"):
        value: Any = draw({"n": st.integers(-1000, 1000), "b": st.booleans(),
                           "o": st.dictionaries(base.PLAIN, base.JSON_SCALAR, max_size=2)}[kind])
        return draw(PAD) + json.dumps(value) + draw(PAD), value
    if kind == "s":  # the raw string, byte-exact; MiniMax: exactly "null" is null
        text = draw(raw)
        return text, None if (not glm and text == "null") else text
    if kind == "u":  # null, an integer, or else the raw string
        choice = draw(st.sampled_from(["null", "int", "str"]))
        if choice == "null":
            return draw(PAD) + "null" + draw(PAD) if glm else "null", None
        if choice == "int":
            n = draw(st.integers(-99, 99))
            return draw(PAD) + str(n) + draw(PAD), n
        text = draw(raw.filter(_not_json))
        return text, text
    # untyped: GLM takes strict JSON if it parses, else the raw string; MiniMax the raw string,
    # except exactly "null"
    if glm:
        if draw(st.booleans()):
            value = draw(base.JSON_VALUE)
            return draw(PAD) + json.dumps(value, ensure_ascii=draw(st.booleans())) + draw(PAD), value
        text = draw(raw.filter(_not_json))
        return text, text
    text = draw(raw)
    return text, None if text == "null" else text


@st.composite
def glm_docs(draw: Any, family: str = "glm45", typed: bool = False) -> base.Doc:
    """GLM documents; glm45 writes a newline after the name and before each call, glm47 neither."""
    content = base.RAW_VALUE.filter(base._free_of(base.LEAK_MARKERS[family] + THINK))
    spaced = family == "glm45"
    parts: list[str] = []
    visible: list[str] = []
    calls: list[tuple[str, dict[str, Any]]] = []
    for _ in range(draw(st.integers(0, 3))):
        base._before_opener(draw, content, "\n" if spaced else "", parts, visible)
        name = "typed" if typed else draw(base.NAME)
        parts.append(f"<tool_call>{draw(NAME_PAD)}{name}{draw(NAME_PAD)}" + ("\n" if spaced else ""))
        args: dict[str, Any] = {}
        keys = draw(st.lists(st.sampled_from(["n", "b", "o", "s", "u", "x"]) if typed
                             else base.NAME, unique=True, max_size=3))
        for key in keys:
            body, args[key] = _value(draw, key, family, typed)
            gap = draw(PAD) if spaced else ""
            parts.append(f"<arg_key>{draw(NAME_PAD)}{key}{draw(NAME_PAD)}</arg_key>{gap}"
                         f"<arg_value>{body}</arg_value>{draw(PAD) if spaced else ''}")
        parts.append("</tool_call>")
        calls.append((name, args))
    tail = draw(content.filter(lambda t: base.ends_clean(t, family)))
    parts.append(tail)
    visible.append(tail)
    return base.Doc("".join(parts), base.framed(visible[0], visible), calls)


@st.composite
def minimax_docs(draw: Any, typed: bool = False) -> base.Doc:
    """MiniMax-M2 documents: blocks of invokes, with text (plain invoke tags included) around."""
    content = base.RAW_VALUE.filter(base._free_of(base.LEAK_MARKERS["minimax-m2"] + THINK))
    parts: list[str] = []
    visible: list[str] = []
    calls: list[tuple[str, dict[str, Any]]] = []
    for _ in range(draw(st.integers(0, 3))):
        base._before_opener(draw, content, "\n", parts, visible)
        parts.append("<minimax:tool_call>" + draw(PAD))
        for _ in range(draw(st.integers(0, 3))):
            name = "typed" if typed else draw(base.NAME)
            parts.append(f"<invoke{draw(base.ATTR_WS)}name=\"{name}\"{draw(base.GT_WS)}>"
                         + draw(PAD))
            args: dict[str, Any] = {}
            keys = draw(st.lists(st.sampled_from(["n", "b", "o", "s", "u", "x"]) if typed
                                 else base.NAME, unique=True, max_size=3))
            for key in keys:
                body, args[key] = _value(draw, key, "minimax-m2", typed)
                parts.append(f"<parameter{draw(base.ATTR_WS)}name=\"{key}\"{draw(base.GT_WS)}>"
                             f"{body}</parameter>{draw(PAD)}")
            parts.append("</invoke>" + draw(PAD))
            calls.append((name, args))
        parts.append("</minimax:tool_call>")
    tail = draw(content.filter(lambda t: base.ends_clean(t, "minimax-m2")))
    parts.append(tail)
    visible.append(tail)
    return base.Doc("".join(parts), base.framed(visible[0], visible), calls)


MARKUP2_DOCS = {"glm45": glm_docs("glm45"), "glm47": glm_docs("glm47"),
                "minimax-m2": minimax_docs()}
#: Pieces of GLM and MiniMax markup for the fuzz soup of every family.
MARKUP2_SOUP = ["<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>", "k", "<minimax:tool_call>",
                "</minimax:tool_call>", '<invoke name="f">', "</invoke>", '<parameter name="p">',
                "<invoke", "<parameter", "<tool_call>f\n", "<tool_call>f"]
