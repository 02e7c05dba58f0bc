"""One conversation, three wire formats: how a workload's turns become a request of each protocol.

The workloads (``workloads.py``) are written once, as neutral turns — a user's text, an assistant's text
and tool calls, the results of those calls — with neutral tool definitions. Each protocol's ``Format``
renders them into its own request (``PROTOCOLS.md``: request shapes), applies the run-wide settings in
its own words (``max_tokens`` / ``max_output_tokens``, reasoning effort / a thinking budget, the usage
option where one exists), reads the answer back out of the checker's assembled message, and tells
whether a user's own ``--body`` is in its format. One engine, three tables of names.

Pure Python, no I/O library: the asyncio probe and the Locust user (gevent) share it.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sseguard.errors import ConfigError
from sseguard.verdict import Api, Verdict

#: ``max_tokens`` is required by Anthropic Messages; the probe sends this when nothing else says.
DEFAULT_MESSAGES_MAX_TOKENS = 1024
#: Reasoning effort → Anthropic thinking budget (tokens). The API's minimum budget is 1,024.
THINKING_BUDGETS = {"minimal": 1024, "low": 1024, "medium": 4096, "high": 16384}
MIN_THINKING_BUDGET = 1024


@dataclass(frozen=True, slots=True)
class Tool:
    """A function the model may call: name, description and the JSON schema of its arguments."""

    name: str
    description: str
    parameters: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Call:
    """One tool call of an answer: its id, the function and the arguments as JSON text."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class Turn:
    """One turn of a conversation: ``user`` text, ``assistant`` text and calls, or ``tool`` results."""

    role: str  # user | assistant | tool
    text: str | None = None
    calls: tuple[Call, ...] = ()
    results: tuple[tuple[Call, str], ...] = ()  # (the call answered, the result's text)


@dataclass(frozen=True, slots=True)
class Answer:
    """What an assistant said, whatever the protocol: its text and its tool calls."""

    text: str
    calls: tuple[Call, ...] = ()


@dataclass(frozen=True, slots=True)
class Settings:
    """The run-wide request settings every format applies in its own words."""

    max_tokens: int | None = None
    reasoning_effort: str | None = None
    include_usage: bool = True


def thinking_budget(effort: str) -> int:
    """The Anthropic thinking budget for a reasoning effort (``low``…``high``, or a token count)."""
    if effort.isdigit():
        budget = int(effort)
        if budget < MIN_THINKING_BUDGET:
            raise ConfigError(f"reasoning-effort {effort}: a thinking budget is at least "
                              f"{MIN_THINKING_BUDGET} tokens")
        return budget
    try:
        return THINKING_BUDGETS[effort]
    except KeyError:
        raise ConfigError(f"reasoning-effort {effort!r} for a messages arm: give "
                          f"{', '.join(THINKING_BUDGETS)} or a thinking budget in tokens") from None


def _json_arguments(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value if value is not None else {}, separators=(",", ":"))


def _role_of(item: Any) -> str | None:
    return item.get("role") if isinstance(item, dict) else None


def _blocks(message: Any) -> list[dict[str, Any]]:
    content = message.get("content") if isinstance(message, dict) else None
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


class Format(ABC):
    """The request shape of one protocol. Subclasses fill in the tables."""

    api: Api
    #: How a person would recognise this format; named in the error for a ``--body`` that does not fit.
    expected: str

    @abstractmethod
    def render(self, system: str, turns: Sequence[Turn], tools: Sequence[Tool]) -> dict[str, Any]:
        """The request body (without model and settings) for a conversation so far."""

    @abstractmethod
    def finish(self, body: dict[str, Any], *, model: str, settings: Settings) -> dict[str, Any]:
        """Apply the model, streaming and the run-wide settings to ``body`` (in place) and return it."""

    @abstractmethod
    def answer(self, message: Mapping[str, Any]) -> Answer | None:
        """The answer in the checker's assembled message, or None when there is none to read."""

    @abstractmethod
    def misfit(self, body: Mapping[str, Any]) -> str | None:
        """Why ``body`` is not a request of this protocol, or None when it is."""

    def answer_of(self, verdict: Verdict) -> Answer | None:
        """The answer of a verdict's assembled message."""
        return self.answer(verdict.message)


class ChatFormat(Format):
    """OpenAI Chat Completions: ``messages`` with a system message, ``tool`` messages for results."""

    api = Api.CHAT
    expected = "a Chat Completions body (a JSON object with a 'messages' list)"

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

    def finish(self, body: dict[str, Any], *, model: str, settings: Settings) -> dict[str, Any]:
        body["model"] = model
        body["stream"] = True
        if settings.include_usage:
            opts = body.get("stream_options")
            body["stream_options"] = {**(opts if isinstance(opts, dict) else {}), "include_usage": True}
        if settings.max_tokens is not None:
            body["max_tokens"] = settings.max_tokens
        if settings.reasoning_effort is not None:
            body["reasoning_effort"] = settings.reasoning_effort
        return body

    def answer(self, message: Mapping[str, Any]) -> Answer | None:
        choices = message.get("choices") or []
        first = choices[0] if isinstance(choices, list) and choices else None
        said = first.get("message") if isinstance(first, dict) else None
        if not isinstance(said, dict):
            return None
        calls = []
        for i, call in enumerate(said.get("tool_calls") or []):
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict):
                calls.append(Call(str(call.get("id") or f"call_{i}"), str(fn.get("name") or ""),
                                  _json_arguments(fn.get("arguments"))))
        return Answer(str(said.get("content") or ""), tuple(calls))

    def misfit(self, body: Mapping[str, Any]) -> str | None:
        if not isinstance(body.get("messages"), list):
            return ("it has 'input' (a Responses body)" if "input" in body
                    else "it has no 'messages' list")
        if "system" in body:
            return "it has a top-level 'system' (an Anthropic Messages body)"
        kinds = {b.get("type") for m in body["messages"] for b in _blocks(m)}
        if kinds & {"tool_use", "tool_result"}:
            return "its messages hold tool_use/tool_result blocks (an Anthropic Messages body)"
        if any(isinstance(t, dict) and "input_schema" in t for t in body.get("tools") or []):
            return "its tools have 'input_schema' (the Anthropic Messages tool format)"
        return None


