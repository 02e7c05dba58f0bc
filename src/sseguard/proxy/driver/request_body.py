"""The body of a guarded request as the proxy reads it: bounded, its content coding undone.

The proxy's server keeps request bodies as the client sent them (no automatic decompression), so
that a path relayed as is reaches the upstream byte for byte, its ``Content-Encoding`` and
``Content-Length`` still true. A guarded endpoint must read the JSON inside: ``gzip`` and
``deflate`` (zlib or raw) are undone here, bounded by ``--max-body`` however far the data would
inflate; any other coding, or data that does not decode, is the client's fault (``BodyRefused``:
415 or 400 in the protocol's own shape), never a 500.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from aiohttp import web


@dataclass(frozen=True, slots=True)
class BodyRefused(Exception):
    """A request body the proxy cannot read: the answer's status, message and error code."""

    status: int
    message: str
    code: str


class TooLarge(Exception):
    """The body (as sent, or once decoded) is larger than ``--max-body``."""


#: zlib's ``wbits`` per coding: gzip's header, zlib's header, or (deflate as some clients send it) none.
_WBITS = {"gzip": (16 + zlib.MAX_WBITS,), "x-gzip": (16 + zlib.MAX_WBITS,),
          "deflate": (zlib.MAX_WBITS, -zlib.MAX_WBITS)}


async def read_body(request: web.Request, limit: int) -> bytes:
    """The request body as sent, at most ``limit`` bytes (``TooLarge`` beyond); a body the HTTP layer
    could not frame (a broken chunked encoding) is ``BodyRefused``."""
    if request.content_length is not None and request.content_length > limit:
        raise TooLarge
    content = request.content
    try:
        if content.is_eof():
            # The whole body came with the headers (a JSON request usually does): take it as it is,
            # without an async iteration (and its StopAsyncIteration) on the way to the first chunk.
            body = content.read_nowait()
            if len(body) > limit:
                raise TooLarge
            return body
        buf = bytearray()
        async for chunk in content.iter_any():
            buf += chunk
            if len(buf) > limit:
                raise TooLarge
        return bytes(buf)
    except web.RequestPayloadError as exc:
        raise BodyRefused(400, f"the request body could not be read: {exc}",
                          "invalid_body") from None


def decode_body(body: bytes, coding: str | None, limit: int) -> bytes:
    """``body`` with its ``Content-Encoding`` (a comma-separated list, applied in order) undone."""
    codings = [c.strip().lower() for c in (coding or "").split(",") if c.strip()]
    for name in reversed(codings):
        if name == "identity":
            continue
        wbits = _WBITS.get(name)
        if wbits is None:
            raise BodyRefused(415, f"the request body's Content-Encoding {name!r} is not one the "
                                   "proxy reads (gzip, deflate, identity)", "unsupported_encoding")
        body = _inflate(body, name, wbits, limit)
    return body


def _inflate(body: bytes, name: str, choices: tuple[int, ...], limit: int) -> bytes:
    for wbits in choices:
        inflater = zlib.decompressobj(wbits)
        try:
            out = inflater.decompress(body, limit + 1)
        except zlib.error:
            continue
        if len(out) > limit or inflater.unconsumed_tail:
            raise TooLarge
        if not inflater.eof:
            break  # cut short: no other framing makes it whole
        return out
    raise BodyRefused(400, f"the request body is not valid {name} data", "invalid_body")
