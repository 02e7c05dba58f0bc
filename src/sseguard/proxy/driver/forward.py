"""Forwarding rules: which URL a request may reach, which headers cross the proxy, error bodies.

The target URL is always built from the configured upstream plus a checked path, never from anything
the client names (absolute-form request targets, ``Host``, ``..`` segments, encoded slashes), so the
proxy cannot be used as an open relay.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any
from urllib.parse import unquote

from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from sseguard.core.contract import Protocol, Route, protocols
from sseguard.core.redact import Redactor

#: Connection-specific headers, the one list of them: RFC 9110 §7.6.1's, the legacy ones proxies
#: still see, and ``HTTP2-Settings``, which a client sends with ``Upgrade: h2c`` for this connection
#: only (RFC 7540 §3.2.1 makes it connection-specific; RFC 9113 deprecates the upgrade, clients
#: such as curl --http2 still send it).
HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection",
    "te", "trailer", "trailers", "transfer-encoding", "upgrade", "http2-settings",
})
# Set by the HTTP layers on each hop, never copied: length and encoding are re-framed per hop.
_REQUEST_DROP = HOP_BY_HOP | {"host", "content-length", "expect"}
_RESPONSE_DROP = HOP_BY_HOP | {"content-length", "content-encoding"}

STREAM_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class PathRejected(ValueError):
    """The request path could escape the upstream's base path."""


def _connection_tokens(headers: CIMultiDictProxy[str]) -> set[str]:
    tokens: set[str] = set()
    for value in headers.getall("Connection", ()):
        tokens.update(t.strip().lower() for t in value.split(",") if t.strip())
    return tokens


def request_headers(headers: CIMultiDictProxy[str], *, identity: bool,
                    body_read: bool = False) -> CIMultiDict[str]:
    """The client's headers for the upstream, ``Authorization`` included (it goes there and only there).

    ``identity`` asks the upstream for an uncompressed body: a stream is checked as it passes, and
    compressed bytes could not be checked (or forwarded) frame by frame. ``body_read``: the body
    sent is the one the proxy read and decoded (``request_body``), so the client's
    ``Content-Encoding`` no longer describes it.
    """
    out = CIMultiDict(headers)
    _drop(out, _REQUEST_DROP, headers)
    if body_read:
        out.popall("Content-Encoding", None)
    if identity:
        out["Accept-Encoding"] = "identity"
    return out


def response_headers(headers: CIMultiDictProxy[str], *, keep_framing: bool,
                     into: CIMultiDict[str] | None = None) -> CIMultiDict[str]:
    """The upstream's headers for the client; ``keep_framing`` keeps length and encoding (raw copy).

    ``into``: added to these (a response's own ``headers``: a stream's headers are not copied twice).
    """
    if into is None:
        out = CIMultiDict(headers)
    else:
        out = into
        out.extend(headers)
    _drop(out, HOP_BY_HOP if keep_framing else _RESPONSE_DROP, headers)
    return out


def _drop(out: CIMultiDict[str], names: frozenset[str], headers: CIMultiDictProxy[str]) -> None:
    """Remove ``names`` and those the ``Connection`` header lists from a copy of ``headers``.

    Copy, then remove: the copy is multidict's own (C) loop, and only the few names present are
    looked at again; a Python loop lowering and filtering every header cost more on every stream.
    """
    for name in names:
        if name in out:
            del out[name]
    if "connection" in headers:
        for name in _connection_tokens(headers):
            out.popall(name, None)


#: Every mount a protocol is served under (``Protocol.mounts``), ``/v1`` first: what the proxy serves.
MOUNTS: tuple[str, ...] = tuple(dict.fromkeys(
    ["/v1", *(mount for proto in protocols() for mount in proto.mounts)]))


#: Distinct request paths whose checks and routes are kept (a handful per deployment: the protocols'
#: endpoints, Gemini's one per model); more only evict the oldest, so many paths cost no more memory.
_PATHS_KEPT = 256


@functools.lru_cache(maxsize=_PATHS_KEPT)
def stream_route(raw_path: str) -> tuple[Protocol, Route] | None:
    """The protocol and route a ``POST`` to ``raw_path`` speaks (``api_for_path`` and the route that
    says whether it streams, in one pass), or None; kept per path, as the routes never change."""
    for proto in protocols():
        route = proto.route_for(raw_path)
        if route is not None:
            return proto, route
    return None


def upstream_url(base: URL, request: web.BaseRequest) -> URL:
    """Map ``/v1/<rest>?<query>`` onto ``<base>/<rest>?<query>``; raise ``PathRejected`` otherwise.

    Another protocol mount (``/v1beta/<rest>``, ``Protocol.mounts``) replaces the base's final ``/v1``.

    Works on the raw (still percent-encoded) path, so what is checked is exactly what is sent.
    """
    # rel_url drops the scheme and host of an absolute-form target ("GET http://elsewhere/v1/x"):
    # whatever host a client names, only the path is used.
    rel = request.rel_url
    return _upstream_url(base, rel.raw_path, rel.raw_query_string)


