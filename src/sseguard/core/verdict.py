"""The vocabulary every checker speaks: how a stream ended, what was wrong in it, and the verdict.

Every wire protocol's checker (``contract/<protocol>/``) produces these same values, so probe, proxy,
store and analyzer never learn which protocol they watched.
"""

from __future__ import annotations

import base64
import builtins
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Api(StrEnum):
    """The wire protocol a stream was spoken in (``docs/design/vocabulary.md``): the one list of their names.

    Everything else about a protocol is its ``Protocol`` descriptor (``contract/<protocol>/``).
    """

    CHAT = "chat"  # POST …/chat/completions
    RESPONSES = "responses"  # POST …/responses (OpenAI Responses API)
    MESSAGES = "messages"  # POST …/messages (Anthropic Messages)
    GEMINI = "gemini"  # POST …/models/{MODEL}:streamGenerateContent (Gemini, google-genai)


class Ending(StrEnum):
    """How a stream ended: exactly one per stream."""

    COMPLETE = "complete"  # a finish_reason for every choice, then data: [DONE]
    TRUNCATED = "truncated"  # content, then a clean EOF with neither finish nor [DONE]
    NO_DONE = "no_done"  # finished properly but no [DONE]
    NO_FINISH = "no_finish"  # [DONE] but some choice never got a finish_reason
    CUT_MID_FRAME = "cut_mid_frame"  # the body stopped inside an event
    TRANSPORT_ERROR = "transport_error"  # the connection failed (reset, timeout, …)
    ERROR_EVENT = "error_event"  # an error object or an `event: error` in the stream
    HTTP_ERROR = "http_error"  # a non-2xx status
    STALLED = "stalled"  # no byte for longer than the stall timeout
    EMPTY = "empty"  # a 2xx with no event at all


class FindingKind(StrEnum):
    """What was wrong inside a stream, independent of how it ended."""

    MARKUP_LEAK = "markup_leak"
    TOOL_ARGS_INVALID_JSON = "tool_args_invalid_json"
    TOOL_UNDEFINED_FUNCTION = "tool_undefined_function"
    TOOL_ARGS_SCHEMA_MISMATCH = "tool_args_schema_mismatch"
    TOOL_CALL_UNTERMINATED = "tool_call_unterminated"
    MISSING_USAGE = "missing_usage"
    FINISH_REASON_MISMATCH = "finish_reason_mismatch"
    BAD_CHUNK_JSON = "bad_chunk_json"
    CHUNK_SCHEMA = "chunk_schema"
    ID_CHANGED = "id_changed"
    FRAME_AFTER_DONE = "frame_after_done"
    # Responses and Messages only (docs/design/vocabulary.md):
    SEQUENCE_GAP = "sequence_gap"  # responses: sequence_number not +1 from the first event
    EVENT_ORDER = "event_order"  # an event for an item/block never opened, opened twice, after the end
    BLOCK_UNTERMINATED = "block_unterminated"  # an output item / content block never closed
    DONE_MISMATCH = "done_mismatch"  # responses: a *.done text/arguments differ from the joined deltas
    # Garbled text (``contract.garble``): warnings unless the policy is ``strict-text``.
    INVALID_TEXT = "invalid_text"  # U+FFFD: bytes that were not UTF-8, or a mangled character
    CONTROL_CHARACTER = "control_character"  # a control character other than tab, LF, CR
    REPEATED_TOKEN = "repeated_token"  # one word repeated past a bound
    REASONING_AFTER_ANSWER = "reasoning_after_answer"  # reasoning text after the answer began


#: The garbled-text findings (``contract.garble``): warnings, which only ``--policy strict-text`` fails.
GARBLE_KINDS = frozenset({FindingKind.INVALID_TEXT, FindingKind.CONTROL_CHARACTER,
                          FindingKind.REPEATED_TOKEN, FindingKind.REASONING_AFTER_ANSWER})


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing wrong in a stream and where: the data frame number and the byte offset in the body."""

    kind: FindingKind
    detail: str = ""
    frame: int | None = None
    offset: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": str(self.kind), "detail": self.detail, "frame": self.frame,
                "offset": self.offset}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Finding:
        return cls(FindingKind(data["kind"]), data.get("detail", ""), data.get("frame"),
                   data.get("offset"))


@dataclass(frozen=True, slots=True)
class Verdict:
    """Everything a checker concluded about one stream. It never depends on a policy."""

    ending: Ending
    findings: tuple[Finding, ...] = ()
    message: dict[str, Any] = field(default_factory=dict)  # the assembled chat.completion
    chunks: int = 0  # data frames seen (the [DONE] sentinel excluded)
    bytes: int = 0
    first_id: str | None = None
    last_id: str | None = None
    tail: builtins.bytes = b""  # the last 2 KiB of the body, as received
    error: str | None = None  # the error message of an error event, HTTP body or transport error
    http_status: int = 200
    api: str = Api.CHAT.value  # which protocol's contract produced it (an ``Api`` value)
    #: Event, block and delta kinds the protocol's tables do not know, as ``type`` or
    #: ``block:type``/``delta:type``, sorted: passed through, never a verdict by themselves.
    unknown_kinds: tuple[str, ...] = ()

    @property
    def finding_kinds(self) -> frozenset[FindingKind]:
        return frozenset(f.kind for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able form; the tail is kept as text when it decodes, else as base64."""
        try:
            tail: dict[str, str] = {"text": self.tail.decode("utf-8")}
        except UnicodeDecodeError:
            tail = {"base64": base64.b64encode(self.tail).decode("ascii")}
        return {
            "ending": str(self.ending),
            "findings": [f.to_dict() for f in self.findings],
            "message": self.message,
            "chunks": self.chunks,
            "bytes": self.bytes,
            "first_id": self.first_id,
            "last_id": self.last_id,
            "tail": tail,
            "error": self.error,
            "http_status": self.http_status,
            "api": self.api,
            "unknown_kinds": list(self.unknown_kinds),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        tail_obj = data.get("tail") or {}
        if "base64" in tail_obj:
            tail = base64.b64decode(tail_obj["base64"])
        else:
            tail = str(tail_obj.get("text", "")).encode("utf-8")
        return cls(
            ending=Ending(data["ending"]),
            findings=tuple(Finding.from_dict(f) for f in data.get("findings", ())),
            message=dict(data.get("message") or {}),
            chunks=int(data.get("chunks", 0)),
            bytes=int(data.get("bytes", 0)),
            first_id=data.get("first_id"),
            last_id=data.get("last_id"),
            tail=tail,
            error=data.get("error"),
            http_status=int(data.get("http_status", 200)),
            api=str(data.get("api", Api.CHAT.value)),
            unknown_kinds=tuple(str(k) for k in data.get("unknown_kinds", ())),
        )
