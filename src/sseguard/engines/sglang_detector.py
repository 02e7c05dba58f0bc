"""SGLang detectors: sseguard's parsers behind ``BaseFormatDetector`` and
``BaseReasoningFormatDetector``, one class per registered name (``sglang_plugin`` makes them).

How SGLang 0.5.23 drives a tool detector (docs/design/engine-facts.md): one per request and choice, built with
no arguments; ``parse_streaming_increment`` per delta, ``finish`` once on the finishing delta,
``detect_and_parse`` for a whole completion. An item with a name opens a call (the server adds the
id), items without one append arguments. ``finish_reason`` becomes ``tool_calls`` on a natural stop
when a call went out, unless ``incomplete_tool_call_indices`` is non-empty: in ``-stream`` mode the
calls the parser voided after they went out are reported there. ``prev_tool_call_arr`` and
``streamed_args_for_tool`` stay empty, so the server appends nothing of its own.

SGLang makes call ids itself; a call whose markup carries its own (Kimi's ``functions.NAME:IDX``)
travels as ``SseguardCallItem.call_id``, which ``sglang_plugin``'s hook on the server's id maker
returns instead.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from sglang.srt.function_call.base_format_detector import BaseFormatDetector
from sglang.srt.function_call.core_types import StreamingParseResult, StructureInfo, ToolCallItem
from sglang.srt.parser.reasoning_parser import BaseReasoningFormatDetector
from sglang.srt.parser.reasoning_parser import StreamingParseResult as ReasoningResult

from sseguard.core.errors import UsageError
from sseguard.core.reasoning import END_THINK, THINK
from sseguard.core.toolcalls import Parser, Text, parser_for
from sseguard.engines import ParserName
from sseguard.engines._frame import call_frame
from sseguard.engines._gate import ClientGate, Step, parse_whole
from sseguard.engines._reasoning import ReasoningSplit

_log = logging.getLogger(__name__)


class SseguardCallItem(ToolCallItem):
    """A call piece with the markup's own call id, where it has one."""

    call_id: str | None = None


def _no_id() -> str:
    return ""  # SGLang makes the id; an empty one means "yours"


def openai_tools(tools: list[Any] | None) -> list[dict[str, Any]] | None:
    """SGLang's ``Tool`` objects as OpenAI tool dicts (what ``ToolSpec`` reads)."""
    if not tools:
        return None
    return [t.model_dump(exclude_none=True) if hasattr(t, "model_dump") else dict(t) for t in tools]


class SseguardDetector(BaseFormatDetector):
    """sseguard's parser of one family as an SGLang tool-call detector (see the module)."""

    sseguard: ParserName = ParserName("hermes")
    registered_as = ""

    def __init__(self) -> None:
        super().__init__()
        self._gate: ClientGate | None = None
        #: client indexes of streamed calls the parser voided (read by SGLang's finish reason)
        self.incomplete_tool_call_indices: set[int] = set()

    def _parser(self, tools: list[Any] | None) -> Parser:
        try:
            return parser_for(self.sseguard.family, openai_tools(tools))
        except UsageError:  # a tools list ToolSpec cannot read: parse without names
            return parser_for(self.sseguard.family)

    @classmethod
    def parses_without_tools(cls) -> bool:
        """A request without tools allows no call (``_gate.calls_allowed``): SGLang then leaves the
        detector out and the answer, call markup and all, reaches the client as content, as for
        ``tool_choice: "none"``."""
        return False

    def has_tool_call(self, text: str) -> bool:
        """Whether ``text`` holds any markup at all (the parser says; no marker guesswork)."""
        parser = self._parser(None)
        return any(not isinstance(ev, Text) for ev in parser.feed(text) + parser.close())

    def detect_and_parse(self, text: str, tools: list[Any]) -> Any:
        step, gate = parse_whole(self._parser(tools), text, _no_id)
        _log_errors(gate, self.registered_as)
        return _result(step)

    def parse_streaming_increment(self, new_text: str, tools: list[Any]) -> Any:
        if self._gate is None:
            self._gate = ClientGate(self._parser(tools), stream=self.sseguard.stream, new_id=_no_id)
        return _result(self._gate.feed(new_text))

    def finish(self, tools: list[Any]) -> Any:
        """The end of the stream: the parser's ``close()``."""
        if self._gate is None:
            return StreamingParseResult()
        step = self._gate.close()
        self.incomplete_tool_call_indices = set(self._gate.void)
        _log_errors(self._gate, self.registered_as)
        return _result(step)

    def supports_structural_tag(self) -> bool:
        """Constrained calls need a JSON frame in the family's markup (``_frame``)."""
        return call_frame(self.sseguard.family, "f") is not None

    def structure_info(self) -> Callable[[str], Any]:
        family_name = self.sseguard.family

        def info(name: str) -> Any:
            frame = call_frame(family_name, name)
            if frame is None:
                raise NotImplementedError(f"{self.registered_as}: no JSON call frame for {name!r}")
            return StructureInfo(begin=frame.begin, end=frame.end, trigger=frame.trigger)

        return info


def _result(step: Step) -> Any:
    """Reasoning a family writes in its own markup (Harmony's analysis channel) has no place in
    SGLang's tool result; it is dropped, never shown as content (docs/engines.md, limits)."""
    calls = [SseguardCallItem(tool_index=p.index, name=p.name, parameters=p.arguments,
                              call_id=p.id or None) for p in step.calls]
    return StreamingParseResult(normal_text=step.content, calls=calls)


def _log_errors(gate: ClientGate, name: str) -> None:
    for err in gate.errors:
        at = "" if err.index is None else f" (call {err.index})"
        _log.warning("%s: markup not passed on as a call: %s%s", name, err.kind, at)


class SseguardReasoningDetector(BaseReasoningFormatDetector):
    """``<think>…</think>`` split by ``ThinkSplitter`` for one family. ``force_reasoning``: the
    output starts inside reasoning (the prompt opened it)."""

    sseguard: ParserName = ParserName("hermes")

    def __init__(self, stream_reasoning: bool = True, force_reasoning: bool = False,
                 **kwargs: Any) -> None:
        # reasoning_default: without a template toggle, SGLang forces reasoning for this parser only
        # when the request asks for it (chat_template_kwargs {"thinking": true}, DeepSeek's toggle);
        # otherwise the text decides (a leading <think>)
        super().__init__(THINK, END_THINK, force_reasoning=force_reasoning,
                         stream_reasoning=stream_reasoning, reasoning_default="explicit_thinking")
        self._split = ReasoningSplit(self.sseguard.family, starts_in_reasoning=force_reasoning)
        self._force = force_reasoning

    def detect_and_parse(self, text: str) -> Any:
        split = ReasoningSplit(self.sseguard.family, starts_in_reasoning=self._force)
        reasoning, answer = split.feed(text)
        more_reasoning, more_answer = split.close(settle=False)  # the tool detector reads it
        return ReasoningResult(normal_text=answer + more_answer, reasoning_text=reasoning + more_reasoning)

    def parse_streaming_increment(self, new_text: str) -> Any:
        reasoning, answer = self._split.feed(new_text)
        return ReasoningResult(normal_text=answer, reasoning_text=reasoning)

    def finish(self) -> Any:
        reasoning, answer = self._split.close(settle=False)
        return ReasoningResult(normal_text=answer, reasoning_text=reasoning)
