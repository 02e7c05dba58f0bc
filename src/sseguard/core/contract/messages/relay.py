"""The messages protocol's relay table: what ends a stream, its error bodies and frames."""

from __future__ import annotations

from typing import Any

from sseguard.core.contract.protocol import UpstreamError, dumps
from sseguard.core.sse import SSEEvent

#: The error ``type`` Anthropic's API gives each HTTP status (``api_error`` for the rest).
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
               503: "overloaded_error", 529: "overloaded_error"}
#: Every Anthropic API version this was checked against; the one its SDKs send.
ANTHROPIC_VERSION = "2023-06-01"
MESSAGE_STOP = "message_stop"
MESSAGE_STOP_FRAME = b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
#: Event types only an Anthropic Messages stream sends (``message_start`` opens every one).
EVENT_TYPES = frozenset({"message_start", "content_block_start", "content_block_delta",
                         "content_block_stop", "message_delta", MESSAGE_STOP})


def error_body(message: str, *, type_: str, code: str | int | None = None,
               param: str | None = None) -> dict[str, Any]:
    """Anthropic's error shape ``{"type": "error", "error": {"type", "message"}}``; a ``code`` rides
    along when given (its SDK keeps the whole body). Anthropic names no ``param``."""
    error: dict[str, Any] = {"type": type_, "message": message}
    if code is not None:
        error["code"] = code
    return {"type": "error", "error": error}


def status_error(status: int, message: str) -> dict[str, Any]:
    """The error body Anthropic's API sends for an HTTP status."""
    return error_body(message, type_=ERROR_TYPES.get(status, "api_error"))


def messages_error_frame(code: str, message: str, sent: bytes = b"") -> bytes:
    """The ``event: error`` the anthropic SDKs raise on; the message starts with the ending's name."""
    body = {"type": "error", "error": {"type": "api_error", "message": f"{code}: {message}"}}
    return b"event: error\ndata: " + dumps(body) + b"\n\n"


def is_terminal(event: SSEEvent) -> bool:
    return event.event == MESSAGE_STOP


def upstream_error_of(event: SSEEvent) -> UpstreamError | None:
    return UpstreamError.FORWARD if event.event == "error" else None
