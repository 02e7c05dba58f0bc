"""``POST /v1/responses``: the OpenAI Responses API, spoken by the chaos upstream.

The request is read into the same ``ChatRequest`` the generator answers for every protocol; the answer
is rendered here as Responses events (``openai.types.responses`` is the reference for every shape):
``response.created``, ``response.in_progress``, one output item per reasoning summary, message and
function call (each opened, streamed and closed), then ``response.completed`` — or
``response.incomplete`` when ``max_output_tokens`` cut the answer — all with a ``sequence_number``
rising by one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import msgspec

from sseguard.chaos.chat import openai_bad_request
from sseguard.chaos.config import RESPONSES_ERROR_FORMS, ChaosConfig
from sseguard.chaos.events import Breakers, Ev, frame, insert_broken, plan_events
from sseguard.chaos.faults import Decision, Fault, ServerDialect
from sseguard.chaos.frames import Plan, ResponseIds
from sseguard.chaos.generate import GeneratedAnswer, GeneratedCall
from sseguard.chaos.request import (
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
from sseguard.core.contract.chat import DONE_FRAME as DONE
from sseguard.core.contract.responses import RESPONSES

#: What a Responses stream cannot carry: it has no ``[DONE]`` to omit, no ``finish_reason`` to
#: contradict, and content after the terminal event is ``event_order`` here.
UNSUPPORTED = frozenset({Fault.NO_DONE, Fault.FINISH_REASON_MISMATCH, Fault.FRAME_AFTER_DONE})
ID_PREFIX = "resp_"
#: OpenAI rejects smaller limits ("integer below minimum value").
MIN_OUTPUT_TOKENS = 16


def parse_request(body: bytes) -> ChatRequest:
    """Decode and validate a Responses request; ``BadRequest`` carries OpenAI's message and param."""
    data = decode_object(body)
    model = data.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("Missing required parameter: 'model'.", "model")
    raw_input = data.get("input")
    if isinstance(raw_input, str):
        items: list[Any] = [{"role": "user", "content": raw_input}]
    elif isinstance(raw_input, list) and raw_input:
        items = raw_input
    else:
        raise BadRequest("Missing required parameter: 'input'.", "input")
    words = len(str(data.get("instructions") or "").split())
    last_role, last_text = "user", ""
    first_user: str | None = None
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise BadRequest(f"Invalid type for 'input[{i}]': expected an object.", f"input[{i}]")
        kind = item.get("type", "message")
        if kind == "message":
            if item.get("role") not in ("user", "assistant", "system", "developer"):
                raise BadRequest(f"Invalid value for 'input[{i}].role'.", f"input[{i}].role")
            last_role, last_text = str(item["role"]), text_of(item.get("content"))
            if first_user is None and last_role == "user":
                first_user = last_text
        elif kind == "function_call_output":
            # Codex CLI 0.171 also sends an output named by ``name`` and ``namespace`` (its goal
            # objective, ``"namespace": "agent"``) with no ``call_id``, which OpenAI accepts.
            if not isinstance(item.get("call_id"), str) and not isinstance(item.get("name"), str):
                raise BadRequest(f"Missing required parameter: 'input[{i}].call_id'.",
                                 f"input[{i}].call_id")
            last_role, last_text = "tool", str(item.get("output", ""))
        else:
            last_role, last_text = "assistant", ""
        words += len(last_text.split()) + 4
    stream = data.get("stream", False)
    if not isinstance(stream, bool):
        raise BadRequest("Invalid type for 'stream': expected a boolean.", "stream")
    background = data.get("background", False)
    if not isinstance(background, bool):
        raise BadRequest("Invalid type for 'background': expected a boolean.", "background")
    if background and data.get("store", True) is False:
        # OpenAI's own rule: a background response is stored, so it can be read again
        raise BadRequest("Background mode requires 'store' to be true.", "store")
    reasoning = data.get("reasoning")
    effort = reasoning.get("effort") if isinstance(reasoning, dict) else None
    if effort is not None and effort not in REASONING_SCALE:
        raise BadRequest(f"Invalid value for 'reasoning.effort': expected one of "
                         f"{', '.join(REASONING_SCALE)}.", "reasoning.effort")
    max_tokens = int_field(data, "max_output_tokens", minimum=MIN_OUTPUT_TOKENS)
    tools = _tools(data.get("tools"))
    tool_choice = _tool_choice(data.get("tool_choice", "auto"), tools)
    digest = hashlib.blake2b(msgspec.json.encode([model, data.get("instructions"), items]),
                             digest_size=16).digest()
    return ChatRequest(
        model=model, stream=stream, include_usage=True, tools=tools, tool_choice=tool_choice,
        parallel_tool_calls=data.get("parallel_tool_calls", True) is not False,
        max_tokens=max_tokens, n=1,
        reasoning=REASONING_SCALE[effort] if effort is not None else 0.0,
        last_role=last_role, last_text=last_text, prompt_words=words, fingerprint=digest,
        background=background, first_user=first_user or "")


