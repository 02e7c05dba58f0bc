"""Judge a captured body in one call: for tests of a server or gateway that sends the stream."""

from __future__ import annotations

from typing import Any

from sseguard.contract import checker_for, detect_api
from sseguard.errors import UsageError
from sseguard.verdict import Verdict


def check_stream(body: bytes, api: str | None = None, *, request: dict[str, Any] | None = None,
                 http_status: int = 200) -> Verdict:
    """The verdict on one whole response body; ``api`` is told from the body when not given.

    ``request`` is the request body that produced it (tools, usage asked), in that API's format.
    """
    if not isinstance(body, bytes | bytearray | memoryview):
        raise UsageError(f"check_stream takes the body as bytes, not {type(body).__name__}")
    which = api if api is not None else detect_api(bytes(body))
    checker = checker_for(which or "chat", request)
    checker.feed(bytes(body))
    return checker.close(http_status=http_status)
