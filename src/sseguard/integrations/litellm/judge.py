"""What the guardrail decides about one stream, sans-IO: items in, a ``Judgement`` out.

LiteLLM hands its iterator hook different things per route (measured on 1.108.7, ``docs/litellm.md``):
``/v1/messages`` and Gemini's ``:streamGenerateContent`` give the raw SSE bytes of the upstream;
``/chat/completions`` gives LiteLLM's ``ModelResponseStream`` objects and ``/v1/responses`` its
Responses event objects, parsed by LiteLLM's provider code and written to the client as
``data: <model_dump_json>`` after the hook. So ``wire_bytes`` turns each item into the frame the client
gets for it, the protocol's own checker (``contract.checker_for``, the one every sseguard guard uses)
is fed those frames, and the policy judges the verdict. On the object routes LiteLLM writes
``data: [DONE]`` after the last item when the stream ends without an error: the judge feeds it too,
so the verdict is the one of the stream the client receives.

One thing the client receives is not the upstream's: on ``/chat/completions`` LiteLLM's stream wrapper
ends a stream whose provider sent no ``finish_reason`` (a truncated, cut or ``no_finish`` stream) with
a chunk of its own carrying ``finish_reason: "stop"``. The judge therefore holds a chat chunk with a
finish reason back from its checker until ``close`` is told whether the provider sent one
(``provider_finished``, which the guardrail reads off LiteLLM's stream); when it did not, the filled-in
finish is dropped and the stream is judged as LiteLLM received it: content, then an end without a
finish (``truncated``). Which of truncated, ``no_finish`` or ``cut_mid_frame`` the upstream did is not
visible through that wrapper (``docs/litellm.md``).

This module imports nothing of LiteLLM (nor any I/O library): ``guardrail.py`` is the only one that does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sseguard.core.contract import Checker, checker_for, protocol
from sseguard.core.contract.chat import DONE_FRAME
from sseguard.core.policy import Policy
from sseguard.core.verdict import Api, Ending, Verdict
from sseguard.proxy.machines.outcome import failure_message

#: How much of what the client was last sent a judge keeps: the protocols' error frames read the last
#: event of it (the Responses ``sequence_number`` goes on from there).
_LAST_SENT = 4096
_SSE_STARTS = (b"data:", b"event:", b":", b"id:", b"retry:")


def wire_bytes(item: object) -> bytes | None:
    """The bytes the client gets for one item the hook was handed, or None for an item of a kind the
    judge does not know (counted, passed on untouched, never judged).

    Raw bytes are already the wire; a pydantic object (a ``ModelResponseStream``, a Responses event) is
    written by LiteLLM as one ``data:`` line of its JSON, ``None`` fields left out; a dict the same.
    """
    if isinstance(item, bytes | bytearray | memoryview):
        return bytes(item)
    if isinstance(item, str):
        data = item.encode("utf-8")
        return data if data.startswith(_SSE_STARTS) else b"data: " + data + b"\n\n"
    try:
        dump = getattr(item, "model_dump_json", None)
        if callable(dump):
            text = dump(exclude_none=True)
            return b"data: " + text.encode("utf-8") + b"\n\n" if isinstance(text, str) else None
        if isinstance(item, Mapping):
            return b"data: " + json.dumps(item, ensure_ascii=False).encode("utf-8") + b"\n\n"
    except (TypeError, ValueError):  # an object its own serializer rejects: not judged, passed on
        return None
    return None


@dataclass(frozen=True, slots=True)
class Judgement:
    """The verdict on one stream and what the guardrail does about it."""

    verdict: Verdict
    #: Why the stream fails the policy (an ending or finding name), None when it passes.
    failure: str | None
    #: What the client is told when it fails, in the protocol's words (empty when it passes).
    message: str
    #: The protocol's own error frame (the one ``sseguard proxy`` writes), for a failing stream.
    frame: bytes
    #: What completes a passing stream that only lacks its sentinel, under a completing policy
    #: (``agents``: Messages' ``message_stop``), as the proxy completes it; b"": nothing.
    completion: bytes = b""

    @property
    def passed(self) -> bool:
        return self.failure is None


class HookJudge:
    """Judges one stream of one route from the items LiteLLM's iterator hook is handed.

    ``see(item)`` for every item as it passes (the judge never holds or changes one), then ``close()``
    once the iteration ended (``transport_error``: what it raised, when it raised). ``api`` is the
    route's protocol; ``request`` the client's JSON body (its tools, its ``stream_options``);
    ``done_after_objects``: LiteLLM writes ``data: [DONE]`` after a stream of objects that ends well.
    """

    def __init__(self, api: Api | str, request: Mapping[str, Any] | None = None, *,
                 policy: Policy, markup: str | None = "all", done_after_objects: bool = True) -> None:
        self.api = Api(api)
        self.policy = policy
        self._relay = protocol(self.api).relay
        body = dict(request) if isinstance(request, Mapping) else None
        self.checker: Checker = checker_for(self.api, body, markup=markup, keep_text=False)
        self._done_after_objects = done_after_objects
        self.items = 0  # items handed to ``see``
        self.objects = 0  # of them parsed objects (the judge wrote their frames)
        self.unseen = 0  # of them of a kind the judge does not know: passed on, not judged
        #: Whether the finish the client got was filled in by LiteLLM (``close``'s
        #: ``provider_finished=False``): the record says so.
        self.finish_filled = False
        self._sent = b""
        #: Chat frames held back from the checker from the first one with a finish reason on, each
        #: with whether it carries one (``close`` decides whether that finish was the provider's).
        self._held: list[tuple[bytes, bool]] = []

    @property
    def saw_content(self) -> bool:
        """A content, reasoning or tool-call delta has passed (the client's first token)."""
        return self.checker.saw_content

    def see(self, item: object) -> None:
        """Check one item on its way to the client."""
        self.items += 1
        data = wire_bytes(item)
        if data is None:
            self.unseen += 1
            return
        self._remember(data)
        if not isinstance(item, bytes | bytearray | memoryview | str):
            self.objects += 1
            finishes = self.api is Api.CHAT and _has_finish(item)
            if finishes or self._held:
                self._held.append((data, finishes))
                return
        self._feed(data)

    def close(self, transport_error: str | None = None, *,
              provider_finished: bool | None = None) -> Judgement:
        """The iteration ended (``transport_error``: it raised, with this message): judge the stream.

        ``provider_finished``: whether the provider itself sent a finish reason (chat; None: unknown,
        the finish the hook saw is taken as the provider's)."""
        self.finish_filled = provider_finished is False and any(f for _, f in self._held)
        for data, finishes in self._held:
            if not (finishes and self.finish_filled):
                self._feed(data)
        self._held.clear()
        if transport_error is None and self.objects and self._done_after_objects \
                and not self.finish_filled:
            self.checker.feed(DONE_FRAME)
        verdict = self.checker.close(transport_error=transport_error)
        failure = self.policy.failure(verdict)
        if failure is None:
            completing = (self.policy.complete and verdict.ending is Ending.NO_DONE
                          and transport_error is None)
            return Judgement(verdict, None, "", b"", self._relay.sentinel if completing else b"")
        why = failure_message(verdict, failure, policy=self.policy.name, stall_timeout=0.0,
                              broke=transport_error, messages=self._relay.messages)
        # The protocol's own frame carries the failure as its code (Responses' ``code``, Gemini's
        # message prefix); LiteLLM's frames carry only a message, so that names it too.
        frame = self._relay.error_frame(failure, f"sseguard: {why}", self._sent)
        return Judgement(verdict, failure, f"sseguard: {failure}: {why}", frame)

    def _feed(self, data: bytes) -> None:
        self.checker.feed(data)

    def _remember(self, data: bytes) -> None:
        sent = self._sent + data
        self._sent = sent[-_LAST_SENT:] if len(sent) > _LAST_SENT else sent



def _has_finish(item: object) -> bool:
    """Whether a chat chunk object (LiteLLM's ``ModelResponseStream``) carries a finish reason."""
    choices = getattr(item, "choices", None)
    if not isinstance(choices, list | tuple):
        return False
    return any(getattr(choice, "finish_reason", None) for choice in choices)
