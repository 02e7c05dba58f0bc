"""Responses and Messages stream bodies written out by hand, for the proxy's and the transports' tests:
healthy ones and every bad ending of docs/design/vocabulary.md, as a server would put them on the wire."""

from __future__ import annotations

import json
from typing import Any


def event(name: str, obj: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: ".encode() + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


# ── responses ────────────────────────────────────────────────────────────────────────────────────

RESPONSE = {"id": "resp_1", "object": "response", "created_at": 1, "model": "m", "output": [],
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}
USAGE = {"input_tokens": 5, "output_tokens": 2, "total_tokens": 7,
         "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}


class Responses:
    """Event builders that number their events the way the Responses API does."""

    def __init__(self) -> None:
        self.seq = 0

    def ev(self, kind: str, **fields: Any) -> bytes:
        out = event(kind, {"type": kind, "sequence_number": self.seq, **fields})
        self.seq += 1
        return out

    def head(self) -> bytes:
        item = {"id": "msg_1", "type": "message", "status": "in_progress", "role": "assistant",
                "content": []}
        return (self.ev("response.created", response={**RESPONSE, "status": "in_progress"})
                + self.ev("response.in_progress", response={**RESPONSE, "status": "in_progress"})
                + self.ev("response.output_item.added", output_index=0, item=item)
                + self.ev("response.content_part.added", item_id="msg_1", output_index=0,
                          content_index=0, part={"type": "output_text", "text": "",
                                                 "annotations": []}))

    def deltas(self, texts: list[str]) -> bytes:
        return b"".join(self.ev("response.output_text.delta", item_id="msg_1", output_index=0,
                                content_index=0, delta=t, logprobs=[]) for t in texts)

    def closing(self, text: str) -> bytes:
        part = {"type": "output_text", "text": text, "annotations": []}
        return (self.ev("response.output_text.done", item_id="msg_1", output_index=0,
                        content_index=0, text=text, logprobs=[])
                + self.ev("response.content_part.done", item_id="msg_1", output_index=0,
                          content_index=0, part=part)
                + self.ev("response.output_item.done", output_index=0, item={
                    "id": "msg_1", "type": "message", "status": "completed", "role": "assistant",
                    "content": [part]}))

    def completed(self, text: str, kind: str = "response.completed") -> bytes:
        item = {"id": "msg_1", "type": "message", "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}
        status = "completed" if kind == "response.completed" else "incomplete"
        extra = {} if status == "completed" else {"incomplete_details": {"reason":
                                                                         "max_output_tokens"}}
        return self.ev(kind, response={**RESPONSE, "status": status, "output": [item],
                                       "usage": USAGE, **extra})


def responses_body(texts: list[str], end: str = "complete") -> bytes:
    """A Responses stream of ``texts``, ending as ``end`` says (an Ending name, or a variant)."""
    r = Responses()
    text = "".join(texts)
    if end == "empty":
        return b""
    body = r.head() + r.deltas(texts)
    if end == "truncated":
        return body
    if end == "cut_mid_frame":
        return body + r.closing(text)[:25]
    body += r.closing(text)
    if end == "no_finish":
        return body + b"data: [DONE]\n\n"
    if end == "error_flat":
        return body + r.ev("error", code="server_error", message="engine crashed", param=None)
    if end == "error_nested":
        return body + r.ev("error", error={"type": "server_error", "message": "engine crashed"})
    if end == "failed":
        return body + r.ev("response.failed", response={**RESPONSE, "status": "failed", "error": {
            "code": "server_error", "message": "engine crashed"}})
    if end == "incomplete":
        return body + r.completed(text, "response.incomplete")
    body += r.completed(text)
    if end == "done_trailer":
        return body + b"data: [DONE]\n\n"
    if end == "after_end":
        return body + r.deltas(["late"])
    assert end == "complete", end
    return body


# ── messages ─────────────────────────────────────────────────────────────────────────────────────

MESSAGE = {"id": "msg_01", "type": "message", "role": "assistant", "model": "m", "content": [],
           "stop_reason": None, "stop_sequence": None,
           "usage": {"input_tokens": 5, "output_tokens": 1}}
MESSAGE_STOP = event("message_stop", {"type": "message_stop"})


def messages_body(texts: list[str], end: str = "complete", *, ping: bool = True) -> bytes:
    """A Messages stream of ``texts``, ending as ``end`` says."""
    if end == "empty":
        return b""
    body = event("message_start", {"type": "message_start", "message": MESSAGE})
    body += event("content_block_start", {"type": "content_block_start", "index": 0,
                                          "content_block": {"type": "text", "text": ""}})
    if ping:
        body += event("ping", {"type": "ping"})
    body += b"".join(event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                   "delta": {"type": "text_delta", "text": t}})
                     for t in texts)
    if end == "truncated":
        return body
    body += event("content_block_stop", {"type": "content_block_stop", "index": 0})
    if end == "cut_mid_frame":
        return body + event("message_delta", {"type": "message_delta"})[:30]
    if end == "error_event":
        return body + event("error", {"type": "error", "error": {
            "type": "overloaded_error", "message": "engine crashed"}})
    if end == "no_finish":
        return body + MESSAGE_STOP
    body += event("message_delta", {"type": "message_delta", "delta": {
        "stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": len(texts)}})
    if end == "no_done":
        return body
    assert end == "complete", end
    return body + MESSAGE_STOP
