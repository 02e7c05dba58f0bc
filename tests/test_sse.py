"""SSEDecoder: WHATWG event-stream rules over bytes, under any split."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sseguard.core.errors import UsageError
from sseguard.core.sse import SSEDecoder, SSEEvent, TailKind


def decode_all(body: bytes, sizes: list[int] | None = None) -> tuple[list[SSEEvent], TailKind, bytes]:
    dec = SSEDecoder()
    events: list[SSEEvent] = []
    pos = 0
    for size in sizes or [len(body) or 1]:
        events += dec.feed(body[pos:pos + size])
        pos += size
    events += dec.feed(body[pos:])
    tail = dec.close()
    return events, tail.kind, tail.raw


def one_byte_at_a_time(body: bytes) -> list[int]:
    return [1] * len(body)


@pytest.mark.parametrize("newline", [b"\n", b"\r", b"\r\n"])
def test_every_line_ending_dispatches_the_same_event(newline: bytes) -> None:
    body = b"data: hello" + newline + newline
    for sizes in (None, one_byte_at_a_time(body)):
        events, tail, _ = decode_all(body, sizes)
        assert [e.data for e in events] == ["hello"]
        assert tail is TailKind.CLEAN


def test_crlf_split_across_feeds_is_one_line_end() -> None:
    dec = SSEDecoder()
    assert dec.feed(b"data: a\r") == []
    assert dec.feed(b"\n\r") == [SSEEvent(data="a", raw=b"data: a\r\n\r")]
    assert dec.feed(b"\ndata: b\n\n")[0].data == "b"
    assert dec.close().kind is TailKind.CLEAN


def test_bom_is_skipped_even_when_split() -> None:
    body = b"\xef\xbb\xbfdata: x\n\n"
    events, tail, _ = decode_all(body, one_byte_at_a_time(body))
    assert [e.data for e in events] == ["x"]
    assert tail is TailKind.CLEAN


def test_comments_are_ignored_and_space_after_colon_is_optional() -> None:
    events, _, _ = decode_all(b": ping\n\ndata:no-space\n\ndata:  two-spaces\n\n")
    assert [e.data for e in events] == ["no-space", " two-spaces"]


def test_multi_line_data_is_joined_with_newlines() -> None:
    events, _, _ = decode_all(b"data: a\ndata: b\ndata\n\n")
    assert events[0].data == "a\nb\n"


def test_event_id_and_retry_fields() -> None:
    events, _, _ = decode_all(b"event: error\nid: 7\nretry: 1500\ndata: x\n\ndata: y\n\n")
    assert (events[0].event, events[0].id, events[0].retry) == ("error", "7", 1500)
    # The event type resets after dispatch; the last event id persists (WHATWG).
    assert (events[1].event, events[1].id) == ("message", "7")


def test_unknown_fields_and_bad_retry_are_ignored() -> None:
    events, _, _ = decode_all(b"foo: bar\nretry: soon\nid: a\x00b\ndata: x\n\n")
    assert events == [SSEEvent(data="x", raw=b"foo: bar\nretry: soon\nid: a\x00b\ndata: x\n\n")]


def test_event_without_data_is_not_dispatched() -> None:
    events, tail, _ = decode_all(b"event: ping\n\ndata: x\n\n")
    assert [e.data for e in events] == ["x"]
    assert tail is TailKind.CLEAN


def test_utf8_split_inside_a_character() -> None:
    body = "data: 你好｜DSML｜\n\n".encode()
    events, _, _ = decode_all(body, one_byte_at_a_time(body))
    assert events[0].data == "你好｜DSML｜"


def test_partial_line_at_close_is_a_cut_frame() -> None:
    _, tail, raw = decode_all(b"data: a\n\ndata: {\"x\"")
    assert tail is TailKind.PARTIAL_LINE
    assert raw == b"data: {\"x\""


def test_complete_event_without_blank_line_is_undispatched() -> None:
    events, tail, raw = decode_all(b"data: a\n\ndata: [DONE]\n")
    assert [e.data for e in events] == ["a"]
    assert tail is TailKind.UNDISPATCHED
    assert raw == b"data: [DONE]\n"


def test_trailing_comment_after_last_event_is_clean() -> None:
    _, tail, _ = decode_all(b"data: a\n\n: bye\n")
    assert tail is TailKind.CLEAN


def test_feed_after_close_is_misuse() -> None:
    dec = SSEDecoder()
    dec.close()
    with pytest.raises(UsageError):
        dec.feed(b"data: x\n\n")


_line = st.one_of(
    st.builds(lambda s: b"data: " + s.encode(), st.text(alphabet=st.characters(
        blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=12)),
    st.sampled_from([b": comment", b"event: error", b"id: 3", b"retry: 10", b"data", b"x: y"]),
)
_body = st.lists(st.tuples(st.lists(_line, min_size=1, max_size=3),
                           st.sampled_from([b"\n", b"\r", b"\r\n"])),
                 max_size=6).map(lambda frames: b"".join(
                     nl.join(lines) + nl + nl for lines, nl in frames))


@settings(max_examples=200, deadline=None)
@given(body=_body, tail=st.binary(max_size=12), cuts=st.lists(st.integers(1, 7), max_size=40))
def test_any_split_gives_the_same_events_and_accounts_for_every_byte(
        body: bytes, tail: bytes, cuts: list[int]) -> None:
    whole = body + tail
    expected = decode_all(whole)
    for sizes in (cuts, one_byte_at_a_time(whole)):
        got = decode_all(whole, sizes)
        assert [(e.data, e.event, e.id, e.retry) for e in got[0]] == \
            [(e.data, e.event, e.id, e.retry) for e in expected[0]]
        assert got[1] == expected[1]
        assert b"".join(e.raw for e in got[0]) + got[2] == whole


# LF-only bodies: the decoder dispatches a frame whose only data line is followed by its blank line in
# one step when both are in the buffer (fed whole), and line by line when they are not (one byte at a
# time never has the blank line's LF in the buffer while it handles the data line). Both must agree.
_lf_line = st.one_of(
    st.builds(lambda s: b"data:" + s.encode(), st.text(alphabet=st.characters(
        blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=8)),
    st.builds(lambda s: b"event:" + s.encode(), st.sampled_from(["", " ", " x", "error", " ü"])),
    st.sampled_from([b"", b": c", b"id: 7", b"id:", b"retry: 5", b"data", b"event", b"x: y",
                     b"data:\xff\xfe", b"data: \xe4\xbd"]),
)


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(_lf_line, max_size=14), tail=st.sampled_from([b"", b"\n", b"data: x", b"\n\n"]))
def test_one_step_frame_dispatch_equals_line_by_line(lines: list[bytes], tail: bytes) -> None:
    body = b"".join(line + b"\n" for line in lines) + tail
    fast = decode_all(body)
    slow = decode_all(body, one_byte_at_a_time(body))
    assert fast == slow
    # The same lines ended by CRLF take the general path (any CR in the buffer does): the same events.
    crlf = decode_all(body.replace(b"\n", b"\r\n"))
    assert [(e.data, e.event, e.id, e.retry) for e in crlf[0]] == \
        [(e.data, e.event, e.id, e.retry) for e in fast[0]]
    assert crlf[1] == fast[1]
