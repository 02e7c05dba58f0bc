"""``POST /v1/chat/completions``: OpenAI Chat Completions, spoken by the chaos upstream.

The request is read the way an OpenAI-compatible server reads it (vLLM and SGLang are the reference:
a malformed request is a 400 with OpenAI's ``invalid_request_error``, since a chaos server that accepted
anything would hide client bugs the real upstream will not), into the ``ChatRequest`` every protocol's
answer is generated from. The answer is rendered as ``chat.completion.chunk`` frames, spliced from a
per-response prefix and the JSON-encoded text instead of serializing a dict per chunk (most of a chunk
is the same every time), with the faults and the chat dialects applied.

Two continuation requests are read as the servers that document them do: vLLM/SGLang's
``continue_final_message`` (on ``/v1``), and DeepSeek's chat prefix completion, a last assistant
message with ``"prefix": true``, which DeepSeek serves only on its beta base URL: chaos answers it on
``/beta/chat/completions`` and refuses it elsewhere with a 400, as a wrong base URL would fail.
"""

from __future__ import annotations

import functools
import hashlib
from typing import Any

import msgspec

from sseguard.chaos.config import ChaosConfig
from sseguard.chaos.faults import Decision, Fault, ServerDialect
from sseguard.chaos.frames import Plan, ResponseIds, Tokens, position, schedule, tokens_from_tags
from sseguard.chaos.generate import GeneratedAnswer
from sseguard.chaos.request import (
    MAX_N,
    REASONING_SCALE,
    BadRequest,
    ChatRequest,
    Tool,
    decode_object,
    int_field,
    text_of,
    tools_of,
)
from sseguard.chaos.writer import Writer
from sseguard.core.contract.chat import CHAT, DONE_FRAME

_enc = msgspec.json.encode
DONE = DONE_FRAME
#: Chat has no sequence numbers, items or blocks: the four Responses/Messages faults are skipped.
UNSUPPORTED = frozenset({Fault.SEQUENCE_GAP, Fault.EVENT_ORDER, Fault.BLOCK_UNTERMINATED,
                         Fault.DONE_MISMATCH})


