"""Continue after the first byte (``--resume vllm``, ``--resume deepseek``): what the client has, how
to ask for the rest, and how the rest is spliced into the client's stream.

A chat stream that breaks after content was forwarded (truncated, cut inside a frame, reset, stall,
``no_finish``) can be continued where the server documents continuation: vLLM and SGLang continue an
assistant message given as the last message with ``"continue_final_message": true,
"add_generation_prompt": false``; DeepSeek's chat prefix completion (a beta feature, served under its
``/beta`` base URL: ``resume/dialects.py`` sends it there) continues a last message ``{"role":
"assistant", "content": SENT, "prefix": true}``. ``ChatResume`` notes every frame the client got (the
text ``SENT``, the client's response id), builds that request, and gives a ``ChatSplice`` that rewrites
the continuation's frames into the client's stream: its opening role delta dropped, the client's id
kept, an exact repeated prefix of ``SENT`` removed, the usage summed over the attempts
(``resume/usage.py``). What cannot be continued exactly is refused, and the stream fails as it would
without ``--resume``: a tool call or reasoning already forwarded (no API continues inside one;
DeepSeek's prefix completion carries no ``reasoning_content`` either), ``n`` > 1, a continuation that
repeats only part of ``SENT`` and ends.

Pure (no I/O): the relay (``driver/stream.py``) asks and pumps, ``driver/guarded.py`` says where to.
"""

from __future__ import annotations

import abc
import copy
import json
from typing import Any

import msgspec

from sseguard.core.sse import SSEEvent
from sseguard.proxy.machines.actions import AskContinuation
from sseguard.proxy.machines.frames import Frames
from sseguard.proxy.resume.events import EventReader, json_of, leading_comments
from sseguard.proxy.resume.usage import CHAT_KEYS, UsageSum

_decode = msgspec.json.Decoder()


class HeldFrames(Frames):
    """Frames held back from the client until the answer shows they are safe to give (the shared
    bookkeeping of ``HeldToolCalls`` and ``messages.HeldToolUse``)."""

    def __init__(self) -> None:
        self.held: list[bytes] = []

    def flush(self) -> bytes:
        held, self.held = self.held, []
        return b"".join(held)


class ResumeState(abc.ABC):
    """One client stream's continuation state, shared by every dialect: what the client has got
    (``forwarded``, the text ``sent``), why it cannot be continued (``blocked``), continuations left,
    and the usage summed over the attempts. Each dialect says how it asks (``continuation``)."""

    def __init__(self, request_obj: dict[str, Any], continuations: int, usage: UsageSum) -> None:
        self.request_obj = request_obj
        self.left = continuations
        self.usage = usage
        self.spliced = False  # from the first continuation on, the splice notes the usage
        self.sent: list[str] = []
        self.forwarded: list[bytes] = []  # every byte written to the client, to re-check the stream
        self.blocked: str | None = None
        #: Text deltas the client got: about a token each (vLLM and SGLang stream a token a chunk).
        self.deltas = 0
        self._written = EventReader()  # the client's stream, as events

    def written(self, data: bytes) -> list[SSEEvent]:
        """Note ``data`` as written to the client; the events it completes."""
        self.forwarded.append(data)
        return self._written.feed(data)

    def budget_spent(self, keys: tuple[str, ...]) -> str | None:
        """Why a continuation cannot be exact when the deltas the client got reach the request's token
        budget: the answer stopped at its limit, and any continuation would add to it."""
        for key in keys:
            value = self.request_obj.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and self.deltas >= value:
                return (f"the answer used its whole token budget ({key} {value}): nothing is left "
                        "to continue")
        return None

    def budget(self, obj: dict[str, Any], keys: tuple[str, ...]) -> None:
        """Ask the continuation for what is left of the client's token budget (``keys``: where the
        request keeps it). A real engine counts a continuation's budget from the continued text on
        (vLLM 0.32, measured through ``chaos --upstream``: continued with the client's own
        ``max_tokens``, answers that stop at that limit uncut came back longer), so the whole answer
        would outgrow what the client asked. Counted in
        deltas, so a delta that carried two tokens leaves the budget a token larger, never
        smaller."""
        for key in keys:
            value = obj.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                obj[key] = max(1, value - self.deltas)

    #: Where the request keeps its token budget (none: no budget to spend).
    budget_keys: tuple[str, ...] = ()

    def why_not(self) -> str | None:
        """Why this stream cannot be continued now (None: it can)."""
        if self.blocked is not None:
            return self.blocked
        if self.left <= 0:
            return "--resume-max continuations spent"
        return self.budget_spent(self.budget_keys)

    def end_attempt(self) -> tuple[dict[str, Any] | None, int]:
        """The attempt being continued ended: its own usage and completion tokens."""
        return self.usage.end_attempt()

    @abc.abstractmethod
    def continuation(self) -> AskContinuation:
        """The continuation request: a body posted where the stream's request went (chat,
        Messages), or a read of the answer a server keeps (Responses' background mode)."""

    def abandoned(self) -> AskContinuation | None:
        """The request that stops the upstream's generation once the client's stream ended without
        the whole answer; None where nothing goes on upstream after its connection closes (a
        posted request's generation ends with it)."""
        return None

    def spend(self) -> None:
        """One continuation is being made."""
        self.left -= 1
        self.spliced = True


