"""One stream's timings and verdict, turned into a ``Record`` — with no I/O library in sight.

The aiohttp run of one request (``request.py``), a Locust user on gevent, or a test all drive the
same ``StreamWatch``: tell it when the request went out, when headers came, feed it each body chunk
with the time it arrived, then ``finish()``. Times are plain monotonic seconds passed in by the
caller (sans-IO, as the core).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sseguard.core.contract import TAIL_BYTES, checker_for, protocol
from sseguard.core.policy import Policy
from sseguard.core.record import Record, record_from_verdict
from sseguard.core.redact import Redactor
from sseguard.core.verdict import Api, Verdict


def _ms(start: float | None, end: float | None) -> float | None:
    if start is None or end is None:
        return None
    return round((end - start) * 1000.0, 3)


class StreamWatch:
    """Feeds one body to its protocol's checker and measures TTFB, TTFT, the longest gap and duration.

    ``sent_at`` is when the request left (monotonic seconds); ``started_at`` the wall-clock epoch time
    of the same moment (records keep it for time-window analysis). ``api`` picks the contract
    (``checker_for``), by protocol name.
    """

    __slots__ = ("api", "checker", "done_at", "first_chunk_at", "first_token_at", "headers",
                 "headers_at", "last_chunk_at", "max_gap", "sent_at", "started_at", "status")

    def __init__(self, request: Mapping[str, Any] | None, *, sent_at: float, started_at: float,
                 api: str | Api = Api.CHAT) -> None:
        self.api = api if type(api) is Api else Api(api)  # an Enum call costs ~1 µs per request
        self.checker = checker_for(self.api, dict(request) if request is not None else None)
        self.sent_at = sent_at
        self.started_at = started_at
        self.headers_at: float | None = None
        self.first_chunk_at: float | None = None
        self.first_token_at: float | None = None
        self.last_chunk_at: float | None = None
        self.done_at: float | None = None
        self.max_gap = 0.0
        self.status = 0
        self.headers: list[tuple[str, str]] = []

    def response(self, status: int, headers: Iterable[tuple[str, str]], now: float) -> None:
        """The status line and headers arrived (the first byte of the response)."""
        self.status = status
        self.headers = list(headers)
        self.headers_at = now

    def feed(self, data: bytes, now: float) -> None:
        """One body chunk of a 2xx response, as it arrived."""
        last = self.last_chunk_at
        if last is None:
            self.first_chunk_at = now
        elif now - last > self.max_gap:
            self.max_gap = now - last
        self.last_chunk_at = now
        self.checker.feed(data)
        if self.first_token_at is None and self.checker.saw_content:
            self.first_token_at = now

    def finish(self, now: float, *, transport_error: str | None = None, stalled: bool = False,
               error_body: bytes | None = None) -> Verdict:
        """The body ended (EOF, error, stall); ``error_body`` is a non-2xx response's body."""
        self.done_at = now
        status = self.status or 200
        if error_body is not None or not 200 <= status < 300:
            return self.checker.close(http_status=status, body=error_body or b"",
                                      transport_error=transport_error)
        return self.checker.close(transport_error=transport_error, stalled=stalled)

    def timings(self) -> dict[str, Any]:
        """The measured facts, as ``Record`` fields."""
        return {
            "ttfb_ms": _ms(self.sent_at, self.headers_at),
            "ttft_ms": _ms(self.sent_at, self.first_token_at),
            "duration_ms": _ms(self.sent_at, self.done_at),
            "max_gap_ms": round(self.max_gap * 1000.0, 3) if self.last_chunk_at is not None else None,
        }

    def record(self, verdict: Verdict, *, policy: Policy, redactor: Redactor,
               model: str | None = None, **facts: Any) -> Record:
        """The stored form: verdict + timings + the caller's facts (arm, index, …), all redacted."""
        facts.setdefault("api", str(self.api))
        record = record_from_verdict(verdict, policy=policy, headers=dict(self.headers),
                                     redactor=redactor, started_at=self.started_at,
                                     **self.timings(), **facts)
        if record.model is None:
            record.model = model
        return record


def evidence_document(record: Record, verdict: Verdict, headers: Iterable[tuple[str, str]],
                      redactor: Redactor, *, request_summary: Mapping[str, Any] | None = None
                      ) -> dict[str, Any]:
    """What a person needs to see one bad stream: redacted headers, the last 2 KiB, the verdict."""
    tail = redactor.text(verdict.tail[-TAIL_BYTES:].decode("utf-8", "replace"))
    verdict_doc = verdict.to_dict()
    verdict_doc.pop("tail", None)
    return {
        "arm": record.arm, "index": record.index, "run_id": record.run_id,
        "started_at": record.started_at, "status": record.status,
        "ending": record.ending, "findings": record.findings, "error": record.error,
        "response_id": record.response_id, "last_response_id": record.last_response_id,
        "injected": record.injected,
        "timings": {"ttfb_ms": record.ttfb_ms, "ttft_ms": record.ttft_ms,
                    "duration_ms": record.duration_ms, "max_gap_ms": record.max_gap_ms},
        "connection": record.connection, "reuse_index": record.reuse_index,
        "concurrency": record.concurrency,
        "request": redactor.obj(dict(request_summary or {})),
        "response_headers": redactor.headers(list(headers)),
        "tail": tail,
        "verdict": redactor.obj(verdict_doc),
    }


def request_summary(body: Mapping[str, Any], *, url_path: str, prompt_bytes: int,
                    api: str | Api = Api.CHAT) -> dict[str, Any]:
    """A small description of the request for evidence files (never the whole 1.7 MB prompt).

    The turns, the token limit and the reasoning settings are read from the fields the protocol's
    request format names (``Format.turns_field`` and the rest).
    """
    fmt = protocol(api).format
    turns = body.get(fmt.turns_field)
    summary = {
        "api": str(api),
        "path": url_path,
        "model": body.get("model"),
        "messages": len(turns) if isinstance(turns, list) else (1 if isinstance(turns, str) else None),
        "tools": len(body["tools"]) if isinstance(body.get("tools"), list) else 0,
        "max_tokens": body.get(fmt.max_tokens_field),
        "prompt_bytes": prompt_bytes,
    }
    for key in fmt.setting_fields:
        if key in body:
            summary[key] = body[key]
    return summary
