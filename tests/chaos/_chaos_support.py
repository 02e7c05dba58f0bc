"""Helpers for the chaos tests: one real request over loopback, checked by the real StreamChecker."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import httpx2

from sseguard.core.contract import checker_for
from sseguard.core.verdict import Verdict

WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"location": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["location"],
        },
    },
}
TIME_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {"name": "get_time", "parameters": {
        "type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}},
}


def chat_request(*, stream: bool = True, usage: bool = True, tools: list[dict[str, Any]] | None = None,
                 content: str = "Say something.", **extra: Any) -> dict[str, Any]:
    req: dict[str, Any] = {"model": "chaos-1", "stream": stream,
                           "messages": [{"role": "user", "content": content}]}
    if stream and usage:
        req["stream_options"] = {"include_usage": True}
    if tools is not None:
        req["tools"] = tools
    req.update(extra)
    return req


@dataclass
class Outcome:
    verdict: Verdict
    status: int
    headers: httpx2.Headers
    body: bytes
    error: str | None = None


async def fetch(client: httpx2.AsyncClient, url: str, request: dict[str, Any], *,
                inject: str | None = None, read_timeout: float = 5.0,
                headers: dict[str, str] | None = None, api: str = "chat") -> Outcome:
    """POST ``request``, feed the raw body to ``api``'s checker, close it the way the body ended."""
    hdrs = dict(headers or {})
    if inject is not None:
        hdrs["x-sseguard-inject"] = inject
    checker = checker_for(api, request)
    body = bytearray()
    status, resp_headers = 0, httpx2.Headers()
    try:
        async with client.stream("POST", url, json=request, headers=hdrs,
                                 timeout=httpx2.Timeout(10.0, read=read_timeout)) as resp:
            status, resp_headers = resp.status_code, resp.headers
            if not 200 <= status < 300:
                raw = await resp.aread()
                return Outcome(checker.close(http_status=status, body=raw), status, resp_headers,
                               raw)
            async for data in resp.aiter_raw():
                body += data
                checker.feed(data)
    except httpx2.ReadTimeout:
        return Outcome(checker.close(stalled=True), status, resp_headers, bytes(body), "stalled")
    except httpx2.TransportError as exc:
        return Outcome(checker.close(transport_error=repr(exc)), status, resp_headers,
                       bytes(body), repr(exc))
    return Outcome(checker.close(), status, resp_headers, bytes(body))


def recheck_byte_by_byte(api: str, request: dict[str, Any], out: Outcome) -> Verdict:
    """The verdict of ``out``'s body fed one byte at a time, closed the way the body ended."""
    checker = checker_for(api, request)
    if not 200 <= out.status < 300:
        return checker.close(http_status=out.status, body=out.body)
    for i in range(len(out.body)):
        checker.feed(out.body[i:i + 1])
    if out.error == "stalled":
        return checker.close(stalled=True)
    if out.error is not None:
        return checker.close(transport_error=out.error)
    return checker.close()


def verdict_in_pieces(api: str, request: dict[str, Any], body: bytes, cuts: list[int]) -> Verdict:
    """The verdict of ``body`` fed to ``api``'s checker split at ``cuts`` (taken modulo its length)."""
    checker = checker_for(api, request)
    points = sorted({c % (len(body) + 1) for c in cuts})
    for a, b in zip([0, *points], [*points, len(body)], strict=True):
        checker.feed(body[a:b])
    return checker.close()


def within_binomial(hits: int, n: int, p: float, sigmas: float = 4.0) -> bool:
    """``hits`` out of ``n`` is consistent with rate ``p`` (a wide band: the seeds are fixed)."""
    mean = n * p
    return abs(hits - mean) <= sigmas * math.sqrt(n * p * (1 - p)) + 1
