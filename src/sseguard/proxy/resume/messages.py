"""``--resume anthropic``: a Messages stream continued by prefill.

The Messages API continues an answer given as the last, assistant, message (a prefill). Anthropic
refuses a final assistant turn that ends in whitespace, so the prefill is the text the client has
without its trailing whitespace, and the continuation's leading copy of that whitespace is removed.
The splice drops the continuation's ``message_start`` and, when the client's text block is still
open, the continuation's first text ``content_block_start``; its blocks are renumbered to follow the
client's; its usage (``message_delta``) reports the original input tokens and the output tokens of
every attempt summed (``resume/usage.py``). A request with ``thinking`` is continued without it (a
prefill is not allowed with thinking) when no thinking content reached the client — none was sent
yet, or the request asked ``display: "omitted"`` (Claude Code always does), which sends thinking
blocks without their text: the continuation request drops ``thinking`` and every
``context_management`` edit that requires it, and the client's empty thinking block is closed
before the continued text. Not continued (the stream fails as without ``--resume``): thinking text
already forwarded, a request that is itself a prefill, a tool-use block already forwarded.

Pure (no I/O), like ``resume/chat.py``, whose ``Splice`` overlap rule and tool-call hold it mirrors.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from sseguard.core.sse import SSEEvent
from sseguard.proxy.machines.actions import AskContinuation
from sseguard.proxy.resume.chat import HeldFrames, RepeatTrim, ResumeState
from sseguard.proxy.resume.events import EventReader, json_of, leading_comments
from sseguard.proxy.resume.usage import MESSAGES_KEYS, UsageSum


def _frame(obj: dict[str, Any]) -> bytes:
    return (b"event: " + str(obj.get("type")).encode() + b"\ndata: "
            + json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n")


class HeldToolUse(HeldFrames):
    """A Messages answer's ``tool_use`` blocks reach the client only with its ``message_delta``, and
    a text block's ``content_block_stop`` only once the answer's end is known.

    A text block the client saw closed cannot be continued: the continuation would open a new block,
    and clients that show the last text block (Claude Code printed only the second half of such a
    healed answer, exit 0) lose the first part. So the stop waits for what follows it: a
    ``message_delta`` with a ``stop_reason`` or another block says the text is whole; a break before
    either leaves the block open for the continuation to go on in.
    """

    def __init__(self) -> None:
        super().__init__()
        self.tool = False  # a tool_use block is among the held frames

    def transform(self, event: SSEEvent) -> bytes:
        data = event.data
        starts = '"content_block_start"' in data
        if self.held:
            self.held.append(event.raw)
            if starts and '"tool_use"' in data:
                self.tool = True
            elif ('"message_delta"' in data and '"stop_reason":null' not in data.replace(" ", "")) \
                    or '"message_stop"' in data or event.event == "error" \
                    or (starts and not self.tool):
                return self.flush()
            return b""
        if (starts and '"tool_use"' in data) or '"content_block_stop"' in data:
            self.tool = starts
            self.held.append(event.raw)
            return b""
        return event.raw

    def flush(self) -> bytes:
        self.tool = False
        return super().flush()


class MessagesResume(ResumeState):
    """One Messages stream's continuation state: what the client has got, continuations left."""

    budget_keys = ("max_tokens",)

    def __init__(self, request_obj: dict[str, Any], continuations: int) -> None:
        super().__init__(request_obj, continuations, UsageSum(MESSAGES_KEYS))
        self.open_text: int | None = None  # the client's text block still open
        #: A thinking block the client saw open with no text in it (``display: "omitted"``, or cut
        #: before its first delta): the splice closes it before the continuation's text.
        self.open_thinking: int | None = None
        self.next_index = 0
        messages = request_obj.get("messages")
        if isinstance(messages, list) and messages and isinstance(messages[-1], dict) and \
                messages[-1].get("role") == "assistant":
            self.blocked = "the request is itself a prefill"

    def note(self, data: bytes) -> None:
        for event in self.written(data):
            obj = json_of(event)
            if obj is None:
                continue
            kind = obj.get("type")
            index = obj.get("index")
            if not self.spliced:
                _note_usage(self.usage, obj)
            if kind == "content_block_start" and isinstance(index, int):
                block = obj.get("content_block")
                what = block.get("type") if isinstance(block, dict) else None
                if what == "text" and isinstance(block, dict):
                    self.open_text = index
                    text = block.get("text")
                    if isinstance(text, str):
                        self.sent.append(text)
                elif what == "thinking" and isinstance(block, dict) and not block.get("thinking"):
                    self.open_thinking = index  # no thinking content yet: still continuable
                elif what == "thinking":
                    self.blocked = "thinking content was forwarded"
                else:
                    self.blocked = "a tool_use or redacted thinking block was forwarded"
                self.next_index = max(self.next_index, index + 1)
            elif kind == "content_block_delta":
                delta = obj.get("delta")
                what = delta.get("type") if isinstance(delta, dict) else None
                if what == "text_delta" and isinstance(delta, dict):
                    text = delta.get("text")
                    if isinstance(text, str):
                        self.sent.append(text)
                        self.deltas += bool(text)
                elif what == "thinking_delta" and isinstance(delta, dict):
                    if delta.get("thinking"):
                        self.blocked = "thinking content was forwarded"
                elif what != "signature_delta" and isinstance(delta, dict):
                    self.blocked = "a tool_use delta was forwarded"
            elif kind == "message_delta":
                delta = obj.get("delta")
                if isinstance(delta, dict) and delta.get("stop_reason") is not None:
                    # The answer had ended: a break now (inside message_stop) has nothing to
                    # continue, and a continuation would add a second answer after the stop.
                    self.blocked = "the answer had already ended (its stop_reason was forwarded)"
            elif kind == "content_block_stop":
                if index == self.open_text:
                    self.open_text = None
                elif index == self.open_thinking:
                    self.open_thinking = None

    def continuation(self) -> AskContinuation:
        """A new request, posted where the stream's own request went (``body``)."""
        return AskContinuation(self.body())

    def body(self) -> bytes:
        """The continuation request: the original one (thinking off), the answer so far as the
        assistant's prefill."""
        obj = copy.copy(self.request_obj)
        _without_thinking(obj)
        prefill = "".join(self.sent).rstrip()
        messages = list(obj.get("messages") or [])
        if prefill:
            messages.append({"role": "assistant", "content": prefill})
        obj["messages"] = messages
        self.budget(obj, self.budget_keys)
        return json.dumps(obj, ensure_ascii=False).encode("utf-8")

    def splice(self) -> MessagesSplice:
        self.spend()
        sent = "".join(self.sent)
        return MessagesSplice(sent[len(sent.rstrip()):], self.open_text, self.next_index, self.usage,
                              close_first=self.open_thinking)