def _tool(i: int, tool: Any) -> Tool | None:
    if not isinstance(tool, dict) or not isinstance(tool.get("type"), str):
        raise BadRequest(f"Missing required parameter: 'tools[{i}].type'.", f"tools[{i}].type")
    if tool["type"] != "function":
        return None  # hosted tools (web_search, file_search, …): never called by this server
    if not isinstance(tool.get("name"), str) or not tool["name"]:
        raise BadRequest(f"Missing required parameter: 'tools[{i}].name'.", f"tools[{i}].name")
    params = tool.get("parameters")
    return Tool(tool["name"], params if isinstance(params, dict) else {})


def _tools(raw: Any) -> tuple[Tool, ...]:
    return tools_of(raw, not_a_list="Invalid type for 'tools': expected an array.", read=_tool)


def _tool_choice(raw: Any, tools: tuple[Tool, ...]) -> Any:
    """In the chat form the generator reads: ``auto``/``none``/``required`` or a named function."""
    if isinstance(raw, dict) and raw.get("type") == "function":
        name = raw.get("name")
        if name not in {t.name for t in tools}:
            raise BadRequest(f"Tool choice '{name}' not found in 'tools' parameter.", "tool_choice")
        return {"type": "function", "function": {"name": name}}
    if raw in ("auto", "none", "required"):
        return raw
    raise BadRequest("Invalid value for 'tool_choice'.", "tool_choice")


# ── the answer as Responses objects and events ─────────────────────────────────────────────────


def _usage(req: ChatRequest, answer: GeneratedAnswer) -> dict[str, Any]:
    out = answer.completion_tokens
    return {"input_tokens": req.prompt_words,
            "input_tokens_details": {"cached_tokens": req.cached_words, "cache_write_tokens": 0},
            "output_tokens": out, "output_tokens_details": {"reasoning_tokens": len(answer.reasoning)},
            "total_tokens": req.prompt_words + out}


def _response(ids: ResponseIds, req: ChatRequest, config: ChaosConfig, *, status: str,
              output: list[dict[str, Any]], usage: dict[str, Any] | None,
              incomplete: bool = False, response_id: str | None = None) -> dict[str, Any]:
    tool_choice = req.tool_choice
    if isinstance(tool_choice, dict):
        tool_choice = {"type": "function", "name": tool_choice["function"]["name"]}
    return {
        "id": response_id or ids.response_id, "object": "response", "created_at": ids.created,
        "status": status, "background": req.background, "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "instructions": None, "max_output_tokens": req.max_tokens, "model": req.model or config.model,
        "output": output, "parallel_tool_calls": req.parallel_tool_calls,
        "previous_response_id": None, "reasoning": {"effort": None, "summary": None},
        "store": req.background, "temperature": 1.0, "text": {"format": {"type": "text"}},
        "tool_choice": tool_choice,
        "tools": [{"type": "function", "name": t.name, "parameters": t.parameters, "strict": False}
                  for t in req.tools],
        "top_p": 1.0, "truncation": "disabled", "usage": usage, "metadata": {},
    }


def _item_ids(ids: ResponseIds) -> tuple[str, str]:
    digest = hashlib.blake2b(ids.response_id.encode(), digest_size=24).hexdigest()
    return f"rs_{digest[:24]}", f"msg_{digest[24:]}"


def _fc_id(call: GeneratedCall) -> str:
    return "fc_" + call.id.removeprefix("call_")


