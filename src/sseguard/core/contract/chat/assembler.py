"""Fold ``chat.completion.chunk`` objects into the final message, the way a client does.

The assembler is deliberately tolerant of shapes real servers send on *good* streams (``finish_reason:
""`` on non-final chunks, a usage chunk with ``choices: null`` or no ``choices``, an empty delta after the
finish, unknown fields such as OpenAI's ``obfuscation`` padding) and reports only what no client can
fold: values of the wrong type. Whether the stream as a whole was good is the checker's business.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec


@dataclass(slots=True)
class AssembledToolCall:
    index: int
    id: str | None = None
    type: str | None = None
    name_parts: list[str] = field(default_factory=list)
    argument_parts: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return "".join(self.name_parts)

    @property
    def arguments(self) -> str:
        return "".join(self.argument_parts)


@dataclass(slots=True)
class AssembledChoice:
    index: int
    role: str | None = None
    content_parts: list[str] = field(default_factory=list)
    reasoning_parts: list[str] = field(default_factory=list)
    tool_calls: dict[int, AssembledToolCall] = field(default_factory=dict)
    finish_reason: str | None = None
    saw_content: bool = False  # content parts were sent (even an empty string)
    refusal_parts: list[str] = field(default_factory=list)
    #: The legacy single call (``delta.function_call``: older servers, some gateways), as a call.
    function_call: AssembledToolCall | None = None
    audio: dict[str, Any] | None = None  # ``delta.audio`` pieces, folded as the openai SDK does

    @property
    def content(self) -> str:
        return "".join(self.content_parts)

    @property
    def reasoning(self) -> str:
        return "".join(self.reasoning_parts)


class ChatDelta(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """The fields of a delta, typed: exactly the delta fields the vocabulary knows
    (``contract.chat.vocabulary``), so a delta with another field fails to decode here and takes
    the generic path, where the checker records it (``delta.<name>``) and the assembler skips it."""

    role: Any = None
    content: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    tool_calls: Any = None  # folded by the generic code: its shapes vary too much among servers
    # Rarer fields (``_fold_rare``): a refusal, audio pieces, the legacy single function call.
    refusal: str | None = None
    audio: Any = None
    function_call: Any = None


#: A field the assembler never reads: kept as its raw JSON bytes (no objects built for it).
_SKIPPED = msgspec.Raw()


class ChatChoice(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A choice's fields the vocabulary knows (``choice.<name>``), typed or skipped."""

    index: int = 0
    delta: ChatDelta | None = None
    message: ChatDelta | None = None
    finish_reason: str | None = None
    logprobs: msgspec.Raw = _SKIPPED
    stop_reason: msgspec.Raw = _SKIPPED
    matched_stop: msgspec.Raw = _SKIPPED