@functools.lru_cache(maxsize=_PATHS_KEPT)
def _upstream_url(base: URL, raw: str, query: str) -> URL:
    """``upstream_url``, checked and built once per path and query (a rejected path is not kept)."""
    mount = next((m for m in MOUNTS if raw.startswith(f"{m}/")), None)
    if mount is None:
        raise PathRejected(f"only {', '.join(f'{m}/*' for m in MOUNTS)} is forwarded")
    rest = raw[len(mount) + 1:]
    base_path = base.raw_path
    if mount != "/v1":
        # Another API version's mount (Gemini's /v1beta) takes the place of the upstream's /v1.
        if not base_path.endswith("/v1"):
            raise PathRejected(f"{mount}/* is forwarded only to an upstream whose base ends in /v1")
        base_path = base_path[: -len("/v1")] + mount
    for segment in rest.split("/"):
        decoded = unquote(segment)
        if decoded in (".", "..") or "/" in decoded or "\\" in decoded or "\x00" in decoded:
            raise PathRejected(f"path segment {segment!r} is not allowed")
    if not rest or "//" in raw:
        raise PathRejected("empty path segment")
    target = str(base.with_path(f"{base_path}/{rest}", encoded=True))
    return URL(f"{target}?{query}" if query else target, encoded=True)


def error_body(proto: Protocol, status: int, message: str, *, type_: str,
               code: str) -> dict[str, Any]:
    """The proxy's own error answer in ``proto``'s shape, which the client's SDK raises as ``status``.

    The body is the protocol's own for that status (``Protocol.status_error``: Google's
    ``{"error": {"code", "message", "status"}}`` for Gemini, Anthropic's ``{"type": "error", …}``,
    OpenAI's error object); where the shape has an error type (OpenAI's, Anthropic's), it names the
    proxy's ``type_`` and carries its ``code`` (``upstream_unreachable``), which their SDKs keep.
    """
    body = proto.status_error(status, message)
    error = body.get("error")
    if isinstance(error, dict) and "type" in error:
        error["type"] = type_
        error["code"] = code
    return body


def error_response(proto: Protocol, status: int, message: str, *, type_: str, code: str,
                   headers: Iterable[tuple[str, str]] = ()) -> web.Response:
    """``error_body`` as a JSON response of ``status``."""
    resp = web.json_response(error_body(proto, status, message, type_=type_, code=code),
                             status=status)
    for name, value in headers:
        resp.headers[name] = value
    return resp


def unreachable(upstream: URL, exc: BaseException, redactor: Redactor) -> str:
    """Why the upstream could not be reached, in one line without secrets."""
    reason = str(exc) or type(exc).__name__
    return redactor.text(f"the upstream {upstream} is unreachable: {reason}")


def _own_headers() -> dict[str, Protocol]:
    """Request headers only one protocol sends (its required headers, an auth header no other
    protocol uses): such a header tells whose client is asking on a path of no protocol's."""
    seen: dict[str, list[Protocol]] = {}
    for proto in protocols():
        for name in {*(h.lower() for h in proto.headers), proto.auth.header.lower()}:
            seen.setdefault(name, []).append(proto)
    return {name: found[0] for name, found in seen.items() if len(found) == 1}


_OWN_HEADERS = _own_headers()


def client_protocol(request: web.BaseRequest, found: Protocol | None) -> Protocol:
    """The protocol whose error shape the proxy's own answers to ``request`` take.

    A guarded route's protocol (``found``) when there is one; otherwise the protocol a header only it
    sends names (``anthropic-version``, ``x-goog-api-key``), then the one whose own mount the path is
    under (``/v1beta``), then the first protocol (OpenAI's shape, which most clients read).
    """
    if found is not None:
        return found
    headers = request.headers
    for name, proto in _OWN_HEADERS.items():
        if name in headers:
            return proto
    raw = request.rel_url.raw_path
    for proto in protocols():
        mount = proto.mounts[0]
        if mount != "/v1" and raw.startswith(f"{mount}/"):
            return proto
    return protocols()[0]


class HeadersWithFirstBytes(web.StreamResponse):
    """A stream response whose headers wait for its first body bytes: one write, one TCP segment.

    ``web.StreamResponse`` sends its headers on ``prepare()``, so a stream whose first frames are
    already in hand (``--retry``: the headers wait for the upstream's first event) would reach the
    client in two writes and two segments, the frames a wake-up later. aiohttp buffers the headers
    until the first body write (or the end) when a response opts out of sending them at once
    (``web.Response`` does); the relay sends them itself (``send_headers``) if its first read
    writes nothing.
    """

    _send_headers_immediately = False
