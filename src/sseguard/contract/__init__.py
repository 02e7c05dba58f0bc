"""The streaming contracts of the three wire protocols, behind one door.

``checker_for(api)`` returns the checker of one protocol (``chat``, ``responses``, ``messages``); every
checker has the surface of the chat ``StreamChecker`` (``feed(bytes)``, ``close(...) -> Verdict``,
``saw_content``, ``findings_so_far``), so probe, proxy, client and Locust user take any of them.
``from sseguard.contract import StreamChecker`` stays the chat checker.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sseguard.contract.chat import (
    LEAK_MARKERS,
    TAIL_BYTES,
    StreamChecker,
    leak_markers,
    leak_shapes,
)
from sseguard.errors import UsageError
from sseguard.verdict import Api

__all__ = ["LEAK_MARKERS", "TAIL_BYTES", "Api", "StreamChecker", "api_for_path", "checker_for",
           "leak_markers", "leak_shapes"]


def checker_for(api: str | Api, request: dict[str, Any] | None = None, *,
                markup: str | Iterable[str] | None = "all", keep_text: bool = True) -> StreamChecker:
    """The contract checker for one stream of protocol ``api``; an unknown name is a ``UsageError``."""
    try:
        which = Api(api)
    except ValueError:
        raise UsageError(f"unknown api {api!r}; expected one of: "
                         f"{', '.join(a.value for a in Api)}") from None
    if which is Api.CHAT:
        return StreamChecker(request, markup=markup, keep_text=keep_text)
    raise UsageError(f"the {which} contract is not built yet")


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
