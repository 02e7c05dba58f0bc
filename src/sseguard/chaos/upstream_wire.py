"""What ``chaos --upstream`` must know of each protocol's frames to break a real stream.

A generated stream is built knowing where its content, calls and finish are; a relayed one is only
read. So each protocol says here, per decoded record: what it is (``Kind``: a text delta a cut may
follow, a piece of a tool call no cut may split, the finish, the terminal event), where its answer text
sits (so a garbled answer changes the deltas and every whole copy of the text alike), how it loses
its finish (``no_finish``), and the protocol's own error frame — the same forms the generated writers
send (``chat.py``, ``responses.py``, ``messages.py``, ``gemini.py``).

Pure: records in, records or bytes out. The fault machine (``upstream.py``) decides when.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Any

import msgspec

from sseguard.chaos.config import RESPONSES_ERROR_FORMS, ChaosConfig
from sseguard.chaos.faults import Decision, Fault, ServerDialect
from sseguard.core.contract.chat import CHAT, DONE_FRAME
from sseguard.core.contract.gemini import GEMINI
from sseguard.core.contract.gemini.relay import ARRAY_CLOSE
from sseguard.core.verdict import Api

_enc = msgspec.json.encode


class Kind(Enum):
    """What one upstream record is to the fault machine."""

    OTHER = 0  # lifecycle events, role deltas, keep-alives: relayed, no cut point
    CONTENT = 1  # a text or reasoning delta: a cut may follow it
    CALL = 2  # a piece of a tool call: from here on, no cut before the finish
    FINISH = 3  # carries the answer's finish (chat's finish_reason chunk, message_delta, …)
    TERMINAL = 4  # ends the stream ([DONE], message_stop, the JSON array's ])


#: A place holding answer text: (the object, its key, whether it holds the whole text so far).
Place = tuple[dict[str, Any], str, bool]


@dataclass(frozen=True, slots=True)
class Wire:
    """One protocol's frames as ``chaos --upstream`` reads and rewrites them."""

    api: Api
    kind: Callable[[str, Any], Kind]  # (event name, decoded record or None) -> its kind
    #: The answer's text in a record (not reasoning): deltas continue it, whole copies restart it.
    texts: Callable[[str, Any], list[Place]]
    #: The record rewritten without its finish (None: dropped), for ``no_finish``; ``FINISH`` only.
    no_finish: Callable[[str, Any], Any]
    #: ``(config, decision, last record, array, sent) -> bytes``: the protocol's error event.
    error: Callable[[ChaosConfig, Decision, Any, bool, bool], bytes]
    #: Faults this protocol's streams cannot carry when relayed.
    unsupported: frozenset[Fault]