class ChatChunk(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A ``chat.completion.chunk`` as well-behaved servers send it, for msgspec's typed decoding.

    A chunk of another shape fails to decode into it (``msgspec.ValidationError``) and takes the
    generic path (a dict and ``add``), which reports what is wrong; ``error`` is only here to tell
    an error chunk apart, which the generic path handles too. A field the vocabulary does not know
    (``chunk.<name>``, in the chunk, a choice or a delta) fails it too: the generic path records it.
    Decoded JSON cannot hold a cycle, so these structs are not tracked by the garbage collector
    (``gc=False``): fewer collections.
    """

    id: str | None = None
    model: Any = None
    system_fingerprint: Any = None
    usage: dict[str, Any] | None = None
    choices: list[ChatChoice] | None = None
    error: Any = msgspec.UNSET
    object: msgspec.Raw = _SKIPPED
    created: msgspec.Raw = _SKIPPED
    service_tier: msgspec.Raw = _SKIPPED
    obfuscation: msgspec.Raw = _SKIPPED
    moderation: msgspec.Raw = _SKIPPED


#: The audio fields whose pieces are joined (``data`` base64, ``transcript`` text); ``id`` and
#: ``expires_at`` repeat and are replaced.
_JOINED_AUDIO = frozenset({"data", "transcript"})

#: Called with (choice index, "content" or "reasoning", text) for every non-empty text delta.
TextWatcher = Callable[[int, str, str], None]


class ChatAssembler:
    """``add(chunk)`` folds one decoded chunk and returns the schema problems it found in it.

    ``keep_text=False`` folds everything but the content and reasoning text itself, so a relay watching
    thousands of long answers keeps memory flat; ``on_text`` still sees every text delta as it arrives.
    """

    __slots__ = ("choices", "first_id", "ids_changed", "keep_text", "last_id", "model", "on_text",
                 "saw_token", "system_fingerprint", "usage")

    def __init__(self, *, keep_text: bool = True, on_text: TextWatcher | None = None) -> None:
        self.keep_text = keep_text
        self.on_text = on_text
        self.choices: dict[int, AssembledChoice] = {}
        self.first_id: str | None = None
        self.last_id: str | None = None
        self.ids_changed = False
        self.model: str | None = None
        self.system_fingerprint: str | None = None
        self.usage: dict[str, Any] | None = None
        self.saw_token = False  # any content, reasoning or tool-call delta

    def add(self, chunk: dict[str, Any]) -> list[str]:
        problems: list[str] = []
        cid = chunk.get("id")
        if cid is not None and not isinstance(cid, str):
            problems.append("id is not a string")
            cid = str(cid)
        self._see_head(cid, chunk.get("model"), chunk.get("system_fingerprint"))
        usage = chunk.get("usage")
        if usage is not None:
            if isinstance(usage, dict):
                self.usage = usage
            else:
                problems.append("usage is not an object")
        choices = chunk.get("choices")
        if choices is None:
            return problems
        if not isinstance(choices, list):
            problems.append("choices is not a list")
            return problems
        for raw in choices:
            if not isinstance(raw, dict):
                problems.append("choice is not an object")
                continue
            self._add_choice(raw, problems)
        return problems

    def add_typed(self, chunk: ChatChunk) -> list[str]:
        """``add`` for a chunk msgspec decoded into ``ChatChunk``: its types are already checked, so
        this folds without the lookups and type tests (the checker's per-event cost); the result is
        the same as ``add`` of the same JSON decoded generically (``test_assemble`` compares)."""
        choices = chunk.choices
        if (chunk.id != self.last_id or chunk.model != self.model
                or chunk.system_fingerprint != self.system_fingerprint):
            # (an unchanged head would change nothing there)
            self._see_head(chunk.id, chunk.model, chunk.system_fingerprint)
        if chunk.usage is not None:
            self.usage = chunk.usage
        if choices is None:
            return []
        if len(choices) == 1:
            # The chunk of nearly every event: one choice already seen, a text delta and nothing
            # else. Folded here as ``_fold_delta`` would, without its layers.
            raw = choices[0]
            delta = raw.delta
            choice = self.choices.get(raw.index)
            if (choice is not None and delta is not None and delta.tool_calls is None
                    and delta.reasoning_content is None and delta.reasoning is None
                    and not raw.finish_reason and delta.refusal is None
                    and delta.function_call is None and delta.audio is None):
                if isinstance(delta.role, str):
                    choice.role = delta.role
                content = delta.content
                if content is not None:
                    choice.saw_content = True
                    if content:
                        if self.keep_text:
                            choice.content_parts.append(content)
                        if self.on_text is not None:
                            self.on_text(choice.index, "content", content)
                        self.saw_token = True
                return []
        problems: list[str] = []
        for raw in choices:
            index = raw.index
            choice = self.choices.get(index)
            if choice is None:
                choice = self.choices[index] = AssembledChoice(index)
            delta = raw.delta if raw.delta is not None else raw.message
            if delta is not None:
                reasoning = delta.reasoning_content
                self._fold_delta(choice, delta.role, delta.content,
                                 reasoning if reasoning is not None else delta.reasoning,
                                 delta.tool_calls, problems)
                if (delta.refusal is not None or delta.audio is not None
                        or delta.function_call is not None):
                    self._fold_rare(choice, delta.refusal, delta.audio, delta.function_call,
                                    problems)
            if raw.finish_reason:
                choice.finish_reason = raw.finish_reason
        return problems

    def _see_head(self, cid: str | None, model: Any, fp: Any) -> None:
        if cid is not None:
            if self.first_id is None:
                self.first_id = cid
            elif cid != self.last_id and cid != self.first_id:
                self.ids_changed = True
            self.last_id = cid
        if isinstance(model, str) and model:
            self.model = model
        if isinstance(fp, str):
            self.system_fingerprint = fp

    def _add_choice(self, raw: dict[str, Any], problems: list[str]) -> None:
        index = raw.get("index", 0)
        if not isinstance(index, int) or isinstance(index, bool):
            problems.append("choice index is not an integer")
            return
        choice = self.choices.get(index)
        if choice is None:
            choice = self.choices[index] = AssembledChoice(index)
        delta = raw.get("delta")
        if delta is None:
            delta = raw.get("message")  # a few servers repeat the non-stream shape
        if delta is not None:
            if isinstance(delta, dict):
                self._add_delta(choice, delta, problems)
            else:
                problems.append("delta is not an object")
        finish = raw.get("finish_reason")
        if finish is not None and finish != "":
            if isinstance(finish, str):
                choice.finish_reason = finish
            else:
                problems.append("finish_reason is not a string")

    def _add_delta(self, choice: AssembledChoice, delta: dict[str, Any],
                   problems: list[str]) -> None:
        content = delta.get("content")
        if content is not None and not isinstance(content, str):
            problems.append("content is not a string")
            content = None
        reasoning = delta.get("reasoning_content")
        if reasoning is None:
            reasoning = delta.get("reasoning")
        if reasoning is not None and not isinstance(reasoning, str):
            problems.append("reasoning_content is not a string")
            reasoning = None
        self._fold_delta(choice, delta.get("role"), content, reasoning, delta.get("tool_calls"),
                         problems)
        refusal, audio, call = delta.get("refusal"), delta.get("audio"), delta.get("function_call")
        if refusal is not None or audio is not None or call is not None:
            if refusal is not None and not isinstance(refusal, str):
                problems.append("refusal is not a string")
                refusal = None
            self._fold_rare(choice, refusal, audio, call, problems)

    def _fold_rare(self, choice: AssembledChoice, refusal: str | None, audio: Any, call: Any,
                   problems: list[str]) -> None:
        """The delta fields few streams carry, folded as the openai SDK folds them: a refusal's
        text joined, audio pieces merged (strings joined, the rest replaced), the legacy
        ``function_call`` joined into one call."""
        if refusal:
            choice.refusal_parts.append(refusal)
            self.saw_token = True
        if audio is not None:
            if not isinstance(audio, dict):
                problems.append("audio is not an object")
            else:
                merged = choice.audio if choice.audio is not None else {}
                for key, value in audio.items():
                    old = merged.get(key)
                    joins = isinstance(value, str) and isinstance(old, str) and key in _JOINED_AUDIO
                    merged[key] = old + value if joins else value
                choice.audio = merged
                self.saw_token = True
        if call is not None:
            if not isinstance(call, dict):
                problems.append("function_call is not an object")
                return
            held = choice.function_call
            if held is None:
                held = choice.function_call = AssembledToolCall(0, type="function")
            self.saw_token = True
            for key, parts in (("name", held.name_parts), ("arguments", held.argument_parts)):
                value = call.get(key)
                if value is None:
                    continue
                if isinstance(value, str):
                    parts.append(value)
                else:
                    problems.append(f"function_call {key} is not a string")

    def _fold_delta(self, choice: AssembledChoice, role: Any, content: str | None,
                    reasoning: str | None, tool_calls: Any, problems: list[str]) -> None:
        """One delta whose text fields are checked: role, text, reasoning, tool calls."""
        if isinstance(role, str):
            choice.role = role
        if content is not None:
            choice.saw_content = True
            if content:
                if self.keep_text:
                    choice.content_parts.append(content)
                if self.on_text is not None:
                    self.on_text(choice.index, "content", content)
                self.saw_token = True
        if reasoning:
            if self.keep_text:
                choice.reasoning_parts.append(reasoning)
            if self.on_text is not None:
                self.on_text(choice.index, "reasoning", reasoning)
            self.saw_token = True
        if tool_calls is not None:
            if isinstance(tool_calls, list):
                for tc in tool_calls:
                    self._add_tool_call(choice, tc, problems)
            else:
                problems.append("tool_calls is not a list")

    def _add_tool_call(self, choice: AssembledChoice, tc: Any, problems: list[str]) -> None:
        if not isinstance(tc, dict):
            problems.append("tool call is not an object")
            return
        index = tc.get("index")
        if index is None:
            # Some OpenAI-compatible servers omit the index: a new id starts a new call,
            # anything else continues the last one.
            if tc.get("id") or not choice.tool_calls:
                index = len(choice.tool_calls)
            else:
                index = max(choice.tool_calls)
        elif not isinstance(index, int) or isinstance(index, bool):
            problems.append("tool call index is not an integer")
            return
        call = choice.tool_calls.get(index)
        if call is None:
            call = choice.tool_calls[index] = AssembledToolCall(index)
        self.saw_token = True
        tid = tc.get("id")
        if isinstance(tid, str) and tid:
            call.id = tid
        ttype = tc.get("type")
        if isinstance(ttype, str):
            call.type = ttype
        fn = tc.get("function")
        if fn is None:
            return
        if not isinstance(fn, dict):
            problems.append("tool call function is not an object")
            return
        name = fn.get("name")
        if name is not None:
            if isinstance(name, str):
                call.name_parts.append(name)
            else:
                problems.append("function name is not a string")
        args = fn.get("arguments")
        if args is not None:
            if isinstance(args, str):
                call.argument_parts.append(args)
            else:
                problems.append("function arguments is not a string")

    def to_openai(self) -> dict[str, Any]:
        """The assembled answer as a non-streamed ``chat.completion`` object."""
        choices: list[dict[str, Any]] = []
        for index in sorted(self.choices):
            choice = self.choices[index]
            message: dict[str, Any] = {
                "role": choice.role or "assistant",
                "content": choice.content if (choice.content_parts or choice.saw_content) else None,
            }
            if choice.reasoning_parts:
                message["reasoning_content"] = choice.reasoning
            if choice.refusal_parts:
                message["refusal"] = "".join(choice.refusal_parts)
            if choice.audio is not None:
                message["audio"] = choice.audio
            if choice.function_call is not None:
                message["function_call"] = {"name": choice.function_call.name,
                                            "arguments": choice.function_call.arguments}
            if choice.tool_calls:
                message["tool_calls"] = [
                    {"id": call.id, "type": call.type or "function",
                     "function": {"name": call.name, "arguments": call.arguments}}
                    for _, call in sorted(choice.tool_calls.items())
                ]
            choices.append({"index": index, "message": message,
                            "finish_reason": choice.finish_reason})
        out: dict[str, Any] = {"id": self.first_id, "object": "chat.completion",
                               "model": self.model, "choices": choices}
        if self.system_fingerprint is not None:
            out["system_fingerprint"] = self.system_fingerprint
        if self.usage is not None:
            out["usage"] = self.usage
        return out