def _output(ids: ResponseIds, answer: GeneratedAnswer) -> list[dict[str, Any]]:
    """The final output items (what ``response.completed`` and a non-streamed body hold)."""
    rs_id, msg_id = _item_ids(ids)
    items: list[dict[str, Any]] = []
    if answer.reasoning:
        items.append({"id": rs_id, "type": "reasoning", "summary": [
            {"type": "summary_text", "text": "".join(answer.reasoning)}]})
    if answer.content:
        status = "incomplete" if answer.finish_reason == "length" else "completed"
        items.append({"id": msg_id, "type": "message", "status": status, "role": "assistant",
                      "content": [_text_part("".join(answer.content))]})
    for call in answer.calls:
        items.append({"id": _fc_id(call), "type": "function_call", "status": "completed",
                      "call_id": call.id, "name": call.name, "arguments": call.arguments})
    return items


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _events(ids: ResponseIds, answer: GeneratedAnswer, fault: Fault | None) -> list[Ev]:
    """Every event between ``response.in_progress`` and the terminal one, with the item faults."""
    final = _output(ids, answer)
    evs: list[Ev] = []
    index = 0
    if answer.reasoning:
        item = final[index]
        where = {"item_id": item["id"], "output_index": index}
        evs.append(Ev("response.output_item.added",
                      {"output_index": index, "item": {**item, "summary": []}}))
        evs.append(Ev("response.reasoning_summary_part.added",
                      {**where, "summary_index": 0, "part": {"type": "summary_text", "text": ""}}))
        evs.extend(Ev("response.reasoning_summary_text.delta",
                      {**where, "summary_index": 0, "delta": piece}, "delta")
                   for piece in answer.reasoning)
        text = item["summary"][0]["text"]
        evs.append(Ev("response.reasoning_summary_text.done",
                      {**where, "summary_index": 0, "text": text}))
        evs.append(Ev("response.reasoning_summary_part.done",
                      {**where, "summary_index": 0, "part": {"type": "summary_text", "text": text}}))
        evs.append(Ev("response.output_item.done", {"output_index": index, "item": item}))
        index += 1
    if answer.content:
        item = final[index]
        where = {"item_id": item["id"], "output_index": index, "content_index": 0}
        evs.append(Ev("response.output_item.added", {"output_index": index, "item": {
            **item, "status": "in_progress", "content": []}}))
        evs.append(Ev("response.content_part.added", {**where, "part": _text_part("")}))
        evs.extend(Ev("response.output_text.delta", {**where, "delta": piece, "logprobs": []},
                      "delta") for piece in answer.content)
        text = item["content"][0]["text"]
        # done_mismatch: the *.done text a gateway re-serialized differently from what it streamed.
        done_text = text[:-1] + "!" if fault is Fault.DONE_MISMATCH else text
        evs.append(Ev("response.output_text.done", {**where, "text": done_text, "logprobs": []}))
        evs.append(Ev("response.content_part.done", {**where, "part": _text_part(text)}))
        if fault is not Fault.BLOCK_UNTERMINATED:
            evs.append(Ev("response.output_item.done", {"output_index": index, "item": item}))
        index += 1
    for call in answer.calls:
        item = final[index]
        where = {"item_id": item["id"], "output_index": index}
        evs.append(Ev("response.output_item.added", {"output_index": index, "item": {
            **item, "status": "in_progress", "arguments": ""}}, "open"))
        last = len(call.pieces) - 1
        evs.extend(Ev("response.function_call_arguments.delta", {**where, "delta": piece},
                      "delta" + (" first" if i == 0 else "") + (" last" if i == last else ""))
                   for i, piece in enumerate(call.pieces))
        evs.append(Ev("response.function_call_arguments.done",
                      {**where, "name": call.name, "arguments": call.arguments}))
        evs.append(Ev("response.output_item.done", {"output_index": index, "item": item}, "close"))
        index += 1
    return evs


def _wrong_type(data: dict[str, Any]) -> None:
    data["delta"] = 42


def _unopened(data: dict[str, Any]) -> None:
    data["item_id"] = "msg_never_opened"
    data["output_index"] = 99


BREAKERS = Breakers(_wrong_type, _unopened)


