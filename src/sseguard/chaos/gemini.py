"""``POST …/models/{model}:streamGenerateContent``: Gemini, spoken by the chaos upstream.

The request is read the way Gemini's API reads it (``contents`` of ``user``/``model`` turns made of
parts, ``systemInstruction``, ``tools[].functionDeclarations``, ``toolConfig``, ``generationConfig``;
a malformed one is a 400 ``INVALID_ARGUMENT`` in Google's error shape) into the ``ChatRequest`` every
protocol's answer is generated from; the model is in the path and the path chooses streaming, both of
which the server applies from the route. The answer is rendered as ``GenerateContentResponse`` records
(thought parts, text parts, each function call whole in one record — or, when the request asks
``toolConfig.functionCallingConfig.streamFunctionCallArguments``, in pieces: its name, then one
``partialArgs`` value per record by ``jsonPath``, strings in two, then an empty closing piece; a
cut there is ``tool_call_unterminated`` — then the record with ``finishReason`` and the usage) in
the framing the query string asked for (``ChatRequest.framing``):
``?alt=sse`` gets ``data: …\\r\\n\\r\\n`` frames and no sentinel; without it the records are the
elements of one JSON array, ``[{…},\\r\\n{…}\\r\\n]``, streamed element by element, closed by ``]``
whenever the body ends cleanly (a truncated array is closed too: only its finishReason is missing).

A request in JSON mode (``generationConfig.responseMimeType: application/json``) gets its text as
one JSON value of the ``responseJsonSchema`` / ``responseSchema`` asked for, as the API would: Gemini
CLI routes every prompt through such a request (a non-streamed ``generateContent`` asking for a
complexity score) and, given prose, retries it with backoff for minutes before it streams anything.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, replace
from typing import Any

import msgspec

from sseguard.chaos.config import ChaosConfig
from sseguard.chaos.faults import Decision, Fault
from sseguard.chaos.frames import (
    End,
    Plan,
    ResponseIds,
    Write,
    position,
    schedule,
    tokens_from_tags,
)
from sseguard.chaos.generate import GeneratedAnswer, schema_value
from sseguard.chaos.request import BadRequest, ChatRequest, Tool, decode_object, int_field, text_of
from sseguard.chaos.writer import Writer
from sseguard.core.contract.gemini import GEMINI
from sseguard.core.contract.gemini.request import (
    function_declarations,
    json_schema,
    normal_request,
    parameters_schema,
)
from sseguard.core.contract.protocol import Framing

_enc = msgspec.json.encode
#: What a Gemini stream cannot carry: function calls arrive with their arguments as an object or as
#: ``partialArgs`` values (no invalid JSON; a call cut inside its arguments only when the request
#: asks for them streamed: ``_carries``), there is no sentinel, no finish_reason of
#: chat's kind, no sequence numbers, items or ``*.done`` events.
UNSUPPORTED = frozenset({Fault.TOOL_ARGS_INVALID_JSON, Fault.TOOL_CALL_UNTERMINATED, Fault.NO_DONE,
                         Fault.NO_FINISH, Fault.FINISH_REASON_MISMATCH, Fault.FRAME_AFTER_DONE,
                         Fault.SEQUENCE_GAP, Fault.BLOCK_UNTERMINATED, Fault.DONE_MISMATCH})
_FINISH = {"stop": "STOP", "length": "MAX_TOKENS", "tool_calls": "STOP"}
#: The thinking budget that counts as reasoning effort "medium" (``Pacing.reasoning_tokens``).
MEDIUM_BUDGET = 8192
_MODES = {"AUTO": "auto", "ANY": "required", "NONE": "none", "VALIDATED": "auto"}


@dataclass(frozen=True)
class GeminiRequest(ChatRequest):
    """A request with what only Gemini's body says: JSON mode and the schema of its answer."""

    json_mode: bool = False
    response_schema: Any = None
    #: ``functionCallingConfig.streamFunctionCallArguments``: calls stream their arguments.
    stream_args: bool = False


def bad_request_body(exc: BadRequest) -> dict[str, Any]:
    """The 400 body in Google's shape: ``INVALID_ARGUMENT``, the message names the field."""
    return GEMINI.status_error(400, str(exc))


