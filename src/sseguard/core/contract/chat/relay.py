"""The chat protocol's relay table: what ends a stream, its error bodies and frames."""

from __future__ import annotations

import json
from typing import Any

from sseguard.core.contract.protocol import UpstreamError, dumps
from sseguard.core.sse import SSEEvent


def status_error(status: int, message: str) -> dict[str, Any]:
    """The error body an OpenAI-compatible server sends for an HTTP status (``type``/``code`` by it)."""
    kind, code = {429: ("rate_limit_error", "rate_limit_exceeded"),
                  503: ("server_error", "service_unavailable")}.get(status, ("server_error", None))
    return error_body(message, type_=kind, code=code if code is not None else status)


def error_body(message: str, *, type_: str, code: str | int | None,
               param: str | None = None) -> dict[str, Any]:
    """OpenAI's error object ``{"error": {"message", "type", "param", "code"}}`` (chat and Responses)."""
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def chat_error_frame(code: str, message: str, sent: bytes = b"") -> bytes:
    """The frame the openai SDKs raise ``APIError`` on (they ignore ``event: error``)."""
    body = {"error": {"message": message, "type": "upstream_stream_error", "code": code}}
    return b"data: " + dumps(body) + b"\n\n"


def is_terminal(event: SSEEvent) -> bool:
    return event.data == DONE


def upstream_error_of(event: SSEEvent) -> UpstreamError | None:
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


#: The sentinel that ends every chat stream.
DONE = "[DONE]"
DONE_FRAME = b"data: [DONE]\n\n"
