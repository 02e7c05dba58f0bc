"""Hypothesis strategies for the families of docs/design/markup.md classes A, A′, B and B′ (calls written as
JSON objects after markers): valid documents with the text, reasoning and calls a correct parser must find.

The markers are written out here (the spec's, docs/design/markup.md §3.1), never taken from the parsers, and
added to ``support.toolcalls.LEAK_MARKERS``. Argument strings may hold any marker: inside a JSON string a
marker is string text.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

import support.toolcalls as base
from support.toolcalls_json import JSON_ARGS

#: Markers that must never come out as text, per family (docs/design/markup.md §3.1).
PART3_LEAKS: dict[str, tuple[str, ...]] = {
    "llama3-json": ("<|python_tag|>",),
    "granite": ("<|tool_call|>", "<tool_call>"),
    "granite-20b-fc": ("<function_call>",),
    "internlm": ("<|plugin|>",),
    "jamba": ("<tool_calls>", "</tool_calls>"),
    "hunyuan-a13b": ("<tool_calls>", "</tool_calls>"),
    "minimax-m1": ("<tool_calls>", "</tool_calls>"),
    "phi4-mini": ("functools[",),
    "xlam": ("<tool_call>", "</tool_call>", "[TOOL_CALLS]"),
    "apertus": ("<|tools_prefix|>", "<|tools_suffix|>"),
    "cohere-command": ("<|START_ACTION|>", "<|END_ACTION|>"),
    "gigachat3": ("<|function_call|>", "function call<|role_sep|>"),
    "longcat": ("<longcat_tool_call>", "</longcat_tool_call>"),
    "ernie45": ("<tool_call>", "</tool_call>"),
    "inkling": ("<|content_invoke_tool_json|>", "<|end_message|>", "<|content_model_end_sampling|>"),
}
#: Every literal each family reads (leak markers, framing, soft openers): visible text avoids them.
LITERALS: dict[str, tuple[str, ...]] = {
    **PART3_LEAKS,
    "llama3-json": ("<|python_tag|>", "<|eom_id|>", "<|eot_id|>", "<|end_of_text|>"),
    "internlm": ("<|action_start|>", "<|plugin|>", "<|action_end|>"),
    "xlam": ("<tool_call>", "</tool_call>", "[TOOL_CALLS]", "```"),
    "cohere-command": ("<|START_ACTION|>", "<|END_ACTION|>", "<|START_RESPONSE|>",
                       "<|END_RESPONSE|>", "<|START_TEXT|>", "<|END_TEXT|>"),
    "gigachat3": ("<|function_call|>", "function call<|role_sep|>", "<|message_sep|>", "</s>"),
    "inkling": ("<|message_model|>", "<|content_invoke_tool_json|>", "<|content_text|>",
                "<|content_thinking|>", "<|end_message|>", "<|content_model_end_sampling|>"),
    "ernie45": ("<tool_call>", "</tool_call>", "<response>", "</response>"),
}
base.LEAK_MARKERS.update(PART3_LEAKS)
base.LEAK_MARKERS["auto"] = tuple(sorted({m for k, ms in base.LEAK_MARKERS.items() if k != "auto"
                                          for m in ms} - set(base.NOT_AUTO)))

Call = tuple[str, dict[str, Any]]
#: Families whose calls may stand unmarked at the answer's start, which ``auto`` never claims.
BARE_START = ("llama3-json", "xlam")
#: Families ``auto`` never claims: every marker of xLAM is another family's.
AUTO_NEVER = ("xlam",)


def _obj(draw: Any, name: str, args: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """``{"name", KEY}`` in either order, ``KEY`` one of ``keys``."""
    key = draw(st.sampled_from(keys))
    return {"name": name, key: args} if draw(st.booleans()) else {key: args, "name": name}


def _dumps(draw: Any, obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=draw(st.booleans()), indent=draw(st.sampled_from([None, 1])))


@dataclass(frozen=True)
class Grammar:
    """How a family writes one block of calls: ``block(draw, calls)``; ``calls_per_block`` the most
    calls in one; ``separator`` what the template writes before an opener (not text);
    ``bare_start``: the first block may stand unmarked at the answer's start; ``after``: text right
    after a block must not start (after whitespace) with one of these; ``ws_between``: whitespace
    alone between two blocks is markup."""

    block: Callable[[Any, list[Call]], str]
    calls_per_block: int = 3
    separator: str = ""
    bare_start: Callable[[Any, list[Call]], str] | None = None
    after: tuple[str, ...] = ()
    ws_between: bool = False


def _array(opener: str, closer: str, shape: str = "name",
           pad: bool = True) -> Callable[[Any, list[Call]], str]:
    def block(draw: Any, calls: list[Call]) -> str:
        elems = []
        for name, args in calls:
            if shape == "key":
                obj: Any = {name: args}
            elif shape == "cohere":
                obj = {"tool_call_id": str(len(elems)), "tool_name": name, "parameters": args}
            else:
                obj = _obj(draw, name, args, ("arguments", "parameters"))
            elems.append(draw(base.ASCII_PAD) + _dumps(draw, obj) + draw(base.ASCII_PAD))
        gap = draw(base.ASCII_PAD) if pad else ""
        end = draw(base.ASCII_PAD) if closer else ""
        return f"{opener}{gap}[{','.join(elems)}]{end}{closer}"
    return block


def _lines(draw: Any, calls: list[Call]) -> str:
    body = "\n".join(_dumps(draw, _obj(draw, n, a, ("arguments",))).replace("\n", " ")
                     for n, a in calls)
    return f"<tool_calls>\n{body}\n</tool_calls>"


def _llama_objects(draw: Any, calls: list[Call]) -> str:
    return ";".join(draw(st.sampled_from(["", " ", "\n"])) + _dumps(draw, _obj(
        draw, n, a, ("parameters", "arguments"))) for n, a in calls)


def _llama(draw: Any, calls: list[Call]) -> str:
    return "<|python_tag|>" + _llama_objects(draw, calls)


def _one(openers: tuple[str, ...]) -> Callable[[Any, list[Call]], str]:
    def block(draw: Any, calls: list[Call]) -> str:
        ((name, args),) = calls
        return (draw(st.sampled_from(openers)) + draw(base.ASCII_PAD)
                + _dumps(draw, _obj(draw, name, args, ("arguments",))))
    return block


def _tags(opener: str, closer: str, keys: tuple[str, ...]) -> Callable[[Any, list[Call]], str]:
    def block(draw: Any, calls: list[Call]) -> str:
        ((name, args),) = calls
        return (opener + draw(base.ASCII_PAD) + _dumps(draw, _obj(draw, name, args, keys))
                + draw(base.ASCII_PAD) + closer)
    return block


def _xlam(draw: Any, calls: list[Call]) -> str:
    opener, closer = draw(st.sampled_from([("<tool_call>", "</tool_call>"), ("[TOOL_CALLS]", ""),
                                           ("```json\n", "\n```"), ("```", "```")]))
    return _array(opener, closer)(draw, calls)


GRAMMARS: dict[str, Grammar] = {
    "llama3-json": Grammar(_llama, bare_start=lambda d, c: _llama_objects(d, c), after=(";", "{")),
    "granite": Grammar(lambda d, c: _array(d(st.sampled_from(["<|tool_call|>", "<tool_call>"])),
                                           "")(d, c)),
    "granite-20b-fc": Grammar(_one(("<function_call>",)), 1, ws_between=True),
    "internlm": Grammar(lambda d, c: _tags(
        "<|action_start|>" + d(st.sampled_from(["", " ", "\n"])) + "<|plugin|>", "<|action_end|>",
        ("parameters", "arguments"))(d, c), 1),
    "jamba": Grammar(_array("<tool_calls>", "</tool_calls>")),
    "hunyuan-a13b": Grammar(_array("<tool_calls>", "</tool_calls>")),
    "minimax-m1": Grammar(_lines),
    "phi4-mini": Grammar(_array("functools", "", pad=False)),
    "xlam": Grammar(_xlam, bare_start=_array("", "")),
    "apertus": Grammar(_array("<|tools_prefix|>", "<|tools_suffix|>", "key")),
    "cohere-command": Grammar(_array("<|START_ACTION|>", "<|END_ACTION|>", "cohere")),
    "gigachat3": Grammar(_one(("<|function_call|>", "function call<|role_sep|>\n")), 1,
                         ws_between=True),
    "longcat": Grammar(_tags("<longcat_tool_call>", "</longcat_tool_call>",
                             ("arguments", "parameters")), 1),
    "ernie45": Grammar(_tags("<tool_call>", "</tool_call>", ("arguments", "parameters")), 1,
                       separator="\n"),
    "inkling": Grammar(lambda d, c: _tags(
        "<|message_model|><|content_invoke_tool_json|>",
        d(st.sampled_from(["<|end_message|>", "<|content_model_end_sampling|>"])),
        ("args", "arguments", "parameters"))(d, c), 1),
}


def _clean(family: str) -> Callable[[str], bool]:
    """Visible text that holds no literal of the family and ends in no start of one (which the
    next marker would complete into something else)."""
    lits = LITERALS[family]
    leads = {lit[0] for lit in lits} | {"`"} if family == "xlam" else {lit[0] for lit in lits}

    def ok(text: str) -> bool:
        if any(lit in text for lit in lits):
            return False
        return not any(text.endswith(lit[:k]) for lit in lits for k in range(1, len(lit))) and \
            text[-1:] not in leads
    return ok


@st.composite
def part3_docs(draw: Any, family: str) -> base.Doc:
    """Text and blocks of ``family``, every call in its JSON, random whitespace where the grammar
    allows it; Inkling adds text and thinking messages."""
    g = GRAMMARS[family]
    content = base.RAW_VALUE.filter(_clean(family))
    parts: list[str] = []
    visible: list[str] = []
    reasoning: list[str] = []
    calls: list[Call] = []
    blocks = draw(st.integers(0, 3))
    for k in range(blocks):
        if k == 0 and g.bare_start is not None and draw(st.booleans()):
            batch = [(draw(base.NAME), draw(JSON_ARGS)) for _ in range(draw(st.integers(
                1, g.calls_per_block)))]
            parts.append(draw(base.ASCII_PAD) + g.bare_start(draw, batch))  # whitespace: markup
            calls.extend(batch)
            continue
        before = draw(content)
        if k == 0 and g.bare_start is not None:
            before = draw(content.filter(lambda t: t.lstrip()[:1] not in ("{", "[")))
        if k > 0 and g.after:
            before = draw(content.filter(lambda t: t.lstrip()[:1] not in g.after))
        if k > 0 and g.ws_between and before and not before.strip():
            before = ""  # whitespace alone between two calls is markup
        if family == "inkling" and draw(st.booleans()):
            kind = draw(st.sampled_from(["<|content_text|>", "<|content_thinking|>"]))
            body = draw(content)
            parts.append(before + "<|message_model|>" + kind + body + "<|end_message|>")
            visible.append(before)
            (visible if kind == "<|content_text|>" else reasoning).append(body)
            before = ""
        before += g.separator if g.separator and draw(st.booleans()) else ""
        parts.append(before)
        # exactly one separator right before the opener is not text, wherever it came from
        cut = bool(g.separator) and before.endswith(g.separator)
        visible.append(before[:-len(g.separator)] if cut else before)
        batch = [(draw(base.NAME), draw(JSON_ARGS)) for _ in range(draw(st.integers(
            1, g.calls_per_block)))]
        parts.append(g.block(draw, batch))
        calls.extend(batch)
    tail = draw(content.filter(lambda t: not (blocks and g.after and t.lstrip()[:1] in g.after)))
    if blocks and g.ws_between and tail and not tail.strip():
        tail = ""
    if not blocks and g.bare_start is not None and tail.lstrip()[:1] in ("{", "["):
        tail = ""
    parts.append(tail)
    visible.append(tail)
    return base.Doc("".join(parts), "".join(visible), calls, "".join(reasoning))


PART3_DOCS = {family: part3_docs(family) for family in GRAMMARS}
#: Pieces of these families' markup for the fuzz soup.
PART3_SOUP = [
    "<|python_tag|>", ";", "<|eom_id|>", "<|tool_call|>", "[", "]", ",", "[{", "}]",
    "<function_call>", "<|action_start|>", "<|plugin|>", "<|action_end|>", "<|interpreter|>",
    "<tool_calls>", "</tool_calls>", "functools", "functools[", "[TOOL_CALLS]", "```json", "```",
    "<|tools_prefix|>", "<|tools_suffix|>", '{"f": {}}', "<|START_ACTION|>", "<|END_ACTION|>",
    '{"tool_call_id": "0", "tool_name": "f", "parameters": {}}', "<|START_RESPONSE|>",
    "function call<|role_sep|>", "<|function_call|>", "</s>", "<longcat_tool_call>",
    "</longcat_tool_call>", "<|message_model|>", "<|content_invoke_tool_json|>", "<|content_text|>",
    "<|content_thinking|>", "<|end_message|>", '{"name": "f", "args": {}}',
    '{"name": "f", "parameters": {"a": [1, "}"]}}', "1", '"s"', "true",
]
