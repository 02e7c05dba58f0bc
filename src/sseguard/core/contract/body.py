"""Judge a whole captured body in one call, and tell which protocol it speaks from the body itself.

``check_body`` serves ``sseguard check`` and ``sseguard.testing.check_stream``: one way to judge a body,
whoever holds it. Sniffing asks each protocol's descriptor whether a record could only be its own
(``Protocol.claims``), so a new protocol is recognised without an edit here.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from sseguard.core.contract._base import JSON_ERRORS, decode_json
from sseguard.core.contract.registry import protocol, protocols
from sseguard.core.errors import UsageError
from sseguard.core.jsonarray import JsonArrayDecoder
from sseguard.core.sse import SSEDecoder
from sseguard.core.verdict import Api, Verdict

#: How much of a body ``detect_api`` looks at: the first typed record decides, it comes early.
SNIFF_BYTES = 65536


def _payloads(head: bytes) -> Iterator[str]:
    """The records of a body in either framing (``Framing``): the elements of one JSON array, or the
    data of SSE events."""
    if head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] == b"[":
        for element in JsonArrayDecoder().feed(head):
            yield element.text
    else:
        for event in SSEDecoder().feed(head):
            yield event.data


def _records(body: bytes) -> Iterator[Mapping[str, Any]]:
    """The JSON objects a body's records carry, in order (sentinels, comments and garbage skipped)."""
    for data in _payloads(body[:SNIFF_BYTES]):
        if data == "[DONE]":
            continue
        try:
            obj = decode_json(data)
        except JSON_ERRORS:
            continue
        if isinstance(obj, dict):
            yield obj


def detect_api(body: bytes) -> Api | None:
    """Which protocol a captured stream body speaks, from its first recognisable record, or None.

    Each protocol's descriptor says which records only it sends (``chat.completion.chunk`` objects;
    ``response.*`` types numbered by ``sequence_number``; ``message_start`` and the other Messages
    event types). Error frames, pings, comments and garbage say nothing, so a body of only those is
    None.
    """
    known = protocols()
    for obj in _records(body):
        for proto in known:
            if proto.claims(obj):
                return proto.api
    return None


def check_body(body: bytes, api: str | Api | None = None, *, request: dict[str, Any] | None = None,
               markup: str | Iterable[str] | None = "all", http_status: int = 200,
               default: Api = Api.CHAT) -> Verdict:
    """The verdict on one whole response body: ``api`` told from the body when not given.

    A body no protocol claims (only errors, pings, garbage) is judged as ``default``. ``request`` is
    the request body that produced it (tools, usage asked), in that API's format. With a non-2xx
    ``http_status`` the body is the error body the server answered with, not a stream.
    """
    if not isinstance(body, bytes | bytearray | memoryview):
        raise UsageError(f"the body must be bytes, not {type(body).__name__}")
    raw = bytes(body)
    which = protocol(api if api is not None else (detect_api(raw) or default))
    checker = which.checker(request, markup=markup, keep_text=True)
    if not 200 <= http_status < 300:
        # A non-2xx answer is no stream: its body is the error the server sent, kept as the verdict's.
        return checker.close(http_status=http_status, body=raw)
    checker.feed(raw)
    return checker.close(http_status=http_status)