class ResponsesFormat(Format):
    """OpenAI Responses: ``input`` items; calls are ``function_call`` items, results
    ``function_call_output`` items; the system prompt is ``instructions``."""

    api = Api.RESPONSES
    expected = "a Responses body (a JSON object with 'input': a string or a list of items)"

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

    def finish(self, body: dict[str, Any], *, model: str, settings: Settings) -> dict[str, Any]:
        # Usage always comes in the terminal response: the Responses API has no option for it.
        body["model"] = model
        body["stream"] = True
        if settings.max_tokens is not None:
            body["max_output_tokens"] = settings.max_tokens
        if settings.reasoning_effort is not None:
            reasoning = body.get("reasoning")
            body["reasoning"] = {**(reasoning if isinstance(reasoning, dict) else {}),
                                 "effort": settings.reasoning_effort}
        return body

    def answer(self, message: Mapping[str, Any]) -> Answer | None:
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
                                  str(item.get("name") or ""), _json_arguments(item.get("arguments"))))
            elif item.get("type") == "message":
                texts.extend(str(part.get("text") or "") for part in _blocks(item)
                             if part.get("type") == "output_text")
        return Answer("".join(texts), tuple(calls))

    def misfit(self, body: Mapping[str, Any]) -> str | None:
        if "messages" in body:
            return "it has 'messages' (a Chat Completions or Anthropic Messages body)"
        if not isinstance(body.get("input"), str | list):
            return "it has no 'input'"
        return None


class MessagesFormat(Format):
    """Anthropic Messages: a top-level ``system``, ``tool_use`` blocks in assistant turns and
    ``tool_result`` blocks in the user turn that answers them; ``max_tokens`` is required."""

    api = Api.MESSAGES
    expected = ("an Anthropic Messages body (a JSON object with a 'messages' list of user/assistant "
                "turns and the system prompt as a top-level 'system')")

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
                               "input": _arguments_object(c.arguments)} for c in turn.calls)
                messages.append({"role": "assistant", "content": blocks})
            else:
                messages.append({"role": turn.role, "content": turn.text or ""})
        body: dict[str, Any] = {"system": system, "messages": messages}
        if tools:
            body["tools"] = [{"name": t.name, "description": t.description,
                              "input_schema": dict(t.parameters)} for t in tools]
            body["tool_choice"] = {"type": "auto"}
        return body

    def finish(self, body: dict[str, Any], *, model: str, settings: Settings) -> dict[str, Any]:
        # Usage always comes in message_start/message_delta: Messages has no option for it.
        body["model"] = model
        body["stream"] = True
        if settings.max_tokens is not None:
            body["max_tokens"] = settings.max_tokens
        if settings.reasoning_effort is not None:
            budget = thinking_budget(settings.reasoning_effort)
            # The API wants max_tokens above the budget; the answer still gets the usual room.
            body["max_tokens"] = max(int(body.get("max_tokens") or 0),
                                     budget + DEFAULT_MESSAGES_MAX_TOKENS)
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
        body.setdefault("max_tokens", DEFAULT_MESSAGES_MAX_TOKENS)
        return body

    def answer(self, message: Mapping[str, Any]) -> Answer | None:
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
                                  str(block.get("name") or ""), _json_arguments(block.get("input"))))
        return Answer("".join(texts), tuple(calls))

    def misfit(self, body: Mapping[str, Any]) -> str | None:
        messages = body.get("messages")
        if not isinstance(messages, list):
            return ("it has 'input' (a Responses body)" if "input" in body
                    else "it has no 'messages' list")
        roles = {_role_of(m) for m in messages}
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


def load_body_file(path: str) -> dict[str, Any]:
    """A user's own request body: a JSON object (its format is checked against each arm's api)."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read body file {path}: {exc.strerror or exc}") from None
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise ConfigError(f"body file {path} is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise ConfigError(f"body file {path} must be a JSON object (a request body)")
    return body


def _arguments_object(arguments: str) -> Any:
    """Messages carries tool input as an object; unparsable arguments are kept as a string field."""
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return {"arguments": arguments}
    return value if isinstance(value, dict) else {"value": value}


FORMATS: dict[Api, Format] = {f.api: f for f in (ChatFormat(), ResponsesFormat(), MessagesFormat())}


def format_for(api: str | Api) -> Format:
    """The format of one protocol; an unknown name is a ``ConfigError``."""
    try:
        return FORMATS[Api(api)]
    except ValueError:
        raise ConfigError(f"unknown api {api!r} (known: {', '.join(a.value for a in Api)})") from None


def check_body(body: Mapping[str, Any], api: str | Api, *, path: str, arm: str | None = None) -> None:
    """A ``ConfigError`` naming the expected format when ``body`` is not a request of ``api``."""
    fmt = format_for(api)
    reason = fmt.misfit(body)
    if reason is not None:
        who = f"arm {arm!r} speaks {fmt.api}" if arm else f"api {fmt.api}"
        raise ConfigError(f"body file {path} does not fit: {reason}; {who} and needs {fmt.expected}")