#: ``context_management`` edits that the API accepts only with thinking on.
_THINKING_EDITS = ("clear_thinking_",)


def _without_thinking(obj: dict[str, Any]) -> None:
    """A continuation asks without thinking (no thinking content reached the client, so none is
    lost; a prefill is refused with it): ``thinking`` goes, and so does every
    ``context_management.edits`` entry whose ``type`` starts ``clear_thinking_`` (the key itself
    when no edit is left). Nothing else of the request is touched."""
    if obj.pop("thinking", None) is None:
        return
    management = obj.get("context_management")
    if not isinstance(management, dict) or not isinstance(management.get("edits"), list):
        return
    edits = [e for e in management["edits"] if not (
        isinstance(e, dict) and isinstance(e.get("type"), str)
        and e["type"].startswith(_THINKING_EDITS))]
    if edits:
        obj["context_management"] = {**management, "edits": edits}
    elif len(management) == 1:
        del obj["context_management"]
    else:
        obj["context_management"] = {k: v for k, v in management.items() if k != "edits"}


def _note_usage(usage: UsageSum, obj: dict[str, Any]) -> None:
    """The usage ``message_start`` (in its message) or ``message_delta`` carries, as reported."""
    kind = obj.get("type")
    if kind == "message_start" and isinstance(obj.get("message"), dict):
        found = obj["message"].get("usage")
    elif kind == "message_delta":
        found = obj.get("usage")
    else:
        return
    if isinstance(found, dict):
        usage.seen(found)


