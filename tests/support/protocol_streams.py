"""Builders for OpenAI Responses and Anthropic Messages stream bodies, shared by the core's tests.

The shapes follow the official SDKs' event types (openai.types.responses, anthropic.types); every
builder returns plain bytes, so a test states exactly what the wire carried.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from sseguard.core.verdict import Ending, Finding, FindingKind, Verdict

BODIES = Path(__file__).parents[2] / "examples" / "bodies"

USAGE_R = {"input_tokens": 12, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
           "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 17}


def sse(obj: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"


class Responses:
    """A Responses stream, event by event, numbered as OpenAI numbers them."""

    def __init__(self, rid: str = "resp_1", model: str = "gpt-5-mini") -> None:
        self.rid = rid
        self.model = model
        self.seq = 0
        self.out = bytearray()
        self.items: list[Any] = []  # the items output_item.done gave, for the terminal response

    def response(self, status: str, output: list[Any] | None = None, **extra: Any) -> dict[str, Any]:
        obj: dict[str, Any] = {"id": self.rid, "object": "response", "created_at": 1764748800,
                               "status": status, "model": self.model, "output": output or [],
                               "error": None, "incomplete_details": None, "usage": None}
        obj.update(extra)
        return obj

    def ev(self, etype: str, **fields: Any) -> Responses:
        obj = {"type": etype, "sequence_number": self.seq, **fields}
        if etype == "response.output_item.done":
            self.items.append(fields["item"])
        self.seq += 1
        self.out += sse(obj, etype)
        return self

    def raw(self, data: bytes) -> Responses:
        self.out += data
        return self

    def created(self) -> Responses:
        self.ev("response.created", response=self.response("in_progress"))
        return self.ev("response.in_progress", response=self.response("in_progress"))

    def message(self, index: int, words: list[str], *, close: bool = True,
                item_id: str = "msg_1") -> Responses:
        item = {"id": item_id, "type": "message", "status": "in_progress", "role": "assistant",
                "content": []}
        part = {"type": "output_text", "text": "", "annotations": []}
        self.ev("response.output_item.added", output_index=index, item=item)
        self.ev("response.content_part.added", item_id=item_id, output_index=index,
                content_index=0, part=part)
        for w in words:
            self.ev("response.output_text.delta", item_id=item_id, output_index=index,
                    content_index=0, delta=w, logprobs=[])
        if close:
            text = "".join(words)
            self.ev("response.output_text.done", item_id=item_id, output_index=index,
                    content_index=0, text=text, logprobs=[])
            self.ev("response.content_part.done", item_id=item_id, output_index=index,
                    content_index=0, part=dict(part, text=text))
            self.ev("response.output_item.done", output_index=index,
                    item=dict(item, status="completed", content=[dict(part, text=text)]))
        return self

    def function_call(self, index: int, name: str, fragments: list[str], *, close: bool = True,
                      item_id: str = "fc_1", call_id: str = "call_1") -> Responses:
        item = {"id": item_id, "type": "function_call", "status": "in_progress", "call_id": call_id,
                "name": name, "arguments": ""}
        self.ev("response.output_item.added", output_index=index, item=item)
        for f in fragments:
            self.ev("response.function_call_arguments.delta", item_id=item_id, output_index=index,
                    delta=f)
        if close:
            args = "".join(fragments)
            self.ev("response.function_call_arguments.done", item_id=item_id, output_index=index,
                    name=name, arguments=args)
            self.ev("response.output_item.done", output_index=index,
                    item=dict(item, status="completed", arguments=args))
        return self

    def reasoning(self, index: int, words: list[str], item_id: str = "rs_1") -> Responses:
        item = {"id": item_id, "type": "reasoning", "summary": []}
        part = {"type": "summary_text", "text": ""}
        self.ev("response.output_item.added", output_index=index, item=item)
        self.ev("response.reasoning_summary_part.added", item_id=item_id, output_index=index,
                summary_index=0, part=part)
        for w in words:
            self.ev("response.reasoning_summary_text.delta", item_id=item_id, output_index=index,
                    summary_index=0, delta=w)
        text = "".join(words)
        self.ev("response.reasoning_summary_text.done", item_id=item_id, output_index=index,
                summary_index=0, text=text)
        self.ev("response.reasoning_summary_part.done", item_id=item_id, output_index=index,
                summary_index=0, part=dict(part, text=text))
        return self.ev("response.output_item.done", output_index=index,
                       item=dict(item, summary=[dict(part, text=text)]))

    def completed(self, *, usage: bool = True) -> Responses:
        return self.ev("response.completed", response=self.response(
            "completed", list(self.items), usage=USAGE_R if usage else None))

    def incomplete(self, reason: str = "max_output_tokens") -> Responses:
        return self.ev("response.incomplete", response=self.response(
            "incomplete", list(self.items), incomplete_details={"reason": reason}, usage=USAGE_R))

    def failed(self, message: str = "The model failed") -> Responses:
        return self.ev("response.failed", response=self.response(
            "failed", error={"code": "server_error", "message": message}))

    def end(self, how: str) -> Responses:
        """completed, incomplete, failed, [DONE], error (a flat error event) or none."""
        if how == "completed":
            return self.completed()
        if how == "incomplete":
            return self.incomplete()
        if how == "failed":
            return self.failed()
        if how == "[DONE]":
            return self.raw(b"data: [DONE]\n\n")
        if how == "error":
            return self.ev("error", code="server_error", message="boom", param=None)
        return self

    def body(self) -> bytes:
        return bytes(self.out)


def responses_text(words: list[str], *, end: str = "completed") -> bytes:
    """created, one message item, then ``end`` (see ``Responses.end``)."""
    return Responses().created().message(0, words).end(end).body()


class Messages:
    """An Anthropic Messages stream, event by event, as the API sends it (``event:`` + ``data:``)."""

    def __init__(self, mid: str = "msg_01", model: str = "claude-sonnet-4-5") -> None:
        self.mid = mid
        self.model = model
        self.out = bytearray()
        self.index = 0

    def ev(self, etype: str, **fields: Any) -> Messages:
        self.out += sse({"type": etype, **fields}, etype)
        return self

    def raw(self, data: bytes) -> Messages:
        self.out += data
        return self

    def start(self) -> Messages:
        return self.ev("message_start", message={
            "id": self.mid, "type": "message", "role": "assistant", "content": [], "model": self.model,
            "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 25, "output_tokens": 1, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 0}})

    def text(self, words: list[str], *, close: bool = True, kind: str = "text") -> Messages:
        index = self.index
        self.index += 1
        block: dict[str, Any] = {"type": "text", "text": ""} if kind == "text" else \
            {"type": "thinking", "thinking": "", "signature": ""}
        self.ev("content_block_start", index=index, content_block=block)
        for w in words:
            delta = {"type": "text_delta", "text": w} if kind == "text" else \
                {"type": "thinking_delta", "thinking": w}
            self.ev("content_block_delta", index=index, delta=delta)
        if kind == "thinking":
            self.ev("content_block_delta", index=index,
                    delta={"type": "signature_delta", "signature": "EqQBCgIYAhIM"})
        if close:
            self.ev("content_block_stop", index=index)
        return self

    def tool(self, name: str, fragments: list[str], *, close: bool = True,
             tool_id: str = "toolu_01") -> Messages:
        index = self.index
        self.index += 1
        self.ev("content_block_start", index=index,
                content_block={"type": "tool_use", "id": tool_id, "name": name, "input": {}})
        for f in fragments:
            self.ev("content_block_delta", index=index,
                    delta={"type": "input_json_delta", "partial_json": f})
        if close:
            self.ev("content_block_stop", index=index)
        return self

    def delta(self, stop_reason: str | None = "end_turn", *, usage: bool = True) -> Messages:
        fields: dict[str, Any] = {"delta": {"stop_reason": stop_reason, "stop_sequence": None}}
        if usage:
            fields["usage"] = {"output_tokens": 15}
        return self.ev("message_delta", **fields)

    def stop(self) -> Messages:
        return self.ev("message_stop")

    def ping(self) -> Messages:
        return self.ev("ping")

    def body(self) -> bytes:
        return bytes(self.out)


def messages_text(words: list[str], *, stop_reason: str | None = "end_turn",
                  stop: bool = True) -> bytes:
    """message_start, one text block, a message_delta with ``stop_reason``, then message_stop."""
    m = Messages().start().text(words).delta(stop_reason)
    if stop:
        m.stop()
    return m.body()


def run(api: str, stream: bytes, step: int | None = None, request: dict[str, Any] | None = None,
        *, keep_text: bool = True, **close: Any) -> Any:
    """Feed ``stream`` to the ``api`` checker in pieces of ``step`` bytes (whole by default); the verdict."""
    from sseguard.core.contract import checker_for

    checker = checker_for(api, request, keep_text=keep_text)
    size = step or max(len(stream), 1)
    for i in range(0, len(stream), size):
        checker.feed(stream[i:i + size])
    return checker.close(**close)


def sdk_shape(value: Any) -> Any:
    """An object as both sides can be compared: no None fields, no SDK-only parse results, integral
    floats as ints (pydantic turns ``created_at`` into a float)."""
    if isinstance(value, dict):
        return {k: sdk_shape(v) for k, v in value.items()
                if v is not None and k not in ("parsed", "parsed_arguments", "parsed_output")}
    if isinstance(value, list):
        return [sdk_shape(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def kinds(v: Verdict) -> list[FindingKind]:
    return [f.kind for f in v.findings]


def facts(v: Verdict) -> tuple[Ending, tuple[Finding, ...], dict[str, Any], str | None]:
    """What must not depend on how the body was split: ending, findings with places, object, error."""
    return v.ending, v.findings, v.message, v.error


def sample_verdict(api: str, name: str) -> Verdict:
    """The verdict of ``examples/bodies/{api}_{name}.sse`` (with the api's tool request), after
    proving it the same for splits down to one byte."""
    body = (BODIES / f"{api}_{name}.sse").read_bytes()
    request = json.loads((BODIES.parent / f"request_tools_{api}.json").read_text())
    whole = run(api, body, request=request)
    for size in (1, 2, 3, 7, 64):
        assert facts(run(api, body, size, request=request)) == facts(whole), size
    return whole


def shipped_samples(api: str) -> set[str]:
    return {p.stem.removeprefix(f"{api}_") for p in BODIES.glob(f"{api}_*.sse")}


def cut_or_crlf(draw: Any, body: bytes) -> bytes:
    """Maybe cut the body anywhere, maybe turn its line ends into CRLF: how property tests break it."""
    if draw(st.booleans()):
        body = body[:draw(st.integers(0, len(body)))]
    if draw(st.booleans()):
        body = body.replace(b"\n", b"\r\n")
    return body


def feed_in_sizes(checker: Any, body: bytes, sizes: list[int]) -> Verdict:
    """Feed the whole body in pieces of the given sizes, cycling through them; the verdict."""
    pos = 0
    while pos < len(body):
        for size in sizes:
            checker.feed(body[pos:pos + size])
            pos += size
    result: Verdict = checker.close()
    return result


#: Every marker of every family, as the tests spell them (not taken from the checker's own table).
#: Text around a marker in the leak tests: without the leads of every family's leak markers ("<", "｜",
#: "[", "f"), so that the only markup in it is what ``MARKERS`` names (hypothesis draws string literals
#: from the code under test, the 46 families' markers among them).
AROUND = st.text(st.characters(blacklist_characters="<｜[f"), max_size=20)
MARKERS = ["｜DSML｜", "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>",
           "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>", "<tool_call>", "</tool_call>", "<function=",
           "</function>", "<parameter=",
           # docs/design/markup.md §2: Kimi K2, gpt-oss Harmony, GLM-4.5/4.7, MiniMax-M2
           "<|tool_calls_section_begin|>", "<|tool_call_section_begin|>", "<|tool_call_begin|>",
           "<|tool_call_argument_begin|>", "<|tool_call_end|>", "<|tool_calls_section_end|>",
           "<|tool_call_section_end|>", "<|start|>", "<|channel|>", "<|message|>", "<|constrain|>",
           "<|end|>", "<|call|>", "<|return|>", "<arg_key>", "</arg_key>", "<arg_value>",
           "</arg_value>", "<minimax:tool_call>", "</minimax:tool_call>", '<invoke name="']
#: What a server that strips special tokens leaves of a Kimi and a Harmony call (decision 2.11).
STRIPPED = ['Sure.functions.get_weather:0{"city": "Paris"}',
            'analysisNeed it.assistantcommentary to=functions.get_weather json{"city": "Paris"}']


def split_at(text: str, cuts: list[int]) -> list[str]:
    """``text`` in non-empty pieces cut at the given offsets (out-of-range ones clamp to its end)."""
    bounds = sorted({min(c, len(text)) for c in cuts} | {0, len(text)})
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


def assert_leak_found_where_it_is(text: str, verdict: Verdict) -> None:
    """A leak finding exactly when a marker is in ``text``, naming the offset where one starts."""
    leaks = [f for f in verdict.findings if f.kind is FindingKind.MARKUP_LEAK]
    assert bool(leaks) == any(m in text for m in MARKERS)
    if leaks:
        pos = int(leaks[0].detail.rsplit(" at ", 1)[1])
        assert any(text.startswith(m, pos) for m in MARKERS)
