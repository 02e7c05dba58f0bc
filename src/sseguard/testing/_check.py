"""Judge a captured body in one call: for tests of a server or gateway that sends the stream."""

from __future__ import annotations

from typing import Any

from sseguard.core.contract import check_body
from sseguard.core.errors import UsageError
from sseguard.core.verdict import Verdict


def check_stream(body: bytes, api: str | None = None, *, request: dict[str, Any] | None = None,
                 http_status: int = 200) -> Verdict:
    """The verdict on one whole response body; ``api`` is told from the body when not given.

    ``request`` is the request body that produced it (tools, usage asked), in that API's format.
    """
    if not isinstance(body, bytes | bytearray | memoryview):
        raise UsageError(f"check_stream takes the body as bytes, not {type(body).__name__}")
    return check_body(bytes(body), api, request=request, http_status=http_status)
