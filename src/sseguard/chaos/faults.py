"""The faults a chaos upstream can inject, what a checker must conclude from each, and the per-request draw.

Every fault names the ``Ending`` and the ``Finding`` a correct checker reports for it, so a test (or the
``demo``) can compare "what was injected" (the ``x-sseguard-fault`` header) with "what was found". The
decision for request *n* uses its own ``random.Random`` seeded from ``(seed, n)``: a run with the same
seed and the same arrival order injects the same faults at the same places, whatever the timing.

The names are protocol-neutral: each protocol's writer (``chaos/<protocol>.py``) renders a fault in its
own frames (chat's ``[DONE]``, Responses' terminal event, Messages' ``message_stop``) and lists the ones
it cannot carry (``Writer.unsupported``); a request drawing one of those is served healthy and counted
as skipped. The comments below give the chat form; ``docs/chaos.md`` has every protocol's.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import StrEnum

from sseguard.core._renamed import renamed
from sseguard.core.verdict import Ending, FindingKind


class Fault(StrEnum):
    """One way to break a response. The value is the name used in flags, TOML and headers."""

    # How the stream ends.
    TRUNCATED = "truncated"  # content, then a clean EOF: no finish, no terminal event
    NO_DONE = "no_done"  # the finish (and usage), then EOF without the sentinel ([DONE])
    NO_FINISH = "no_finish"  # the sentinel / terminal event without any finish reason
    CUT_MID_FRAME = "cut_mid_frame"  # EOF inside an event
    TRANSPORT_ERROR = "transport_error"  # TCP reset mid-body
    ERROR_EVENT = "error_event"  # the protocol's error event mid-stream (chat: `data: {"error": …}`)
    HTTP_ERROR = "http_error"  # 429 / 500 / 503 with the API's own JSON error body
    STALLED = "stalled"  # silence longer than a client's stall timeout
    EMPTY = "empty"  # 200 and headers, then EOF without a single event
    # What the stream carries.
    MARKUP_LEAK = "markup_leak"  # raw tool-call markup (of the configured family) left in text
    TOOL_ARGS_INVALID_JSON = "tool_args_invalid_json"
    TOOL_UNDEFINED_FUNCTION = "tool_undefined_function"  # a name not among the offered tools
    TOOL_ARGS_SCHEMA_MISMATCH = "tool_args_schema_mismatch"  # JSON, but against the tool's schema
    TOOL_CALL_UNTERMINATED = "tool_call_unterminated"  # clean EOF in the middle of arguments
    MALFORMED_CLOSING_TAG = "malformed_closing_tag"  # raw DSML with a misspelled closer
    BAD_CHUNK_JSON = "bad_chunk_json"  # one data frame that is not JSON
    CHUNK_SCHEMA = "chunk_schema"  # one chunk with a value of the wrong type
    FINISH_REASON_MISMATCH = "finish_reason_mismatch"  # chat: "tool_calls" on a text answer
    MISSING_USAGE = "missing_usage"  # usage asked (or always sent by the API), none sent
    ID_CHANGED = "id_changed"  # the response id changes half-way
    FRAME_AFTER_DONE = "frame_after_done"  # chat: a chunk after data: [DONE]
    # Protocols with typed events only (docs/design/vocabulary.md); chat's writer cannot carry them.
    SEQUENCE_GAP = "sequence_gap"  # responses: one sequence_number skipped
    EVENT_ORDER = "event_order"  # a delta for an output item / content block never opened
    BLOCK_UNTERMINATED = "block_unterminated"  # the text item / block never closed, then the end
    DONE_MISMATCH = "done_mismatch"  # responses: output_text.done differs from the joined deltas
    # Corruption no markup shows (issue 39): a span of the answer's words shuffled or replaced, in a
    # stream that is otherwise perfect. Only comparing answers (the consistency workload) sees it.
    GARBLED = "garbled"


@dataclass(frozen=True, slots=True)
class Expectation:
    """What a strict checker reports for a fault on a plain text answer (no tool calls, no markup).

    ``markup_error`` is the ``MarkupError`` kind a ``sseguard.core.toolcalls`` parser reports for the
    content, where the fault lives inside raw markup.
    """

    ending: Ending
    findings: frozenset[FindingKind] = frozenset()
    markup_error: str | None = None


def _x(ending: Ending, *kinds: FindingKind, markup_error: str | None = None) -> Expectation:
    return Expectation(ending, frozenset(kinds), markup_error)


#: Fault → the verdict it must produce. Raw markup in content is always also a ``markup_leak`` for a
#: checker that does not parse it: that is what a server without a tool parser looks like.
EXPECTED: dict[Fault, Expectation] = {
    Fault.TRUNCATED: _x(Ending.TRUNCATED),
    Fault.NO_DONE: _x(Ending.NO_DONE),
    Fault.NO_FINISH: _x(Ending.NO_FINISH),
    Fault.CUT_MID_FRAME: _x(Ending.CUT_MID_FRAME),
    Fault.TRANSPORT_ERROR: _x(Ending.TRANSPORT_ERROR),
    Fault.ERROR_EVENT: _x(Ending.ERROR_EVENT),
    Fault.HTTP_ERROR: _x(Ending.HTTP_ERROR),
    Fault.STALLED: _x(Ending.STALLED),
    Fault.EMPTY: _x(Ending.EMPTY),
    Fault.MARKUP_LEAK: _x(Ending.COMPLETE, FindingKind.MARKUP_LEAK),
    Fault.TOOL_ARGS_INVALID_JSON: _x(Ending.COMPLETE, FindingKind.TOOL_ARGS_INVALID_JSON),
    Fault.TOOL_UNDEFINED_FUNCTION: _x(Ending.COMPLETE, FindingKind.TOOL_UNDEFINED_FUNCTION),
    Fault.TOOL_ARGS_SCHEMA_MISMATCH: _x(Ending.COMPLETE, FindingKind.TOOL_ARGS_SCHEMA_MISMATCH),
    Fault.TOOL_CALL_UNTERMINATED: _x(Ending.TRUNCATED, FindingKind.TOOL_CALL_UNTERMINATED),
    Fault.MALFORMED_CLOSING_TAG: _x(Ending.COMPLETE, FindingKind.MARKUP_LEAK,
                                    markup_error="malformed_tag"),
    Fault.BAD_CHUNK_JSON: _x(Ending.COMPLETE, FindingKind.BAD_CHUNK_JSON),
    Fault.CHUNK_SCHEMA: _x(Ending.COMPLETE, FindingKind.CHUNK_SCHEMA),
    Fault.FINISH_REASON_MISMATCH: _x(Ending.COMPLETE, FindingKind.FINISH_REASON_MISMATCH),
    Fault.MISSING_USAGE: _x(Ending.COMPLETE, FindingKind.MISSING_USAGE),
    Fault.ID_CHANGED: _x(Ending.COMPLETE, FindingKind.ID_CHANGED),
    Fault.FRAME_AFTER_DONE: _x(Ending.COMPLETE, FindingKind.FRAME_AFTER_DONE),
    Fault.SEQUENCE_GAP: _x(Ending.COMPLETE, FindingKind.SEQUENCE_GAP),
    Fault.EVENT_ORDER: _x(Ending.COMPLETE, FindingKind.EVENT_ORDER),
    Fault.BLOCK_UNTERMINATED: _x(Ending.COMPLETE, FindingKind.BLOCK_UNTERMINATED),
    Fault.DONE_MISMATCH: _x(Ending.COMPLETE, FindingKind.DONE_MISMATCH),
    Fault.GARBLED: _x(Ending.COMPLETE),  # nothing a stream checker can see
}

#: Faults that only make sense on a streamed body; a non-streamed request drawing one gets none.
STREAM_ONLY = frozenset({
    Fault.TRUNCATED, Fault.NO_DONE, Fault.NO_FINISH, Fault.CUT_MID_FRAME, Fault.ERROR_EVENT,
    Fault.EMPTY, Fault.TOOL_CALL_UNTERMINATED, Fault.BAD_CHUNK_JSON, Fault.CHUNK_SCHEMA,
    Fault.ID_CHANGED, Fault.FRAME_AFTER_DONE, Fault.SEQUENCE_GAP, Fault.EVENT_ORDER,
    Fault.BLOCK_UNTERMINATED, Fault.DONE_MISMATCH,
})
#: Faults whose answer must be a tool call (the request's tools, or a built-in one when none).
NEEDS_TOOL_CALL = frozenset({
    Fault.TOOL_ARGS_INVALID_JSON, Fault.TOOL_UNDEFINED_FUNCTION, Fault.TOOL_ARGS_SCHEMA_MISMATCH,
    Fault.TOOL_CALL_UNTERMINATED, Fault.MALFORMED_CLOSING_TAG,
})
#: Faults whose answer must be text only.
NEEDS_TEXT = frozenset({Fault.MARKUP_LEAK, Fault.FINISH_REASON_MISMATCH, Fault.BLOCK_UNTERMINATED,
                        Fault.DONE_MISMATCH, Fault.GARBLED})


class ServerDialect(StrEnum):
    """Shapes of *good* streams that real servers send and naive checkers misread; not faults.
    (Was ``Dialect``: the proxy's resume dialects and the analysis's SQL dialects are other things.)"""

    NO_FINISH_REASON = "no_finish_reason"  # Ollama, some vLLM builds: [DONE] but finish_reason null
    NO_DONE = "no_done"  # gateways: finish_reason and usage, never data: [DONE]
    EMPTY_FINISH_REASON = "empty_finish_reason"  # finish_reason "" instead of null mid-stream
    USAGE_CHOICES_NULL = "usage_choices_null"  # the usage chunk says "choices": null
    # Responses: `data: [DONE]` after response.completed, as chat-minded gateways add it.
    TRAILING_DONE = "trailing_done"


#: The ending a strict checker reports for a healthy answer under each dialect.
DIALECT_ENDING: dict[ServerDialect, Ending] = {
    ServerDialect.NO_FINISH_REASON: Ending.NO_FINISH,
    ServerDialect.NO_DONE: Ending.NO_DONE,
    ServerDialect.EMPTY_FINISH_REASON: Ending.COMPLETE,
    ServerDialect.USAGE_CHOICES_NULL: Ending.COMPLETE,
    ServerDialect.TRAILING_DONE: Ending.COMPLETE,
}


@dataclass(frozen=True, slots=True)
class Decision:
    """What happens to one request. ``at`` (0 ≤ at < 1) is where along the stream the fault strikes;
    ``variant`` picks among a fault's forms (HTTP status, error-event shape)."""

    fault: Fault | None
    route: str = "default"
    id_prefix: str = "chatcmpl-"
    at: float = 0.5
    variant: int = 0
    source: str = "none"  # none | base | load | routed | window | api | cache | forced
    drawn: Fault | None = None  # the fault drawn before applicability; differs when skipped

    @property
    def header(self) -> str:
        """The ``x-sseguard-fault`` value."""
        return str(self.fault) if self.fault is not None else "none"


def request_rng(seed: int, counter: int) -> random.Random:
    """The generator for request number ``counter``; a string seed hashes stably across runs."""
    return random.Random(f"sseguard-chaos:{seed}:{counter}")

#: Old names → new (docs/design/vocabulary.md "Names").
__getattr__ = renamed(__name__, {"Dialect": "ServerDialect"})