def _stream_events(config: ChaosConfig, req: ChatRequest, decision: Decision, ids: ResponseIds,
                   answer: GeneratedAnswer, *, ending: bool = True) -> tuple[list[Ev], list[Ev]]:
    """The events of a streamed Responses answer (body, trailer) with ``decision``'s fault in them;
    ``ending=False``: the trailer of a whole answer, whatever ending the fault would give it (what a
    background response keeps)."""
    fault = decision.fault
    usage = None if fault is Fault.MISSING_USAGE else _usage(req, answer)
    start = _response(ids, req, config, status="queued" if req.background else "in_progress",
                      output=[], usage=None)
    body = [Ev("response.created", {"response": start})]
    if req.background:
        body.append(Ev("response.queued", {"response": start}))
        start = {**start, "status": "in_progress"}
    body += [Ev("response.in_progress", {"response": start}), *_events(ids, answer, fault)]
    insert_broken(body, decision, BREAKERS)
    incomplete = answer.finish_reason == "length"
    # id_changed: the terminal event comes from "another backend" with its own response id.
    final_id = ids.response_id + "b" if fault is Fault.ID_CHANGED else None
    final = _response(ids, req, config, status="incomplete" if incomplete else "completed",
                      output=_output(ids, answer), usage=usage, incomplete=incomplete,
                      response_id=final_id)
    trailer = [Ev("response.incomplete" if incomplete else "response.completed",
                  {"response": final})]
    if ending and fault is Fault.NO_FINISH:
        trailer = [Ev("", raw=DONE)]
    elif ServerDialect.TRAILING_DONE in config.dialects:
        trailer.append(Ev("", raw=DONE))
    return body, trailer


def _error_frames(config: ChaosConfig, req: ChatRequest, decision: Decision, ids: ResponseIds
                  ) -> Callable[[int], list[bytes]]:
    def error_frames(seq: int) -> list[bytes]:
        form = config.options.responses_error_form
        if form == "any":
            form = RESPONSES_ERROR_FORMS[decision.variant % 3]
        return [error_event(form, seq, ids, req, config)]

    return error_frames


def stream_plan(config: ChaosConfig, req: ChatRequest, decision: Decision, ids: ResponseIds,
                answers: list[GeneratedAnswer]) -> Plan:
    """The writes of a streamed Responses answer with ``decision``'s fault applied."""
    body, trailer = _stream_events(config, req, decision, ids, answers[0])
    return plan_events(config, decision, body, trailer, _error_frames(config, req, decision, ids),
                       sequenced=True)


def resume_plan(config: ChaosConfig, req: ChatRequest, stored: Decision, reading: Decision,
                ids: ResponseIds, answers: list[GeneratedAnswer], after: int) -> Plan:
    """A background response's stream read again from the event after ``after``
    (``GET /responses/{id}?stream=true&starting_after=N``): the events it was made of, numbers
    unchanged, ending whole unless ``reading`` (this read's own fault) ends it."""
    body, trailer = _stream_events(config, req, stored, ids, answers[0], ending=False)
    return plan_events(config, reading, body, trailer, _error_frames(config, req, reading, ids),
                       sequenced=True, after=after)


def error_event(form: str, seq: int, ids: ResponseIds, req: ChatRequest,
                config: ChaosConfig) -> bytes:
    """One of the three error endings seen from Responses servers: the flat ``error`` event of the API
    reference, the nested ``error: {…}`` some gateways send, and ``response.failed``."""
    message = "upstream model worker failed mid-stream"
    if form == "flat":
        return frame("error", {"type": "error", "code": "server_error", "message": message,
                               "param": None, "sequence_number": seq})
    if form == "nested":
        return frame("error", {"type": "error", "sequence_number": seq, "error": {
            "type": "server_error", "code": "server_error", "message": message}})
    failed = _response(ids, req, config, status="failed", output=[], usage=None)
    failed["error"] = {"code": "server_error", "message": message}
    return frame("response.failed", {"type": "response.failed", "response": failed,
                                     "sequence_number": seq})


def response_body(config: ChaosConfig, req: ChatRequest, decision: Decision, ids: ResponseIds,
                  answers: list[GeneratedAnswer]) -> bytes:
    """A non-streamed ``response`` object with the content faults applied."""
    answer = answers[0]
    incomplete = answer.finish_reason == "length"
    usage = None if decision.fault is Fault.MISSING_USAGE else _usage(req, answer)
    return msgspec.json.encode(_response(
        ids, req, config, status="incomplete" if incomplete else "completed",
        output=_output(ids, answer), usage=usage, incomplete=incomplete))


WRITER = Writer(RESPONSES.api, parse_request, stream_plan, response_body, openai_bad_request,
                id_prefix=ID_PREFIX, unsupported=UNSUPPORTED, resume=resume_plan)
