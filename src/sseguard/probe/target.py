"""Where requests go and which connection carried them: shared by the asyncio run of a request
(``request.py``) and the Locust user.

Nothing here imports an HTTP library, so a gevent process (Locust) can use it without loading asyncio.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from sseguard.probe.config import Arm


@dataclass(frozen=True, slots=True)
class Target:
    """An arm ready to be sent to: its URL and its request headers, key included (never stored)."""

    arm: Arm
    url: str
    headers: Mapping[str, str]
    #: The URL's path, as records keep it: worked out once here, not per request.
    path: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", urlsplit(self.url).path or "/")

    @classmethod
    def of(cls, arm: Arm, environ: Mapping[str, str] | None = None) -> Target:
        headers = {"content-type": "application/json", "accept": "text/event-stream",
                   **arm.request_headers(environ)}
        return cls(arm=arm, url=arm.url, headers=headers)

    @property
    def secrets(self) -> list[str]:
        """The key values this target sends, for the ``Redactor``."""
        key_header = self.arm.key_header_name.lower()
        out = []
        for name, value in self.headers.items():
            if name.lower() == key_header:
                out.append(value)
                if value.lower().startswith("bearer "):
                    out.append(value[7:])
        return out



class ConnectionTracker:
    """Numbers connections and counts the requests each has carried (the reuse index).

    Keyed weakly on the runner's per-connection object (aiohttp's protocol, a gevent socket), so a
    closed connection is forgotten and a new one with the same port is a new connection.
    """

    def __init__(self) -> None:
        self._seen: weakref.WeakKeyDictionary[object, list[int]] = weakref.WeakKeyDictionary()
        self._next = 0

    def use(self, protocol: object | None) -> tuple[str | None, int | None]:
        """(connection label, requests carried before this one) for the connection in use; both None
        when the caller could not see the connection (unknown is not "a fresh connection")."""
        if protocol is None:
            return None, None
        entry = self._seen.get(protocol)
        if entry is None:
            self._next += 1
            entry = [self._next, 0]
            self._seen[protocol] = entry
        reuse = entry[1]
        entry[1] += 1
        return f"c{entry[0]}", reuse
