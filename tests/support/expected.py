"""What a strict checker must report for each chaos fault, written out here from the contract
(docs/design/vocabulary.md) — the tests never take it from ``sseguard.chaos``'s own table, so a wrong
entry there cannot make a wrong verdict pass."""

from __future__ import annotations

from typing import NamedTuple


class Verdict(NamedTuple):
    ending: str
    findings: frozenset[str] = frozenset()
    markup_error: str | None = None  # what a toolcalls parser reports on the content, if anything


#: fault name → the verdict on a plain answer (tool faults: on an answer to a request with tools).
FAULT_VERDICTS: dict[str, Verdict] = {
    "truncated": Verdict("truncated"),
    "no_done": Verdict("no_done"),
    "no_finish": Verdict("no_finish"),
    "cut_mid_frame": Verdict("cut_mid_frame"),
    "transport_error": Verdict("transport_error"),
    "error_event": Verdict("error_event"),
    "http_error": Verdict("http_error"),
    "stalled": Verdict("stalled"),
    "empty": Verdict("empty"),
    "markup_leak": Verdict("complete", frozenset({"markup_leak"})),
    "tool_args_invalid_json": Verdict("complete", frozenset({"tool_args_invalid_json"})),
    "tool_undefined_function": Verdict("complete", frozenset({"tool_undefined_function"})),
    "tool_args_schema_mismatch": Verdict("complete", frozenset({"tool_args_schema_mismatch"})),
    "tool_call_unterminated": Verdict("truncated", frozenset({"tool_call_unterminated"})),
    "malformed_closing_tag": Verdict("complete", frozenset({"markup_leak"}), "malformed_tag"),
    "bad_chunk_json": Verdict("complete", frozenset({"bad_chunk_json"})),
    "chunk_schema": Verdict("complete", frozenset({"chunk_schema"})),
    "finish_reason_mismatch": Verdict("complete", frozenset({"finish_reason_mismatch"})),
    "missing_usage": Verdict("complete", frozenset({"missing_usage"})),
    "id_changed": Verdict("complete", frozenset({"id_changed"})),
    "frame_after_done": Verdict("complete", frozenset({"frame_after_done"})),
    # Text corrupted in a perfect stream (issue 39): nothing a checker can see.
    "garbled": Verdict("complete"),
}


def expected(fault: object) -> Verdict:
    """The verdict for a fault (a ``Fault`` or its name); ``none`` is a healthy, complete stream."""
    name = str(fault)
    return Verdict("complete") if name in ("none", "None") else FAULT_VERDICTS[name]