def _tools(raw: Any) -> tuple[Tool, ...]:
    if raw is not None and not isinstance(raw, list):
        raise BadRequest("* GenerateContentRequest.tools: must be a list", "tools")
    tools = []
    for i, decl in enumerate(function_declarations(raw) or []):
        if not isinstance(decl.get("name"), str) or not decl["name"]:
            raise BadRequest(f"* GenerateContentRequest.tools[{i}].function_declarations: name "
                             "is required", "tools")
        schema = parameters_schema(decl)
        tools.append(Tool(decl["name"], schema if isinstance(schema, dict) else {}))
    return tuple(tools)


def _tool_choice(raw: Any, tools: tuple[Tool, ...]) -> Any:
    """``toolConfig.functionCallingConfig`` in the chat form the generator reads."""
    config = raw.get("functionCallingConfig") if isinstance(raw, dict) else None
    if not isinstance(config, dict):
        return "auto"
    mode = config.get("mode", "AUTO")
    if mode not in _MODES:
        raise BadRequest(f"* GenerateContentRequest.tool_config.function_calling_config.mode: "
                         f"invalid value {mode!r}", "toolConfig")
    allowed = config.get("allowedFunctionNames")
    if mode == "ANY" and isinstance(allowed, list) and len(allowed) == 1:
        if allowed[0] not in {t.name for t in tools}:
            raise BadRequest(f"allowed_function_names: {allowed[0]!r} is not declared", "toolConfig")
        return {"type": "function", "function": {"name": allowed[0]}}
    return _MODES[mode]


def _reasoning(config: dict[str, Any]) -> float:
    """The reasoning scale: thoughts are streamed only when ``includeThoughts`` asks for them."""
    thinking = config.get("thinkingConfig")
    if thinking is None:
        return 0.0
    if not isinstance(thinking, dict):
        raise BadRequest("* GenerateContentRequest.generation_config.thinking_config: must be an "
                         "object", "generationConfig")
    if thinking.get("includeThoughts") is not True:
        return 0.0
    budget = int_field(thinking, "thinkingBudget", minimum=-1)
    if budget is None or budget == -1:
        return 1.0  # dynamic thinking
    return min(3.0, budget / MEDIUM_BUDGET)


def parse_request(body: bytes) -> ChatRequest:
    """Decode and validate a generateContent request; ``BadRequest`` carries Google's message."""
    # Either spelling of every field, as Google's API reads it (google-genai writes some in snake
    # case: ``include_thoughts``, ``parameters_json_schema``).
    data = normal_request(decode_object(body))
    contents = data.get("contents")
    if not isinstance(contents, list) or not contents:
        raise BadRequest("* GenerateContentRequest.contents: contents is not specified", "contents")
    words = len(text_of(_parts(data.get("systemInstruction"), "systemInstruction")).split())
    last_role, last_text = "user", ""
    first_user: str | None = None
    for i, content in enumerate(contents):
        parts = _parts(content, f"contents[{i}]")
        role = content.get("role", "user")
        if role not in ("user", "model"):
            raise BadRequest(f"* GenerateContentRequest.contents[{i}].role: Please use a valid role: "
                             "user, model.", "contents")
        last_text = text_of(parts)
        last_role = "assistant" if role == "model" else "tool" if any(
            isinstance(p, dict) and "functionResponse" in p for p in parts) else "user"
        if first_user is None and last_role == "user":
            first_user = last_text
        words += len(last_text.split()) + 4
    config = data.get("generationConfig") or {}
    if not isinstance(config, dict):
        raise BadRequest("* GenerateContentRequest.generation_config: must be an object",
                         "generationConfig")
    tools = _tools(data.get("tools"))
    digest = hashlib.blake2b(_enc([data.get("systemInstruction"), contents]), digest_size=16).digest()
    json_mode = config.get("responseMimeType") == "application/json"
    # Gemini CLI spells the types of its responseJsonSchema in Gemini's capitals ("OBJECT"), which
    # the API accepts: both fields are read through the same normalisation.
    raw_schema = config.get("responseJsonSchema")
    schema = json_schema(raw_schema if raw_schema is not None else config.get("responseSchema"))
    return GeminiRequest(
        model=None, stream=False, include_usage=True, tools=tools,
        tool_choice=_tool_choice(data.get("toolConfig"), tools), parallel_tool_calls=True,
        max_tokens=int_field(config, "maxOutputTokens", minimum=1),
        n=int_field(config, "candidateCount", minimum=1, maximum=8) or 1,
        reasoning=_reasoning(config), last_role=last_role, last_text=last_text,
        prompt_words=words, fingerprint=digest, json_mode=json_mode,
        response_schema=schema if json_mode else None, stream_args=_streams_args(data),
        first_user=first_user or "")