class MessagesSplice:
    """Rewrites a prefill continuation's events into the client's stream."""

    def __init__(self, whitespace: str, open_text: int | None, next_index: int,
                 usage: UsageSum | None = None, *, close_first: int | None = None) -> None:
        self.usage = usage if usage is not None else UsageSum(MESSAGES_KEYS)
        # Only the client's trailing whitespace can come again: the prefill leaves it out.
        self.trim = RepeatTrim(whitespace)
        self.open_text = open_text
        self.next_index = next_index
        self.base: int | None = None
        self.failure: str | None = None
        #: A block of the client's to close before the continuation's first block (a thinking
        #: block whose stop was held when the answer broke).
        self.close_first = close_first
        self._events = EventReader()

    def feed(self, data: bytes) -> bytes:
        return b"".join([self.frame(event) for event in self._events.feed(data)])

    def close(self) -> bytes:
        return self._events.close()

    def frame(self, event: SSEEvent) -> bytes:
        """One continuation event as the client gets it: as it came, renumbered into the client's
        blocks, or dropped (keep-alives before it kept)."""
        obj = json_of(event)
        if obj is None:
            return event.raw
        kind = obj.get("type")
        comments = leading_comments(event.raw)
        if kind == "message_start":
            _note_usage(self.usage, obj)  # the continuation's own, never the client's
            return comments
        if self.close_first is not None and kind in ("content_block_start", "message_delta"):
            stop = _frame({"type": "content_block_stop", "index": self.close_first})
            self.close_first = None
            return comments + stop + self.frame(event)[len(comments):]
        frame = event.raw
        if kind == "message_delta" and isinstance(obj.get("usage"), dict):
            obj["usage"] = self.usage.rewrite(obj["usage"])
            frame = comments + _frame(obj)
        if kind == "message_delta" and self.base is None and self.open_text is not None:
            # A continuation with nothing to add: the client's open text block is closed here.
            self.base = self.open_text + 1
            return (comments + _frame({"type": "content_block_stop", "index": self.open_text})
                    + frame[len(comments):])
        index = obj.get("index")
        if kind not in ("content_block_start", "content_block_delta", "content_block_stop") or \
                not isinstance(index, int):
            return frame
        out = comments
        base = self.base
        if base is None:
            block = obj.get("content_block")
            merge = (kind == "content_block_start" and index == 0 and self.open_text is not None
                     and isinstance(block, dict) and block.get("type") == "text")
            if merge and self.open_text is not None:
                base = self.base = self.open_text
                text = block.get("text") if isinstance(block, dict) else None
                if isinstance(text, str) and text:
                    obj = {"type": "content_block_delta", "index": 0,
                           "delta": {"type": "text_delta", "text": text}}
                    kind = "content_block_delta"
                else:
                    return comments
            elif self.open_text is not None:
                out = comments + _frame({"type": "content_block_stop", "index": self.open_text})
                base = self.open_text + 1
            else:
                base = self.next_index
            self.base = base
        obj["index"] = base + index
        if kind == "content_block_delta" and obj["index"] == self.open_text:
            delta = obj.get("delta")
            if isinstance(delta, dict) and isinstance(delta.get("text"), str):
                delta["text"] = self.trim(delta["text"])
                if not delta["text"]:
                    return out
        return out + _frame(obj)

