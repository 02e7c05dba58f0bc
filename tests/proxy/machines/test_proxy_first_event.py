"""Whether a 2xx attempt's beginning is worth another attempt is the machine's decision
(``machines/first_event.py``), made on the reads alone, split anywhere: an empty body, a stall, a
reset or an error event first are bad starts; keep-alive comments and a good first event are the
stream's beginning, relayed."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sseguard.core.contract import checker_for
from sseguard.core.verdict import Api
from sseguard.proxy.machines.attempts import BadStart
from sseguard.proxy.machines.first_event import Beginning, FirstEvent
from support.proxy_machine import REQUESTS, split

GOOD = (b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":'
        b'[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}\n\n')
ERROR = b'data: {"error":{"message":"model overloaded","type":"server_error"}}\n\n'
PING = b": ping\n\n"


def _machine() -> FirstEvent:
    return FirstEvent(checker_for(Api.CHAT, REQUESTS["chat"], keep_text=False))


def _feed(machine: FirstEvent, reads: list[bytes]) -> Beginning | None:
    for chunk in reads:
        got = machine.receive(chunk)
        if got is not None:
            return got
    return None


@settings(deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=len(GOOD)), max_size=8))
def test_a_good_first_event_is_relayed_with_what_the_checker_found(cuts: list[int]) -> None:
    got = _feed(_machine(), split(GOOD, cuts))
    assert got is not None and got.failed is None and got.bad_start is None
    assert got.data == GOOD and got.events is not None and [e.raw for e in got.events] == [GOOD]


@settings(deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=len(ERROR)), max_size=8))
def test_an_error_event_first_is_a_bad_start(cuts: list[int]) -> None:
    got = _feed(_machine(), split(ERROR, cuts))
    assert got is not None and got.bad_start == BadStart("error_event", "model overloaded", 0)
    assert got.data == ERROR


def test_keep_alive_comments_first_begin_the_clients_body_and_are_never_retried() -> None:
    machine = _machine()
    assert machine.receive(b": pi") is None  # not a whole comment block yet
    got = machine.receive(b"ng\n\n")
    assert got == Beginning(PING, [], None)


def test_an_empty_body_a_stall_and_a_reset_before_the_first_event_are_bad_starts() -> None:
    empty = _machine().receive(b"")
    assert empty is not None and empty.bad_start == BadStart("empty", None, 0)
    stalled = _machine()
    assert stalled.receive(GOOD[:10]) is None
    got = stalled.ended(stalled=True)
    assert got.data == GOOD[:10] and got.events is None
    assert got.bad_start is not None and got.bad_start.ending == "stalled"
    reset = _machine().ended(transport_error="ClientPayloadError: reset")
    assert reset.bad_start is not None and reset.bad_start.ending == "transport_error"