class HeldToolCalls(HeldFrames):
    """With ``--resume``, a chat answer's tool calls reach the client only with the answer's end.

    No API continues an answer inside or after a tool call, so a call the client had started to
    receive would make a break uncurable. Held from the first tool-call delta until the choice's
    ``finish_reason`` (or the end of the stream), a cut inside that stretch forwarded nothing of it:
    the continuation restarts from the text before it and brings the calls whole. Agents act on a call
    only once it is complete, so they lose nothing by the wait.
    """

    def transform(self, event: SSEEvent) -> bytes:
        data = event.data
        if not self.held and "tool_calls" not in data:
            return event.raw
        if data == "[DONE]":
            return self.flush() + event.raw
        try:
            obj = _decode.decode(data)
        except msgspec.DecodeError:
            obj = None
        choices = obj.get("choices") if isinstance(obj, dict) else None
        choices = choices if isinstance(choices, list) else []
        if not self.held and not any(isinstance(c, dict) and isinstance(c.get("delta"), dict)
                                     and c["delta"].get("tool_calls") for c in choices):
            return event.raw
        self.held.append(event.raw)
        if any(isinstance(c, dict) and c.get("finish_reason") is not None for c in choices):
            return self.flush()
        return b""


class ChatResume(ResumeState):
    """One chat stream's continuation state: what the client has got, continuations left.

    ``prefix``: the dialect marks the continued message ``"prefix": true`` (DeepSeek) rather than
    asking ``continue_final_message`` (vLLM, SGLang)."""

    budget_keys = ("max_completion_tokens", "max_tokens")

    def __init__(self, request_obj: dict[str, Any], continuations: int,
                 dialect: str = "vllm") -> None:
        super().__init__(request_obj, continuations, UsageSum(CHAT_KEYS))
        self.dialect = dialect
        self.client_id: str | None = None
        n = request_obj.get("n")
        if isinstance(n, int) and n > 1:
            self.blocked = "n > 1"

    def note(self, data: bytes) -> None:
        """Whole frames (and comments) just written to the client."""
        for event in self.written(data):
            if event.data == "[DONE]":
                continue
            try:
                obj = _decode.decode(event.data)
            except msgspec.DecodeError:
                self.blocked = "a frame the client got is not JSON"
                continue
            if not isinstance(obj, dict):
                continue
            if self.client_id is None and isinstance(obj.get("id"), str):
                self.client_id = obj["id"]
            if not self.spliced and isinstance(obj.get("usage"), dict):
                self.usage.seen(obj["usage"])
            for choice in obj.get("choices") or ():
                delta = choice.get("delta") if isinstance(choice, dict) else None
                if not isinstance(delta, dict):
                    continue
                if delta.get("tool_calls") or delta.get("function_call"):
                    self.blocked = "a tool call was forwarded"
                if delta.get("reasoning_content") or delta.get("reasoning"):
                    self.blocked = "reasoning was forwarded"
                content = delta.get("content")
                if isinstance(content, str):
                    self.sent.append(content)
                    self.deltas += bool(content)

    def continuation(self) -> AskContinuation:
        """A new request, posted where the stream's own request went (``body``)."""
        return AskContinuation(self.body())

    def body(self) -> bytes:
        """The continuation request: the original one, plus the answer so far as the assistant's,
        marked the way the dialect continues it."""
        obj = copy.copy(self.request_obj)
        messages = list(obj.get("messages") or [])
        last: dict[str, Any] = {"role": "assistant", "content": "".join(self.sent)}
        if self.dialect == "deepseek":
            last["prefix"] = True
        else:
            obj["continue_final_message"] = True
            obj["add_generation_prompt"] = False
        messages.append(last)
        obj["messages"] = messages
        self.budget(obj, self.budget_keys)
        return json.dumps(obj, ensure_ascii=False).encode("utf-8")

    def splice(self) -> ChatSplice:
        self.spend()
        return ChatSplice("".join(self.sent), self.client_id, self.usage)