def _streams_args(data: dict[str, Any]) -> bool:
    config = data.get("toolConfig")
    calling = config.get("functionCallingConfig") if isinstance(config, dict) else None
    return isinstance(calling, dict) and calling.get("streamFunctionCallArguments") is True


def _parts(content: Any, where: str) -> list[Any]:
    if content is None and where == "systemInstruction":
        return []
    parts = content.get("parts") if isinstance(content, dict) else None
    if not isinstance(parts, list):
        raise BadRequest(f"* GenerateContentRequest.{where}.parts: must be a list", where)
    return parts


# ── the answer as GenerateContentResponse records ──────────────────────────────────────────────


class _Records:
    """Encodes the records of one response: the same ids and model version in every one."""

    def __init__(self, ids: ResponseIds, model: str, prompt_tokens: int, *, usage: bool) -> None:
        self._tail = {"modelVersion": model, "responseId": ids.response_id}
        self._usage = {"promptTokenCount": prompt_tokens, "totalTokenCount": prompt_tokens} \
            if usage else None
        self.signature = hashlib.blake2b(ids.response_id.encode(), digest_size=24).hexdigest()

    def record(self, index: int, parts: list[dict[str, Any]] | None, finish: str | None = None,
               usage: dict[str, Any] | None = None, rid: str | None = None) -> dict[str, Any]:
        candidate: dict[str, Any] = {}
        if parts is not None:
            candidate["content"] = {"parts": parts, "role": "model"}
        if finish is not None:
            candidate["finishReason"] = finish
        candidate["index"] = index
        out: dict[str, Any] = {"candidates": [candidate]}
        if usage is not None or self._usage is not None:
            out["usageMetadata"] = usage if usage is not None else self._usage
        out.update(self._tail)
        if rid is not None:
            out["responseId"] = rid
        return out


def frame(record: dict[str, Any] | bytes) -> bytes:
    """One ``?alt=sse`` frame, ended as Google ends them."""
    data = record if isinstance(record, bytes) else _enc(record)
    return b"data: " + data + b"\r\n\r\n"


#: What closes the JSON-array framing once the body ends cleanly.
ARRAY_CLOSE = b"\r\n]"


def _framed(framing: Framing, records: list[dict[str, Any] | bytes], first: int) -> list[bytes]:
    """``records`` in ``framing``; ``first`` is how many records of the body come before them (an
    array's first element opens it with ``[``, every later one follows a ``,``)."""
    if framing is Framing.SSE:
        return [frame(r) for r in records]
    return [(b"[" if first + i == 0 else b",\r\n") + (r if isinstance(r, bytes) else _enc(r))
            for i, r in enumerate(records)]


def _as_json(req: ChatRequest, answers: list[GeneratedAnswer]) -> list[GeneratedAnswer]:
    """In JSON mode each answer's text is one JSON value (of the schema, if one was given), in as
    many pieces as its prose had, so that a cut leaves a cut value; no calls (a model in JSON mode
    answers with the value, and Gemini CLI's JSON requests offer no tools)."""
    if not isinstance(req, GeminiRequest) or not req.json_mode:
        return answers
    out = []
    for index, answer in enumerate(answers):
        if not answer.content:  # an empty answer (fault ``empty``) stays empty
            out.append(answer)
            continue
        rng = random.Random(req.fingerprint + bytes([index]))
        value = schema_value(rng, req.response_schema, 0) if isinstance(req.response_schema, dict) \
            else {"text": "".join(answer.content)}
        text = _enc(value).decode()
        count = max(1, min(len(answer.content), len(text)))
        cuts = sorted(rng.sample(range(1, len(text)), count - 1)) if count > 1 else []
        pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        out.append(replace(answer, content=pieces, calls=[], finish_reason="stop"))
    return out


def _close_array(plan: Plan, fault: Fault | None) -> Plan:
    """Close the array of a body that ends cleanly; a cut, reset, hang or empty body stays open."""
    if plan.end is End.EOF and plan.writes and fault is not Fault.CUT_MID_FRAME:
        last = plan.writes[-1]
        plan.writes[-1] = Write(last.at, last.data + ARRAY_CLOSE, last.frames)
    return plan


