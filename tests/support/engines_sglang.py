"""SGLang's chat serving steps for one completion, driven the way ``_generate_stream_content`` drives
them: the reasoning step (``_process_reasoning_stream``) where a reasoning parser is set, then the
tool-call step (``_process_tool_call_stream``) per delta, ``flush`` (the detectors' ``finish``) on the
finishing one, then ``_check_for_unstreamed_tool_args``; the finish reason by SGLang's own rule
(``tool_calls`` on a natural stop when a call went out, unless ``_incomplete_tool_call_indices``).

The serving object is SGLang's ``OpenAIServingChat`` with only the attributes these steps read set
(a tokenizer manager is the engine's process; the steps read its ``tokenizer`` and nothing else).
"""

from __future__ import annotations

import json
import types
from typing import Any

from sglang.srt.entrypoints.openai.protocol import ChatCompletionRequest
from sglang.srt.entrypoints.openai.serving_chat import (
    OpenAIServingChat,
    _incomplete_tool_call_indices,
)
from sglang.srt.parser.reasoning_parser import ReasoningParser
from sglang.srt.plugins import load_plugins

load_plugins()


def serving(tool_parser: str | None, reasoning_parser: str | None = None) -> Any:
    chat = object.__new__(OpenAIServingChat)
    chat.tool_call_parser = tool_parser
    chat.reasoning_parser = reasoning_parser
    chat._encoding_adapter = None
    chat.template_manager = types.SimpleNamespace(force_reasoning=False, reasoning_config=None)
    chat.tokenizer_manager = types.SimpleNamespace(tokenizer=None)
    # as OpenAIServingChat.__init__ builds it: the detector whose defaults decide forced reasoning
    chat._reasoning_detector = (ReasoningParser(model_type=reasoning_parser, stream_reasoning=True).detector
                                if reasoning_parser else None)
    return chat


async def stream(chat: Any, text: str, size: int, tools: list[dict[str, Any]] | None,
                 finish: str = "stop", *, think: bool = False,
                 pieces: list[str] | None = None, tool_choice: Any = None) -> dict[str, Any]:
    """Stream ``text`` in ``size``-character deltas (or in the given ``pieces``, which join to it);
    what a client assembles."""
    body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    if tools is not None:
        body["tools"] = tools
    if tool_choice is not None:
        body["tool_choice"] = tool_choice
    if think:
        body["chat_template_kwargs"] = {"thinking": True}
    request = ChatCompletionRequest(**body)
    parsers: dict[int, Any] = {}
    reasoners: dict[int, Any] = {}
    has_calls: dict[int, bool] = {}
    content = {"meta_info": {"id": "chatcmpl-x"}}
    if pieces is None:
        pieces = [text[i:i + size] for i in range(0, len(text), size)] or [""]
    frames: list[str] = []
    reasoning: list[str] = []
    for n, delta in enumerate(pieces):
        last = n == len(pieces) - 1
        if chat.reasoning_parser:
            said, delta = chat._process_reasoning_stream(0, delta, reasoners, content, request,
                                                         finish if last else None)
            reasoning.append(said or "")
        if chat._tool_call_parsing_active(request):
            async for frame in chat._process_tool_call_stream(0, delta or "", parsers, content, request,
                                                              has_calls, created=0, flush=last):
                frames.append(frame)
            if last and 0 in parsers:
                extra = chat._check_for_unstreamed_tool_args(parsers[0], content, request, 0, created=0)
                if extra:
                    frames.append(extra)
        elif delta:
            frames.append("data: " + json.dumps({"choices": [{"delta": {"content": delta}}]}) + "\n\n")
    verdict = finish
    if has_calls.get(0, False) and finish == "stop" and not _incomplete_tool_call_indices(parsers.get(0)):
        verdict = "tool_calls"
    return assemble(frames, "".join(reasoning), verdict)


def assemble(frames: list[str], reasoning: str, finish: str) -> dict[str, Any]:
    content: list[str] = []
    calls: dict[int, list[Any]] = {}
    for frame in frames:
        chunk = json.loads(frame.removeprefix("data: ").strip())
        for choice in chunk["choices"]:
            delta = choice.get("delta") or {}
            content.append(delta.get("content") or "")
            for tc in delta.get("tool_calls") or []:
                slot = calls.setdefault(tc["index"], [None, None, ""])
                fn = tc.get("function") or {}
                slot[0] = tc.get("id") or slot[0]
                slot[1] = fn.get("name") or slot[1]
                slot[2] += fn.get("arguments") or ""
    return {"content": "".join(content), "reasoning": reasoning,
            "calls": [calls[i] for i in sorted(calls)], "finish": finish, "chunks": frames}


def whole(chat: Any, text: str, tools: list[dict[str, Any]] | None,
          tool_choice: Any = None) -> dict[str, Any]:
    """The non-streaming path: ``_process_tool_calls`` on the whole completion, where the request
    has tool parsing active (SGLang's ``_tool_call_parsing_active``); the text as content otherwise."""
    body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    if tools is not None:
        body["tools"] = tools
    if tool_choice is not None:
        body["tool_choice"] = tool_choice
    request = ChatCompletionRequest(**body)
    if not chat._tool_call_parsing_active(request):
        return {"content": text, "reasoning": "", "calls": [], "finish": "stop", "chunks": []}
    result = chat._process_tool_calls(text, request.tools, {"type": "stop"}, request.tool_choice)
    calls = [[c.id, c.function.name, c.function.arguments] for c in result.tool_calls or []]
    return {"content": result.remaining_text or "", "reasoning": "", "calls": calls,
            "finish": result.finish_reason["type"], "chunks": []}
