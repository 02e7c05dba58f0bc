"""Hypothesis strategies for the families of docs/design/markup.md classes C, D and E: valid documents with
the text and calls a correct parser must find, the soup pieces of their markup, and canned streams for the
interleaving test.

Python literals are written here with this module's own writer (``py_text``), never with the
product's renderer: every string in one of several quotings, numbers with and without signs, both
spellings of the constants, tuples for lists.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

import support.toolcalls as base

IDENT = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)
CALL_NAME = st.one_of(IDENT, st.builds(lambda a, b: f"{a}.{b}", IDENT, IDENT))
PY_WS = st.sampled_from(["", " ", "  ", "\n", " \n  "])


def _quoted(draw: Any, s: str) -> str:
    """A Python string literal for ``s``, in one of the quotings a model may write."""
    style = draw(st.sampled_from(["repr", "repr", "double", "triple", "json"]))
    if style == "double":
        body = s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace(
            "\r", "\\r")
        return '"' + body + '"'
    if style == "triple" and "'''" not in s and not s.endswith("'") and "\\" not in s \
            and "\r" not in s:
        return "'''" + s + "'''"
    if style == "json":
        return json.dumps(s, ensure_ascii=False)  # JSON string syntax is Python's too
    return repr(s)


def py_text(draw: Any, value: Any) -> str:
    """``value`` (a JSON value) as Python literal text, drawn among the spellings models use."""
    if value is None:
        return draw(st.sampled_from(["None", "null"]))
    if isinstance(value, bool):
        return draw(st.sampled_from(["True", "true"] if value else ["False", "false"]))
    if isinstance(value, int):
        if value < 0 and draw(st.booleans()):
            return "- " + str(-value)
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return _quoted(draw, value)
    ws = draw(PY_WS)
    if isinstance(value, list):
        items = [py_text(draw, v) for v in value]
        if draw(st.booleans()):
            inner = ("," + ws).join(items)
            return "(" + inner + ("," if len(items) == 1 else "") + ")"
        return "[" + ws + ("," + ws).join(items) + ws + "]"
    pairs = [f"{_quoted(draw, k)}:{draw(PY_WS)}{py_text(draw, v)}" for k, v in value.items()]
    return "{" + ws + ("," + ws).join(pairs) + "}"


PY_STRING = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
PY_VALUE = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20),
              st.floats(allow_nan=False, allow_infinity=False), PY_STRING,
              st.sampled_from(["<|python_end|>", "</function_calls>", "<|tool_call_end|>", ")",
                               "]", "'", '"', "\\", "\n", "é🙂"])),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(PY_STRING, inner, max_size=3)), max_leaves=6)


@st.composite
def py_calls(draw: Any, separator: str) -> tuple[str, list[tuple[str, dict[str, Any]]]]:
    """Calls as Python, joined by ``separator`` (with whitespace drawn around it)."""
    texts: list[str] = []
    calls: list[tuple[str, dict[str, Any]]] = []
    for _ in range(draw(st.integers(1, 3))):
        name = draw(CALL_NAME)
        keys = draw(st.lists(IDENT, unique=True, max_size=3))
        args = {k: draw(PY_VALUE) for k in keys}
        parts = [f"{k}{draw(st.sampled_from(['=', ' = ']))}{py_text(draw, v)}"
                 for k, v in args.items()]
        trailing = "," if parts and draw(st.booleans()) else ""
        texts.append(f"{name}({draw(PY_WS)}{(',' + draw(PY_WS)).join(parts)}{trailing})")
        calls.append((name, args))
    joined = ""
    for i, t in enumerate(texts):
        if i:
            joined += draw(st.sampled_from(["", " "])) + separator + draw(
                st.sampled_from(["", " ", "\n"]))
        joined += t
    return joined, calls


def _content(family: str) -> Any:
    return base.RAW_VALUE.filter(base._free_of(base.LEAK_MARKERS[family]))


@st.composite
def pythonic_docs(draw: Any) -> base.Doc:
    """A call list where the answer starts (bare, or after ``<|python_start|>``), or lists after
    ``<|python_start|>`` anywhere; text around them."""
    content = _content("pythonic")
    parts: list[str] = []
    visible: list[str] = []
    calls: list[tuple[str, dict[str, Any]]] = []
    if draw(st.booleans()):  # the bare list opening the answer
        lead = draw(st.sampled_from(["", " ", "\n"]))
        body, found = draw(py_calls(","))
        parts.append(f"{lead}[{draw(PY_WS)}{body}{draw(PY_WS)}]")
        visible.append(lead)
        calls += found
    else:
        for k in range(draw(st.integers(0, 3))):
            before = draw(content.filter(
                lambda t, k=k: k or not t.lstrip(base.ASCII_WS).startswith(("[", "<|"))))
            parts.append(before)
            visible.append(before)
            body, found = draw(py_calls(","))
            end = draw(st.sampled_from(["<|python_end|>", ""]))
            parts.append(f"<|python_start|>{draw(PY_WS)}[{body}]{end}")
            calls += found
    tail = draw(content.filter(lambda t: base.ends_clean(t, "pythonic")
                               and not (not parts and t.lstrip(base.ASCII_WS).startswith("["))
                               and not t.startswith("<|")))
    parts.append(tail)
    visible.append(tail)
    return base.Doc("".join(parts), "".join(visible), calls)


@st.composite
def block_docs(draw: Any, family: str) -> base.Doc:
    """``olmo3`` blocks (one call per line) or ``lfm2`` blocks (a Python list or a JSON array)."""
    content = _content(family)
    parts: list[str] = []
    visible: list[str] = []
    calls: list[tuple[str, dict[str, Any]]] = []
    for _ in range(draw(st.integers(0, 3))):
        before = draw(content)
        parts.append(before)
        visible.append(before)
        if family == "olmo3":
            body, found = draw(py_calls("\n"))
            parts.append(f"<function_calls>{draw(st.sampled_from(['', chr(10)]))}{body}"
                         f"{draw(st.sampled_from(['', chr(10)]))}</function_calls>")
        elif draw(st.booleans()):
            body, found = draw(py_calls(","))
            parts.append(f"<|tool_call_start|>[{body}]<|tool_call_end|>")
        else:
            found = [(draw(base.NAME), draw(st.dictionaries(base.PLAIN, base.JSON_VALUE,
                                                             max_size=3)))
                     for _ in range(draw(st.integers(1, 2)))]
            array = json.dumps([{"name": n, "arguments": a} for n, a in found],
                               ensure_ascii=draw(st.booleans()))
            parts.append(f"<|tool_call_start|>{array}<|tool_call_end|>")
        calls += found
    tail = draw(content.filter(lambda t: base.ends_clean(t, family)))
    parts.append(tail)
    visible.append(tail)
    return base.Doc("".join(parts), "".join(visible), calls)



# ── class C: mistral, plamo3 ─────────────────────────────────────────────────────────────────────

_P = "<|plamo:{}:plamo|>"
JSON_ARGS = st.dictionaries(base.PLAIN, st.one_of(base.JSON_VALUE, st.sampled_from(
    ["[TOOL_CALLS]", "[ARGS]", "}", "{", "]", _P.format("end_tool_arguments"), '\\"'])),
    max_size=3)


@st.composite
def mistral_docs(draw: Any) -> base.Doc:
    """v11+ calls (with ``[ARGS]`` or a bare ``{``), pre-v11 arrays, ``[THINK]`` reasoning, text
    between and after calls."""
    content = _content("mistral")
    parts: list[str] = []
    visible: list[str] = []
    reasoning = ""
    calls: list[tuple[str, dict[str, Any]]] = []
    if draw(st.booleans()):
        reasoning = draw(content.filter(lambda t: base.ends_clean(t, "mistral")))
        parts.append(f"[THINK]{reasoning}[/THINK]")
    for _ in range(draw(st.integers(0, 3))):
        before = draw(content.filter(lambda t: base.ends_clean(t, "mistral")))
        parts.append(before)
        visible.append(before)
        if draw(st.booleans()) and draw(st.booleans()):
            found = [(draw(base.NAME), draw(JSON_ARGS)) for _ in range(draw(st.integers(0, 2)))]
            parts.append("[TOOL_CALLS]" + draw(PY_WS) + json.dumps(
                [{"name": n, "arguments": a} for n, a in found]))
        else:
            found = []
            for _ in range(draw(st.integers(1, 2))):
                name, args = draw(base.NAME), draw(JSON_ARGS)
                marker = draw(st.sampled_from(["[ARGS]", "[ARGS] ", ""]))
                parts.append(f"[TOOL_CALLS]{name}{marker}{json.dumps(args, ensure_ascii=False)}")
                found.append((name, args))
        calls += found
    tail = draw(content.filter(lambda t: base.ends_clean(t, "mistral")))
    parts.append(tail)
    visible.append(tail)
    return base.Doc("".join(parts), "".join(visible), calls, reasoning)


@st.composite
def plamo3_docs(draw: Any) -> base.Doc:
    """PLaMo 3 requests (wrappers, constrain and msg markers optional), reasoning, text."""
    content = _content("plamo3")
    parts: list[str] = []
    visible: list[str] = []
    reasoning = ""
    calls: list[tuple[str, dict[str, Any]]] = []
    if draw(st.booleans()):
        reasoning = draw(content.filter(lambda t: base.ends_clean(t, "plamo3")))
        parts.append(f"{_P.format('begin_think')}{reasoning}{_P.format('end_think')}")
    for _ in range(draw(st.integers(0, 3))):
        before = draw(content.filter(lambda t: base.ends_clean(t, "plamo3")))
        parts.append(before)
        visible.append(before)
        wrap = draw(st.booleans())
        parts.append(_P.format("begin_tool_requests") if wrap else "")
        for _ in range(draw(st.integers(1, 2))):
            name, args = draw(base.NAME), draw(JSON_ARGS)
            constrain = draw(st.sampled_from(["<|plamo:constrain|>json", ""]))
            parts.append(f"{_P.format('begin_tool_request')}{_P.format('begin_tool_name')}{name}"
                         f"{_P.format('end_tool_name')}{_P.format('begin_tool_arguments')}"
                         f"{constrain}<|plamo:msg|>{draw(base.ASCII_PAD)}"
                         f"{json.dumps(args, ensure_ascii=False)}{draw(base.ASCII_PAD)}"
                         f"{_P.format('end_tool_arguments')}{_P.format('end_tool_request')}")
            calls.append((name, args))
        parts.append(_P.format("end_tool_requests") if wrap else "")
    tail = draw(content.filter(lambda t: base.ends_clean(t, "plamo3")))
    parts.append(tail)
    visible.append(tail)
    return base.Doc("".join(parts), "".join(visible), calls, reasoning)


# ── class E: functiongemma, gemma4 ───────────────────────────────────────────────────────────────


def _is_json(text: str) -> bool:
    try:
        json.loads(text.strip(base.ASCII_WS))
    except ValueError:
        return False
    return True


BARE_WORD = st.from_regex(r"[A-Za-z][A-Za-z _.-]{0,10}", fullmatch=True).map(
    lambda w: w.strip()).filter(lambda w: w and not _is_json(w) and w != "None")


@st.composite
def gemma_value(draw: Any, family: str, depth: int = 0) -> tuple[str, Any]:
    """(text, value) of one Gemma value: delimited strings, bare scalars and words, containers."""
    delim = "<escape>" if family == "functiongemma" else '<|"|>'
    kinds = ["str", "str", "scalar", "word", "none"] + (["list", "dict"] if depth < 2 else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "str":
        text = draw(base.RAW_VALUE.filter(lambda t: delim not in t and not any(
            t.endswith(delim[:k]) for k in range(1, len(delim)))))
        if family == "functiongemma":  # untyped: strict JSON if it parses, else the string
            if draw(st.booleans()):
                value = draw(base.JSON_VALUE)
                return delim + json.dumps(value, ensure_ascii=False) + delim, value
            text = text if not _is_json(text) else text + " x"
        return delim + text + delim, text
    if kind == "scalar":
        value = draw(st.one_of(st.integers(-10**6, 10**6), st.booleans(),
                               st.floats(allow_nan=False, allow_infinity=False)))
        return draw(base.ASCII_PAD) + json.dumps(value) + draw(base.ASCII_PAD), value
    if kind == "word":
        word = draw(BARE_WORD)
        return word, word
    if kind == "none":
        return draw(st.sampled_from(["null", "None"])), None
    if kind == "list":
        items = [draw(gemma_value(family, depth + 1)) for _ in range(draw(st.integers(0, 3)))]
        return "[" + ",".join(t for t, _ in items) + "]", [v for _, v in items]
    keys = draw(st.lists(IDENT, unique=True, max_size=3))
    pairs = [(k, draw(gemma_value(family, depth + 1))) for k in keys]
    return "{" + ",".join(f"{k}:{t}" for k, (t, _) in pairs) + "}", {k: v for k, (_, v) in pairs}


@st.composite
def gemma_docs(draw: Any, family: str) -> base.Doc:
    fg = family == "functiongemma"
    opener, closer = ("<start_function_call>", "<end_function_call>") if fg else (
        "<|tool_call>", "<tool_call|>")
    delim = "<escape>" if fg else '<|"|>'
    content = _content(family)
    parts: list[str] = []
    visible: list[str] = []
    reasoning = ""
    calls: list[tuple[str, dict[str, Any]]] = []
    if not fg and draw(st.booleans()):
        reasoning = draw(content.filter(lambda t: base.ends_clean(t, family)))
        parts.append(f"<|channel>thought{reasoning}<channel|>")
    for _ in range(draw(st.integers(0, 3))):
        before = draw(content.filter(lambda t: base.ends_clean(t, family)))
        parts.append(before)
        visible.append(before)
        name = draw(IDENT)
        keys = draw(st.lists(IDENT, unique=True, max_size=4))
        body: list[str] = []
        args: dict[str, Any] = {}
        for k in keys:
            text, value = draw(gemma_value(family))
            key = f"{delim}{k}{delim}" if not fg and draw(st.booleans()) else k
            sep = "" if (fg and body and body[-1].endswith(delim) and draw(st.booleans())) else ","
            body.append((sep if body else "") + f"{key}:{text}")
            args[k] = value
        parts.append(f"{opener}call:{name}{{{''.join(body)}}}{closer}")
        calls.append((name, args))
    tail = draw(content.filter(lambda t: base.ends_clean(t, family)))
    parts.append(tail)
    visible.append(tail)
    return base.Doc("".join(parts), "".join(visible), calls, reasoning)


PY_DOCS = {"pythonic": pythonic_docs(), "olmo3": block_docs("olmo3"), "lfm2": block_docs("lfm2"),
           "mistral": mistral_docs(), "plamo3": plamo3_docs(),
           "functiongemma": gemma_docs("functiongemma"), "gemma4": gemma_docs("gemma4")}

#: Families whose calls need no marker (a bare list where the answer starts): ``auto`` never takes
#: those for calls, so it agrees with the named parser only where a marker stands.
UNMARKED = frozenset({"pythonic"})

#: Pieces of their markup for the fuzz soup.
PY_SOUP = [
    "<|python_start|>", "<|python_end|>", "[", "]", "f(", "a.b(", ")", "a=", "=", "1", "-2.5e3",
    "'x'", '"y"', "'''", "\\'", "True", "None", "null", "(1,)", "{'k': 1}", "{1, 2}", ",",
    "<function_calls>", "</function_calls>", "<|tool_call_start|>", "<|tool_call_end|>",
    '[{"name": "f", "arguments": {}}]', "b'x'", "x+1",
    "[TOOL_CALLS]", "[ARGS]", "[THINK]", "[/THINK]", "[TOOL_CALLS]f[ARGS]", "[TOOL_CALLS] [",
    _P.format("begin_tool_name"), _P.format("end_tool_name"), _P.format("begin_tool_arguments"),
    "<|plamo:msg|>", _P.format("end_tool_arguments"), _P.format("begin_tool_requests"),
    "<start_function_call>", "call:f{", "<escape>", "<end_function_call>", "<|tool_call>",
    '<|"|>', "<tool_call|>", "<|channel>thought", "<channel|>", "k:", "None",
]

#: Canned streams for the interleaving test.
PY_CANNED = {
    "pythonic": ["[f(a='x < y', b=(1, 2))] then ", "<|python_start|>[g.h(c={'k': None})]"
                 "<|python_end|>"],
    "olmo3": ["<function_calls>f(a=1)\ng(b='''two\nlines''')</function_calls>"],
    "lfm2": ["<|tool_call_start|>[f(a=1)]<|tool_call_end|>",
             '<|tool_call_start|>[{"name": "g", "arguments": {"b": "]"}}]<|tool_call_end|>'],
    "mistral": ['[TOOL_CALLS]f[ARGS]{"a": "[TOOL_CALLS]"}', '[TOOL_CALLS] [{"name": "g", '
                '"arguments": {}}]', "[THINK]hm[/THINK]"],
    "plamo3": [_P.format("begin_tool_name") + "f" + _P.format("end_tool_name")
               + _P.format("begin_tool_arguments") + '<|plamo:msg|>{"a": 1}'
               + _P.format("end_tool_arguments")],
    "functiongemma": ["<start_function_call>call:f{a:<escape>x, y}<escape>b:2}"
                      "<end_function_call>"],
    "gemma4": ['<|tool_call>call:f{a:<|"|>x<|"|>,n:[1,{b:null}]}<tool_call|>'],
}


# ── tables and robustness, shared by the class C, D and E test modules ──────────────────────────

SIZES = (1, 2, 3, 7)


def everyhow(family: str, text: str, tools: list[dict[str, Any]] | None = None,
             seed: int = 0) -> list[base.Event]:
    """The joined events of ``text`` fed whole, checked equal when fed in 1-, 2-, 3- and 7-character
    pieces and in random-size pieces, every run keeping the invariants."""
    import random

    whole = base.run(family, text, tools=tools)
    base.check_invariants(family, whole)
    for size in SIZES:
        split = base.run(family, text, tools=tools, size=size)
        base.check_invariants(family, split)
        assert split.joined == whole.joined, f"{size}-character pieces differ"
    rng = random.Random(seed)
    for _ in range(3):
        cuts = sorted(rng.sample(range(1, max(2, len(text))), min(len(text) - 1, 8))) \
            if len(text) > 1 else []
        split = base.run(family, text, cuts, tools=tools)
        base.check_invariants(family, split)
        assert split.joined == whole.joined, f"pieces cut at {cuts} differ"
    return whole.joined


def outcome(family: str, text: str, tools: list[dict[str, Any]] | None = None,
            ) -> tuple[str, list[tuple[str, Any]], list[tuple[str, int | None]]]:
    """(visible text, completed calls, error kinds with their indexes) of ``text``, fed every way."""
    events = everyhow(family, text, tools)
    return base.text_of(events), base.calls_of(events), base.errors_of(events)


def assert_robust(family: str, text: str) -> None:
    """Any input: no exception, no character lost, no marker in text, every chunking the same, and
    every error carrying the raw text it covered."""
    events = everyhow(family, text)
    for ev in events:
        if isinstance(ev, base.MarkupError) and ev.kind != "undefined_function" and ev.raw:
            assert ev.raw in text
