"""Class C of docs/design/markup.md §3: a name, then one JSON object of arguments (``mistral``, ``plamo3``).

Every input and expectation is written out here (the spec's examples, then its decisions); each parse
is also checked fed whole, in 1-, 2-, 3- and 7-character pieces and in random pieces.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import support.toolcalls  # noqa: F401 - loads the support modules in their order
from sseguard.core.toolcalls import Markup, ToolArgsDelta, ToolCallEnd, ToolCallStart, family
from support.toolcalls import reasoning_of
from support.toolcalls_python import assert_robust, everyhow, outcome

P = "<|plamo:{}:plamo|>".format
REQS, REQS_END = P("begin_tool_requests"), P("end_tool_requests")
REQ, REQ_END = P("begin_tool_request"), P("end_tool_request")
NAME, NAME_END = P("begin_tool_name"), P("end_tool_name")
ARGS, ARGS_END = P("begin_tool_arguments"), P("end_tool_arguments")
JSON_MSG = "<|plamo:constrain|>json<|plamo:msg|>"
BAD, MAL, DUP, UNT = "bad_param_json", "malformed_tag", "duplicate_parameter", "unterminated"


def plamo(name: str, body: str, preamble: str = JSON_MSG) -> str:
    return f"{REQ}{NAME}{name}{NAME_END}{ARGS}{preamble}{body}{ARGS_END}{REQ_END}"


TABLE: list[tuple[str, str, str, list[tuple[str, Any]], list[tuple[str, int | None]]]] = [
    # the spec's examples (docs/design/markup.md §3.1 and §3.3)
    ("mistral", '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}', "",
     [("get_weather", {"city": "Paris"})], []),
    ("mistral", '[TOOL_CALLS]a[ARGS]{}[TOOL_CALLS]b[ARGS]{"x": [1, {"y": "}"}]}', "",
     [("a", {}), ("b", {"x": [1, {"y": "}"}]})], []),
    ("mistral", '[TOOL_CALLS] [{"name": "f", "arguments": {"a": 1}}, {"name": "g", '
     '"arguments": {}}]', "", [("f", {"a": 1}), ("g", {})], []),
    ("plamo3", REQS + plamo("get_weather", '{"city": "Tokyo"}') + REQS_END, "",
     [("get_weather", {"city": "Tokyo"})], []),
    # a { right after the name starts the arguments (vLLM mistral L274-284)
    ("mistral", '[TOOL_CALLS]f{"a": 1}', "", [("f", {"a": 1})], []),
    # text before and after calls is visible (vLLM drops what follows the arguments)
    ("mistral", 'Let me check.[TOOL_CALLS]f[ARGS]{"a": "[TOOL_CALLS]"} Done.',
     "Let me check. Done.", [("f", {"a": "[TOOL_CALLS]"})], []),
    ("mistral", '[TOOL_CALLS] [{"name": "f", "arguments": {}}]\nok', "\nok", [("f", {})], []),
    ("plamo3", "Hi" + REQS + plamo("f", "{}") + plamo("g", '{"n": 2}', "<|plamo:msg|>")
     + REQS_END + "bye", "Hibye", [("f", {}), ("g", {"n": 2})], []),
    # errors: each call all or nothing
    ("mistral", "[TOOL_CALLS] [ARGS]{}", "{}", [], [(MAL, None), (MAL, None)]),
    ("mistral", '[TOOL_CALLS]f[ARGS]{"a": 1, "a": 2}[TOOL_CALLS]g{}', "", [("g", {})],
     [(DUP, 0)]),
    ("mistral", '[TOOL_CALLS]f[ARGS]{"a": NaN}', "", [], [(BAD, 0)]),
    ("mistral", '[TOOL_CALLS]f[ARGS]{"a": [TOOL_CALLS]g[ARGS]{}', "", [("g", {})], [(MAL, 0)]),
    ("mistral", '[TOOL_CALLS]f[ARGS]{"a": 1', "", [], [(UNT, 0)]),
    ("mistral", "[TOOL_CALLS]f[AR", "", [], [(UNT, None)]),
    ("mistral", "a [ARGS] b [/THINK] c", "a  b  c", [], [(MAL, None), (MAL, None)]),
    ("mistral", '[TOOL_CALLS] [{"name": "f", "arguments": "{}"}]', "", [], [(BAD, None)]),
    ("plamo3", plamo("f", '{} junk'), "", [], [(BAD, 0)]),
    ("plamo3", plamo("", "{}"), "", [], [(MAL, None)]),
    ("plamo3", f'{NAME}f{NAME_END}{ARGS}<|plamo:msg|>{{"a": "{ARGS_END}"', "", [], [(UNT, 0)]),
    ("plamo3", f"x{ARGS_END}y", "xy", [], [(MAL, None)]),
]


@pytest.mark.parametrize("fam,text,visible,calls,errors", TABLE)
def test_the_table_under_every_chunking(fam: str, text: str, visible: str,
                                        calls: list[tuple[str, Any]],
                                        errors: list[tuple[str, int | None]]) -> None:
    assert outcome(fam, text) == (visible, calls, errors)


@pytest.mark.parametrize("text,reasoning,visible,calls", [
    ('[THINK]Paris? [maybe][/THINK]Sure.[TOOL_CALLS]f{"a": 1}', "Paris? [maybe]", "Sure.",
     [("f", {"a": 1})]),
    ('[THINK]I will call it[TOOL_CALLS]f{"a": 1}', "I will call it", "", [("f", {"a": 1})]),
])
def test_mistral_reasoning_ends_at_its_closer_or_at_a_call(text: str, reasoning: str,
                                                           visible: str,
                                                           calls: list[tuple[str, Any]]) -> None:
    events = everyhow("mistral", text)
    assert reasoning_of(events) == reasoning
    assert outcome("mistral", text)[:2] == (visible, calls)


def test_plamo_reasoning_is_its_think_span() -> None:
    text = f'{P("begin_think")}hmm{P("end_think")}ok{plamo("f", "{}")}'
    assert reasoning_of(everyhow("plamo3", text)) == "hmm"
    assert outcome("plamo3", text) == ("ok", [("f", {})], [])


def test_the_arguments_stream_verbatim_as_they_arrive() -> None:
    parser = family("mistral").make(None)
    assert parser.feed('[TOOL_CALLS]write[ARGS]{"body": "a long') == [
        ToolCallStart(0, "write"), ToolArgsDelta(0, '{"body": "a long')]
    assert parser.feed(" text") == [ToolArgsDelta(0, " text")]
    assert parser.feed('"} after')[:2] == [
        ToolArgsDelta(0, '"}'), ToolCallEnd(0, "write", '{"body": "a long text"}')]


def test_framing_is_markup() -> None:
    events = everyhow("plamo3", f"{REQS}{plamo('f', '{}')}{REQS_END}")
    assert events[0] == Markup(f"{REQS}{REQ}")
    assert events[-1] == Markup(f"{REQ_END}{REQS_END}")


# ── malformed input ──────────────────────────────────────────────────────────────────────────────

VALID = {
    "mistral": '[THINK]t[/THINK]a[TOOL_CALLS]f[ARGS]{"k": ["v", 1]}b[TOOL_CALLS] '
               '[{"name": "g", "arguments": {}}]c',
    "plamo3": "a" + REQS + plamo("f", '{"k": [1]}') + REQS_END + "b",
}


@pytest.mark.parametrize("fam", sorted(VALID))
def test_a_document_cut_at_every_position_is_reported_not_lost(fam: str) -> None:
    text = VALID[fam]
    for k in range(len(text) + 1):
        assert_robust(fam, text[:k])


@pytest.mark.parametrize("fam,a,b", [("mistral", "[TOOL_CALLS]", "[ARGS]"),
                                     ("mistral", "[THINK]", "[/THINK]"),
                                     ("plamo3", NAME, NAME_END), ("plamo3", ARGS, ARGS_END)])
def test_swapped_markers_are_reported_not_shown(fam: str, a: str, b: str) -> None:
    text = VALID[fam]
    assert_robust(fam, text.replace(a, "\0").replace(b, a).replace("\0", b))


JUNK = st.sampled_from(["[", "]", "{", "}", ",", '"', "\\", "\n", "x", "[TOOL_CALLS]", "[ARGS]",
                        "[THINK]", NAME, ARGS_END, "<|plamo:", ":", "1"])


@pytest.mark.parametrize("fam", sorted(VALID))
def test_junk_inside_is_reported_not_shown(fam: str) -> None:
    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(junk=st.lists(st.tuples(st.integers(0, 300), JUNK), min_size=1, max_size=4))
    def prop(junk: list[tuple[int, str]]) -> None:
        text = VALID[fam]
        for at, piece in junk:
            at %= len(text) + 1
            text = text[:at] + piece + text[at:]
        assert_robust(fam, text)

    prop()


# ── the builder ──────────────────────────────────────────────────────────────────────────────────


def test_name_then_json_builds_a_family_with_or_without_a_closer() -> None:
    from sseguard.core.errors import UsageError
    from sseguard.core.toolcalls import name_then_json

    closed = name_then_json("toy-closed", "<<fn>>", "<<args>>", "<</fn>>")
    parser = closed.make(None)
    events = parser.feed('hi<<fn>> get <<args>> {"a": [1]} <</fn>>bye') + parser.close()
    assert [e for e in events if isinstance(e, ToolCallEnd)] == [
        ToolCallEnd(0, "get", '{"a": [1]}')]
    open_ended = name_then_json("toy-open", "<<fn>>", "<<args>>")
    parser = open_ended.make(None)
    events = parser.feed('<<fn>>get<<args>>{"a": "}"} then text') + parser.close()
    assert [e for e in events if isinstance(e, ToolCallEnd)] == [
        ToolCallEnd(0, "get", '{"a": "}"}')]
    with pytest.raises(UsageError):
        name_then_json("bad", "<<x>>", "<<x>>")
