"""The Gemini writer: markup in ``text`` parts becomes ``functionCall`` parts.

Each candidate gets a parser. Gemini sends a function call whole, in one part (``name``, ``args`` an
object, an ``id`` only where the model wrote its own: Kimi's ``functions.NAME:IDX``; Gemini's own
calls come without one), so a repaired call goes out once its markup has ended, as a ``functionCall``
part of the record in which it ended. Its arguments are the parser's JSON, which must be an object:
anything else fails the stream like markup that cannot be parsed. Text before and after a call stays
in ``text`` parts; reasoning the family wrote in its markup (Harmony's ``analysis`` channel) goes out
as a ``"thought": true`` part. ``finishReason`` stays as it came: Gemini ends an answer of calls with
``STOP``, as it ends one of text (it has no reason of chat's ``tool_calls`` kind).

Every upstream record goes out as one record, in the body's framing: with ``?alt=sse`` a ``data:``
frame; in the JSON array the element with the bytes before it (the ``[`` or the separator), so that
the array stays one JSON document and the guard's error element can follow whatever went last. A record
whose text the parser holds back (a possible marker, or a call still being written) goes out with an
empty text part, the shape of Gemini's own closing records; a record whose text parts are all plain
text goes out byte-identical.
"""

from __future__ import annotations

from typing import Any

import msgspec

from sseguard.core.contract.gemini.request import function_declarations, parameters_schema
from sseguard.core.sse import SSEEvent
from sseguard.core.toolcalls import MarkupErrorKind, Reasoning, Text, ToolCallEnd
from sseguard.proxy.repair.base import ChoiceRepair, Repair, chat_tools, json_object, plain

_encode = msgspec.json.encode
_decode = msgspec.json.decode
#: What may stand before an element of the JSON array: a byte-order mark, whitespace, ``[`` and ``,``.
_PREFIX = b"\xef\xbb\xbf \t\r\n[,"
#: How Google ends an ``?alt=sse`` frame.
_SSE_END = b"\r\n\r\n"
#: The separator before an element the repair makes up (Google's own, as the chaos server writes it).
_SEPARATOR = b",\r\n"
#: Part fields that belong to the text itself, not carried to the parts made of it.
_TEXT_FIELDS = frozenset({"text", "thought"})


