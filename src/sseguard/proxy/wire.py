"""What the relay needs to know about each streaming protocol: one engine (``stream.py``), three tables.

The relay forwards frames, holds the terminal event back until the upstream's end shows the stream
deserves it, and ends a failing stream with an error the client's SDK raises. Only *which* event is
terminal, *which* upstream error frames the SDK already raises on, and *what* error frame to send differ
between Chat Completions, Responses and Messages; ``PROTOCOLS.md`` ("What a guard sends") fixes the
frames, verified against the official SDKs:

- chat: ``data: {"error": {…}}`` (openai raises ``APIError`` on it; it ignores ``event: error``);
- responses: ``event: error`` whose data is a valid Responses ``error`` event *and* carries a top-level
  ``error`` object (openai-python raises only on that key; a bare ``error`` or ``response.failed`` event
  is yielded to the caller, not raised);
- messages: ``event: error`` with ``{"type": "error", "error": {"type": "api_error", …}}`` (the
  anthropic SDK raises on every ``event: error``; it skips events without an ``event:`` line).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from sseguard.sse import SSEEvent
from sseguard.verdict import Api, Ending

DONE_FRAME = b"data: [DONE]\n\n"
MESSAGE_STOP_FRAME = b'event: message_stop\ndata: {"type":"message_stop"}\n\n'


class UpstreamError(StrEnum):
    """What the relay does with an error frame the upstream sent."""

    #: The client's SDK raises on it as it is: forward it, byte-identical, and end the stream.
    FORWARD = "forward"
    #: The client's SDK would not raise on it (or not for every client): send the guard's own frame.
    REPLACE = "replace"


@dataclass(frozen=True, slots=True)
class Wire:
    """One protocol's table for the relay."""

    api: Api
    #: The event that ends a good stream; held until the upstream ends its body.
    terminal: Callable[[SSEEvent], bool]
    #: Whether an event is an upstream error frame, and what to do with it (None: not an error).
    upstream_error: Callable[[SSEEvent], UpstreamError | None]
    #: ``(code, message, what was last sent) -> frame``: the error the client's SDK raises on.
    error_frame: Callable[[str, str, bytes], bytes]
    #: What ``--complete-done`` appends to a finished stream that only lacks it (b"": no such thing).
    sentinel: bytes
    #: Why a stream with this ending failed, in this protocol's words.
    messages: Mapping[Ending, str]
    #: Frames after the terminal event that are delivered with it (a tolerated trailer).
    trailer: Callable[[SSEEvent], bool]


def _dumps(obj: object) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode("utf-8")


def _never(event: SSEEvent) -> bool:
    return False


def _data_type(event: SSEEvent, wanted: frozenset[str]) -> str | None:
    """The ``type`` of an unnamed event's JSON data, when it is one of ``wanted`` (cheap pre-check)."""
    data = event.data
    if not any(name in data for name in wanted):
        return None
    try:
        obj = json.loads(data)
    except ValueError:
        return None
    kind = obj.get("type") if isinstance(obj, dict) else None
    return kind if isinstance(kind, str) and kind in wanted else None


# ── chat completions ─────────────────────────────────────────────────────────────────────────────


def chat_error_frame(code: str, message: str, sent: bytes = b"") -> bytes:
    """The frame the openai SDKs raise ``APIError`` on (they ignore ``event: error``)."""
    body = {"error": {"message": message, "type": "upstream_stream_error", "code": code}}
    return b"data: " + _dumps(body) + b"\n\n"


def _chat_terminal(event: SSEEvent) -> bool:
    return event.data == "[DONE]"


def _chat_upstream_error(event: SSEEvent) -> UpstreamError | None:
    if event.event == "error":
        return UpstreamError.REPLACE  # not every client raises on a named event
    if b'"error"' in event.raw:
        try:
            obj = json.loads(event.data)
        except ValueError:
            return None
        if isinstance(obj, dict) and "error" in obj and not obj.get("choices"):
            return UpstreamError.FORWARD
    return None


