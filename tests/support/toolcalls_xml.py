"""Hypothesis strategies for the families of docs/design/markup.md classes F, G and H: valid documents with
the text and calls a correct parser must find. Markers are written out here, as the spec spells them,
never taken from the parsers.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import assume
from hypothesis import strategies as st

import support.toolcalls as base
import support.toolcalls_markup2 as m2

#: class F: the Qwen3-Coder body in each family's block (opener, closer).
QWEN_BLOCKS = {"seed-oss": ("<seed:tool_call>", "</seed:tool_call>"),
               "zaya": ("<zyphra_tool_call>", "</zyphra_tool_call>")}

#: class H: the tags of each family (call, call end, key, key end, value, value end, block, block
#: end, name separator, type tag, type end); "" where the family has none.
KV_TAGS = {
    "iquest-q1": ("<iquest_tool_call>", "</iquest_tool_call>", "<arg_key>", "</arg_key>",
                  "<arg_value>", "</arg_value>", "", "", "", "", ""),
    "hunyuan": ("<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>",
                "</arg_value>", "<tool_calls>", "</tool_calls>", "<tool_sep>", "", ""),
    "k2-horizon": ("<ifm|tool_call>", "</ifm|tool_call>", "<ifm|arg_key>", "</ifm|arg_key>",
                   "<ifm|arg_value>", "</ifm|arg_value>", "<ifm|tool_calls>", "</ifm|tool_calls>",
                   "", "<ifm|arg_type>", "</ifm|arg_type>"),
}

#: class G: (block, block end, call wrapper begin/separator/end, invoke element, parameter
#: element, name quotes, untyped values JSON if they parse); "" where the family has none.
INVOKE_TAGS = {
    "dots": ("<dots_function_call>", "</dots_function_call>", "", "", "", "invoke", "parameter",
             '"', False),
    "step3": ("<｜tool_calls_begin｜>", "<｜tool_calls_end｜>", "<｜tool_call_begin｜>", "<｜tool_sep｜>",
              "<｜tool_call_end｜>", "steptml:invoke", "steptml:parameter", '"', True),
    "minicpm5": ("", "", "", "", "", "function", "param", "\"'", False),
}

XML_LEAK_MARKERS: dict[str, tuple[str, ...]] = {
    "muse": ("<atem:function_calls>", "</atem:function_calls>"),
    "minimax-m3": ("]<]minimax[>[",),
    "kimi-k3": ("<|open|>", "<|close|>", "<|sep|>"),
    "gigachat35": ("<｜GCML｜", "</｜GCML｜"),
    "dots": ("<dots_function_call>", "</dots_function_call>"),
    "step3": ("<｜tool_calls_begin｜>", "<｜tool_calls_end｜>", "<｜tool_call_begin｜>",
              "<｜tool_sep｜>", "<｜tool_call_end｜>"),
    "minicpm5": ('<function name="', "<function name='"),
    **{fam: (o, c, "<function=", "</function>", "<parameter=", "</parameter>")
       for fam, (o, c) in QWEN_BLOCKS.items()},
    **{fam: tuple(t for t in tags if t) for fam, tags in KV_TAGS.items()},
}
XML_LEAK_MARKERS["seed-oss"] += ("<seed:think>", "</seed:think>")
XML_LEAK_MARKERS["k2-horizon"] += ("<ifm|think>", "</ifm|think>")
#: Reserved tags that are not the family's own (GLM's think tags): never in generated text.
XML_RESERVED = {fam: ("<think>", "</think>") for fam in ("hunyuan", "iquest-q1", *INVOKE_TAGS)}


def _content(family: str) -> Any:
    """Visible text of a family's documents: none of its markers, no cut marker at its end."""
    return base.RAW_VALUE.filter(base._free_of(XML_LEAK_MARKERS[family]
                                               + XML_RESERVED.get(family, ())))


def _clean_end(text: str, family: str) -> bool:
    return base.ends_clean(text, family) and not any(
        text.endswith(m[:k]) for m in XML_RESERVED.get(family, ()) for k in range(2, len(m)))


