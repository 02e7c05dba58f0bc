"""The request side of the OpenAI Responses API: how a conversation is written as a Responses body,
and how an assembled response is read back as an answer (used by chaos, the probe and the proxy).

Kept apart from ``responses.py`` (the stream contract) only for size: both are the one Responses
descriptor's, which ``responses.py`` assembles.
"""

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
    json_arguments,
)
from sseguard.core.verdict import Api


class ResponsesFormat(Format):
    """OpenAI Responses: ``input`` items; calls are ``function_call`` items, results
    ``function_call_output`` items; the system prompt is ``instructions``."""

    api = Api.RESPONSES
    expected = "a Responses body (a JSON object with 'input': a string or a list of items)"
    turns_field = "input"
    max_tokens_field = "max_output_tokens"
    setting_fields = ("reasoning",)

    def render(self, system: str, turns: Sequence[Turn], tools: Sequence[Tool]) -> dict[str, Any]:
        items: list[dict[str, Any]] = []
        for turn in turns:
            if turn.role == "tool":
                items.extend({"type": "function_call_output", "call_id": call.id, "output": text}
                             for call, text in turn.results)
                continue
            if turn.text or not turn.calls:
                items.append({"role": turn.role, "content": turn.text or ""})
            items.extend({"type": "function_call", "call_id": c.id, "name": c.name,
                          "arguments": c.arguments} for c in turn.calls)
        body: dict[str, Any] = {"instructions": system, "input": items}
        if tools:
            body["tools"] = [{"type": "function", "name": t.name, "description": t.description,
                              "parameters": dict(t.parameters)} for t in tools]
            body["tool_choice"] = "auto"
        return body

    def finish(self, body: dict[str, Any], *, model: str, settings: BodySettings) -> dict[str, Any]:
        # Usage always comes in the terminal response: the Responses API has no option for it.
        self.stream_to(body, model, settings)
        if settings.reasoning_effort is not None:
            reasoning = body.get("reasoning")
            body["reasoning"] = {**(reasoning if isinstance(reasoning, dict) else {}),
                                 "effort": settings.reasoning_effort}
        if settings.seed is not None:  # the Responses API takes no seed
            body.update(temperature=0, top_p=1)
        return body

    def answer(self, message: Mapping[str, Any]) -> AssistantAnswer | None:
        output = message.get("output")  # the assembled response object
        if not isinstance(output, list):
            return None
        texts: list[str] = []
        calls: list[Call] = []
        for item in output:
            if not isinstance(item, dict):
                continue
            if item.get("type") == "function_call":
                calls.append(Call(str(item.get("call_id") or item.get("id") or f"call_{len(calls)}"),
                                  str(item.get("name") or ""), json_arguments(item.get("arguments"))))
            elif item.get("type") == "message":
                texts.extend(str(part.get("text") or "") for part in blocks_of(item)
                             if part.get("type") == "output_text")
        return AssistantAnswer("".join(texts), tuple(calls))

    def misfit(self, body: Mapping[str, Any]) -> str | None:
        if "messages" in body:
            return "it has 'messages' (a Chat Completions or Anthropic Messages body)"
        if not isinstance(body.get("input"), str | list):
            return "it has no 'input'"
        return None
