"""One streamed request per protocol through a LiteLLM proxy, each with the vendor's own SDK.

Each driver reads the stream to its end the way an application does and says how it ended for the
application: ``clean`` (the SDK ended the stream quietly) or the name of what it raised. With
``tools=True`` the request offers one tool, written in the protocol's own shape (the chaos upstream
then answers with a call of it, and the checker judges the call against it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import anthropic
import openai
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types

from _litellm_support import CHAT_MODEL, CLAUDE_MODEL, GEMINI_MODEL, MASTER_KEY

TIMEOUT_S = 90.0
PROMPT = "Say something."
#: The one tool a request offers with ``tools=True``: its name and JSON schema.
TOOL_NAME = "get_weather"
TOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"location": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["location"],
}


def _openai(url: str, ask: Callable[[openai.OpenAI], Iterable[Any]]) -> str:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=MASTER_KEY, max_retries=0,
                           timeout=TIMEOUT_S)
    last = None
    try:
        for event in ask(client):
            last = getattr(event, "type", None)
    except openai.APIError as exc:
        return type(exc).__name__
    # openai-python does not raise on a Responses response.failed: the application gets the event
    return "clean (last event response.failed)" if last == "response.failed" else "clean"


def chat(url: str, *, tools: bool = False) -> str:
    offered = [{"type": "function", "function": {"name": TOOL_NAME, "parameters": TOOL_SCHEMA}}]
    extra: dict[str, Any] = {"tools": offered} if tools else {}
    return _openai(url, lambda client: client.chat.completions.create(
        model=CHAT_MODEL, messages=[{"role": "user", "content": PROMPT}], stream=True, **extra))


def responses(url: str, *, tools: bool = False) -> str:
    offered = [{"type": "function", "name": TOOL_NAME, "parameters": TOOL_SCHEMA}]
    extra: dict[str, Any] = {"tools": offered} if tools else {}
    return _openai(url, lambda client: client.responses.create(
        model=CHAT_MODEL, input=PROMPT, stream=True, **extra))


def messages(url: str, *, tools: bool = False) -> str:
    client = anthropic.Anthropic(base_url=url, api_key=MASTER_KEY, max_retries=0,
                                 timeout=TIMEOUT_S)
    extra: dict[str, Any] = {"tools": [{"name": TOOL_NAME, "input_schema": TOOL_SCHEMA}]} \
        if tools else {}
    try:
        stream = client.messages.create(model=CLAUDE_MODEL, max_tokens=256, stream=True,
                                        messages=[{"role": "user", "content": PROMPT}], **extra)
        for _ in stream:
            pass
    except anthropic.APIError as exc:
        return type(exc).__name__
    return "clean"


def gemini(url: str, *, tools: bool = False) -> str:
    client = genai.Client(api_key=MASTER_KEY, http_options=genai_types.HttpOptions(
        base_url=url, api_version="v1beta", timeout=int(TIMEOUT_S * 1000)))
    config = genai_types.GenerateContentConfig(tools=[genai_types.Tool(function_declarations=[
        genai_types.FunctionDeclaration(name=TOOL_NAME, parameters_json_schema=TOOL_SCHEMA)])]) \
        if tools else None
    try:
        for _ in client.models.generate_content_stream(model=GEMINI_MODEL, contents=PROMPT,
                                                       config=config):
            pass
    except (genai_errors.APIError, genai_errors.UnknownApiResponseError) as exc:
        return type(exc).__name__
    except TypeError:
        # LiteLLM writes an error frame's "code" as a string ("500"); google-genai compares it
        # with numbers and fails there: the application gets a TypeError (measured, 1.108.7)
        return "TypeError"
    return "clean"


#: The driver of each protocol, by its ``Api`` value.
DRIVERS: dict[str, Callable[..., str]] = {
    "chat": chat, "responses": responses, "messages": messages, "gemini": gemini,
}