@st.composite
def qwen_block_docs(draw: Any, family: str) -> base.Doc:
    """Class F documents: ``qwen3-coder``'s rules (``\\n\\n`` before the first block and ``\\n``
    before later ones removed from the text; one wrapping newline per value), another block."""
    opener, closer = QWEN_BLOCKS[family]
    content = _content(family)
    value_text = base.RAW_VALUE.filter(base._free_of(base.QWEN_RESERVED))
    parts: list[str] = []
    visible: list[str] = []
    calls: list[tuple[str, dict[str, Any]]] = []
    first = True
    for _ in range(draw(st.integers(0, 3))):
        base._before_opener(draw, content, "\n\n" if first else "\n", parts, visible)
        first = False
        # a bare <function=…> is a call too, but to auto it is Qwen3-Coder's: after a block only
        bare = bool(calls) and draw(st.booleans()) and draw(st.booleans())
        if not bare:
            parts.append(opener + draw(base.ASCII_PAD))
        name = draw(base.NAME)
        parts.append(f"<function={name}>{draw(base.ASCII_PAD)}")
        args: dict[str, Any] = {}
        for key in draw(st.lists(base.NAME, unique=True, max_size=3)):
            args[key] = value = draw(value_text)  # no tools: every value a string
            parts.append(f"<parameter={key}>\n{value}\n</parameter>{draw(base.ASCII_PAD)}")
        parts.append("</function>")
        if not bare:
            parts.append(draw(base.ASCII_PAD) + closer)
        calls.append((name, args))
    tail = draw(content.filter(lambda t: _clean_end(t, family)))
    parts.append(tail)
    visible.append(tail)
    return base.Doc("".join(parts), "".join(visible), calls)


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


@st.composite
def kv_docs(draw: Any, family: str) -> base.Doc:
    """Class H documents, untyped (GLM's rule: strict JSON if it parses, else the raw string), text
    verbatim around the calls; calls in a block or bare; K2's type tag on some values."""
    call, call_end, key_t, key_end, val_t, val_end, block, block_end, sep, typ, typ_end = \
        KV_TAGS[family]
    reserved = (val_end, call_end, *((block_end,) if block_end else ()))
    content = _content(family)
    parts: list[str] = []
    visible: list[str] = []
    calls: list[tuple[str, dict[str, Any]]] = []
    for _ in range(draw(st.integers(0, 3))):
        text = draw(content)
        parts.append(text)
        visible.append(text)
        # Hunyuan's template always writes the block (a bare <tool_call> is GLM's to auto)
        in_block = bool(block) and (family == "hunyuan" or draw(st.booleans()))
        if in_block:
            parts.append(block + draw(m2.PAD))
        for _ in range(draw(st.integers(1, 2)) if in_block else 1):
            name = draw(base.NAME)
            name_sep = sep if sep and draw(st.booleans()) else draw(st.sampled_from(["", "\n"]))
            parts.append(f"{call}{draw(m2.NAME_PAD)}{name}{draw(m2.NAME_PAD)}{name_sep}")
            args: dict[str, Any] = {}
            for key in draw(st.lists(base.NAME, unique=True, max_size=3)):
                typed = ""
                if typ and draw(st.booleans()):
                    if draw(st.booleans()):
                        value: Any = draw(m2.VALUE)
                        body = value  # "string": the raw text, whatever it looks like
                    else:  # any other type: strict JSON of that type
                        value = draw(base.JSON_VALUE.filter(lambda v: not isinstance(v, str)))
                        body = draw(m2.PAD) + json.dumps(value, ensure_ascii=False) + draw(m2.PAD)
                    typed = f"{typ}{_type_name(value)}{typ_end}"
                elif draw(st.booleans()):
                    value = draw(base.JSON_VALUE)
                    body = draw(m2.PAD) + json.dumps(value, ensure_ascii=False) + draw(m2.PAD)
                else:
                    value = body = draw(m2.VALUE.filter(m2._not_json))
                assume(base._free_of(reserved)(body))
                args[key] = value
                parts.append(f"{key_t}{draw(m2.NAME_PAD)}{key}{draw(m2.NAME_PAD)}{key_end}"
                             f"{draw(m2.PAD)}{typed}{val_t}{body}{val_end}{draw(m2.PAD)}")
            parts.append(call_end + (draw(m2.PAD) if in_block else ""))
            calls.append((name, args))
        if in_block:
            parts.append(block_end)
    tail = draw(content.filter(lambda t: _clean_end(t, family)))
    parts.append(tail)
    visible.append(tail)
    return base.Doc("".join(parts), "".join(visible), calls)


