"""The usage a continued stream reports: the original prompt, the completion tokens of every part.

A continued stream is answered by several upstream attempts, each reporting (if it got that far) its
own usage. The client asked one question and got one answer, so the usage it receives is that
answer's: the original request's prompt tokens, and the completion tokens of every attempt summed.
An attempt that broke before reporting usage (a chat stream's usage chunk comes last) counts 0:
the proxy never invents a count. When no attempt of the original request reported its prompt
tokens, the first continuation's are used (vLLM and DeepSeek count the continued text ``SENT`` as
prompt there, so that number is larger than the original one by about ``SENT``'s tokens).

Pure (no I/O): ``chat.Splice`` and ``messages.MessagesSplice`` call it on the usage they
pass, ``resume/dialects.py`` closes each attempt.
"""

from __future__ import annotations

from typing import Any

#: Where each protocol's usage keeps its prompt and completion counts (chat; Messages).
CHAT_KEYS = ("prompt_tokens", "completion_tokens")
MESSAGES_KEYS = ("input_tokens", "output_tokens")


def _count(usage: dict[str, Any], key: str) -> int | None:
    value = usage.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class UsageSum:
    """One client stream's usage across its attempts."""

    def __init__(self, keys: tuple[str, str]) -> None:
        self.prompt_key, self.completion_key = keys
        self.prompt: int | None = None  # the original request's, once known
        self.done = 0  # completion tokens of the attempts already ended
        self.own: dict[str, Any] | None = None  # the current attempt's own usage, as it reported it

    def seen(self, usage: dict[str, Any]) -> None:
        """Usage the current attempt reported (a later report of the same attempt overrides)."""
        self.own = {**(self.own or {}), **{k: v for k, v in usage.items() if v is not None}}

    @property
    def own_completion(self) -> int:
        """The current attempt's own completion tokens (0 when it reported none)."""
        return (_count(self.own, self.completion_key) if self.own else None) or 0

    def end_attempt(self) -> tuple[dict[str, Any] | None, int]:
        """The current attempt ended (to be continued): its own usage and completion tokens."""
        own, tokens = self.own, self.own_completion
        if self.prompt is None and own is not None:
            self.prompt = _count(own, self.prompt_key)
        self.done += tokens
        self.own = None
        return own, tokens

    def rewrite(self, usage: dict[str, Any]) -> dict[str, Any]:
        """A continuation's usage as the client gets it: noted as the attempt's own, then the
        original prompt and the summed completion tokens put in its place."""
        self.seen(usage)
        out = dict(usage)
        completion = _count(usage, self.completion_key)
        if completion is not None:
            out[self.completion_key] = self.done + completion
        prompt = _count(usage, self.prompt_key)
        if prompt is not None and self.prompt is not None:
            out[self.prompt_key] = self.prompt
        if "total_tokens" in usage and isinstance(out.get(self.prompt_key), int) \
                and isinstance(out.get(self.completion_key), int):
            out["total_tokens"] = out[self.prompt_key] + out[self.completion_key]
        return out
