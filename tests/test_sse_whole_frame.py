"""SSEDecoder's whole-frame path: a read that is exactly one frame gives the event the line rules give.

The probe, the proxy and the client read one frame per read when events come milliseconds apart, so
that read is decided without the line loop; these tests feed the same reads as ``bytearray`` (which
always takes the line loop) and compare every field, ``raw`` included.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sseguard.core.sse import SSEDecoder, SSEEvent, TailKind


def decode(reads: list[bytes] | list[bytearray]) -> tuple[list[SSEEvent], TailKind]:
    dec = SSEDecoder()
    events = [e for r in reads for e in dec.feed(r)]
    return events, dec.close().kind


_piece = st.sampled_from([b"data:", b"data: ", b"event:", b"event: ", b"id: 4", b"retry: 9", b":",
                          b" ", b"\n", b"\r", b"\r\n", b"x", b"{\"a\": 1}", b"\xff", b"\xe4\xbd\xa0",
                          b"[DONE]", b"error"])
_frame = st.lists(_piece, min_size=1, max_size=8).map(b"".join)
_ending = st.sampled_from([b"\n\n", b"\r\n\r\n", b"\n", b"\r\r", b"", b"\n\r\n"])


@settings(max_examples=600, deadline=None)
@given(reads=st.lists(st.tuples(_frame, _ending).map(b"".join), min_size=1, max_size=5))
def test_a_read_of_one_frame_gives_the_events_of_the_line_rules(reads: list[bytes]) -> None:
    # The first read primes the decoder (its BOM check); every later read that is one whole frame
    # with nothing buffered takes the whole-frame path.
    reads = [b"data: first\n\n", *reads]
    assert decode(reads) == decode([bytearray(r) for r in reads])


def test_common_frames_take_the_whole_frame_path() -> None:
    """The frames of every protocol are decided by ``_whole_frame`` (else it would never run)."""
    dec = SSEDecoder()
    frames = {
        b'data: {"a": 1}\n\n': SSEEvent('{"a": 1}', raw=b'data: {"a": 1}\n\n'),
        b'data:{"a": 1}\n\n': SSEEvent('{"a": 1}', raw=b'data:{"a": 1}\n\n'),
        b'data: {"b": 2}\r\n\r\n': SSEEvent('{"b": 2}', raw=b'data: {"b": 2}\r\n\r\n'),
        b'event: message_stop\ndata: {"type": "message_stop"}\n\n': SSEEvent(
            '{"type": "message_stop"}', "message_stop",
            raw=b'event: message_stop\ndata: {"type": "message_stop"}\n\n'),
        b"event:\ndata: x\n\n": SSEEvent("x", raw=b"event:\ndata: x\n\n"),
        b"data: \xff\n\n": SSEEvent("\ufffd", raw=b"data: \xff\n\n"),
    }
    for frame, event in frames.items():
        assert dec._whole_frame(frame) == event
    for other in (b"data: a\ndata: b\n\n", b": ping\n\n", b"data: a\r\n", b"data: a\n\ndata: b\n\n",
                  b"id: 1\ndata: a\n\n", b"event: x\ndata: a\r\n\r\n", b"data: a\rb\n\n"):
        assert dec._whole_frame(other) is None