@st.composite
def invoke_docs(draw: Any, family: str) -> base.Doc:
    """Class G documents, untyped: MiniMax's rule (the raw string) or, for Step-3, GLM's (strict
    JSON if it parses, else the raw string); text verbatim around the blocks."""
    block, block_end, begin, sep, end, invoke, param, quotes, as_json = INVOKE_TAGS[family]
    reserved = (f"</{param}>", f"</{invoke}>", *(t for t in (block_end, end) if t),
                *(("<![CDATA[",) if family == "minicpm5" else ()))
    content = _content(family)
    parts: list[str] = []
    visible: list[str] = []
    calls: list[tuple[str, dict[str, Any]]] = []
    for _ in range(draw(st.integers(0, 3))):
        text = draw(content)
        parts.append(text)
        visible.append(text)
        parts.append(block + (draw(m2.PAD) if block else ""))
        for _ in range(draw(st.integers(0 if block else 1, 2 if block else 1))):
            if begin:
                parts.append(f"{begin}{draw(m2.PAD)}function{draw(m2.PAD)}{sep}{draw(m2.PAD)}")
            name = draw(base.NAME)
            q = draw(st.sampled_from(quotes))
            parts.append(f"<{invoke}{draw(base.ATTR_WS)}name={q}{name}{q}{draw(base.GT_WS)}>"
                         + draw(m2.PAD))
            args: dict[str, Any] = {}
            for key in draw(st.lists(base.NAME, unique=True, max_size=3)):
                if as_json and draw(st.booleans()):
                    value: Any = draw(base.JSON_VALUE)
                    body = draw(m2.PAD) + json.dumps(value, ensure_ascii=False) + draw(m2.PAD)
                elif family == "minicpm5" and draw(st.booleans()):  # a CDATA section: as is
                    value = draw(base.RAW_VALUE.filter(lambda v: "]]>" not in v))
                    body = f"<![CDATA[{value}]]>"
                else:
                    value = body = draw(m2.VALUE.filter(m2._not_json) if as_json else m2.VALUE)
                    assume(body != "null")
                    assume(base._free_of(reserved)(body))
                args[key] = value
                q = draw(st.sampled_from(quotes))
                parts.append(f"<{param}{draw(base.ATTR_WS)}name={q}{key}{q}{draw(base.GT_WS)}>"
                             f"{body}</{param}>{draw(m2.PAD)}")
            parts.append(f"</{invoke}>")
            if end:
                parts.append(draw(m2.PAD) + end)
            parts.append(draw(m2.PAD) if block else "")
            calls.append((name, args))
        parts.append(block_end)
    tail = draw(content.filter(lambda t: _clean_end(t, family)))
    parts.append(tail)
    visible.append(tail)
    return base.Doc("".join(parts), "".join(visible), calls)


def _swap(value: Any) -> Any:
    """``｜DSML｜`` → ``｜GCML｜`` everywhere in a decoded value (keys included)."""
    if isinstance(value, str):
        return value.replace("｜DSML｜", "｜GCML｜")
    if isinstance(value, list):
        return [_swap(v) for v in value]
    if isinstance(value, dict):
        return {_swap(k): _swap(v) for k, v in value.items()}
    return value


def gcml_docs() -> Any:
    """GigaChat 3.5 documents: V4 DSML documents with the marker swapped (the grammar is the same,
    so the swap maps every valid document and its expectations onto valid ones)."""
    # visible text that spells a marker only once its pieces are joined would swap differently in
    # the text and in the joined visible text: such documents are left out
    return base.dsml_docs("dsml-v4").filter(
        lambda d: "DSML" not in d.visible and "GCML" not in d.text).map(lambda d: base.Doc(
        _swap(d.text), _swap(d.visible), [(_swap(n), _swap(a)) for n, a in d.calls],
        _swap(d.reasoning)))