CHAT = Wire(
    api=Api.CHAT, terminal=_chat_terminal, upstream_error=_chat_upstream_error,
    error_frame=chat_error_frame, sentinel=DONE_FRAME, trailer=_never,
    messages={
        Ending.TRUNCATED: "the upstream stopped after content with neither a finish_reason nor "
                          "data: [DONE]; the answer is incomplete",
        Ending.NO_FINISH: "the upstream sent data: [DONE] without a finish_reason for every choice",
        Ending.NO_DONE: "the upstream finished the answer but never sent data: [DONE]",
        Ending.CUT_MID_FRAME: "the upstream body stopped in the middle of an event",
        Ending.EMPTY: "the upstream sent no event at all",
    },
)

# ── responses ────────────────────────────────────────────────────────────────────────────────────

_RESPONSES_TERMINAL = frozenset({"response.completed", "response.incomplete"})
_RESPONSES_ERRORS = frozenset({"error", "response.failed"})
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
    return b"event: error\ndata: " + _dumps(body) + b"\n\n"


def _responses_terminal(event: SSEEvent) -> bool:
    # data: [DONE] too: openai-python stops reading at it, so one that came without
    # response.completed (no_finish) must still be replaceable by an error.
    if event.event in _RESPONSES_TERMINAL or event.data == "[DONE]":
        return True
    return event.event == "message" and _data_type(event, _RESPONSES_TERMINAL) is not None


def _responses_upstream_error(event: SSEEvent) -> UpstreamError | None:
    # A nested error object would make openai-python raise too, but a flat one or response.failed
    # would not: one shape for all of them, with the code the client can act on.
    if event.event in _RESPONSES_ERRORS:
        return UpstreamError.REPLACE
    if event.event == "message" and _data_type(event, _RESPONSES_ERRORS) is not None:
        return UpstreamError.REPLACE
    return None


def _responses_trailer(event: SSEEvent) -> bool:
    return event.data == "[DONE]"  # tolerated after response.completed, never required


RESPONSES = Wire(
    api=Api.RESPONSES, terminal=_responses_terminal, upstream_error=_responses_upstream_error,
    error_frame=responses_error_frame, sentinel=b"", trailer=_responses_trailer,
    messages={
        Ending.TRUNCATED: "the upstream stopped after content without response.completed or "
                          "response.incomplete; the answer is incomplete",
        Ending.NO_FINISH: "the upstream ended the stream (data: [DONE] or response.done) without "
                          "response.completed or response.incomplete",
        Ending.CUT_MID_FRAME: "the upstream body stopped in the middle of an event",
        Ending.EMPTY: "the upstream sent no event at all",
    },
)

# ── messages ─────────────────────────────────────────────────────────────────────────────────────


def messages_error_frame(code: str, message: str, sent: bytes = b"") -> bytes:
    """The ``event: error`` the anthropic SDKs raise on; the message starts with the ending's name."""
    body = {"type": "error", "error": {"type": "api_error", "message": f"{code}: {message}"}}
    return b"event: error\ndata: " + _dumps(body) + b"\n\n"


def _messages_terminal(event: SSEEvent) -> bool:
    return event.event == "message_stop"


def _messages_upstream_error(event: SSEEvent) -> UpstreamError | None:
    return UpstreamError.FORWARD if event.event == "error" else None


MESSAGES = Wire(
    api=Api.MESSAGES, terminal=_messages_terminal, upstream_error=_messages_upstream_error,
    error_frame=messages_error_frame, sentinel=MESSAGE_STOP_FRAME, trailer=_never,
    messages={
        Ending.TRUNCATED: "the upstream stopped after content with neither a stop_reason nor "
                          "message_stop; the answer is incomplete",
        Ending.NO_FINISH: "the upstream sent message_stop without a stop_reason",
        Ending.NO_DONE: "the upstream gave a stop_reason but never sent message_stop",
        Ending.CUT_MID_FRAME: "the upstream body stopped in the middle of an event",
        Ending.EMPTY: "the upstream sent no event at all",
    },
)

WIRES: Mapping[Api, Wire] = {w.api: w for w in (CHAT, RESPONSES, MESSAGES)}
