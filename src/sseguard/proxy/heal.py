"""``--resume``: after a stream broke with content forwarded, ask for the rest and relay it on.

``StreamResumer`` is the relay's ``Resumer``: it notes what the client got (``resume.ChatResume``,
``resume_messages.MessagesResume``), and when the upstream's answer ends in a way a continuation can
cure (``resume.RESUMABLE``) it records that answer as an attempt (``heal_of``), asks the upstream
for the continuation, re-checks the client's stream from what the client already has, and hands the
relay the continuation's body spliced into the client's stream (``resume.Splice``). Continuations go
where the request went, but for ``deepseek``, whose prefix completion is served only by its beta
API: to ``--resume-base-url`` plus the request's path after the upstream base
(``…/beta/chat/completions``). Each attempt's record keeps its own usage; the client's stream
reports the usage summed (``resume_usage.py``). Anything else — a tool call or reasoning already
forwarded, no continuation left, an upstream that refuses the continuation — gives None, and the
stream ends as it would without ``--resume``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import aiohttp
from yarl import URL

from sseguard.contract import checker_for
from sseguard.proxy.config import ProxyConfig
from sseguard.proxy.frames import Failure, Frames
from sseguard.proxy.relay import StreamRelay
from sseguard.proxy.resume import RESUMABLE, ChatResume, HeldToolCalls, Splice
from sseguard.proxy.resume_messages import HeldToolUse, MessagesResume, MessagesSplice
from sseguard.proxy.stall import Body, StallWatch
from sseguard.verdict import Api, Verdict

#: Sends a continuation request body to a URL: its 2xx response, or None (unreachable, refused).
Ask = Callable[[URL, bytes], Awaitable[aiohttp.ClientResponse | None]]
Resume = ChatResume | MessagesResume


def resumer_for(config: ProxyConfig, api: Api, request_obj: dict[str, Any], target: URL,
                ask: Ask) -> tuple[StreamResumer, Frames] | None:
    """The resumer and the frames (tool calls held) of a stream of ``api`` sent to ``target``, if
    ``--resume`` covers it."""
    names = (config.resume or "").split(",")
    continuations = config.resume_max
    if api is Api.CHAT and "vllm" in names:
        state: Resume = ChatResume(request_obj, continuations)
    elif api is Api.CHAT and "deepseek" in names:
        state = ChatResume(request_obj, continuations, "deepseek")
        target = continuation_url(config, target)
    elif api is Api.MESSAGES and "anthropic" in names:
        return StreamResumer(MessagesResume(request_obj, continuations), ask, target,
                             api), HeldToolUse()
    else:
        return None
    return StreamResumer(state, ask, target, api), HeldToolCalls()


def continuation_url(config: ProxyConfig, target: URL) -> URL:
    """``target`` (the upstream base plus the client's path) moved onto ``--resume-base-url``."""
    base = config.resume_base_url
    if base is None:
        return target
    prefix = config.upstream.raw_path.rstrip("/") + "/"
    rest = target.raw_path[len(prefix):] if target.raw_path.startswith(prefix) else \
        target.raw_path.rpartition("/")[2]
    url = str(base.with_path(f"{base.raw_path.rstrip('/')}/{rest}", encoded=True))
    query = target.raw_query_string
    return URL(f"{url}?{query}" if query else url, encoded=True)


def _own_usage(verdict: Verdict, usage: dict[str, Any] | None) -> Verdict:
    """An attempt's verdict with the usage that attempt itself reported (the checker of a continued
    stream has also read what the client got before it)."""
    message = {k: v for k, v in verdict.message.items() if k != "usage"}
    if usage is not None:
        message["usage"] = usage
    return replace(verdict, message=message)


class SplicedBody:
    """A continuation's body, read through its ``Splice`` (whole frames, rewritten for the client)."""

    def __init__(self, content: Body, splice: Splice | MessagesSplice) -> None:
        self._content = content
        self._splice = splice
        self._ended = False

    async def read(self, n: int = -1) -> bytes:
        while True:
            chunk = await self._content.read(n)
            if not chunk:
                if self._ended:
                    return b""
                self._ended = True
                return self._splice.close()  # a frame cut at the end goes on: the checker sees it
            out = self._splice.feed(chunk)
            if out:
                return out

    def failure(self) -> Failure | None:
        if self._splice.failure is None:
            return None
        return ("resume_mismatch", self._splice.failure)


class StreamResumer:
    """One stream's ``--resume`` (``vllm`` or ``deepseek`` for chat, ``anthropic`` for messages)."""

    def __init__(self, state: Resume, ask: Ask, target: URL, api: Api) -> None:
        self.state = state
        self._ask = ask
        self.target = target  # where continuations go
        self.api = api
        self.note = state.note

    async def next(self, relay: StreamRelay, upstream: aiohttp.ClientResponse, watch: StallWatch,
                   transport_error: str | None) -> tuple[aiohttp.ClientResponse, StallWatch,
                                                         SplicedBody] | None:
        if relay.outcome.extra.get("lingered_after_done") or not self.state.forwarded:
            return None  # a whole answer whose body did not end, or nothing the client has
        verdict = relay.upstream_verdict(transport_error, watch.fired)
        if str(verdict.ending) not in RESUMABLE or self.state.why_not() is not None:
            return None
        upstream.close()
        watch.close()
        continuation = await self._ask(self.target, self.state.body())
        if continuation is None:
            return None
        usage, tokens = self.state.usage.end_attempt()
        relay.record_attempt(_own_usage(verdict, usage), tokens)
        relay.upstream_headers = dict(continuation.headers)
        relay.restart(checker_for(self.api, relay.request_obj, keep_text=False),
                      b"".join(self.state.forwarded))
        # What the broken answer held back is not the client's.
        relay.frames = HeldToolCalls() if self.api is Api.CHAT else HeldToolUse()
        body = SplicedBody(continuation.content, self.state.splice())
        return continuation, StallWatch(relay.loop, relay.config.stall_timeout,
                                        continuation.content), body