@st.composite
def kimi_k3_docs(draw: Any) -> base.Doc:
    """Kimi K3 documents: think, response and tools channels in any order; string arguments raw,
    others JSON of their named type."""
    xtml = ("<|open|>", "<|close|>", "<|sep|>")
    free = base.RAW_VALUE.filter(base._free_of(xtml)).filter(lambda t: _clean_end(t, "kimi-k3"))
    parts: list[str] = []
    visible: list[str] = []
    reasoning: list[str] = []
    calls: list[tuple[str, dict[str, Any]]] = []
    index = 0
    for channel in draw(st.lists(st.sampled_from(["think", "response", "tools"]), max_size=4)):
        if channel == "think":
            text = draw(free)
            parts.append(f"<|open|>think<|sep|>{text}<|close|>think<|sep|>")
            reasoning.append(text)
        elif channel == "response":
            text = draw(free)
            parts.append(f"<|open|>response<|sep|>{text}<|close|>response<|sep|>")
            visible.append(text)
        else:
            parts.append("<|open|>tools<|sep|>" + draw(m2.PAD))
            for _ in range(draw(st.integers(0, 2))):
                index += 1
                name = draw(base.NAME)
                parts.append(f'<|open|>call tool="{name}" index="{index}"<|sep|>' + draw(m2.PAD))
                args: dict[str, Any] = {}
                for key in draw(st.lists(base.NAME, unique=True, max_size=3)):
                    if draw(st.booleans()):
                        value: Any = draw(free)
                        kind, body = "string", value
                    else:
                        value = draw(base.JSON_VALUE.filter(lambda v: not isinstance(v, str)))
                        kind = _type_name(value)
                        body = draw(m2.PAD) + json.dumps(value, ensure_ascii=False) + draw(m2.PAD)
                    args[key] = value
                    parts.append(f'<|open|>argument key="{key}" type="{kind}"<|sep|>{body}'
                                 f"<|close|>argument<|sep|>{draw(m2.PAD)}")
                parts.append("<|close|>call<|sep|>" + draw(m2.PAD))
                calls.append((name, args))
            parts.append("<|close|>tools<|sep|>")
    return base.Doc("".join(parts), "".join(visible), calls, "".join(reasoning))


M3 = "]<]minimax[>["


@st.composite
def minimax_m3_docs(draw: Any) -> base.Doc:
    """MiniMax-M3 documents: parameters as elements named by their keys, leaves raw strings (the
    untyped rule), some parameters objects of leaves; the token may be followed by whitespace."""
    free = base.RAW_VALUE.filter(lambda t: "]<]" not in t and not t.endswith(("]", "]<")))
    key = st.text(st.sampled_from("abcdefgh_xyz0123"), min_size=1, max_size=6).filter(
        lambda k: k not in ("invoke", "tool_call"))

    def tag(inner: str) -> str:
        return M3 + draw(st.sampled_from(["", "", " ", "\n"])) + inner

    parts: list[str] = []
    visible: list[str] = []
    calls: list[tuple[str, dict[str, Any]]] = []
    for _ in range(draw(st.integers(0, 2))):
        text = draw(free)
        parts.append(text)
        visible.append(text)
        parts.append(tag("<tool_call>") + draw(m2.PAD))
        for _ in range(draw(st.integers(0, 2))):
            name = draw(base.NAME)
            q = draw(st.sampled_from(['"', "'"]))
            parts.append(tag(f"<invoke name={q}{name}{q}>") + draw(m2.PAD))
            args: dict[str, Any] = {}
            for k in draw(st.lists(key, unique=True, max_size=3)):
                if draw(st.booleans()):
                    value: Any = draw(free.filter(lambda v: v != "null"))
                    parts.append(tag(f"<{k}>") + value + tag(f"</{k}>") + draw(m2.PAD))
                else:
                    value = {}
                    parts.append(tag(f"<{k}>") + draw(m2.PAD))
                    for c in draw(st.lists(key, unique=True, min_size=1, max_size=2)):
                        value[c] = draw(free.filter(lambda v: v != "null"))
                        parts.append(tag(f"<{c}>") + value[c] + tag(f"</{c}>") + draw(m2.PAD))
                    parts.append(tag(f"</{k}>") + draw(m2.PAD))
                args[k] = value
            parts.append(tag("</invoke>") + draw(m2.PAD))
            calls.append((name, args))
        parts.append(tag("</tool_call>"))
    tail = draw(free)
    parts.append(tail)
    visible.append(tail)
    return base.Doc("".join(parts), "".join(visible), calls)


