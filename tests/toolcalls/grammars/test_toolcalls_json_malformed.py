"""Malformed input of the families of docs/design/markup.md classes A, A′, B and B′: cut at every position,
markers swapped, junk inside. Every run gives ``MarkupError``s carrying the raw text, never an
exception, a lost character or a marker in visible text, and the same events under any chunking."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sseguard.core.toolcalls import family
from support.toolcalls import calls_of, check_invariants, errors_of, run
from support.toolcalls_jsoncalls import PART3_LEAKS

FAMILIES = sorted(PART3_LEAKS)
JUNK = st.sampled_from(["x", "}", "]", "[", ",", '"', "\\", "{", ";", "\n", "<", "<|", "NaN",
                        "<tool_calls>", "</tool_calls>", "<tool_call>", "</tool_call>",
                        "<|python_tag|>", "functools[", "<function_call>", "```", "<|plugin|>",
                        "<|end_message|>", "<|START_ACTION|>", "<|tools_suffix|>"])


@dataclass(frozen=True)
class _Call:
    name: str
    values: dict[str, Any]

    @property
    def arguments(self) -> str:
        return json.dumps(self.values)


CALLS = [_Call("get_weather", {"city": "Paris <", "days": [1, "]"]}), _Call("get_time", {})]


def _document(name: str) -> str:
    return "Let me check. " + family(name).render(CALLS, False) + " Done."


def _check(name: str, text: str) -> list[tuple[str, int | None]]:
    whole = run(name, text)
    check_invariants(name, whole)
    assert run(name, text, size=1).joined == whole.joined
    assert run(name, text, size=3).joined == whole.joined
    return errors_of(whole.events)


@pytest.mark.parametrize("name", FAMILIES)
def test_the_rendered_document_is_two_calls_and_the_text(name: str) -> None:
    events = run(name, _document(name)).events
    if name != "xlam":  # xLAM's first marker is Granite's <tool_call>: text before it is fine
        assert calls_of(events) == [(c.name, c.values) for c in CALLS]
        assert errors_of(events) == []


@pytest.mark.parametrize("name", FAMILIES)
def test_a_document_cut_anywhere_keeps_every_guarantee(name: str) -> None:
    """Cut at every position: the calls found are the first calls of the whole document, and once
    the family's marker is complete, a cut-off call is reported, never silently dropped."""
    text = _document(name)
    full = calls_of(run(name, text).events)
    opened = min(text.find(m) + len(m) for m in PART3_LEAKS[name] if m in text)
    last = text.rfind("}") + 1
    for k in range(len(text) + 1):
        prefix = text[:k]
        errors = _check(name, prefix)
        found = calls_of(run(name, prefix).events)
        assert found == full[:len(found)], k
        if opened <= k < last and len(found) < len(full):
            assert errors or found, (k, prefix)


@pytest.mark.parametrize("name", FAMILIES)
def test_swapped_markers_are_errors_not_calls_or_text(name: str) -> None:
    fam = family(name)
    text = _document(name)
    markers = [m for m in PART3_LEAKS[name] if m in text]
    if len(markers) < 2:
        pytest.skip("one marker only")
    a, b = markers[0], markers[-1]
    swapped = text.replace(a, "\0").replace(b, a).replace("\0", b)
    errors = _check(name, swapped)
    assert errors or calls_of(run(name, swapped).events) != [(c.name, c.values) for c in CALLS]
    assert fam.name == name


@pytest.mark.parametrize("name", FAMILIES)
def test_junk_inside_the_markup_never_breaks_a_guarantee(name: str) -> None:
    text = _document(name)
    start = len("Let me check. ")
    end = len(text) - len(" Done.")

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(at=st.integers(start, end), junk=JUNK)
    def prop(at: int, junk: str) -> None:
        _check(name, text[:at] + junk + text[at:])

    prop()