def _parts_of(answer: GeneratedAnswer, signature: str, *, stream_args: bool = False,
              ) -> list[tuple[dict[str, Any], str]]:
    """The parts of an answer, one per streamed piece, each with its tag for ``tokens_from_tags``;
    a call whole (the first one signed), or in pieces when ``stream_args``."""
    parts: list[tuple[dict[str, Any], str]] = [({"text": piece, "thought": True}, "")
                                               for piece in answer.reasoning]
    parts.extend(({"text": piece}, "") for piece in answer.content)
    for i, call in enumerate(answer.calls):
        if stream_args:
            pieces = _streamed_call(call.name, call.values)
            if i == 0:
                pieces[0][0]["thoughtSignature"] = signature
            parts.extend(pieces)
            continue
        part: dict[str, Any] = {"functionCall": {"name": call.name, "args": call.values}}
        if i == 0:
            part["thoughtSignature"] = signature
        parts.append((part, ""))
    return parts


def _leaves(value: Any, path: str) -> list[tuple[str, Any]]:
    """The leaf values of arguments with their ``jsonPath``s (an empty object or list is a leaf)."""
    if isinstance(value, dict) and value:
        return [leaf for key, item in value.items() for leaf in _leaves(item, f"{path}.{key}")]
    if isinstance(value, list) and value:
        return [leaf for i, item in enumerate(value) for leaf in _leaves(item, f"{path}[{i}]")]
    return [(path, value)]


