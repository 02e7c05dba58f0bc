"""``POST /v1/messages``: Anthropic Messages, spoken by the chaos upstream.

The request is read into the same ``ChatRequest`` every protocol's answer is generated from; the answer
is rendered as Messages events (``anthropic.types`` is the reference): ``message_start``, ``ping``, one
content block per thinking, text and ``tool_use`` part (``content_block_start``, ``…_delta``,
``content_block_stop``), then ``message_delta`` (``stop_reason``, usage) and ``message_stop``.
Validation follows the real API: ``max_tokens`` is required, and errors have Anthropic's shape
``{"type": "error", "error": {"type", "message"}}``.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

from sseguard.chaos.config import ChaosConfig
from sseguard.chaos.events import Breakers, Ev, frame, insert_broken, plan_events
from sseguard.chaos.faults import Decision, Fault, ServerDialect
from sseguard.chaos.frames import Plan, ResponseIds
from sseguard.chaos.generate import GeneratedAnswer, GeneratedCall
from sseguard.chaos.request import BadRequest, ChatRequest, Tool, decode_object, int_field, text_of, tools_of
from sseguard.chaos.writer import Writer
from sseguard.core.contract.messages import MESSAGES

#: What a Messages stream cannot carry: no sequence numbers, no ``*.done`` text to contradict, one
#: message id sent once, no ``finish_reason`` enum of chat's kind, and content after ``message_stop``
#: is ``event_order`` here.
UNSUPPORTED = frozenset({Fault.SEQUENCE_GAP, Fault.DONE_MISMATCH, Fault.ID_CHANGED,
                         Fault.FINISH_REASON_MISMATCH, Fault.FRAME_AFTER_DONE})
#: A non-streamed ``tool_use`` block holds ``input`` as an object: broken JSON cannot be sent in it.
UNSUPPORTED_UNSTREAMED = frozenset({Fault.TOOL_ARGS_INVALID_JSON})
ID_PREFIX = "msg_"
#: The thinking budget that counts as reasoning effort "medium" (``Pacing.reasoning_tokens``).
MEDIUM_BUDGET = 2048
_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


def bad_request_body(exc: BadRequest) -> dict[str, Any]:
    """The 400 body in Anthropic's shape: it names no ``param``, the message says which field."""
    return MESSAGES.status_error(400, str(exc))


def parse_request(body: bytes) -> ChatRequest:
    """Decode and validate a Messages request; ``BadRequest`` carries Anthropic's message."""
    data = decode_object(body)
    model = data.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("model: Field required", "model")
    if "max_tokens" not in data:
        raise BadRequest("max_tokens: Field required", "max_tokens")
    max_tokens = int_field(data, "max_tokens", minimum=1)
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages: Field required", "messages")
    continued = None
    last = messages[-1]
    if (len(messages) > 1 and isinstance(last, dict) and last.get("role") == "assistant"
            and isinstance(last.get("content"), str)):
        # A prefill: the answer continues this text (the conversation is the one without it).
        continued, messages = last["content"], messages[:-1]
    words = len(_system_text(data.get("system")).split())
    last_role, last_text = "user", ""
    first_user: str | None = None
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or msg.get("role") not in ("user", "assistant"):
            raise BadRequest(f"messages.{i}.role: Input should be 'user' or 'assistant'",
                             f"messages.{i}")
        content = msg.get("content")
        last_role, last_text = str(msg["role"]), text_of(content)
        if first_user is None and last_role == "user":
            first_user = last_text
        if isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result"
                                             for b in content):
            last_role = "tool"
        words += len(last_text.split()) + 4
    stream = data.get("stream", False)
    if not isinstance(stream, bool):
        raise BadRequest("stream: Input should be a valid boolean", "stream")
    thinking = data.get("thinking")
    reasoning = _thinking(thinking, max_tokens)
    if continued is not None and reasoning > 0:
        # Anthropic's rule: with thinking on, the final assistant turn must start with a thinking
        # block, so a text prefill is refused.
        raise BadRequest("messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, "
                         "but found `text`. When `thinking` is enabled, a final `assistant` "
                         "message must start with a thinking block.", "messages")
    tools = _tools(data.get("tools"))
    tool_choice, parallel = _tool_choice(data.get("tool_choice"), tools)
    digest = hashlib.blake2b(msgspec.json.encode([model, data.get("system"), messages]),
                             digest_size=16).digest()
    return ChatRequest(
        model=model, stream=stream, include_usage=True, tools=tools, tool_choice=tool_choice,
        parallel_tool_calls=parallel, max_tokens=max_tokens, n=1,
        reasoning=reasoning, last_role=last_role,
        last_text=last_text, prompt_words=words, fingerprint=digest, continued=continued,
        reasoning_shown=_thinking_shown(thinking), first_user=first_user or "")


