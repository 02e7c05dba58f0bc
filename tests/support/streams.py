"""Builders for OpenAI chat.completion.chunk streams, shared by the core's tests."""

from __future__ import annotations

import json
from typing import Any

DONE = b"data: [DONE]\n\n"


def frame(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, *, index: int = 0,
          id: str = "chatcmpl-1", **extra: Any) -> bytes:
    obj: dict[str, Any] = {"id": id, "object": "chat.completion.chunk", "model": "m",
                           "choices": [{"index": index, "delta": delta or {}, "finish_reason": finish}]}
    obj.update(extra)
    return frame(obj)


def text_stream(words: list[str], *, finish: str | None = "stop", done: bool = True,
                usage: bool = False) -> bytes:
    body = chunk({"role": "assistant", "content": ""})
    body += b"".join(chunk({"content": w}) for w in words)
    if finish:
        body += chunk({}, finish)
    if usage:
        body += frame({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [],
                       "usage": {"prompt_tokens": 1, "completion_tokens": len(words),
                                 "total_tokens": 1 + len(words)}})
    if done:
        body += DONE
    return body


def tool_stream(name: str, fragments: list[str], *, finish: str = "tool_calls") -> bytes:
    body = chunk({"role": "assistant", "tool_calls": [
        {"index": 0, "id": "call_1", "type": "function", "function": {"name": name, "arguments": ""}}]})
    body += b"".join(chunk({"tool_calls": [{"index": 0, "function": {"arguments": f}}]})
                     for f in fragments)
    return body + chunk({}, finish) + DONE
