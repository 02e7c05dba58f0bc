"""``--resume``: after a chat stream broke with content forwarded, ask for the rest and relay it on.

``StreamResumer`` is the relay's ``Resumer``: it notes what the client got (``resume.ChatResume``,
``resume_messages.MessagesResume``), and
when the upstream's answer ends in a way a continuation can cure (``resume.RESUMABLE``) it records that
answer as an attempt (``heal_of``), asks the upstream for the continuation, re-checks the client's
stream from what the client already has, and hands the relay the continuation's body spliced into the
client's stream (``resume.Splice``). Anything else — a tool call or reasoning already forwarded, no
continuation left, an upstream that refuses the continuation — gives None, and the stream ends as it
would without ``--resume``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp

from sseguard.contract import checker_for
from sseguard.proxy.frames import Failure, Frames
from sseguard.proxy.relay import StreamRelay
from sseguard.proxy.resume import RESUMABLE, ChatResume, HeldToolCalls, Splice
from sseguard.proxy.resume_messages import HeldToolUse, MessagesResume, MessagesSplice
from sseguard.proxy.retry import completion_tokens
from sseguard.proxy.stall import Body, StallWatch
from sseguard.verdict import Api

#: Sends a continuation request body upstream: its 2xx response, or None (unreachable, refused).
Ask = Callable[[bytes], Awaitable[aiohttp.ClientResponse | None]]
Resume = ChatResume | MessagesResume


def resumer_for(dialects: str | None, api: Api, request_obj: dict[str, Any], continuations: int,
                ask: Ask) -> tuple[StreamResumer, Frames] | None:
    """The resumer and the frames (tool calls held) of a stream of ``api``, if ``--resume`` covers it."""
    names = (dialects or "").split(",")
    if api is Api.CHAT and "vllm" in names:
        return StreamResumer(ChatResume(request_obj, continuations), ask, api), HeldToolCalls()
    if api is Api.MESSAGES and "anthropic" in names:
        return StreamResumer(MessagesResume(request_obj, continuations), ask, api), HeldToolUse()
    return None


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
    """One stream's ``--resume`` (``vllm`` for chat, ``anthropic`` for messages)."""

    def __init__(self, state: Resume, ask: Ask, api: Api) -> None:
        self.state = state
        self._ask = ask
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
        continuation = await self._ask(self.state.body())
        if continuation is None:
            return None
        relay.record_attempt(verdict, completion_tokens(verdict))
        relay.upstream_headers = dict(continuation.headers)
        relay.restart(checker_for(self.api, relay.request_obj, keep_text=False),
                      b"".join(self.state.forwarded))
        # What the broken answer held back is not the client's.
        relay.frames = HeldToolCalls() if self.api is Api.CHAT else HeldToolUse()
        body = SplicedBody(continuation.content, self.state.splice())
        return continuation, StallWatch(relay.loop, relay.config.stall_timeout,
                                        continuation.content), body