def _thinking_shown(thinking: Any) -> bool:
    """Whether thinking blocks carry their text: ``display`` says so; without it, adaptive thinking
    is ``"omitted"`` — the API's default on the models that take only adaptive thinking (Opus
    4.7/4.8, which Claude Code 2.1 asks for with a bare ``{"type": "adaptive"}``) — and a
    budgeted ``"enabled"`` is ``"summarized"``, as on the models that take it."""
    if not isinstance(thinking, dict):
        return True
    display = thinking.get("display")
    if display is None:
        return bool(thinking.get("type") != "adaptive")
    return bool(display != "omitted")


def _system_text(system: Any) -> str:
    if system is None:
        return ""
    if isinstance(system, str | list):
        return text_of(system)
    raise BadRequest("system: Input should be a valid string or a list of text blocks", "system")


def _thinking(raw: Any, max_tokens: int | None) -> float:
    """The reasoning scale for ``thinking``; the API's own rules on the budget are kept."""
    if raw is None:
        return 0.0
    if not isinstance(raw, dict) or raw.get("type") not in ("enabled", "disabled", "adaptive"):
        raise BadRequest("thinking.type: Input should be 'enabled', 'disabled' or 'adaptive'",
                         "thinking")
    if raw["type"] == "disabled":
        return 0.0
    if raw["type"] == "adaptive":
        return 1.0
    budget = int_field(raw, "budget_tokens", minimum=1024)
    if budget is None:
        raise BadRequest("thinking.enabled.budget_tokens: Field required", "thinking")
    if max_tokens is not None and budget >= max_tokens:
        raise BadRequest("`max_tokens` must be greater than `thinking.budget_tokens`", "thinking")
    return min(3.0, budget / MEDIUM_BUDGET)


def _tool(i: int, tool: Any) -> Tool | None:
    if not isinstance(tool, dict) or not isinstance(tool.get("name"), str) or not tool["name"]:
        raise BadRequest(f"tools.{i}.name: Field required", f"tools.{i}")
    if tool.get("type", "custom") != "custom":
        return None  # server tools (web_search_…, bash_…): never called by this server
    schema = tool.get("input_schema")
    if not isinstance(schema, dict):
        raise BadRequest(f"tools.{i}.custom.input_schema: Field required", f"tools.{i}")
    return Tool(tool["name"], schema)


def _tools(raw: Any) -> tuple[Tool, ...]:
    return tools_of(raw, not_a_list="tools: Input should be a valid list", read=_tool)


def _tool_choice(raw: Any, tools: tuple[Tool, ...]) -> tuple[Any, bool]:
    """(tool_choice in the chat form the generator reads, parallel tool use allowed)."""
    if raw is None:
        return "auto", True
    if not isinstance(raw, dict) or raw.get("type") not in ("auto", "any", "tool", "none"):
        raise BadRequest("tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'",
                         "tool_choice")
    parallel = raw.get("disable_parallel_tool_use") is not True
    kind = raw["type"]
    if kind == "tool":
        if raw.get("name") not in {t.name for t in tools}:
            raise BadRequest(f"Tool '{raw.get('name')}' not found in tools", "tool_choice")
        return {"type": "function", "function": {"name": raw["name"]}}, parallel
    return {"auto": "auto", "any": "required", "none": "none"}[kind], parallel


# ── the answer as Messages events ────────────────────────────────────────────────────────────────


def _tool_id(call: GeneratedCall) -> str:
    return "toolu_" + call.id.removeprefix("call_")


def _signature(ids: ResponseIds) -> str:
    return hashlib.blake2b(ids.response_id.encode(), digest_size=48).hexdigest()


def _blocks(ids: ResponseIds, answer: GeneratedAnswer, shown: bool = True) -> list[dict[str, Any]]:
    """The final content blocks (what a non-streamed body holds and the SDK accumulates)."""
    blocks: list[dict[str, Any]] = []
    if answer.reasoning:
        blocks.append({"type": "thinking", "thinking": "".join(answer.reasoning) if shown else "",
                       "signature": _signature(ids)})
    if answer.content:
        blocks.append({"type": "text", "text": "".join(answer.content)})
    blocks.extend({"type": "tool_use", "id": _tool_id(c), "name": c.name, "input": c.values}
                  for c in answer.calls)
    return blocks


def _message(ids: ResponseIds, req: ChatRequest, config: ChaosConfig, content: list[Any],
             stop_reason: str | None, output_tokens: int) -> dict[str, Any]:
    return {"id": ids.response_id, "type": "message", "role": "assistant",
            "model": req.model or config.model, "content": content, "stop_reason": stop_reason,
            "stop_sequence": None,
            # Anthropic counts cache reads apart from ``input_tokens``.
            "usage": {"input_tokens": req.prompt_words - req.cached_words,
                      "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": req.cached_words, "output_tokens": output_tokens}}


