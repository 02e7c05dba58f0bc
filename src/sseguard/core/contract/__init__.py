"""The streaming contracts of the wire protocols, behind one door.

Each protocol is one folder, ``contract/<protocol>/``, the same four modules in each: ``checker.py``
(the stream contract), ``assembler.py`` (the final object, as the SDK folds it), ``request.py`` (how a
conversation is written as its body) and ``relay.py`` (what ends a stream, its error bodies and
frames); its ``__init__.py`` is the one ``Protocol`` descriptor that ties them together (routes, auth,
sniffing, finish reasons, terminal events, …), listed
one line each in ``contract/registry.py``: ``protocols()`` and ``protocol(api)`` are how every consumer
reads them. ``checker_for(api)`` returns the checker of one protocol; every checker has the surface of
the chat ``StreamChecker`` (``feed(bytes)``, ``close(...) -> Verdict``, ``saw_content``, ``saw_done``,
``error_message``, ``findings_so_far``, ``bytes_seen``), so probe, proxy, client and Locust user take any
of them (``Checker`` is their common type). ``from sseguard.core.contract import StreamChecker`` stays
the chat checker. Which protocol a stream speaks is told by the request path (``api_for_path``) or by the body
itself (``detect_api``); ``check_body`` judges a whole captured body.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sseguard.core._renamed import renamed
from sseguard.core.contract._base import TAIL_BYTES
from sseguard.core.contract._base import CheckerBase as Checker
from sseguard.core.contract.body import check_body, detect_api
from sseguard.core.contract.chat import StreamChecker
from sseguard.core.contract.leaks import LEAK_MARKERS, leak_markers, leak_shapes
from sseguard.core.contract.messages import MessagesAssembler, MessagesChecker
from sseguard.core.contract.protocol import Auth, Framing, Protocol, RelayTable, Route, UpstreamError
from sseguard.core.contract.registry import api_names, protocol, protocols
from sseguard.core.contract.responses import ResponsesAssembler, ResponsesChecker
from sseguard.core.verdict import Api

__all__ = ["LEAK_MARKERS", "TAIL_BYTES", "Api", "Auth", "Checker", "Framing", "MessagesAssembler",
           "MessagesChecker", "Protocol", "RelayTable", "ResponsesAssembler", "ResponsesChecker", "Route",
           "StreamChecker", "UpstreamError", "api_for_path", "api_names", "check_body", "checker_for",
           "detect_api", "leak_markers", "leak_shapes", "protocol", "protocol_for_path", "protocols"]


def checker_for(api: str | Api, request: dict[str, Any] | None = None, *,
                markup: str | Iterable[str] | None = "all", keep_text: bool = True) -> Checker:
    """The contract checker for one stream of protocol ``api``; an unknown name is a ``UsageError``."""
    return protocol(api).checker(request, markup=markup, keep_text=keep_text)


def protocol_for_path(path: str) -> Protocol | None:
    """The protocol a request path asks for a stream of, as the SDKs build paths (any base prefix)."""
    for proto in protocols():
        if proto.route_for(path) is not None:
            return proto
    return None


def api_for_path(path: str) -> Api | None:
    """Which protocol a request path speaks, as the SDKs build paths (any base prefix), or None.

    ``/v1/messages/count_tokens`` and ``/v1/responses/{id}`` are not streams of a protocol: only the
    collection endpoints themselves are.
    """
    proto = protocol_for_path(path)
    return proto.api if proto is not None else None

#: Old names → new (docs/design/vocabulary.md "Names": the proxy's relay is the machine).
__getattr__ = renamed(__name__, {"Relay": "RelayTable"})
