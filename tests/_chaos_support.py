"""Helpers for the chaos tests: one real request over loopback, checked by the real StreamChecker."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import httpx2

from sseguard.contract import StreamChecker
from sseguard.verdict import Verdict

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
                headers: dict[str, str] | None = None) -> Outcome:
    """POST ``request``, feed the raw body to a StreamChecker, close it the way the body ended."""
    hdrs = dict(headers or {})
    if inject is not None:
        hdrs["x-sseguard-inject"] = inject
    checker = StreamChecker(request)
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


def within_binomial(hits: int, n: int, p: float, sigmas: float = 4.0) -> bool:
    """``hits`` out of ``n`` is consistent with rate ``p`` (a wide band: the seeds are fixed)."""
    mean = n * p
    return abs(hits - mean) <= sigmas * math.sqrt(n * p * (1 - p)) + 1
