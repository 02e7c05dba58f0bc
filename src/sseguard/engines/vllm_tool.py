"""vLLM ``ToolParser`` adapters: one class per registered name, made on first use.

vLLM imports this module when a ``sseguard-*`` tool parser is first looked up (``vllm_plugin``),
and asks it for the class named like the parser (``getattr(module, "sseguard-hermes")``); the
module ``__getattr__`` makes a ``SseguardToolParser`` subclass bound to that family and mode.

How vLLM drives it (docs/design/engine-facts.md, vLLM 0.33.0): ``engine_based_streaming`` makes the serving
code pass only the new text of each delta (so the parser reads ``delta_text`` and nothing is re-scanned) and
call ``finish_streaming()`` once, on the delta that carries the finish reason: that is the parser's
``close()``. The lists ``prev_tool_call_arr`` and ``streamed_args_for_tool`` stay empty, so
``get_remaining_unstreamed_args()`` appends nothing of its own. Call ids are set on a call's first
delta: the markup's own (Kimi's ``functions.NAME:IDX``) or vLLM's ``chatcmpl-tool-…``.

A request that allows no call (``tool_choice: "none"``, or no tools, which vLLM turns into
``"none"``) still reaches an engine-based parser: vLLM runs it and discards the calls it found, so
for such a request the parser passes the text through untouched (``_gate.calls_allowed``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from vllm.entrypoints.generate.base.protocol import (
    DeltaFunctionCall,
    DeltaMessage,
    DeltaToolCall,
    ExtractedToolCallInformation,
    FunctionCall,
    ToolCall,
)
from vllm.renderers.chat_utils import make_tool_call_id
from vllm.tool_parsers.abstract_tool_parser import ToolParser

from sseguard.core.errors import UsageError
from sseguard.core.toolcalls import MarkupError, Parser, family, parser_for
from sseguard.engines import ParserName, class_per_name, tool_parser_names
from sseguard.engines._gate import ClientGate, Step, calls_allowed, parse_whole

_log = logging.getLogger(__name__)


def openai_tools(tools: Sequence[Any]) -> list[dict[str, Any]]:
    """vLLM's tool objects (chat's ``ChatCompletionToolsParam``, Responses' flat ``FunctionTool``) as
    OpenAI chat tool dicts, what ``ToolSpec`` reads."""
    out: list[dict[str, Any]] = []
    for tool in tools:
        data = tool.model_dump(exclude_none=True) if hasattr(tool, "model_dump") else dict(tool)
        if "function" not in data:  # Responses: {"type": "function", "name": …, "parameters": …}
            data = {"type": "function", "function": {k: v for k, v in data.items() if k != "type"}}
        out.append(data)
    return out


def log_errors(errors: list[MarkupError], parser_name: str) -> None:
    """The client never sees rejected markup; the operator's log says what and where (kind and
    index only: the raw text may hold a secret)."""
    for err in errors:
        at = "" if err.index is None else f" (call {err.index})"
        _log.warning("%s: markup not passed on as a call: %s%s", parser_name, err.kind, at)


class SseguardToolParser(ToolParser):
    """sseguard's parser of one family behind vLLM's ``ToolParser`` interface (see the module)."""

    engine_based_streaming = True
    #: the family and mode; set on the per-name subclasses
    sseguard: ParserName = ParserName("hermes")
    registered_as = ""

    def __init__(self, tokenizer: Any, tools: list[Any] | None = None, *args: Any, **kwargs: Any) -> None:
        super().__init__(tokenizer, tools)
        self._gate: ClientGate | None = None

    def _parser(self) -> Parser:
        try:
            return parser_for(self.sseguard.family, openai_tools(self.tools) if self.tools else None)
        except UsageError:  # a tools list ToolSpec cannot read: parse without names
            return parser_for(self.sseguard.family)

    def adjust_request(self, request: Any) -> Any:
        """Markers that the tokenizer holds as added tokens must reach the parser as text."""
        request = super().adjust_request(request)
        try:
            added = self.model_tokenizer.get_added_vocab()
        except Exception:  # a tokenizer without added tokens: the markers are plain text
            added = {}
        if any(marker in added for marker in family(self.sseguard.family).markers):
            request.skip_special_tokens = False
        return request

    def extract_tool_calls(self, model_output: str, request: Any) -> Any:
        if not _allows_calls(request):
            return ExtractedToolCallInformation(tools_called=False, tool_calls=[],
                                                content=model_output or None)
        step, gate = parse_whole(self._parser(), model_output, make_tool_call_id)
        log_errors(gate.errors, self.registered_as)
        calls = [ToolCall(id=piece.id, type="function",
                          function=FunctionCall(name=piece.name or "", arguments=piece.arguments))
                 for piece in step.calls]
        return ExtractedToolCallInformation(tools_called=bool(calls), tool_calls=calls,
                                            content=step.content or None)

    def extract_tool_calls_streaming(self, previous_text: str, current_text: str, delta_text: str,
                                     previous_token_ids: Sequence[int], current_token_ids: Sequence[int],
                                     delta_token_ids: Sequence[int], request: Any) -> Any:
        if not _allows_calls(request):
            return DeltaMessage(content=delta_text) if delta_text else None
        if self._gate is None:
            self._gate = ClientGate(self._parser(), stream=self.sseguard.stream, new_id=make_tool_call_id)
        return _delta(self._gate.feed(delta_text))

    def finish_streaming(self) -> Any:
        """The end of the stream: the parser's ``close()``."""
        if self._gate is None:
            return None
        gate, self._gate = self._gate, None
        step = gate.close()
        log_errors(gate.errors, self.registered_as)
        return _delta(step)


def _allows_calls(request: Any) -> bool:
    """vLLM's request (chat or Responses) lets the model call; a caller without a request (none of
    vLLM's own) is taken to allow calls, as the parser did before."""
    if request is None:
        return True
    return calls_allowed(getattr(request, "tools", None), getattr(request, "tool_choice", None))


def _delta(step: Step) -> Any:
    """A ``DeltaMessage`` with only the fields that carry something (vLLM serializes with
    ``exclude_unset``: a field passed as None would reach the client as ``null``)."""
    if not step:
        return None
    fields: dict[str, Any] = {}
    if step.content:
        fields["content"] = step.content
    if step.reasoning:
        fields["reasoning"] = step.reasoning
    if step.calls:
        calls = []
        for piece in step.calls:
            if piece.name is not None:
                calls.append(DeltaToolCall(id=piece.id, type="function", index=piece.index,
                                           function=DeltaFunctionCall(name=piece.name,
                                                                      arguments=piece.arguments)))
            else:
                calls.append(DeltaToolCall(index=piece.index,
                                           function=DeltaFunctionCall(arguments=piece.arguments)))
        fields["tool_calls"] = calls
    return DeltaMessage(**fields)


#: The parser class registered as ``name`` (``sseguard-<family>[-stream]``), made once.
__getattr__ = class_per_name(__name__, SseguardToolParser, tool_parser_names,
                             lambda name, meaning: {
                                 "registered_as": name,
                                 "__doc__": f"sseguard's {meaning.family} parser "
                                            f"({'stream' if meaning.stream else 'hold'})."})
