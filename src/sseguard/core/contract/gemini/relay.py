"""Gemini's table for the guarding relay (``Protocol.relay``): what ends a good stream, what an upstream
error record gets, and the guard's own error frame, in both framings.

With ``?alt=sse`` there is no terminal event and no sentinel: the end of the body is the end, and the
guard decides it. In the JSON-array framing the closing ``]`` is held like a terminal event. The SSE
error frame is two (the record, then the same object bare) because the two Google SDKs notice errors
differently (``_bare``); ``docs/proxy.md`` has the frames and what each SDK raises, measured.
"""

from __future__ import annotations

import json

from sseguard.core.contract.protocol import RelayTable, UpstreamError, dumps
from sseguard.core.sse import SSEEvent
from sseguard.core.verdict import Ending

__all__ = ["ARRAY_CLOSE", "RELAY", "gemini_error_frame"]

#: The event name of the JSON array's closing ``]``: no record, but bytes a relay must forward.
ARRAY_CLOSE = "]"


def _in_array(sent: bytes) -> bool:
    """Whether what the guard last sent was an element of the JSON-array framing (not SSE)."""
    return sent.lstrip(b" \t\r\n\xef\xbb\xbf")[:1] in (b"[", b",", b"{")


def _bare(error: bytes) -> bytes:
    """An SSE error record followed by the same error object bare, on its own lines.

    The two SDKs read errors differently. google-genai (Python) raises on the ``data:`` record itself
    (``ServerError``/``ClientError``: its stream loop raises on any chunk whose JSON is an ``error``).
    The ``@google/genai`` JS SDK inside Gemini CLI does not: it looks for ``error`` only when one whole
    network read parses as JSON, and yields a ``data:`` record of an error as a response without
    candidates, silently. But a body that ends with bytes which are no ``data:`` record is
    "Incomplete JSON segment at the end" to it, and a read that is the bare object alone is its
    ``ApiError``: either way it throws (both retryable for the CLI). Any other SSE reader (ours
    included) ignores the bare line, a field it does not know, and sees the ``data:`` record as the
    error event; the blank line after it leaves no event half-read.
    """
    return b"data: " + error + b"\r\n\r\n" + _alone(error)


def _alone(error: bytes) -> bytes:
    return error + b"\r\n\r\n"


def gemini_error_frame(code: str, message: str, sent: bytes = b"") -> bytes:
    """The guard's error: in SSE, a ``data:`` record of it followed by the same object bare (both
    SDKs raise, see ``_bare``); in the JSON-array framing, the array's last element and its ``]``."""
    body = dumps({"error": {"code": 502, "message": f"{code}: {message}", "status": "UNAVAILABLE"}})
    if _in_array(sent):
        return b"\n,\r\n" + body + b"\n]"
    return _bare(body)


def upstream_error_of(event: SSEEvent) -> UpstreamError | None:
    if b'"error"' not in event.raw:
        return None
    try:
        obj = json.loads(event.data)
    except ValueError:
        return None
    return UpstreamError.FORWARD if isinstance(obj, dict) and "error" in obj else None


def _forwarded(event: SSEEvent, sent: bytes) -> bytes:
    """An upstream error record, forwarded with its own code and status (a 429 stays a 429), then
    what makes the JS SDK notice it: in SSE, the same object bare (``_bare``); in the JSON array, the
    ``]`` the upstream will not send after it. The framing is told by what was sent before it, or,
    when it comes first, by the record itself (an array's first element begins with ``[``)."""
    if _in_array(sent or event.raw):
        return event.raw + b"\n]"
    return event.raw + _alone(dumps(json.loads(event.data)))


def _array_close(event: SSEEvent) -> bool:
    return event.event == ARRAY_CLOSE


RELAY = RelayTable(
    # SSE has no terminal event: the end of the body is the end, and the guard decides it. The
    # array framing's closing ``]`` is held like one: sent once the end is known good, or
    # replaced by the guard's error element and its own ``]``.
    terminal=_array_close, upstream_error=upstream_error_of, error_frame=gemini_error_frame,
    sentinel=b"", forwarded=_forwarded,
    messages={
        Ending.TRUNCATED: "the upstream stopped after content without a finishReason; the "
                          "answer is incomplete",
        Ending.CUT_MID_FRAME: "the upstream body stopped in the middle of a record",
        Ending.EMPTY: "the upstream sent no record at all",
    })
