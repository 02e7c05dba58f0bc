"""The real google-genai SDK as the Gemini tests drive it: one client, its stream read sync or async."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest


def sdk_client(base: str, **http_options: Any) -> Any:
    """A google-genai client on ``base`` (``v1beta``, no retries), with extra ``HttpOptions``."""
    genai = pytest.importorskip("google.genai")
    types = pytest.importorskip("google.genai.types")
    return genai.Client(api_key="AIza-test", http_options=types.HttpOptions(
        base_url=base, api_version="v1beta", retry_options=types.HttpRetryOptions(attempts=1),
        **http_options))


def sync_text(sdk: Any, options: dict[str, Any]) -> str:
    return "".join(chunk.text or "" for chunk in sdk.models.generate_content_stream(
        model="chaos-1", contents="Say something.", config=options))


async def async_text(sdk: Any, options: dict[str, Any]) -> str:
    stream = await sdk.aio.models.generate_content_stream(
        model="chaos-1", contents="Say something.", config=options)
    return "".join([chunk.text or "" async for chunk in stream])


async def both_ways(sdk: Any, options: dict[str, Any]) -> list[tuple[str, str]]:
    """Read one stream sync (in a thread: the server runs in this event loop), then async: per way,
    the exception's class name and text, or ``("silent", the text read)``."""
    outcomes = []
    for use_async in (False, True):
        try:
            text = await (async_text(sdk, options) if use_async
                          else asyncio.to_thread(sync_text, sdk, options))
        except Exception as exc:  # its class is what is measured
            outcomes.append((type(exc).__name__, str(exc)))
        else:
            outcomes.append(("silent", text))
    return outcomes