def _streamed_call(name: str, values: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """One call as Gemini streams its arguments: the name (``willContinue``), one ``partialArgs``
    value per piece (a string in two pieces, the first ``willContinue``), the empty closing piece."""
    whole = {k: v for k, v in _leaves(values, "$") if isinstance(v, dict | list)}
    opening: dict[str, Any] = {"name": name, "willContinue": True}
    if whole:  # empty objects and lists have no partialArgs value: they come with the name
        opening["args"] = {path[2:]: v for path, v in whole.items() if path.count(".") == 1}
    pieces: list[dict[str, Any]] = []
    for path, value in _leaves(values, "$"):
        if isinstance(value, dict | list):
            continue
        if isinstance(value, str) and len(value) > 1:
            half = len(value) // 2
            pieces.append({"jsonPath": path, "stringValue": value[:half], "willContinue": True})
            pieces.append({"jsonPath": path, "stringValue": value[half:]})
        elif isinstance(value, str):
            pieces.append({"jsonPath": path, "stringValue": value})
        elif isinstance(value, bool):
            pieces.append({"jsonPath": path, "boolValue": value})
        elif isinstance(value, int | float):
            pieces.append({"jsonPath": path, "numberValue": value})
        else:
            pieces.append({"jsonPath": path, "nullValue": "NULL_VALUE"})
    out: list[tuple[dict[str, Any], str]] = [({"functionCall": opening}, "open")]
    for i, piece in enumerate(pieces):
        tag = ("first" if i == 0 else "") + (" last" if i == len(pieces) - 1 else "")
        out.append(({"functionCall": {"partialArgs": [piece], "willContinue": True}}, tag))
    out.append(({"functionCall": {}}, "close"))
    return out


def usage_of(req: ChatRequest, answers: list[GeneratedAnswer]) -> dict[str, Any]:
    output = sum(len(a.content) + len(a.calls) for a in answers)
    thoughts = sum(len(a.reasoning) for a in answers)
    usage = {"promptTokenCount": req.prompt_words, "candidatesTokenCount": output,
             "totalTokenCount": req.prompt_words + output + thoughts}
    if thoughts:
        usage["thoughtsTokenCount"] = thoughts
    if req.cached_words:  # (Gemini leaves zero counts out)
        usage["cachedContentTokenCount"] = req.cached_words
    return usage


def stream_plan(config: ChaosConfig, req: ChatRequest, decision: Decision, ids: ResponseIds,
                answers: list[GeneratedAnswer]) -> Plan:
    """The writes of a streamed answer, ``?alt=sse`` framing, with ``decision``'s fault applied."""
    fault = decision.fault
    answers = _as_json(req, answers)
    enc = _Records(ids, req.model or config.model, req.prompt_words,
                   usage=fault is not Fault.MISSING_USAGE)
    records: list[dict[str, Any] | bytes] = []
    tags: list[str] = []
    stream_args = isinstance(req, GeminiRequest) and req.stream_args
    per_candidate = [_parts_of(answer, enc.signature, stream_args=stream_args)
                     for answer in answers]
    for step in range(max(len(p) for p in per_candidate)):
        for index, parts in enumerate(per_candidate):
            if step < len(parts):
                part, tag = parts[step]
                records.append(enc.record(index, [part]))
                tags.append(tag)
    if fault is Fault.ID_CHANGED:
        # The second half comes from "another backend": same shape, another id.
        half = max(1, len(records) // 2)
        for record in records[half:]:
            assert isinstance(record, dict)
            record["responseId"] = ids.response_id + "b"
    if fault in (Fault.BAD_CHUNK_JSON, Fault.CHUNK_SCHEMA) and records:
        pos = position(decision.at, 0, len(records) - 1)
        if fault is Fault.BAD_CHUNK_JSON:
            whole = _enc(records[pos])
            # SSE: half a record. An array element must stay balanced (or the array is lost), so
            # there the record loses its first colon instead: still bracketed, no longer JSON.
            records.insert(pos + 1, whole[: len(whole) // 2] if req.framing is Framing.SSE
                           else whole.replace(b":", b"", 1))
        else:
            records.insert(pos + 1, enc.record(0, [{"text": 42}]))
        tags.insert(pos + 1, "")
    last_id = ids.response_id + "b" if fault is Fault.ID_CHANGED else None
    usage = usage_of(req, answers) if fault is not Fault.MISSING_USAGE else None
    ends: list[dict[str, Any] | bytes] = [
        enc.record(index, [{"text": ""}], _FINISH[answer.finish_reason], usage, last_id)
        for index, answer in enumerate(answers)]
    if fault is Fault.EVENT_ORDER:
        ends.append(enc.record(0, [{"text": " and one more thing."}], None, usage, last_id))
    framing = req.framing
    frames = _framed(framing, records, 0)
    trailer = _framed(framing, ends, len(frames))
    toks = tokens_from_tags(frames, tags, 0)

    def error_frames(k: int) -> list[bytes]:
        # What Gemini sends when the backend fails after the 200: an error record, then the end.
        error = GEMINI.status_error(500, "An internal error has occurred. Please retry.")
        return _framed(framing, [error], k)

    plan = schedule(config, decision, toks, trailer, error_frames)
    return plan if framing is Framing.SSE else _close_array(plan, fault)


def response_body(config: ChaosConfig, req: ChatRequest, decision: Decision, ids: ResponseIds,
                  answers: list[GeneratedAnswer]) -> bytes:
    """A non-streamed ``GenerateContentResponse`` with the content faults applied."""
    answers = _as_json(req, answers)
    enc = _Records(ids, req.model or config.model, req.prompt_words, usage=False)
    candidates = []
    for index, answer in enumerate(answers):
        parts: list[dict[str, Any]] = []
        if answer.reasoning:
            parts.append({"text": "".join(answer.reasoning), "thought": True})
        if answer.content:
            parts.append({"text": "".join(answer.content)})
        parts.extend(p for p, _ in _parts_of(GeneratedAnswer([], [], answer.calls, answer.finish_reason),
                                             enc.signature))
        candidates.append({"content": {"parts": parts, "role": "model"},
                           "finishReason": _FINISH[answer.finish_reason], "index": index})
    body: dict[str, Any] = {"candidates": candidates}
    if decision.fault is not Fault.MISSING_USAGE:
        body["usageMetadata"] = usage_of(req, answers)
    body.update(modelVersion=req.model or config.model, responseId=ids.response_id)
    return _enc(body)


def _carries(req: ChatRequest) -> frozenset[Fault]:
    """A request that streams its calls' arguments can have a call cut inside them."""
    streams = isinstance(req, GeminiRequest) and req.stream_args and req.tools_offered
    return frozenset({Fault.TOOL_CALL_UNTERMINATED}) if streams else frozenset()


WRITER = Writer(GEMINI.api, parse_request, stream_plan, response_body, bad_request_body,
                id_prefix=None, unsupported=UNSUPPORTED, carries=_carries)