def gemini_tools(request: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The request's ``functionDeclarations`` in the chat shape the parsers read; a declaration's
    ``parametersJsonSchema`` as it is, or its ``parameters`` (Gemini's OpenAPI subset) translated;
    either spelling of the fields (``function_declarations`` reads them as the API does).
    """
    declarations = function_declarations(request.get("tools"))
    if declarations is None:
        return None
    entries = []
    for declaration in declarations:
        entries.append({"name": declaration.get("name"),
                        "parameters": parameters_schema(declaration)})
    return chat_tools(entries, "parameters")


class GeminiRepairFrames(Repair):
    """Gemini ``streamGenerateContent``, both framings: markup in ``text`` parts becomes
    ``functionCall`` parts (see the module)."""

    def __init__(self, family: str, tools: list[Any] | None) -> None:
        super().__init__(family, tools)
        self._candidates: dict[int, ChoiceRepair] = {}
        self._array: bool | None = None  # the JSON-array framing; None until the first record
        self._last: dict[str, Any] = {}  # the last record with candidates: flush's record copies it

    @staticmethod
    def tools_of(request: dict[str, Any]) -> list[Any] | None:
        """The ``functionDeclarations`` (``gemini_tools``)."""
        return gemini_tools(request)

    # ── Frames ─────────────────────────────────────────────────────────────────────────────────
    def transform(self, event: SSEEvent) -> bytes:
        # The array's closing ``]`` comes as an event of its own name: it goes out as it came.
        if self.failure is not None or event.event != "message":
            return event.raw
        if self._array is None:
            self._array = event.raw.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"[", b"{")
        obj = json_object(event)
        candidates = obj.get("candidates") if obj is not None else None
        if obj is None or not isinstance(candidates, list):
            return event.raw  # an error record, a blocked prompt's feedback: nothing to repair
        self._last = obj
        out: list[Any] = []
        for cand in candidates:
            out.append(self._candidate(cand))
            if self.failure is not None:
                return self._failed(event.raw, obj)
        if all(new is old for new, old in zip(out, candidates, strict=True)):
            return event.raw
        return self._record(event.raw, {**obj, "candidates": out})

    def flush(self) -> bytes:
        """Close the parsers of candidates that never got a ``finishReason``: what they still hold
        goes out in one record more."""
        made: list[dict[str, Any]] = []
        for index, state in sorted(self._candidates.items()):
            if state.closed:
                continue
            state.closed = True
            parts = self._parts(state, index, state.parser.close(), {})
            if self.failure is not None:
                return b""
            if parts:
                made.append({"content": {"parts": parts, "role": "model"}, "index": index})
        if not made:
            return b""
        # The last record's own fields (ids, model version, its usage: Gemini's usage is cumulative).
        fields = {k: v for k, v in self._last.items() if k not in ("candidates", "promptFeedback")}
        body = _encode({"candidates": made, **fields})
        return _SEPARATOR + body if self._array else b"data: " + body + _SSE_END

    # ── one candidate ──────────────────────────────────────────────────────────────────────────
    def _candidate(self, cand: Any) -> Any:
        """The candidate as the client gets it: the very object when nothing in it changed."""
        if not isinstance(cand, dict):
            return cand
        # Protocol-buffer JSON leaves out a zero: candidate 0 often comes without its index.
        index = cand.get("index", 0)
        if not isinstance(index, int) or isinstance(index, bool):
            return cand
        state = self._candidates.get(index)
        if state is None:
            state = self._candidates[index] = self.new_state()
        content = cand.get("content")
        parts = content.get("parts") if isinstance(content, dict) else None
        changed = False
        new_parts: list[Any] = []
        for part in parts if isinstance(parts, list) else ():
            made = self._part(state, index, part)
            if self.failure is not None:
                return cand
            if made is None:
                new_parts.append(part)
            else:
                new_parts.extend(made)
                changed = True
        if cand.get("finishReason") is not None and not state.closed:
            state.closed = True
            made = self._parts(state, index, state.parser.close(), {})
            if self.failure is not None:
                return cand
            if made:
                new_parts.extend(made)
                changed = True
        if not changed:
            return cand
        base = content if isinstance(content, dict) else {"role": "model"}
        return {**cand, "content": {**base, "parts": new_parts or [{"text": ""}]}}

    def _part(self, state: ChoiceRepair, index: int, part: Any) -> list[dict[str, Any]] | None:
        """The parts one upstream part becomes; None: it goes out as it came."""
        if not isinstance(part, dict):
            return None
        text = part.get("text")
        if not isinstance(text, str) or not text:
            return None  # a call, a function response, an empty text: nothing for the parser
        if part.get("thought") is True:
            # The upstream's own thought reaches the client as it is: a leak there is a leak.
            self.scan(self.upstream_key(index), "thought", text)
            return None
        if state.closed:  # text after the candidate's finishReason: the checker reports it
            self.scan(state.key, "content", text)
            return None
        events = state.parser.feed(text)
        if plain(events, text):
            self.scan(state.key, "content", text)
            return None
        return self._parts(state, index, events, {k: v for k, v in part.items()
                                                  if k not in _TEXT_FIELDS})

    def _parts(self, state: ChoiceRepair, index: int, events: list[Any],
               extra: dict[str, Any]) -> list[dict[str, Any]]:
        """Parser events as Gemini parts. ``extra``: the fields of the upstream part besides its
        text (a ``thoughtSignature``), carried to the first part made of it, or to an empty text part
        when the parser holds all of it back."""
        parts: list[dict[str, Any]] = []
        for out in self.drive(state, events, f"candidate {index}"):
            if isinstance(out, Text):
                parts.append({"text": out.text})
            elif isinstance(out, Reasoning):
                parts.append({"text": out.text, "thought": True})
            elif isinstance(out, ToolCallEnd):
                args = self._args(out)
                if args is None:
                    return []
                call: dict[str, Any] = {"name": out.name, "args": args}
                parts.append({"functionCall": {"id": out.id, **call} if out.id is not None else call})
            # A call's start and argument fragments: Gemini sends a call whole, at its end.
        if self.failure is not None:
            return []
        if extra:
            if parts:
                parts[0] = {**parts[0], **extra}
            else:
                parts.append({"text": "", **extra})
        return parts

    def _args(self, end: ToolCallEnd) -> dict[str, Any] | None:
        """A call's arguments as the object ``functionCall.args`` is; None (and ``failure``) when
        they are not one."""
        try:
            args = _decode(end.arguments) if end.arguments.strip() else {}
        except msgspec.DecodeError:
            args = None
        if isinstance(args, dict):
            return args
        kind = MarkupErrorKind.BAD_PARAM_JSON
        self.failure = (f"markup_{kind}",
                        f"the arguments of the call to {end.name!r} in the upstream's text are not a "
                        f"JSON object ({kind} in call {end.index}); it is not shown as content")
        return None

    # ── output ─────────────────────────────────────────────────────────────────────────────────
    def _record(self, raw: bytes, obj: dict[str, Any]) -> bytes:
        """``obj`` in the framing ``raw`` came in: an array element keeps the bytes before it."""
        body = _encode(obj)
        if self._array:
            return raw[:len(raw) - len(raw.lstrip(_PREFIX))] + body
        return b"data: " + body + _SSE_END

    def _failed(self, raw: bytes, obj: dict[str, Any]) -> bytes:
        """The record in which the markup could not be parsed: none of its text goes out. The record
        that opens the JSON array goes out emptied, for its ``[``: the guard's error element that
        follows (``,{"error": …}]``) then closes one valid array."""
        prefix = raw[:len(raw) - len(raw.lstrip(_PREFIX))]
        if not (self._array and b"[" in prefix):
            return b""
        emptied = [{**{k: v for k, v in c.items() if k != "finishReason"},
                    "content": {"parts": [{"text": ""}], "role": "model"}}
                   if isinstance(c, dict) else c for c in obj["candidates"]]
        return prefix + _encode({**obj, "candidates": emptied})
