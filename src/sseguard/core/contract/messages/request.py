"""The request side of the messages protocol: how a conversation is written as its body."""

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
    arguments_object,
    effort_budget,
    json_arguments,
    no_list_misfit,
    role_of,
)
from sseguard.core.verdict import Api

# ── the protocol's other facts: requests, relay, errors, sniffing, the descriptor ─────────────────

#: ``max_tokens`` is required by Anthropic Messages; the probe sends this when nothing else says.
DEFAULT_MESSAGES_MAX_TOKENS = 1024
#: Reasoning effort → Anthropic thinking budget (tokens). The API's minimum budget is 1,024.
THINKING_BUDGETS = {"minimal": 1024, "low": 1024, "medium": 4096, "high": 16384}
MIN_THINKING_BUDGET = 1024


def thinking_budget(effort: str) -> int:
    """The Anthropic thinking budget for a reasoning effort (``low``…``high``, or a token count)."""
    return effort_budget(effort, THINKING_BUDGETS, arm="messages", least=MIN_THINKING_BUDGET)


class MessagesFormat(Format):
    """Anthropic Messages: a top-level ``system``, ``tool_use`` blocks in assistant turns and
    ``tool_result`` blocks in the user turn that answers them; ``max_tokens`` is required."""

    api = Api.MESSAGES
    expected = ("an Anthropic Messages body (a JSON object with a 'messages' list of user/assistant "
                "turns and the system prompt as a top-level 'system')")
    turns_field = "messages"
    max_tokens_field = "max_tokens"
    setting_fields = ("thinking",)

    def render(self, system: str, turns: Sequence[Turn], tools: Sequence[Tool]) -> dict[str, Any]:
        messages: list[dict[str, Any]] = []
        for turn in turns:
            if turn.role == "tool":
                messages.append({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": call.id, "content": text}
                    for call, text in turn.results]})
            elif turn.calls:
                blocks: list[dict[str, Any]] = [{"type": "text", "text": turn.text}] if turn.text else []
                blocks.extend({"type": "tool_use", "id": c.id, "name": c.name,
                               "input": arguments_object(c.arguments)} for c in turn.calls)
                messages.append({"role": "assistant", "content": blocks})
            else:
                messages.append({"role": turn.role, "content": turn.text or ""})
        body: dict[str, Any] = {"system": system, "messages": messages}
        if tools:
            body["tools"] = [{"name": t.name, "description": t.description,
                              "input_schema": dict(t.parameters)} for t in tools]
            body["tool_choice"] = {"type": "auto"}
        return body

    def finish(self, body: dict[str, Any], *, model: str, settings: BodySettings) -> dict[str, Any]:
        # Usage always comes in message_start/message_delta: Messages has no option for it.
        self.stream_to(body, model, settings)
        if settings.reasoning_effort is not None:
            budget = self.thinking_budget(settings.reasoning_effort)
            # The API wants max_tokens above the budget; the answer still gets the usual room.
            body["max_tokens"] = max(int(body.get("max_tokens") or 0),
                                     budget + DEFAULT_MESSAGES_MAX_TOKENS)
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
        body.setdefault("max_tokens", DEFAULT_MESSAGES_MAX_TOKENS)
        # ``settings.seed`` (deterministic sampling) has no words here: the current Messages API takes
        # no seed and no sampling parameters (the anthropic SDK 2 dropped ``temperature`` and
        # ``top_k``), so a messages arm is compared at the server's own sampling (docs/probe.md).
        return body

    def thinking_budget(self, effort: str) -> int:
        return thinking_budget(effort)

    def answer(self, message: Mapping[str, Any]) -> AssistantAnswer | None:
        content = message.get("content")
        if not isinstance(content, list):
            return None
        texts: list[str] = []
        calls: list[Call] = []
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                texts.append(str(block.get("text") or ""))
            elif block.get("type") == "tool_use":
                calls.append(Call(str(block.get("id") or f"toolu_{len(calls)}"),
                                  str(block.get("name") or ""), json_arguments(block.get("input"))))
        return AssistantAnswer("".join(texts), tuple(calls))

    def misfit(self, body: Mapping[str, Any]) -> str | None:
        messages = body.get("messages")
        if not isinstance(messages, list):
            return no_list_misfit(body, "messages")
        roles = {role_of(m) for m in messages}
        if roles & {"system", "developer", "tool"}:
            role = sorted(r for r in roles & {"system", "developer", "tool"} if r)[0]
            return f"it has a '{role}' role message (a Chat Completions body)"
        if any(isinstance(m, dict) and "tool_calls" in m for m in messages):
            return "it has 'tool_calls' (a Chat Completions body)"
        if any(isinstance(t, dict) and "function" in t for t in body.get("tools") or []):
            return "its tools are in the Chat Completions format ('function')"
        if "stream_options" in body:
            return "it has 'stream_options' (a Chat Completions body)"
        return None