@st.composite
def muse_docs(draw: Any) -> base.Doc:
    """Muse documents: ``to=self`` messages (reasoning), answer messages with text and blocks of
    ``atem:`` invokes (raw string values), or bare blocks."""
    tokens = ("<|start|>", "<|message|>", "<|eom|>", "<atem:", "</atem:", "<think>", "</think>")
    free = base.RAW_VALUE.filter(base._free_of(tokens)).filter(
        lambda t: not any(t.endswith(m[:k]) for m in tokens for k in range(2, len(m))))
    value = m2.VALUE.filter(base._free_of(("</atem:parameter>", "</atem:invoke>",
                                           "</atem:function_calls>", "<|eom|>")))
    parts: list[str] = []
    visible: list[str] = []
    reasoning: list[str] = []
    calls: list[tuple[str, dict[str, Any]]] = []
    for kind in draw(st.lists(st.sampled_from(["self", "user", "tool", "bare"]), max_size=3)):
        if kind == "self":
            text = draw(free)
            parts.append(f"<|start|>assistant to=self<|message|>{text}<|eom|>")
            reasoning.append(text)
            continue
        text = draw(free)
        visible.append(text)
        block = ["<atem:function_calls>"]
        for _ in range(draw(st.integers(0, 2))):
            name = draw(base.NAME)
            block.append(f'<atem:invoke name="{name}">')
            args: dict[str, Any] = {}
            for key in draw(st.lists(base.NAME, unique=True, max_size=2)):
                args[key] = v = draw(value)
                assume(v != "null")
                block.append(f'<atem:parameter name="{key}">{v}</atem:parameter>')
            block.append("</atem:invoke>")
            calls.append((name, args))
        block.append("</atem:function_calls>")
        body = text + "".join(block)
        if kind == "user":
            parts.append(f"<|start|>assistant to=user<|message|>{body}<|eom|>")
        elif kind == "tool":
            parts.append(f"<|start|>assistant to=functions.f<|message|>{body}<|eom|>")
        else:
            parts.append(body)
    return base.Doc("".join(parts), "".join(visible), calls, "".join(reasoning))


XML_DOCS = {"gigachat35": gcml_docs(), "kimi-k3": kimi_k3_docs(), "minimax-m3": minimax_m3_docs(),
            "muse": muse_docs(),
            **{fam: invoke_docs(fam) for fam in INVOKE_TAGS},
            **{fam: qwen_block_docs(fam) for fam in QWEN_BLOCKS},
            **{fam: kv_docs(fam) for fam in KV_TAGS}}
#: Pieces of these families' markup for the fuzz soup of every family.
XML_SOUP = ["<seed:tool_call>", "</seed:tool_call>", "<zyphra_tool_call>", "</zyphra_tool_call>",
            "<iquest_tool_call>", "</iquest_tool_call>", "<tool_calls>", "</tool_calls>",
            "<tool_sep>", "<ifm|tool_calls>", "<ifm|tool_call>", "</ifm|tool_call>",
            "</ifm|tool_calls>", "<ifm|arg_key>", "</ifm|arg_key>", "<ifm|arg_value>",
            "</ifm|arg_value>", "<ifm|arg_type>", "string", "integer", "</ifm|arg_type>",
            "<dots_function_call>", "</dots_function_call>", "<｜tool_calls_begin｜>",
            "<｜tool_call_begin｜>function<｜tool_sep｜>", "<｜tool_call_end｜>", "<｜tool_calls_end｜>",
            '<steptml:invoke name="f">', "</steptml:invoke>", '<steptml:parameter name="p">',
            "</steptml:parameter>", '<function name="f">', "<function name='g'>", "</function>",
            '<param name="p">', "</param>", "<![CDATA[", "]]>", "<｜GCML｜tool_calls>",
            '<｜GCML｜invoke name="f">', '<｜GCML｜parameter name="p" string="true">',
            "</｜GCML｜parameter>", "</｜GCML｜invoke>", "</｜GCML｜tool_calls>", "<|open|>",
            "<|close|>", "<|sep|>", "<|open|>tools<|sep|>", '<|open|>call tool="f" index="1"<|sep|>',
            '<|open|>argument key="a" type="string"<|sep|>', "<|close|>argument<|sep|>",
            "<|close|>call<|sep|>", "think<|sep|>", "response<|sep|>", "]<]minimax[>[",
            "]<]minimax[>[<tool_call>", '<invoke name="f">', "<a>", "</a>", "]<]minimax[>[</a>",
            "]<]minimax[>[</invoke>", "]<]minimax[>[</tool_call>", "]", "]<]",
            "<|start|>assistant to=self<|message|>", "<|eom|>", "<atem:function_calls>",
            '<atem:invoke name="f">', '<atem:parameter name="p">', "</atem:parameter>",
            "</atem:invoke>", "</atem:function_calls>"]