def _events(ids: ResponseIds, answer: GeneratedAnswer, fault: Fault | None, shown: bool = True) -> list[Ev]:
    evs: list[Ev] = []
    index = 0
    if answer.reasoning:
        evs.append(Ev("content_block_start", {"index": index, "content_block": {
            "type": "thinking", "thinking": "", "signature": ""}}))
        if shown:  # display: "omitted": the block and its signature, none of its text
            evs.extend(Ev("content_block_delta", {"index": index, "delta": {
                "type": "thinking_delta", "thinking": piece}}, "delta")
                for piece in answer.reasoning)
        evs.append(Ev("content_block_delta", {"index": index, "delta": {
            "type": "signature_delta", "signature": _signature(ids)}}))
        evs.append(Ev("content_block_stop", {"index": index}))
        index += 1
    if answer.content:
        evs.append(Ev("content_block_start", {"index": index, "content_block": {
            "type": "text", "text": ""}}))
        evs.extend(Ev("content_block_delta", {"index": index, "delta": {
            "type": "text_delta", "text": piece}}, "delta") for piece in answer.content)
        if fault is not Fault.BLOCK_UNTERMINATED:
            evs.append(Ev("content_block_stop", {"index": index}))
        index += 1
    for call in answer.calls:
        evs.append(Ev("content_block_start", {"index": index, "content_block": {
            "type": "tool_use", "id": _tool_id(call), "name": call.name, "input": {}}}, "open"))
        last = len(call.pieces) - 1
        evs.extend(Ev("content_block_delta", {"index": index, "delta": {
            "type": "input_json_delta", "partial_json": piece}},
            "delta" + (" first" if i == 0 else "") + (" last" if i == last else ""))
            for i, piece in enumerate(call.pieces))
        evs.append(Ev("content_block_stop", {"index": index}, "close"))
        index += 1
    return evs


_TEXT_KEYS = ("text", "thinking", "partial_json")


def _wrong_type(data: dict[str, Any]) -> None:
    delta = data["delta"]
    key = next(k for k in _TEXT_KEYS if k in delta)
    delta[key] = 42


def _unopened(data: dict[str, Any]) -> None:
    data["index"] = 99


BREAKERS = Breakers(_wrong_type, _unopened)


def stream_plan(config: ChaosConfig, req: ChatRequest, decision: Decision, ids: ResponseIds,
                answers: list[GeneratedAnswer]) -> Plan:
    """The writes of a streamed Messages answer with ``decision``'s fault applied."""
    answer = answers[0]
    fault = decision.fault
    start = _message(ids, req, config, [], None, 1)
    events = _events(ids, answer, fault, req.reasoning_shown)
    body = [Ev("message_start", {"message": start}), Ev("ping"), *events]
    insert_broken(body, decision, BREAKERS)
    stop = None if fault is Fault.NO_FINISH else _STOP[answer.finish_reason]
    delta: dict[str, Any] = {"delta": {"stop_reason": stop, "stop_sequence": None}}
    if fault is not Fault.MISSING_USAGE:
        delta["usage"] = {"output_tokens": answer.completion_tokens}
    trailer = [Ev("message_delta", delta)]
    # no_done, as a fault and as the gateway dialect: a stop_reason, then no message_stop.
    if fault is not Fault.NO_DONE and ServerDialect.NO_DONE not in config.dialects:
        trailer.append(Ev("message_stop"))

    def error_frames(_seq: int) -> list[bytes]:
        kind = "overloaded_error" if decision.variant % 2 else "api_error"
        message = "Overloaded" if kind == "overloaded_error" else "Internal server error"
        return [frame("error", {"type": "error", "error": {"type": kind, "message": message}})]

    return plan_events(config, decision, body, trailer, error_frames, sequenced=False)


def message_body(config: ChaosConfig, req: ChatRequest, decision: Decision, ids: ResponseIds,
                 answers: list[GeneratedAnswer]) -> bytes:
    """A non-streamed ``message`` with the content faults applied."""
    answer = answers[0]
    body = _message(ids, req, config, _blocks(ids, answer, req.reasoning_shown),
                    _STOP[answer.finish_reason],
                    answer.completion_tokens)
    if decision.fault is Fault.MISSING_USAGE:
        del body["usage"]
    return msgspec.json.encode(body)


WRITER = Writer(MESSAGES.api, parse_request, stream_plan, message_body, bad_request_body,
                id_prefix=ID_PREFIX, unsupported=UNSUPPORTED,
                unsupported_unstreamed=UNSUPPORTED_UNSTREAMED)
