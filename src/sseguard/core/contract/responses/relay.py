"""How a relay handles a Responses stream: its terminal and error events, the error frame it sends.

Kept apart from the checker (``responses.py``) as Gemini's relay table is: the proxy reads these per
event, the checker never does.
"""

from __future__ import annotations

import re

from sseguard.core.contract.protocol import SSE_ENDING_MESSAGES, RelayTable, UpstreamError, data_type, dumps
from sseguard.core.sse import SSEEvent
from sseguard.core.verdict import Ending

#: A legitimate end (the one place these are spelt): ``incomplete`` is a stop like chat's
#: ``length`` (its reason is the finish).
TERMINAL_EVENTS = frozenset({"response.completed", "response.incomplete"})


#: The error events of a Responses stream (flat or nested ``error``, and ``response.failed``).
ERROR_EVENTS = frozenset({"error", "response.failed"})
_SEQUENCE = re.compile(rb'"sequence_number"\s*:\s*(\d+)')


def next_sequence_number(sent: bytes) -> int:
    """One past the last ``sequence_number`` in what was last sent (0 when there is none)."""
    # The key cannot occur inside a JSON string unescaped, so the last match is the last event's.
    at = sent.rfind(b'"sequence_number"')
    match = _SEQUENCE.match(sent, at) if at >= 0 else None
    return int(match.group(1)) + 1 if match else 0


def responses_error_frame(code: str, message: str, sent: bytes = b"") -> bytes:
    """A valid Responses ``error`` event that openai-python also raises ``APIError`` on."""
    body = {"type": "error", "code": code, "message": message, "param": None,
            "sequence_number": next_sequence_number(sent),
            "error": {"type": "upstream_stream_error", "code": code, "message": message}}
    return b"event: error\ndata: " + dumps(body) + b"\n\n"


def is_terminal(event: SSEEvent) -> bool:
    # data: [DONE] too: openai-python stops reading at it, so one that came without
    # response.completed (no_finish) must still be replaceable by an error.
    if event.event in TERMINAL_EVENTS or event.data == "[DONE]":
        return True
    return event.event == "message" and data_type(event, TERMINAL_EVENTS) is not None


def upstream_error_of(event: SSEEvent) -> UpstreamError | None:
    # A nested error object would make openai-python raise too, but a flat one or response.failed
    # would not: one shape for all of them, with the code the client can act on.
    if event.event in ERROR_EVENTS:
        return UpstreamError.REPLACE
    if event.event == "message" and data_type(event, ERROR_EVENTS) is not None:
        return UpstreamError.REPLACE
    return None


def _trailer(event: SSEEvent) -> bool:
    return event.data == "[DONE]"  # tolerated after the terminal event, never required


#: The relay's table of a Responses stream (the ``Protocol`` descriptor's ``relay``).
RELAY = RelayTable(
    terminal=is_terminal, upstream_error=upstream_error_of, error_frame=responses_error_frame,
    sentinel=b"", trailer=_trailer,
    messages={
        Ending.TRUNCATED: "the upstream stopped after content without response.completed or "
                          "response.incomplete; the answer is incomplete",
        Ending.NO_FINISH: "the upstream ended the stream (data: [DONE] or response.done) without "
                          "response.completed or response.incomplete",
        **SSE_ENDING_MESSAGES,
    })
