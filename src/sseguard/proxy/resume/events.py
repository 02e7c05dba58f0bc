"""The frames a resume dialect reads — what the client was sent, and a continuation's body — as SSE
events, split by the core's ``SSEDecoder``.

One splitter for every dialect, the one the checker uses, so that a frame means the same to the
dialect as to the checker whatever its line endings: CR, LF or CRLF, mixed, and split anywhere
between reads (the WHATWG event-stream rules; docs/design/architecture.md "The path of one proxied
streamed request"). The dialects once carried three splitters of their own, each on ``\\n\\n``:
a CRLF continuation (``\\r\\n\\r\\n`` holds no ``\\n\\n``) was never spliced, and a CR-only one
never split at all.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from sseguard.core.sse import SSEDecoder, SSEEvent

_decode = msgspec.json.Decoder()
#: One line with its end (CR, LF or CRLF), or the unterminated rest.
_LINE = re.compile(rb"[^\r\n]*(?:\r\n|\r|\n)?")


def json_of(event: SSEEvent) -> dict[str, Any] | None:
    """The event's data as a JSON object; None when it is not one (``[DONE]``, not JSON, a list)."""
    try:
        obj = _decode.decode(event.data)
    except msgspec.DecodeError:
        return None
    return obj if isinstance(obj, dict) else None


def leading_comments(raw: bytes) -> bytes:
    """The comment and blank lines an event's ``raw`` begins with (keep-alives since the previous
    event), kept when the event itself is rewritten or dropped."""
    end = 0
    for match in _LINE.finditer(raw):
        line = match.group()
        if not line or not (line.startswith(b":") or line in (b"\n", b"\r", b"\r\n")):
            break
        end = match.end()
    return raw[:end]


class EventReader:
    """A continuous stream of bytes, in any split, as the events it completes (``feed``) and, at its
    end, the bytes of a frame still arriving (``close``)."""

    __slots__ = ("_decoder",)

    def __init__(self) -> None:
        self._decoder = SSEDecoder()

    def feed(self, data: bytes) -> list[SSEEvent]:
        """The events ``data`` completes."""
        return self._decoder.feed(data)

    def close(self) -> bytes:
        """The stream ended: what followed its last event, as it came (comments, a cut frame)."""
        return self._decoder.close().raw
