"""The OpenAI ``/v1/chat/completions`` streaming contract, checked incrementally over raw body bytes.

``StreamChecker`` is sans-IO: the adapter feeds the body as it arrives and says at ``close()`` how the
transport ended (a transport error, a stall it measured, the HTTP status). Nothing the peer sends can
raise out of ``feed()``/``close()``: a broken stream is the *answer*, given as a ``Verdict``.

The contract, as the official clients assume it and servers are seen to break it:
``complete`` needs a non-null ``finish_reason`` for every choice *and* the exact ``data: [DONE]``
sentinel. A stream that simply stops after content is ``truncated`` — the failure tolerant SDKs accept
silently, which is why it is the first thing this checker exists to name.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import msgspec

from sseguard.assemble import MessageAssembler
from sseguard.errors import UsageError
from sseguard.sse import SSEDecoder, SSEEvent
from sseguard.verdict import Ending, Finding, FindingKind, Verdict

TAIL_BYTES = 2048

#: Markers whose presence in visible content or reasoning means tool-call markup leaked, per family.
#: A plain substring search: the incremental parsers in ``sseguard.toolcalls`` do the real parsing.
LEAK_MARKERS: dict[str, tuple[str, ...]] = {
    "dsml": ("｜DSML｜",),
    "deepseek-v3": ("<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>",
                    "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>"),
    "hermes": ("<tool_call>", "</tool_call>"),
    "qwen3-coder": ("<function=", "</function>", "<parameter="),
    # GLM's tags are added tokens that are not special: they survive skip_special_tokens as they are
    "glm": ("<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"),
    # MiniMax's block tokens are special; stripped, they leave the plain-text invoke tag (decision 11)
    "minimax-m2": ("<minimax:tool_call>", "</minimax:tool_call>", '<invoke name="'),
}
# Family names of sseguard.toolcalls mapped onto the marker sets above.
_FAMILY_ALIASES = {
    "dsml-v32": "dsml", "dsml-v4": "dsml", "dsml-v41": "dsml",
    "deepseek-v31": "deepseek-v3", "qwen": "hermes", "glm45": "glm", "glm47": "glm",
}

_decode = msgspec.json.decode


def leak_markers(families: str | Iterable[str] | None = "all") -> tuple[str, ...]:
    """The marker strings to look for; ``"all"`` (or None) means every known family."""
    if families is None or families == "all" or families == "auto":
        names: Iterable[str] = LEAK_MARKERS
    elif isinstance(families, str):
        names = [families]
    else:
        names = families
    out: list[str] = []
    for name in names:
        out.extend(LEAK_MARKERS.get(_FAMILY_ALIASES.get(name, name), ()))
    return tuple(out)


class _RequestFacts:
    """What the request tells the checker: offered tools, usage asked, number of choices."""

    __slots__ = ("include_usage", "n", "tool_schemas", "tools_offered")

    def __init__(self, request: dict[str, Any] | None) -> None:
        request = request or {}
        self.tools_offered = False
        self.tool_schemas: dict[str, Any] = {}
        tools = request.get("tools")
        if isinstance(tools, list):
            self.tools_offered = True
            for tool in tools:
                fn = tool.get("function") if isinstance(tool, dict) else None
                if isinstance(fn, dict) and isinstance(fn.get("name"), str):
                    self.tool_schemas[fn["name"]] = fn.get("parameters")
        opts = request.get("stream_options")
        self.include_usage = bool(isinstance(opts, dict) and opts.get("include_usage"))
        n = request.get("n")
        self.n = n if isinstance(n, int) and n > 0 else None


class StreamChecker:
    """Feed it one response body's bytes; ``close()`` returns the ``Verdict``.

    ``request`` is the request body that produced the stream (optional). ``markup`` names the
    tool-call markup families to look for in visible text (``"all"`` by default).
    """

    def __init__(self, request: dict[str, Any] | None = None, *,
                 markup: str | Iterable[str] | None = "all", keep_text: bool = True) -> None:
        self._request = _RequestFacts(request)
        self._leaks = _LeakScanner(leak_markers(markup), self._on_leak)
        self._decoder = SSEDecoder()
        self._assembler = MessageAssembler(keep_text=keep_text, on_text=self._leaks.scan)
        self._findings: list[Finding] = []
        self._seen_kinds: set[FindingKind] = set()
        self._tail_parts: list[bytes] = []
        self._tail_len = 0
        self._bytes = 0
        self._frames = 0  # dispatched SSE events
        self._frame_end = 0  # body offset just past the last dispatched event
        self._chunks = 0  # JSON chunk objects folded
        self._done_frame: int | None = None
        self._error: str | None = None
        self._closed = False

    # ── feeding ───────────────────────────────────────────────────────────────────────────────
    @property
    def saw_content(self) -> bool:
        """A content, reasoning or tool-call delta has arrived: the adapter's "first token" moment."""
        return self._assembler.saw_token

    @property
    def saw_done(self) -> bool:
        return self._done_frame is not None

    @property
    def error_message(self) -> str | None:
        """The message of an error event, once one arrived."""
        return self._error

    @property
    def findings_so_far(self) -> tuple[Finding, ...]:
        """Findings made while feeding (those that need the whole stream come at ``close()``)."""
        return tuple(self._findings)

    @property
    def bytes_seen(self) -> int:
        return self._bytes

    def feed(self, data: bytes) -> list[SSEEvent]:
        """Check the next bytes of the body; returns the events they completed."""
        if self._closed:
            raise UsageError("StreamChecker.feed() after close()")
        if not data:
            return []
        self._bytes += len(data)
        self._keep_tail(data)
        events = self._decoder.feed(data)
        for event in events:
            self._on_event(event)
        return events

    def _keep_tail(self, data: bytes) -> None:
        self._tail_parts.append(data)
        self._tail_len += len(data)
        if self._tail_len > 4 * TAIL_BYTES:
            joined = b"".join(self._tail_parts)[-TAIL_BYTES:]
            self._tail_parts = [joined]
            self._tail_len = len(joined)

    def _find(self, kind: FindingKind, detail: str, *, once: bool = False) -> None:
        if once and kind in self._seen_kinds:
            return
        self._seen_kinds.add(kind)
        self._findings.append(Finding(kind, detail, self._frames, self._frame_end))

    def _on_leak(self, marker: str, choice: int, where: str, pos: int) -> None:
        self._find(FindingKind.MARKUP_LEAK, f"{marker!r} in {where} of choice {choice} at {pos}")

    def _on_event(self, event: SSEEvent) -> None:
        self._frames += 1
        # Where a finding happened is the end of its frame in the body: the same however the body
        # was split into feeds (the bytes fed so far would not be).
        self._frame_end += len(event.raw)
        data = event.data
        if self._done_frame is not None:
            self._find(FindingKind.FRAME_AFTER_DONE,
                       f"event after [DONE]: {data[:80]!r}", once=True)
        if event.event == "error":
            self._on_error(data)
            return
        if data == "[DONE]":
            if self._done_frame is None:
                self._done_frame = self._frames
            return
        if event.event != "message":
            return  # named events other than `error` carry no chat chunks (pings, vendor metadata)
        try:
            obj = _decode(data)
        except (msgspec.DecodeError, UnicodeDecodeError):
            self._find(FindingKind.BAD_CHUNK_JSON, f"not JSON: {data[:120]!r}")
            return
        if not isinstance(obj, dict):
            self._find(FindingKind.CHUNK_SCHEMA, f"chunk is a {type(obj).__name__}, not an object")
            return
        if "error" in obj and not obj.get("choices"):
            self._on_error(data, obj)
            return
        self._chunks += 1
        for problem in self._assembler.add(obj):
            self._find(FindingKind.CHUNK_SCHEMA, problem)

    def _on_error(self, data: str, obj: Any = None) -> None:
        if obj is None:
            try:
                obj = json.loads(data)
            except ValueError:
                obj = None
        message = data
        if isinstance(obj, dict):
            err = obj.get("error", obj)
            if isinstance(err, dict):
                message = str(err.get("message") or err.get("type") or err.get("code") or data)
            elif isinstance(err, str):
                message = err
        if self._error is None:
            self._error = message or "error event"

    # ── the verdict ───────────────────────────────────────────────────────────────────────────
    def close(self, transport_error: str | None = None, http_status: int = 200,
              stalled: bool = False, body: bytes | None = None) -> Verdict:
        """Say how the body ended and get the verdict. ``body`` is a non-2xx response's body."""
        if self._closed:
            raise UsageError("StreamChecker.close() called twice")
        self._closed = True
        tail = self._decoder.close()
        asm = self._assembler
        error = self._error
        if body is not None:
            self._keep_tail(body)
            self._bytes += len(body)
        finished = bool(asm.choices) and all(
            c.finish_reason is not None for c in asm.choices.values())
        if self._request.n and len(asm.choices) < self._request.n and asm.choices:
            finished = False
        done = self._done_frame is not None
        if not 200 <= http_status < 300:
            ending = Ending.HTTP_ERROR
            error = (body or b"").decode("utf-8", "replace")[:TAIL_BYTES] or f"HTTP {http_status}"
        elif error is not None:
            ending = Ending.ERROR_EVENT
        elif stalled:
            ending = Ending.STALLED
            error = "stalled"
        elif transport_error is not None:
            ending = Ending.TRANSPORT_ERROR
            error = transport_error
        elif tail.is_cut:
            ending = Ending.CUT_MID_FRAME
        elif self._frames == 0:
            ending = Ending.EMPTY
        elif done and finished:
            ending = Ending.COMPLETE
        elif done:
            ending = Ending.NO_FINISH
        elif finished:
            ending = Ending.NO_DONE
        else:
            ending = Ending.TRUNCATED
        self._frame_end = self._bytes  # what is found from here on concerns the whole body
        if ending is not Ending.HTTP_ERROR:
            self._final_findings(ending)
        if asm.ids_changed:
            self._find(FindingKind.ID_CHANGED,
                       f"response id changed from {asm.first_id!r} to {asm.last_id!r}")
        return Verdict(
            ending=ending,
            findings=tuple(self._findings),
            message=asm.to_openai(),
            chunks=self._chunks,
            bytes=self._bytes,
            first_id=asm.first_id,
            last_id=asm.last_id,
            tail=b"".join(self._tail_parts)[-TAIL_BYTES:],
            error=error,
            http_status=http_status,
        )

    def _final_findings(self, ending: Ending) -> None:
        asm = self._assembler
        cut_short = ending not in (Ending.COMPLETE, Ending.NO_DONE, Ending.NO_FINISH)
        for choice in asm.choices.values():
            calls = [call for _, call in sorted(choice.tool_calls.items())]
            for call in calls:
                self._check_call(choice.index, call.name, call.arguments,
                                 last=call is calls[-1], cut_short=cut_short,
                                 finished=choice.finish_reason is not None)
            if choice.finish_reason == "tool_calls" and not calls:
                self._find(FindingKind.FINISH_REASON_MISMATCH,
                           f"choice {choice.index}: finish_reason tool_calls without tool calls")
            elif calls and choice.finish_reason in ("stop", "length"):
                self._find(FindingKind.FINISH_REASON_MISMATCH,
                           f"choice {choice.index}: {len(calls)} tool call(s) with finish_reason "
                           f"{choice.finish_reason!r}")
        if (self._request.include_usage and asm.usage is None
                and ending in (Ending.COMPLETE, Ending.NO_DONE, Ending.NO_FINISH)):
            self._find(FindingKind.MISSING_USAGE,
                       "stream_options.include_usage was asked but no usage chunk came")

    def _check_call(self, choice: int, name: str, arguments: str, *, last: bool,
                    cut_short: bool, finished: bool) -> None:
        where = f"choice {choice} tool call {name!r}"
        if self._request.tools_offered and name not in self._request.tool_schemas:
            self._find(FindingKind.TOOL_UNDEFINED_FUNCTION,
                       f"{where}: not among the {len(self._request.tool_schemas)} offered tools")
        if arguments.strip() == "":
            # An empty string for a call without arguments is common and harmless.
            args: Any = {}
        else:
            try:
                args = json.loads(arguments)
            except ValueError as exc:
                if last and cut_short and not finished:
                    self._find(FindingKind.TOOL_CALL_UNTERMINATED,
                               f"{where}: arguments cut off after {len(arguments)} chars")
                else:
                    self._find(FindingKind.TOOL_ARGS_INVALID_JSON,
                               f"{where}: {exc.msg} at {exc.pos}: {arguments[:120]!r}"
                               if isinstance(exc, json.JSONDecodeError) else f"{where}: {exc}")
                return
        schema = self._request.tool_schemas.get(name)
        if isinstance(schema, dict) and schema:
            problem = _schema_problem(args, schema)
            if problem is not None:
                self._find(FindingKind.TOOL_ARGS_SCHEMA_MISMATCH, f"{where}: {problem}")


