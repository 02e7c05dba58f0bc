"""The streaming contracts of the three wire protocols, behind one door.

``checker_for(api)`` returns the checker of one protocol (``chat``, ``responses``, ``messages``); every
checker has the surface of the chat ``StreamChecker`` (``feed(bytes)``, ``close(...) -> Verdict``,
``saw_content``, ``saw_done``, ``error_message``, ``findings_so_far``, ``bytes_seen``), so probe, proxy,
client and Locust user take any of them (``Checker`` is their common type). ``from sseguard.contract
import StreamChecker`` stays the chat checker. Which protocol a stream speaks is told by the request path
(``api_for_path``) or by the body itself (``detect_api``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sseguard.contract._base import JSON_ERRORS, TAIL_BYTES, decode_json
from sseguard.contract._base import CheckerBase as Checker
from sseguard.contract.chat import StreamChecker
from sseguard.contract.leaks import LEAK_MARKERS, leak_markers, leak_shapes
from sseguard.contract.messages import MessagesAssembler, MessagesChecker
from sseguard.contract.responses import ResponsesAssembler, ResponsesChecker
from sseguard.errors import UsageError
from sseguard.sse import SSEDecoder
from sseguard.verdict import Api

__all__ = ["LEAK_MARKERS", "TAIL_BYTES", "Api", "Checker", "MessagesAssembler", "MessagesChecker",
           "ResponsesAssembler", "ResponsesChecker", "StreamChecker", "api_for_path", "checker_for",
           "detect_api", "leak_markers", "leak_shapes"]

_CHECKERS: dict[Api, type[StreamChecker] | type[ResponsesChecker] | type[MessagesChecker]] = {
    Api.CHAT: StreamChecker,
    Api.RESPONSES: ResponsesChecker,
    Api.MESSAGES: MessagesChecker,
}

#: Event types only an Anthropic Messages stream sends (``message_start`` opens every one).
_MESSAGES_TYPES = frozenset({"message_start", "content_block_start", "content_block_delta",
                             "content_block_stop", "message_delta", "message_stop"})
#: How much of a body ``detect_api`` looks at: the first typed event decides, it comes early.
_SNIFF_BYTES = 65536


def checker_for(api: str | Api, request: dict[str, Any] | None = None, *,
                markup: str | Iterable[str] | None = "all", keep_text: bool = True) -> Checker:
    """The contract checker for one stream of protocol ``api``; an unknown name is a ``UsageError``."""
    try:
        which = Api(api)
    except ValueError:
        raise UsageError(f"unknown api {api!r}; expected one of: "
                         f"{', '.join(a.value for a in Api)}") from None
    return _CHECKERS[which](request, markup=markup, keep_text=keep_text)


def api_for_path(path: str) -> Api | None:
    """Which protocol a request path speaks, as the SDKs build paths (any base prefix), or None.

    ``/v1/messages/count_tokens`` and ``/v1/responses/{id}`` are not streams of a protocol: only the
    collection endpoints themselves are.
    """
    path = path.split("?", 1)[0].rstrip("/")
    if path.endswith("/chat/completions"):
        return Api.CHAT
    if path.endswith("/responses") or path == "responses":
        return Api.RESPONSES
    if path.endswith("/messages") or path == "messages":
        return Api.MESSAGES
    return None


def detect_api(body: bytes) -> Api | None:
    """Which protocol a captured stream body speaks, from its first recognisable event, or None.

    ``chat.completion.chunk`` objects (or ``choices``) are chat; ``response.*`` types numbered by
    ``sequence_number`` are Responses; ``message_start`` and the other Messages event types are
    Messages. Error frames, pings, comments and garbage say nothing, so a body of only those is None.
    """
    decoder = SSEDecoder()
    for event in decoder.feed(body[:_SNIFF_BYTES]):
        if event.data == "[DONE]":
            continue
        try:
            obj = decode_json(event.data)
        except JSON_ERRORS:
            continue
        if not isinstance(obj, dict):
            continue
        etype = obj.get("type")
        if obj.get("object") == "chat.completion.chunk" or isinstance(obj.get("choices"), list):
            return Api.CHAT
        if isinstance(etype, str):
            if etype.startswith("response.") and "sequence_number" in obj:
                return Api.RESPONSES
            if etype in _MESSAGES_TYPES:
                return Api.MESSAGES
    return None
