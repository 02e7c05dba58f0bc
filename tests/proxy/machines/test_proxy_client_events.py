"""The client's side reaches the stream machine as events: the end of its stream going out
(``client_stream_ended``) and the client leaving (``client_gone``); the driver writes no machine
state. A departure before the end went out is the client leaving early; one after it is not."""

from __future__ import annotations

from sseguard.proxy.machines.actions import CloseUpstream, EndBody, RecordVerdict, StreamAction
from sseguard.proxy.machines.stream import StreamMachine
from support.proxy_machine import chat_stream, machine_for


def _relayed_to_the_end() -> tuple[StreamMachine, list[StreamAction]]:
    machine = machine_for("chat")
    machine.receive(chat_stream(["Hello", " world"]))
    return machine, machine.upstream_ended()


def _record(actions: list[StreamAction]) -> RecordVerdict:
    assert [type(a) for a in actions] == [CloseUpstream, RecordVerdict]
    record = actions[1]
    assert isinstance(record, RecordVerdict)
    return record


def test_a_client_gone_before_its_streams_end_went_out_left_early() -> None:
    machine, actions = _relayed_to_the_end()
    assert EndBody() in actions  # decided, but the driver has not said it went out
    assert _record(machine.client_gone()).outcome.client_gone is True


def test_a_client_gone_after_its_streams_end_went_out_did_not_leave_early() -> None:
    machine, actions = _relayed_to_the_end()
    assert EndBody() in actions
    machine.client_stream_ended()
    assert _record(machine.client_gone()).outcome.client_gone is False