class _LeakScanner:
    """Finds tool-call markers in text deltas as they arrive, also across delta boundaries.

    Scanning in flight (not the assembled text at the end) says in which frame markup leaked and lets a
    relay drop the text itself. Only the last ``longest marker - 1`` characters are carried between
    deltas, so the cost is linear; one finding per choice and field is enough evidence.
    """

    __slots__ = ("_carry", "_keep", "_markers", "_report", "_reported")

    def __init__(self, markers: tuple[str, ...],
                 report: Callable[[str, int, str, int], None]) -> None:
        self._markers = markers
        self._report = report
        self._keep = max((len(m) for m in markers), default=1) - 1
        self._carry: dict[tuple[int, str], tuple[str, int]] = {}  # tail kept, its offset in the text
        self._reported: set[tuple[int, str]] = set()

    def scan(self, choice: int, where: str, text: str) -> None:
        key = (choice, where)
        if key in self._reported or not self._markers:
            return
        carry, start = self._carry.get(key, ("", 0))
        window = carry + text if carry else text
        # Every marker of every family holds '<' or '｜': most deltas are done after two `in` tests.
        if "<" in window or "｜" in window:
            for marker in self._markers:
                pos = window.find(marker)
                if pos != -1:
                    self._reported.add(key)
                    self._carry.pop(key, None)
                    self._report(marker, choice, where, start + pos)
                    return
        end = start + len(window)
        tail = window[-self._keep:] if self._keep else ""
        # A marker that spans the boundary starts in the tail, with its '<' or '｜'.
        if "<" in tail or "｜" in tail:
            self._carry[key] = (tail, end - len(tail))
        else:
            self._carry[key] = ("", end)


def _schema_problem(instance: Any, schema: dict[str, Any]) -> str | None:
    """The first JSON-schema violation, or None; an invalid schema is the caller's, not a finding."""
    import jsonschema  # imported lazily: only requests with tool schemas pay for it

    try:
        validator_cls = jsonschema.validators.validator_for(schema)
        validator_cls.check_schema(schema)
        error = jsonschema.exceptions.best_match(validator_cls(schema).iter_errors(instance))
    except jsonschema.exceptions.SchemaError:
        return None
    return None if error is None else error.message