class RepeatTrim:
    """Removes an exact repetition of ``expected`` at the start of a continuation's text, however the
    text is split: what may still be the repetition is held until it is, or is not."""

    def __init__(self, expected: str) -> None:
        self.expected = expected
        self.matching = bool(expected)
        self.held = ""

    @property
    def pending(self) -> bool:
        """Text is held that began to repeat ``expected`` but has not finished it."""
        return self.matching and bool(self.held)

    def __call__(self, text: str) -> str:
        """The part of ``text`` the client has not seen yet ("" while a repetition may go on)."""
        if not self.matching:
            return text
        candidate = self.held + text
        if self.expected.startswith(candidate):
            self.held = candidate
            if len(candidate) == len(self.expected):
                self.matching, self.held = False, ""
            return ""
        self.matching, self.held = False, ""
        if candidate.startswith(self.expected):
            return candidate[len(self.expected):]
        return candidate


class ChatSplice:
    """Rewrites a continuation's frames into the client's stream, frame by frame.

    ``failure`` is set when the continuation does not line up (the relay then ends the client's
    stream with an explicit error, never a garbled answer).
    """

    def __init__(self, sent: str, client_id: str | None, usage: UsageSum | None = None) -> None:
        self.client_id = client_id
        self.usage = usage if usage is not None else UsageSum(CHAT_KEYS)
        self.trim = RepeatTrim(sent)  # the continuation may still be repeating SENT
        self.failure: str | None = None
        self._events = EventReader()

    def feed(self, data: bytes) -> bytes:
        """Continuation body bytes in, the client's frames out (whole frames only)."""
        return b"".join([self.frame(event) for event in self._events.feed(data)])

    def close(self) -> bytes:
        """The continuation ended: a frame still arriving goes on as it came (the checker judges it)."""
        rest = self._events.close()
        if self.trim.pending:
            self.failure = "the continuation repeated part of the answer so far and stopped"
        return rest

    def frame(self, event: SSEEvent) -> bytes:
        """One continuation event as the client gets it: as it came (``[DONE]``, an error, what is
        not a JSON object: the checker judges it), rewritten, or dropped (keep-alives before it
        kept)."""
        obj = json_of(event)
        if obj is None or "error" in obj:
            return event.raw
        if self.client_id is not None and "id" in obj:
            obj["id"] = self.client_id
        keep = bool(obj.get("usage"))
        if isinstance(obj.get("usage"), dict):
            obj["usage"] = self.usage.rewrite(obj["usage"])
        for choice in obj.get("choices") or ():
            delta = choice.get("delta") if isinstance(choice, dict) else None
            if not isinstance(delta, dict):
                keep = True
                continue
            delta.pop("role", None)
            content = delta.get("content")
            if isinstance(content, str):
                content = self.trim(content)
                if content:
                    delta["content"] = content
                else:
                    delta.pop("content")
            if any(v not in (None, "", []) for v in delta.values()) or choice.get(
                    "finish_reason") is not None:
                keep = True
        if not keep:
            return leading_comments(event.raw)
        return (leading_comments(event.raw) + b"data: "
                + json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n")

