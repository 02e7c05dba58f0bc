"""JsonArrayDecoder: a streamed JSON array (Gemini without ``alt=sse``) cut into its elements, any split."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sseguard.core.errors import UsageError
from sseguard.core.jsonarray import ArrayEnd, JsonArrayDecoder, JsonElement


def decode(body: bytes, sizes: list[int] | None = None, *,
           closes: bool = False) -> tuple[list[JsonElement], Any]:
    """Feed ``body`` in pieces of the given sizes (cycled; whole by default): elements and tail."""
    decoder = JsonArrayDecoder(closes=closes)
    out: list[JsonElement] = []
    pos = 0
    steps = sizes or [max(len(body), 1)]
    while pos < len(body):
        for size in steps:
            out += decoder.feed(body[pos:pos + size])
            pos += size
    return out, decoder.close()


def texts(elements: list[JsonElement]) -> list[str]:
    return [e.text for e in elements]


#: How Gemini's REST API streams ``:streamGenerateContent`` without ``alt=sse`` (records abridged).
GEMINI_ARRAY = (b'[{\n  "candidates": [{"content": {"parts": [{"text": "The sky"}], "role": "model"}, '
                b'"index": 0}],\n  "responseId": "r1"\n}\r\n,\r\n{\n  "candidates": [{"content": '
                b'{"parts": [{"text": " is {blue} \\"[really]\\""}], "role": "model"}, '
                b'"finishReason": "STOP", "index": 0}],\n  "responseId": "r1"\n}\n]')


# ── elements and endings ────────────────────────────────────────────────────────────────────────

def test_a_gemini_array_gives_each_record_with_its_offsets_and_a_closed_end() -> None:
    elements, tail = decode(GEMINI_ARRAY)
    assert [json.loads(e.text)["candidates"][0]["content"]["parts"][0]["text"] for e in elements] \
        == ["The sky", ' is {blue} "[really]"']
    first_end = GEMINI_ARRAY.index(b"}\r\n,") + 1
    assert [(e.start, e.end) for e in elements] == [(1, first_end), (first_end + 5, len(GEMINI_ARRAY) - 2)]
    for e in elements:
        assert GEMINI_ARRAY[e.start:e.end].decode() == e.text
    assert b"".join(e.raw for e in elements) + tail.raw == GEMINI_ARRAY
    assert (tail.kind, tail.raw, tail.is_cut) == (ArrayEnd.CLOSED, b"\n]", False)


def test_an_element_is_given_as_soon_as_its_bracket_closes() -> None:
    decoder = JsonArrayDecoder()
    assert decoder.feed(b'[{"a": [1, {"b": "}"}]') == []
    assert texts(decoder.feed(b"}")) == ['{"a": [1, {"b": "}"}]}']
    assert texts(decoder.feed(b',\r\n"s\\"tr"')) == ['"s\\"tr"']


@pytest.mark.parametrize(("body", "elements", "end"), [
    (b"", [], ArrayEnd.NOTHING),
    (b" \r\n ", [], ArrayEnd.NOTHING),
    (b"[]", [], ArrayEnd.CLOSED),
    (b"\xef\xbb\xbf[ ]\n", [], ArrayEnd.CLOSED),
    (b"\xef\xbb\xbf\n", [], ArrayEnd.NOTHING),
    (b"\xef\xbb", [], ArrayEnd.INSIDE),
    (b"[", [], ArrayEnd.UNCLOSED),
    (b'[{"a":1}', ['{"a":1}'], ArrayEnd.UNCLOSED),
    (b'[{"a":1},', ['{"a":1}'], ArrayEnd.UNCLOSED),
    (b'[{"a":1},{"b":', ['{"a":1}'], ArrayEnd.INSIDE),
    (b'[{"a":"x\\', [], ArrayEnd.INSIDE),
    (b"[1, 2", ["1"], ArrayEnd.INSIDE),
    (b"[1, 2]", ["1", "2"], ArrayEnd.CLOSED),
    (b'[true,null ,"x", [3]]', ["true", "null", '"x"', "[3]"], ArrayEnd.CLOSED),
    # a bare object is read as one element of an array that was never closed
    (b'{"error": {"code": 500}}', ['{"error": {"code": 500}}'], ArrayEnd.UNCLOSED),
    # missing comma, stray bytes and bytes after ']' come out as elements: seen, never dropped
    (b'[{"a":1}{"b":2}]', ['{"a":1}', '{"b":2}'], ArrayEnd.CLOSED),
    (b"[}, x]", ["}", "x"], ArrayEnd.CLOSED),
    (b"[1] junk", ["1"], ArrayEnd.INSIDE),
    (b"[1] junk ", ["1", "junk"], ArrayEnd.UNCLOSED),
    (b"[1]\n\n", ["1"], ArrayEnd.CLOSED),
])
def test_ending_table(body: bytes, elements: list[str], end: ArrayEnd) -> None:
    for sizes in ([len(body) or 1], [1], [2, 3]):
        got, tail = decode(body, sizes)
        assert (texts(got), tail.kind) == (elements, end), sizes
        assert b"".join(e.raw for e in got) + tail.raw == body


def test_elements_nested_deeper_than_any_server_writes_still_come_out_whole() -> None:
    deep = b'{"a": ' * 40 + b'"}"' + b"}" * 40
    for sizes in ([1000], [1], [3, 7]):
        got, tail = decode(b"[" + deep + b", " + deep + b"]", sizes)
        assert (texts(got), tail.kind) == ([deep.decode()] * 2, ArrayEnd.CLOSED)


def test_a_relay_can_have_the_closing_bracket_as_it_arrives() -> None:
    got, tail = decode(b'[{"a":1}\n] \n', closes=True)
    assert [(e.text, e.raw, e.closes) for e in got] == [('{"a":1}', b'[{"a":1}', False),
                                                        ("]", b"\n]", True)]
    assert (tail.kind, tail.raw) == (ArrayEnd.CLOSED, b" \n")


def test_invalid_utf8_is_replaced_and_multibyte_text_survives_any_split() -> None:
    body = '[{"t": "日本語 ✓"}, "\xff"]'.encode().replace("\xff".encode(), b"\xff")
    for size in (1, 2, 5):
        got, _ = decode(body, [size])
        assert texts(got) == ['{"t": "日本語 ✓"}', '"\ufffd"']


def test_misuse_raises_usage_error() -> None:
    decoder = JsonArrayDecoder()
    decoder.close()
    with pytest.raises(UsageError):
        decoder.feed(b"[")
    with pytest.raises(UsageError):
        decoder.close()


# ── guarantees ──────────────────────────────────────────────────────────────────────────────────

_scalars = st.none() | st.booleans() | st.integers() | st.text(
    alphabet=st.sampled_from(list('ab"\\{}[],: \n日✓\u2028')), max_size=12)
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=10)
_gaps = st.sampled_from(["", " ", "\n", "\r\n", "\r\n  "])


@st.composite
def arrays(draw: Any) -> tuple[bytes, list[Any]]:
    """A JSON array as servers write it, with whitespace of any kind around elements and commas."""
    values = draw(st.lists(_values, max_size=5))
    body = "[" + draw(_gaps)
    for i, value in enumerate(values):
        body += json.dumps(value, ensure_ascii=draw(st.booleans()),
                           indent=draw(st.sampled_from([None, 2])))
        body += draw(_gaps) + ("," + draw(_gaps) if i < len(values) - 1 else "")
    return (body + "]").encode(), values


@settings(max_examples=200, deadline=None)
@given(arrays(), st.lists(st.integers(1, 9), min_size=1, max_size=6))
def test_any_split_gives_the_same_elements_and_they_are_the_values(
        case: tuple[bytes, list[Any]], sizes: list[int]) -> None:
    body, values = case
    whole, tail = decode(body)
    assert [json.loads(e.text) for e in whole] == values
    assert tail.kind is ArrayEnd.CLOSED
    pieces, piece_tail = decode(body, sizes)
    assert pieces == whole and piece_tail == tail


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200) | arrays().map(lambda c: c[0][:-1]),
       st.lists(st.integers(1, 9), min_size=1, max_size=6))
def test_arbitrary_bytes_never_raise_and_every_byte_is_accounted_for(
        body: bytes, sizes: list[int]) -> None:
    with_closes, tail = decode(body, closes=True)
    assert b"".join(e.raw for e in with_closes) + tail.raw == body
    assert decode(body, sizes, closes=True) == (with_closes, tail)
    whole, tail = decode(body)
    assert b"".join(e.raw for e in whole) + tail.raw == body
    for e in whole:
        assert body[e.start:e.end].decode("utf-8", "replace") == e.text
    assert decode(body, sizes) == (whole, tail)