def _tool(i: int, tool: Any) -> Tool:
    fn = tool.get("function") if isinstance(tool, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
        raise BadRequest(f"tools[{i}] must be {{'type': 'function', 'function': {{'name': …}}}}",
                         f"tools[{i}]")
    params = fn.get("parameters")
    return Tool(fn["name"], params if isinstance(params, dict) else {})


def _tools(raw: Any) -> tuple[Tool, ...]:
    return tools_of(raw, not_a_list="tools must be a list", read=_tool)


#: Where DeepSeek's prefix completion is served (its beta base URL's path).
BETA_MOUNT = "/beta"


def parse_request(body: bytes, *, beta: bool = False) -> ChatRequest:
    """Decode and validate a request body; raises ``BadRequest`` with a client-facing message.

    ``beta``: the request came to ``BETA_MOUNT``, where a ``"prefix": true`` last message is a
    continuation."""
    data = decode_object(body)
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list", "messages")
    continued = None
    last = messages[-1]
    ends_assistant = len(messages) > 1 and isinstance(last, dict) and last.get("role") == "assistant"
    if ends_assistant and last.get("prefix") is True:
        if not beta:
            raise BadRequest('"prefix": true (chat prefix completion) is a beta feature: send it to '
                             f"the base URL ending in {BETA_MOUNT}", "messages")
        continued, messages = text_of(last.get("content")), messages[:-1]
    elif ends_assistant and data.get("continue_final_message") is True:
        continued, messages = text_of(last.get("content")), messages[:-1]
    words = 0
    first_user: str | None = None
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or not isinstance(msg.get("role"), str):
            raise BadRequest(f"messages[{i}] must be an object with a role", f"messages[{i}]")
        text = text_of(msg.get("content"))
        if first_user is None and msg["role"] == "user":
            first_user = text
        words += len(text.split()) + 4
    stream = data.get("stream", False)
    if not isinstance(stream, bool):
        raise BadRequest("stream must be a boolean", "stream")
    opts = data.get("stream_options")
    if opts is not None and not isinstance(opts, dict):
        raise BadRequest("stream_options must be an object", "stream_options")
    model = data.get("model")
    if model is not None and not isinstance(model, str):
        raise BadRequest("model must be a string", "model")
    effort = data.get("reasoning_effort")
    if effort is not None and effort not in REASONING_SCALE:
        raise BadRequest(f"reasoning_effort must be one of {', '.join(REASONING_SCALE)}",
                         "reasoning_effort")
    max_tokens = int_field(data, "max_completion_tokens", minimum=1)
    if max_tokens is None:
        max_tokens = int_field(data, "max_tokens", minimum=1)
    tools = _tools(data.get("tools"))
    tool_choice = data.get("tool_choice", "auto")
    fn = tool_choice.get("function") if isinstance(tool_choice, dict) else None
    forced = fn.get("name") if isinstance(fn, dict) else None
    if forced is not None and forced not in {t.name for t in tools}:
        raise BadRequest(f"tool_choice names {forced!r}, which is not among the tools",
                         "tool_choice")
    last = messages[-1]
    digest = hashlib.blake2b(msgspec.json.encode([model, messages]), digest_size=16).digest()
    return ChatRequest(
        model=model,
        stream=stream,
        include_usage=bool(opts and opts.get("include_usage")),
        tools=tools,
        tool_choice=tool_choice,
        parallel_tool_calls=data.get("parallel_tool_calls", True) is not False,
        max_tokens=max_tokens,
        n=int_field(data, "n", minimum=1, maximum=MAX_N) or 1,
        reasoning=REASONING_SCALE[effort] if effort is not None else 0.0,
        last_role=str(last["role"]),
        last_text=text_of(last.get("content")),
        prompt_words=words,
        fingerprint=digest,
        continued=continued,
        first_user=first_user or "",
    )


def openai_bad_request(exc: BadRequest) -> dict[str, Any]:
    """OpenAI's 400 body: ``invalid_request_error`` naming the field."""
    return CHAT.error_body(str(exc), type_="invalid_request_error", code=None, param=exc.param)


class ChunkEncoder:
    """Pre-encoded pieces of a ``chat.completion.chunk`` for one response id."""

    __slots__ = ("_base", "_head", "_null")

    def __init__(self, response_id: str, created: int, model: str, *, empty_finish: bool) -> None:
        self._base = (b'data: {"id":' + _enc(response_id)
                      + b',"object":"chat.completion.chunk","created":' + str(created).encode()
                      + b',"model":' + _enc(model) + b',"system_fingerprint":"fp_sseguard_chaos"')
        self._head = self._base + b',"choices":[{"index":'
        self._null = b',"logprobs":null,"finish_reason":""}]}\n\n' if empty_finish else \
            b',"logprobs":null,"finish_reason":null}]}\n\n'

    def delta(self, index: int, delta: bytes) -> bytes:
        return b"".join((self._head, str(index).encode(), b',"delta":', delta, self._null))

    def text(self, index: int, key: bytes, text: str) -> bytes:
        return b"".join((self._head, str(index).encode(), b',"delta":{"', key, b'":', _enc(text),
                         b"}", self._null))

    def finish(self, index: int, reason: str | None) -> bytes:
        value = b"null" if reason is None else _enc(reason)
        return b"".join((self._head, str(index).encode(),
                         b',"delta":{},"logprobs":null,"finish_reason":', value, b"}]}\n\n"))

    def usage(self, usage: dict[str, Any], *, choices_null: bool) -> bytes:
        choices = b',"choices":null' if choices_null else b',"choices":[]'
        return b"".join((self._base, choices, b',"usage":', _enc(usage), b"}\n\n"))


def usage_of(req: ChatRequest, answers: list[GeneratedAnswer]) -> dict[str, Any]:
    completion = sum(a.completion_tokens for a in answers)
    reasoning = sum(len(a.reasoning) for a in answers)
    return {"prompt_tokens": req.prompt_words, "completion_tokens": completion,
            "total_tokens": req.prompt_words + completion,
            "prompt_tokens_details": {"cached_tokens": req.cached_words},
            "completion_tokens_details": {"reasoning_tokens": reasoning}}


def _token_frames(enc: ChunkEncoder, answers: list[GeneratedAnswer]) -> Tokens:
    per_choice: list[list[tuple[bytes, str]]] = []
    for index, answer in enumerate(answers):
        frames: list[tuple[bytes, str]] = []  # (frame, what it does to the call being sent)
        frames.append((enc.delta(index, b'{"role":"assistant","content":""}'), ""))
        for piece in answer.reasoning:
            frames.append((enc.text(index, b"reasoning_content", piece), ""))
        for piece in answer.content:
            frames.append((enc.text(index, b"content", piece), ""))
        for ci, call in enumerate(answer.calls):
            opener = {"tool_calls": [{"index": ci, "id": call.id, "type": "function",
                                      "function": {"name": call.name, "arguments": ""}}]}
            frames.append((enc.delta(index, _enc(opener)), "open" if call.pieces else ""))
            for pi, piece in enumerate(call.pieces):
                delta = {"tool_calls": [{"index": ci, "function": {"arguments": piece}}]}
                # A chat call has no closing frame: its last argument piece closes it.
                tags = ("first " if pi == 0 else "") + (
                    "last close" if pi == len(call.pieces) - 1 else "")
                frames.append((enc.delta(index, _enc(delta)), tags))
        per_choice.append(frames)
    interleaved = [frames[step] for step in range(max(len(f) for f in per_choice))
                   for frames in per_choice if step < len(frames)]
    return tokens_from_tags([f for f, _ in interleaved], [t for _, t in interleaved],
                            len(answers))


def stream_plan(config: ChaosConfig, req: ChatRequest, decision: Decision, ids: ResponseIds,
                answers: list[GeneratedAnswer]) -> Plan:
    """The writes of a streamed response: token frames paced, the trailer sent at once."""
    dialects = config.dialects
    fault = decision.fault
    model = req.model or config.model
    enc = ChunkEncoder(ids.response_id, ids.created, model,
                       empty_finish=ServerDialect.EMPTY_FINISH_REASON in dialects)
    toks = _token_frames(enc, answers)
    tokens = toks.frames
    if fault is Fault.ID_CHANGED:
        # The second half comes from "another backend": same shape, another id.
        other = ChunkEncoder(ids.response_id + "b", ids.created, model,
                             empty_finish=ServerDialect.EMPTY_FINISH_REASON in dialects)
        half = max(toks.roles + 1, len(tokens) // 2)
        tokens[half:] = _token_frames(other, answers).frames[half:]
        enc = other
    finish_frames = []
    if fault is not Fault.NO_FINISH:
        for index, answer in enumerate(answers):
            reason = None if ServerDialect.NO_FINISH_REASON in dialects else answer.finish_reason
            finish_frames.append(enc.finish(index, reason))
    trailer = list(finish_frames)
    if req.include_usage and fault is not Fault.MISSING_USAGE:
        trailer.append(enc.usage(usage_of(req, answers),
                                 choices_null=ServerDialect.USAGE_CHOICES_NULL in dialects))
    if fault is not Fault.NO_DONE and ServerDialect.NO_DONE not in dialects:
        trailer.append(DONE)
    if fault is Fault.FRAME_AFTER_DONE:
        trailer.append(enc.delta(0, b"{}"))
    if fault is Fault.BAD_CHUNK_JSON:
        pos = position(decision.at, 1, len(tokens) - 1)
        body = tokens[pos][len(b"data: "):-2]
        tokens.insert(pos + 1, b"data: " + body[: len(body) // 2] + b"\n\n")
    elif fault is Fault.CHUNK_SCHEMA:
        pos = position(decision.at, 1, len(tokens) - 1)
        tokens.insert(pos + 1, enc.delta(0, b'{"content":42}'))
    def error_frames(k: int) -> list[bytes]:
        form = config.options.error_event_form
        if form == "both":
            form = "event" if decision.variant % 2 else "data"
        payload = _enc(CHAT.status_error(500, "upstream model worker failed mid-stream"))
        if form == "event":
            return [b"event: error\ndata: " + payload + b"\n\n"]
        return [b"data: " + payload + b"\n\n", DONE]

    return schedule(config, decision, toks, trailer, error_frames)


def completion_body(config: ChaosConfig, req: ChatRequest, decision: Decision, ids: ResponseIds,
                    answers: list[GeneratedAnswer]) -> bytes:
    """A non-streamed ``chat.completion`` with the content faults applied."""
    choices = []
    for index, answer in enumerate(answers):
        message: dict[str, Any] = {"role": "assistant",
                                   "content": "".join(answer.content) or None}
        if answer.reasoning:
            message["reasoning_content"] = "".join(answer.reasoning)
        if answer.calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name,
                                                               "arguments": c.arguments}}
                for c in answer.calls]
        reason = None if ServerDialect.NO_FINISH_REASON in config.dialects else answer.finish_reason
        choices.append({"index": index, "message": message, "logprobs": None,
                        "finish_reason": reason})
    body: dict[str, Any] = {"id": ids.response_id, "object": "chat.completion",
                            "created": ids.created, "model": req.model or config.model,
                            "system_fingerprint": "fp_sseguard_chaos", "choices": choices}
    if decision.fault is not Fault.MISSING_USAGE:
        body["usage"] = usage_of(req, answers)
    return _enc(body)


WRITER = Writer(CHAT.api, parse_request, stream_plan, completion_body, openai_bad_request,
                id_prefix=None, unsupported=UNSUPPORTED,
                extra_mounts=((BETA_MOUNT, functools.partial(parse_request, beta=True)),))
