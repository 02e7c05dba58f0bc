"""The OpenAI ``/v1/chat/completions`` streaming contract, checked incrementally over raw body bytes.

``StreamChecker`` is sans-IO: the adapter feeds the body as it arrives and says at ``close()`` how the
transport ended (a transport error, a stall it measured, the HTTP status). Nothing the peer sends can
raise out of ``feed()``/``close()``: a broken stream is the *answer*, given as a ``Verdict``.

The contract, as the official clients assume it and servers are seen to break it:
``complete`` needs a non-null ``finish_reason`` for every choice *and* the exact ``data: [DONE]``
sentinel. A stream that simply stops after content is ``truncated`` — the failure tolerant SDKs accept
silently, which is why it is the first thing this checker exists to name.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from sseguard.core.contract._base import (
    FINISHED,
    JSON_ERRORS,
    CheckerBase,
)
from sseguard.core.contract.chat.assembler import AssembledChoice, ChatAssembler, ChatChunk
from sseguard.core.contract.chat.vocabulary import KINDS, REASONS
from sseguard.core.sse import SSEEvent
from sseguard.core.verdict import Api, Ending, FindingKind

#: Chunks of the common shape decode straight into typed structs (no dict lookups to fold them);
#: anything else — bad JSON, other types, too deep — falls back to the generic decode and ``add``.
_decode_chunk = msgspec.json.Decoder(ChatChunk).decode
_TYPED_MISS = (msgspec.ValidationError, *JSON_ERRORS)
_UNSET = msgspec.UNSET
#: The lane's choice before there is a lane (``_lane_state`` refuses it; nothing folds into it).
_NO_CHOICE = AssembledChoice(-1)


class StreamChecker(CheckerBase):
    """Feed it one response body's bytes; ``close()`` returns the ``Verdict``.

    ``request`` is the request body that produced the stream (optional). ``markup`` names the
    tool-call markup families to look for in visible text (``"all"`` by default).
    """

    api = Api.CHAT
    reasons = REASONS
    kinds = KINDS

    def __init__(self, request: dict[str, Any] | None = None, *,
                 markup: str | Iterable[str] | None = "all", keep_text: bool = True) -> None:
        super().__init__(request, markup=markup, keep_text=keep_text)
        request = self._request
        opts = request.get("stream_options")
        self._include_usage = bool(isinstance(opts, dict) and opts.get("include_usage"))
        n = request.get("n")
        self._n = n if isinstance(n, int) and n > 0 else None
        self._assembler = ChatAssembler(keep_text=keep_text, on_text=self._leaks.scan)
        self._done_frame: int | None = None
        # The choice the lane's text goes to, and its text parts (None without ``keep_text``).
        self._lane_choice = _NO_CHOICE
        self._lane_parts: list[str] | None = None
        self._lane_head: tuple[str | None, Any, Any] = (None, None, None)

    @staticmethod
    def _tool_entry(tool: dict[str, Any]) -> tuple[Any, Any]:
        """A chat tool nests its name and schema under ``function``."""
        fn = tool.get("function")
        return (fn.get("name"), fn.get("parameters")) if isinstance(fn, dict) else (None, None)

    @property
    def saw_content(self) -> bool:
        return self._assembler.saw_token

    @property
    def saw_done(self) -> bool:
        return self._done_frame is not None

    def _on_event(self, event: SSEEvent) -> None:
        self._events += 1
        data = event.data
        if self._done_frame is not None:
            self._once("after_done", FindingKind.FRAME_AFTER_DONE, f"event after [DONE]: {data[:80]!r}")
        name = event.event
        if name != "message" or data == "[DONE]":
            if name == "error":
                self._on_error(data)
            elif data == "[DONE]" and self._done_frame is None:
                self._done_frame = self._frames
            elif name not in self.kinds.events:
                self._unknown_kind(name)  # named events carry no chat chunks (vendor metadata)
            return
        try:
            chunk = _decode_chunk(data)
        except _TYPED_MISS:
            pass  # not the common shape: the generic path below says what is wrong with it
        else:
            if chunk.error is _UNSET:
                self._chunks += 1
                choices = chunk.choices
                steady = (choices is not None and len(choices) == 1 and chunk.usage is None
                          and choices[0].index in self._assembler.choices and self._may_learn)
                problems = self._assembler.add_typed(chunk)
                if problems:
                    for problem in problems:
                        self._find(FindingKind.CHUNK_SCHEMA, problem)
                elif steady:
                    self._learn_chat_lane(event, chunk)
                return
        obj = self._json_object(data, "chunk")
        if obj is None:
            return
        if "error" in obj and not obj.get("choices"):
            self._on_error(data, obj)
            return
        self._chunks += 1
        self._unknown_fields(obj)
        for problem in self._assembler.add(obj):
            self._find(FindingKind.CHUNK_SCHEMA, problem)

    def _unknown_fields(self, chunk: dict[str, Any]) -> None:
        """Record the fields of a chunk, its choices and their deltas that the vocabulary does not
        know (``chunk.<name>``, ``choice.<name>``, ``delta.<name>``): a server's new field passes
        through byte for byte and is never a verdict (``docs/design/guarantees.md`` guarantee 6). Only chunks
        the typed decoding refused come here, which every chunk with such a field is."""
        fields, deltas = self.kinds.fields, self.kinds.deltas
        for key in chunk:
            if "chunk." + key not in fields:
                self._unknown_kind("chunk." + key)
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            return
        for choice in choices:
            if not isinstance(choice, dict):
                continue
            for key in choice:
                if "choice." + key not in fields:
                    self._unknown_kind("choice." + key)
            delta = choice.get("delta")
            if delta is None:
                delta = choice.get("message")  # folded as the delta (``ChatAssembler``)
            if isinstance(delta, dict):
                for key in delta:
                    if key not in deltas:
                        self._unknown_kind("delta." + key)

    def _learn_chat_lane(self, event: SSEEvent, chunk: ChatChunk) -> None:
        """A chunk the assembler folded as the common one (one choice it knew, text content and
        nothing else) becomes the stream's lane, when its head is the assembler's already."""
        asm = self._assembler
        assert chunk.choices is not None
        raw = chunk.choices[0]
        delta = raw.delta
        if (delta is None or raw.message is not None or raw.finish_reason or delta.role is not None
                or delta.tool_calls is not None or delta.reasoning_content is not None
                or delta.reasoning is not None or not isinstance(delta.content, str)
                or delta.refusal is not None or delta.audio is not None
                or delta.function_call is not None
                or chunk.id != asm.last_id or chunk.model != asm.model
                or chunk.system_fingerprint != asm.system_fingerprint):
            return
        if self._learn_lane(event, delta.content, ("choices", 0, "delta", "content")):
            self._lane_choice = choice = asm.choices[raw.index]
            self._lane_parts = choice.content_parts if asm.keep_text else None
            self._lane_head = (chunk.id, chunk.model, chunk.system_fingerprint)

    def _lane_state(self) -> bool:
        asm = self._assembler
        cid, model, fingerprint = self._lane_head
        return (self._done_frame is None and self._lane_choice is not _NO_CHOICE
                and cid == asm.last_id and model == asm.model
                and fingerprint == asm.system_fingerprint)

    def _lane_fold(self, text: str) -> None:
        """The lane's chunk with ``text``, folded as ``add_typed`` folds the common chunk (the
        assembler's ``on_text`` is this checker's leak scan)."""
        self._events += 1
        self._chunks += 1
        choice = self._lane_choice
        choice.saw_content = True
        if text:
            if self._lane_parts is not None:
                self._lane_parts.append(text)
            self._leaks.scan(choice.index, "content", text)
            self._assembler.saw_token = True

    def _finished(self) -> bool:
        choices = self._assembler.choices
        finished = bool(choices) and all(c.finish_reason is not None for c in choices.values())
        return finished and not (self._n and len(choices) < self._n)

    def _clean_ending(self) -> Ending:
        for index in sorted(self._assembler.choices):
            reason = self._assembler.choices[index].finish_reason
            if reason is not None:
                self._finish_reason(reason, f"choice {index} finish_reason")
        if self._error is not None:
            return Ending.ERROR_EVENT  # a finish reason that says the model failed
        done = self._done_frame is not None
        finished = self._finished()
        if done and finished:
            return Ending.COMPLETE
        if done:
            return Ending.NO_FINISH
        return Ending.NO_DONE if finished else Ending.TRUNCATED

    def _final_findings(self, ending: Ending) -> None:
        cut_short = ending not in FINISHED
        for choice in self._assembler.choices.values():
            calls = [call for _, call in sorted(choice.tool_calls.items())]
            finished = choice.finish_reason is not None
            for call in calls:
                self._check_call(f"choice {choice.index} tool call {call.name!r}", call.name,
                                 call.arguments, cut_off=call is calls[-1] and cut_short and not finished)
            legacy = choice.function_call
            if legacy is not None:
                self._check_call(f"choice {choice.index} function_call {legacy.name!r}", legacy.name,
                                 legacy.arguments, cut_off=cut_short and not finished)
            if choice.finish_reason == "tool_calls" and not calls:
                self._find(FindingKind.FINISH_REASON_MISMATCH,
                           f"choice {choice.index}: finish_reason tool_calls without tool calls")
            elif calls and choice.finish_reason in ("stop", "length"):
                self._find(FindingKind.FINISH_REASON_MISMATCH,
                           f"choice {choice.index}: {len(calls)} tool call(s) with finish_reason "
                           f"{choice.finish_reason!r}")
        if self._include_usage and self._assembler.usage is None and not cut_short:
            self._find(FindingKind.MISSING_USAGE,
                       "stream_options.include_usage was asked but no usage chunk came")

    def _ids(self) -> tuple[str | None, str | None, bool]:
        asm = self._assembler
        return asm.first_id, asm.last_id, asm.ids_changed

    def _message(self) -> dict[str, Any]:
        return self._assembler.to_openai()
