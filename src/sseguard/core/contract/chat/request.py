"""The request side of the chat protocol: how a conversation is written as its body."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sseguard.core.contract.request import (
    AssistantAnswer,
    BodySettings,
    Call,
    Format,
    Tool,
    Turn,
    blocks_of,
    first_dict,
    json_arguments,
    no_list_misfit,
)
from sseguard.core.verdict import Api

# ── the protocol's other facts: requests, relay, errors, sniffing, the descriptor ─────────────────


class ChatFormat(Format):
    """OpenAI Chat Completions: ``messages`` with a system message, ``tool`` messages for results."""

    api = Api.CHAT
    expected = "a Chat Completions body (a JSON object with a 'messages' list)"
    turns_field = "messages"
    max_tokens_field = "max_tokens"
    setting_fields = ("reasoning_effort", "stream_options")

    def render(self, system: str, turns: Sequence[Turn], tools: Sequence[Tool]) -> dict[str, Any]:
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
        for turn in turns:
            if turn.role == "tool":
                messages.extend({"role": "tool", "tool_call_id": call.id, "content": text}
                                for call, text in turn.results)
            elif turn.calls:
                messages.append({"role": "assistant", "content": turn.text, "tool_calls": [
                    {"id": c.id, "type": "function",
                     "function": {"name": c.name, "arguments": c.arguments}} for c in turn.calls]})
            else:
                messages.append({"role": turn.role, "content": turn.text or ""})
        body: dict[str, Any] = {"messages": messages}
        if tools:
            body["tools"] = [{"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": dict(t.parameters)}}
                for t in tools]
            body["tool_choice"] = "auto"
        return body

    def finish(self, body: dict[str, Any], *, model: str, settings: BodySettings) -> dict[str, Any]:
        self.stream_to(body, model, settings)
        if settings.include_usage:
            opts = body.get("stream_options")
            body["stream_options"] = {**(opts if isinstance(opts, dict) else {}), "include_usage": True}
        if settings.reasoning_effort is not None:
            body["reasoning_effort"] = settings.reasoning_effort
        if settings.seed is not None:  # as the openai SDK sends ``seed=``, ``temperature=``, ``top_p=``
            body.update(temperature=0, top_p=1, seed=settings.seed)
        return body

    def answer(self, message: Mapping[str, Any]) -> AssistantAnswer | None:
        first = first_dict(message, "choices")
        said = first.get("message") if first is not None else None
        if not isinstance(said, dict):
            return None
        calls = []
        for i, call in enumerate(said.get("tool_calls") or []):
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict):
                calls.append(Call(str(call.get("id") or f"call_{i}"), str(fn.get("name") or ""),
                                  json_arguments(fn.get("arguments"))))
        return AssistantAnswer(str(said.get("content") or ""), tuple(calls))

    def misfit(self, body: Mapping[str, Any]) -> str | None:
        if not isinstance(body.get("messages"), list):
            return no_list_misfit(body, "messages")
        if "system" in body:
            return "it has a top-level 'system' (an Anthropic Messages body)"
        kinds = {b.get("type") for m in body["messages"] for b in blocks_of(m)}
        if kinds & {"tool_use", "tool_result"}:
            return "its messages hold tool_use/tool_result blocks (an Anthropic Messages body)"
        if any(isinstance(t, dict) and "input_schema" in t for t in body.get("tools") or []):
            return "its tools have 'input_schema' (the Anthropic Messages tool format)"
        return None
