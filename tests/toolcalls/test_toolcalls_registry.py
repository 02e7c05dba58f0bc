"""The family registry: every family has every facet, renders what it parses, and an unknown name is
one line listing the known ones wherever a name is taken."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sseguard.chaos import ChaosConfig
from sseguard.core.contract import checker_for, leak_markers
from sseguard.core.errors import ConfigError, UsageError
from sseguard.core.toolcalls import (
    FAMILIES,
    Claim,
    Family,
    MarkupError,
    Text,
    ToolCallEnd,
    families,
    family,
    json_in_tags,
    parser_for,
)
from sseguard.core.verdict import Api

#: The families of docs/design/markup.md §1 and §2, then those of its classes A, A′, B and B′.
FIRST = ["dsml-v32", "dsml-v4", "dsml-v41", "deepseek-v3", "deepseek-v31", "hermes", "glm45",
         "glm47", "qwen3-coder", "kimi-k2", "harmony", "minimax-m2"]
JSON_CALLS = ["llama3-json", "granite", "granite-20b-fc", "internlm", "jamba", "hunyuan-a13b",
              "minimax-m1", "phi4-mini", "apertus", "cohere-command", "gigachat3", "longcat",
              "ernie45", "inkling", "xlam"]
#: docs/design/markup.md classes C, D and E
PY_CALLS = ["functiongemma", "gemma4", "lfm2", "mistral", "olmo3", "plamo3", "pythonic"]
#: docs/design/markup.md classes F, G, G′ and H
XML_CALLS = ["dots", "gigachat35", "hunyuan", "iquest-q1", "k2-horizon", "kimi-k3", "minicpm5",
             "minimax-m3", "muse", "seed-oss", "step3", "zaya"]
#: rank, then name: the rank-95 families sort among themselves; classes F–H rank 96
BUILT_INS = [*FIRST, *JSON_CALLS[:-1], *PY_CALLS, "xlam", *XML_CALLS]
KNOWN = ", ".join(BUILT_INS)
#: Families whose markup ``auto`` reads as an earlier family's, with the same result (identical
#: grammars), or never claims (every marker of xLAM is another family's).
AUTO_READS_AS = {"ernie45": "hermes", "hunyuan-a13b": "jamba", "xlam": None}
#: what auto picks for the rendering of a family it never claims
AUTO_FALLS_TO = {"xlam": "granite"}


@dataclass
class Call:
    name: str
    values: dict[str, Any]
    arguments: str


def test_the_built_ins_are_registered_in_auto_order() -> None:
    assert list(families()) == BUILT_INS
    assert list(FAMILIES) == [*BUILT_INS, "auto"]


@pytest.mark.parametrize("name", BUILT_INS)
def test_every_family_has_every_facet(name: str) -> None:
    fam = family(name)
    assert isinstance(fam, Family) and fam.name == name and FAMILIES[name] is fam
    parser = fam.make(None)
    assert parser.family == name and callable(parser.feed) and callable(parser.close)
    for facet in (fam.markers, fam.leak_markers, fam.auto_markers):
        assert facet and all(isinstance(m, str) and m for m in facet)
    assert isinstance(fam.reasoning_exits, tuple)  # Harmony's is empty: its reasoning is a channel
    assert set(fam.reasoning_exits) <= set(FAMILIES["auto"].reasoning_exits)
    assert fam.leads <= {"<", "f", "[", "]"}  # functools[, "function call", MiniMax-M3's ]<]
    assert fam.grammar
    rendered = fam.render([Call("get_weather", {"city": "Paris"}, '{"city": "Paris"}')], False)
    assert any(marker in rendered for marker in fam.leak_markers)
    if name in AUTO_READS_AS:
        assert (fam.claim(rendered.lstrip("\n"), True) is Claim.YES) == (
            AUTO_READS_AS[name] is not None)
    else:
        assert fam.claim(rendered.lstrip("\n"), True) is Claim.YES
    auto = parser_for("auto")
    auto.feed(rendered)
    auto.close()
    assert getattr(auto, "detected", None) == (AUTO_READS_AS.get(name, name) or AUTO_FALLS_TO[name])
    assert set(fam.leak_markers) <= set(leak_markers("all"))


def test_the_malformable_families_are_the_ones_with_a_broken_rendering() -> None:
    assert [n for n, f in families().items() if f.malformable] == [
        "dsml-v32", "dsml-v4", "dsml-v41", "glm45", "glm47", "kimi-k2", "harmony", "minimax-m2",
        "jamba", "hunyuan-a13b", "minimax-m1", "apertus", "cohere-command", "longcat", "ernie45",
        "xlam", "dots", "gigachat35", "hunyuan", "iquest-q1", "k2-horizon", "kimi-k3", "minicpm5",
        "minimax-m3", "muse", "step3"]


def test_the_stripped_token_shapes_are_kimis_harmonys_gemmas_and_mistrals() -> None:
    assert [n for n, f in families().items() if f.leak_shape] == [
        "kimi-k2", "harmony", "functiongemma", "gemma4"]
    assert [n for n, f in families().items() if f.leak_start] == ["mistral"]


# ── render → parse ──────────────────────────────────────────────────────────────────────────────

NAMES = st.from_regex(r"[a-z][a-z_]{0,11}", fullmatch=True)
# no "<" (every marker's lead) and no DSML bar: inside a raw value those are markup by decision; not
# the string "null": families that write values untyped read an exact null as null even where the
# schema says string (decision 2.5), so that one string cannot make the round trip
STRINGS = st.text(st.characters(blacklist_characters="<｜", blacklist_categories=("Cs",)),
                  max_size=12).filter(lambda s: s != "null")
VALUES = st.one_of(STRINGS, st.integers(-10**6, 10**6), st.booleans())


@st.composite
def calls(draw: st.DrawFn) -> list[Call]:
    out = []
    for _ in range(draw(st.integers(1, 3))):
        keys = draw(st.lists(NAMES, max_size=3, unique=True))
        values = {k: draw(VALUES) for k in keys}
        out.append(Call(draw(NAMES), values, json.dumps(values, ensure_ascii=False)))
    return out


def _tools(calls: list[Call]) -> list[dict[str, Any]]:
    """The tools offered, with each parameter typed as its value is (GLM, MiniMax and Qwen3-Coder
    write values untyped; the schema types them)."""
    kinds = {str: "string", int: "integer", bool: "boolean"}
    props: dict[str, dict[str, dict[str, str]]] = {}
    for call in calls:
        props.setdefault(call.name, {}).update(
            {k: {"type": kinds[type(v)]} for k, v in call.values.items()})
    return [{"type": "function", "function": {"name": n, "parameters": {"type": "object",
                                                                         "properties": p}}}
            for n, p in props.items()]


def _round_trip(fam: Family, batch: list[Call], via: str) -> None:
    # a name used twice with other value types cannot be typed by one schema
    names = [c.name for c in batch]
    if len(set(names)) != len(names):
        batch = batch[:1]
    rendered = fam.render(batch, False)
    p = parser_for("auto" if via == "auto" else fam.name, _tools(batch))
    events = p.feed(rendered) + p.close()
    assert [e for e in events if isinstance(e, MarkupError)] == []
    assert "".join(e.text for e in events if isinstance(e, Text)) == ""
    ends = [e for e in events if isinstance(e, ToolCallEnd)]
    assert [(e.name, json.loads(e.arguments)) for e in ends] == [(c.name, c.values) for c in batch]


PROPS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("name", BUILT_INS)
def test_what_a_family_renders_parses_back_to_the_same_calls(name: str) -> None:
    @PROPS
    @given(batch=calls(), via=st.sampled_from(
        ["name"] if name in AUTO_READS_AS and AUTO_READS_AS[name] is None else ["name", "auto"]))
    def prop(batch: list[Call], via: str) -> None:
        _round_trip(family(name), batch, via)

    prop()


@PROPS
@given(batch=calls())
def test_a_json_in_tags_family_renders_what_it_parses(batch: list[Call]) -> None:
    toy = json_in_tags("toy", "<<call>>", "<</call>>")
    rendered = toy.render(batch, False)
    p = toy.make(None)
    events = [e for ch in rendered for e in p.feed(ch)] + p.close()
    ends = [e for e in events if isinstance(e, ToolCallEnd)]
    assert [(e.name, json.loads(e.arguments)) for e in ends] == [(c.name, c.values) for c in batch]
    assert [e for e in events if isinstance(e, MarkupError | Text)] == []


@pytest.mark.parametrize("opener,closer", [("", "</x>"), ("<x>", "<x>"), ("<x>", "<x>>"),
                                           ("<x>", "[/x]"), ('"x', '"/x')])
def test_json_in_tags_refuses_tags_it_cannot_hold_back(opener: str, closer: str) -> None:
    with pytest.raises(UsageError):
        json_in_tags("bad", opener, closer)


# ── unknown names ───────────────────────────────────────────────────────────────────────────────


def test_an_unknown_family_name_lists_the_known_ones() -> None:
    for call in (lambda: parser_for("hermse"), lambda: family("hermse")):
        with pytest.raises(UsageError) as info:
            call()
        assert str(info.value) == f"unknown markup family 'hermse'; known: {KNOWN}, auto"


def test_a_checker_given_an_unknown_markup_name_raises_instead_of_scanning_for_nothing() -> None:
    for api in Api:
        with pytest.raises(UsageError) as info:
            checker_for(api, None, markup="hermse")
        assert str(info.value) == (f"unknown markup family 'hermse'; known: {KNOWN}, all, auto, "
                                   "none")
    assert leak_markers("none") == leak_markers([]) == ()
    assert leak_markers("auto") == leak_markers("all") == leak_markers(None)


def test_chaos_refuses_an_unknown_raw_markup_family() -> None:
    with pytest.raises(ConfigError) as info:
        ChaosConfig(raw_markup="hermse")
    assert str(info.value) == f"unknown markup family 'hermse' (known: {KNOWN})"


@pytest.mark.parametrize("args", [["check", "/dev/null", "--markup", "hermse"],
                                  ["chaos", "--listen", "127.0.0.1:0", "--raw-markup", "hermse"]])
def test_the_command_line_exits_2_with_the_known_names(args: list[str]) -> None:
    done = subprocess.run([sys.executable, "-c", "from sseguard.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "'hermse'" in done.stderr and "unknown markup family" in done.stderr
    assert "known: dsml-v32, dsml-v4" in done.stderr and len(done.stderr.splitlines()) == 1
    assert "Traceback" not in done.stderr