def _dict(obj: Any) -> dict[str, Any]:
    return obj if isinstance(obj, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


# ── chat ─────────────────────────────────────────────────────────────────────────────────────────

def _chat_kind(name: str, obj: Any) -> Kind:
    if obj == "[DONE]":
        return Kind.TERMINAL
    choices = _dict(obj).get("choices")
    if "usage" in _dict(obj) and not choices:
        return Kind.FINISH  # the usage chunk comes after every finish
    kind = Kind.OTHER
    for choice in _list(choices):
        choice = _dict(choice)
        if choice.get("finish_reason"):
            return Kind.FINISH
        delta = _dict(choice.get("delta"))
        if delta.get("tool_calls"):
            kind = Kind.CALL
        elif kind is Kind.OTHER and any(isinstance(delta.get(k), str) and delta[k]
                                        for k in ("content", "reasoning_content", "reasoning")):
            kind = Kind.CONTENT
    return kind


def _chat_texts(name: str, obj: Any) -> list[Place]:
    out: list[Place] = []
    for choice in _list(_dict(obj).get("choices")):
        choice = _dict(choice)
        delta = _dict(choice.get("delta"))
        if choice.get("index", 0) == 0 and isinstance(delta.get("content"), str):
            out.append((delta, "content", False))
    return out


def _chat_no_finish(name: str, obj: Any) -> Any:
    if obj == "[DONE]" or not _dict(obj).get("choices"):
        return obj
    kept = False
    for choice in _list(obj["choices"]):
        choice = _dict(choice)
        if choice.get("finish_reason"):
            choice["finish_reason"] = None
        delta = _dict(choice.get("delta"))
        kept = kept or any(v not in (None, "", []) for k, v in delta.items() if k != "role")
    return obj if kept else None  # a finish chunk with nothing else is dropped, as generated


def _chat_error(config: ChaosConfig, decision: Decision, last: Any, array: bool, sent: bool) -> bytes:
    form = config.options.error_event_form
    if form == "both":
        form = "event" if decision.variant % 2 else "data"
    payload = _enc(CHAT.status_error(500, "upstream model worker failed mid-stream"))
    if form == "event":
        return b"event: error\ndata: " + payload + b"\n\n"
    return b"data: " + payload + b"\n\n" + DONE_FRAME


# ── responses ────────────────────────────────────────────────────────────────────────────────────

_RESPONSES_END = frozenset({"response.completed", "response.incomplete", "response.failed"})
_RESPONSES_TEXT = frozenset({"response.output_text.delta", "response.reasoning_summary_text.delta",
                             "response.reasoning_text.delta"})


def _responses_kind(name: str, obj: Any) -> Kind:
    kind = _dict(obj).get("type", name)
    if kind in _RESPONSES_END:
        return Kind.FINISH
    if kind in _RESPONSES_TEXT:
        return Kind.CONTENT
    if kind == "response.function_call_arguments.delta" or (
            kind == "response.output_item.added"
            and _dict(_dict(obj).get("item")).get("type") == "function_call"):
        return Kind.CALL
    return Kind.OTHER


def _output_texts(items: Any) -> Iterator[Place]:
    for item in _list(items):
        for part in _list(_dict(item).get("content")):
            part = _dict(part)
            if part.get("type") == "output_text" and isinstance(part.get("text"), str):
                yield part, "text", True


def _responses_texts(name: str, obj: Any) -> list[Place]:
    obj = _dict(obj)
    kind = obj.get("type", name)
    if kind == "response.output_text.delta" and isinstance(obj.get("delta"), str):
        return [(obj, "delta", False)]
    if kind == "response.output_text.done" and isinstance(obj.get("text"), str):
        return [(obj, "text", True)]
    if kind == "response.content_part.done":
        part = _dict(obj.get("part"))
        return [(part, "text", True)] if isinstance(part.get("text"), str) else []
    if kind == "response.output_item.done":
        return list(_output_texts([obj.get("item")]))
    if kind in _RESPONSES_END:
        return list(_output_texts(_dict(obj.get("response")).get("output")))
    return []


def _responses_no_finish(name: str, obj: Any) -> Any:
    return "[DONE]"  # data: [DONE] instead of response.completed, as the generated stream does


def _responses_error(config: ChaosConfig, decision: Decision, last: Any, array: bool,
                     sent: bool) -> bytes:
    seq = _dict(last).get("sequence_number")
    seq = seq + 1 if isinstance(seq, int) else 0
    form = config.options.responses_error_form
    if form == "any":
        form = RESPONSES_ERROR_FORMS[decision.variant % 3]
    message = "upstream model worker failed mid-stream"
    if form == "flat":
        payload: dict[str, Any] = {"type": "error", "code": "server_error", "message": message,
                                   "param": None, "sequence_number": seq}
        name = "error"
    elif form == "nested":
        payload = {"type": "error", "sequence_number": seq,
                   "error": {"type": "server_error", "code": "server_error", "message": message}}
        name = "error"
    else:
        payload = {"type": "response.failed", "sequence_number": seq, "response": {
            "object": "response", "status": "failed", "output": [], "usage": None,
            "error": {"code": "server_error", "message": message}}}
        name = "response.failed"
    return b"event: " + name.encode() + b"\ndata: " + _enc(payload) + b"\n\n"


# ── messages ─────────────────────────────────────────────────────────────────────────────────────

def _messages_kind(name: str, obj: Any) -> Kind:
    obj = _dict(obj)
    kind = obj.get("type", name)
    if kind == "message_stop":
        return Kind.TERMINAL
    if kind == "message_delta":
        return Kind.FINISH
    if kind == "content_block_delta":
        delta = _dict(obj.get("delta"))
        if delta.get("type") in ("text_delta", "thinking_delta"):
            return Kind.CONTENT
        return Kind.CALL if delta.get("type") == "input_json_delta" else Kind.OTHER
    if kind == "content_block_start" and _dict(obj.get("content_block")).get("type") == "tool_use":
        return Kind.CALL
    return Kind.OTHER


def _messages_texts(name: str, obj: Any) -> list[Place]:
    obj = _dict(obj)
    delta = _dict(obj.get("delta"))
    if obj.get("type") == "content_block_delta" and delta.get("type") == "text_delta" \
            and isinstance(delta.get("text"), str):
        return [(delta, "text", False)]
    return []


def _messages_no_finish(name: str, obj: Any) -> Any:
    delta = _dict(_dict(obj).get("delta"))
    if "stop_reason" in delta:
        delta["stop_reason"] = None
    return obj


def _messages_error(config: ChaosConfig, decision: Decision, last: Any, array: bool,
                    sent: bool) -> bytes:
    kind = "overloaded_error" if decision.variant % 2 else "api_error"
    message = "Overloaded" if kind == "overloaded_error" else "Internal server error"
    payload = {"type": "error", "error": {"type": kind, "message": message}}
    return b"event: error\ndata: " + _enc(payload) + b"\n\n"


# ── gemini ───────────────────────────────────────────────────────────────────────────────────────

def _gemini_kind(name: str, obj: Any) -> Kind:
    if name == ARRAY_CLOSE:
        return Kind.TERMINAL
    kind = Kind.OTHER
    for cand in _list(_dict(obj).get("candidates")):
        cand = _dict(cand)
        if cand.get("finishReason"):
            return Kind.FINISH
        for part in _list(_dict(cand.get("content")).get("parts")):
            part = _dict(part)
            if "functionCall" in part:
                kind = Kind.CALL
            elif kind is Kind.OTHER and isinstance(part.get("text"), str) and part["text"]:
                kind = Kind.CONTENT
    return kind


def _gemini_texts(name: str, obj: Any) -> list[Place]:
    out: list[Place] = []
    for cand in _list(_dict(obj).get("candidates")):
        cand = _dict(cand)
        if cand.get("index", 0) != 0:
            continue
        for part in _list(_dict(cand.get("content")).get("parts")):
            part = _dict(part)
            if isinstance(part.get("text"), str) and not part.get("thought"):
                out.append((part, "text", False))
    return out


def _gemini_error(config: ChaosConfig, decision: Decision, last: Any, array: bool,
                  sent: bool) -> bytes:
    error = _enc(GEMINI.status_error(500, "An internal error has occurred. Please retry."))
    if array:
        return (b",\r\n" if sent else b"[") + error + b"\r\n]"
    return b"data: " + error + b"\r\n\r\n"


#: Faults no relayed stream carries: what the answer holds (a generated answer is made to carry
#: them; a real one is what the model wrote) and the frames only a generator numbers.
_CONTENT_FAULTS = frozenset({
    Fault.MARKUP_LEAK, Fault.TOOL_ARGS_INVALID_JSON, Fault.TOOL_UNDEFINED_FUNCTION,
    Fault.TOOL_ARGS_SCHEMA_MISMATCH, Fault.TOOL_CALL_UNTERMINATED, Fault.MALFORMED_CLOSING_TAG,
    Fault.BAD_CHUNK_JSON, Fault.CHUNK_SCHEMA, Fault.FINISH_REASON_MISMATCH, Fault.MISSING_USAGE,
    Fault.ID_CHANGED, Fault.FRAME_AFTER_DONE, Fault.SEQUENCE_GAP, Fault.EVENT_ORDER,
    Fault.BLOCK_UNTERMINATED, Fault.DONE_MISMATCH,
})

WIRES: dict[Api, Wire] = {
    Api.CHAT: Wire(Api.CHAT, _chat_kind, _chat_texts, _chat_no_finish, _chat_error,
                   _CONTENT_FAULTS),
    Api.RESPONSES: Wire(Api.RESPONSES, _responses_kind, _responses_texts, _responses_no_finish,
                        _responses_error, _CONTENT_FAULTS | {Fault.NO_DONE}),
    Api.MESSAGES: Wire(Api.MESSAGES, _messages_kind, _messages_texts, _messages_no_finish,
                       _messages_error, _CONTENT_FAULTS),
    Api.GEMINI: Wire(Api.GEMINI, _gemini_kind, _gemini_texts, lambda name, obj: obj, _gemini_error,
                     _CONTENT_FAULTS | {Fault.NO_DONE, Fault.NO_FINISH}),
}


def chat_dialects(obj: Any, kind: Kind, dialects: frozenset[ServerDialect]) -> Any:
    """A chat record as a server of ``dialects`` writes it: no finish reason, ``""`` for null
    mid-stream, ``"choices": null`` in the usage chunk (``[DONE]`` is dropped by the machine)."""
    if not isinstance(obj, dict):
        return obj
    choices = obj.get("choices")
    if ServerDialect.USAGE_CHOICES_NULL in dialects and "usage" in obj and choices == []:
        obj["choices"] = None
    for choice in _list(choices):
        choice = _dict(choice)
        if "finish_reason" not in choice:
            continue
        if choice["finish_reason"] and ServerDialect.NO_FINISH_REASON in dialects:
            choice["finish_reason"] = None
        elif choice["finish_reason"] is None and ServerDialect.EMPTY_FINISH_REASON in dialects \
                and kind is not Kind.FINISH:
            choice["finish_reason"] = ""
    return obj
