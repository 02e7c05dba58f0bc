"""The Gemini ``streamGenerateContent`` streaming contract, checked over raw body bytes, both framings.

A Gemini stream is a sequence of ``GenerateContentResponse`` records, each a slice of the answer:
``candidates[i].content.parts`` (text parts are deltas, ``"thought": true`` parts are reasoning, a
``functionCall`` part arrives whole), and the record that ends a candidate carries its
``finishReason``. With ``?alt=sse`` (what the SDKs and Gemini CLI ask for) each record is one
``data:`` frame and there is **no sentinel**; without it the body is one JSON array streamed element by
element (``jsonarray.py``). The same records give the same verdict in both.

Endings (``docs/design/vocabulary.md``, "The fourth protocol"): ``complete`` when every candidate got a
``finishReason`` (``STOP``, ``MAX_TOKENS``, and the safety stops, which the policy may fail) or the
prompt was blocked (``promptFeedback.blockReason``, no candidates) and the body then ended cleanly;
``truncated`` when it ended cleanly before that; ``no_done`` cannot happen. A top-level ``error`` record,
or a ``finishReason`` that the reason table (``vocabulary.py``) classes as failed — or does not name at
all — is ``error_event``. A JSON array that is never closed by its
``]`` is ``cut_mid_frame``: the array is one JSON document, and a body without its end is a cut one.

``GeminiAssembler`` folds the records into the final ``GenerateContentResponse`` as a client joining
the chunks would (google-genai yields the records and leaves the joining to its caller; ADK's
aggregator joins them like this): text joined, thoughts apart, function calls whole, the last usage.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import msgspec
from msgspec import UNSET

from sseguard.core.contract._base import FINISHED, JSON_ERRORS, CheckerBase, FrameTail
from sseguard.core.contract.folding import ToolFacts, is_int
from sseguard.core.contract.gemini.assembler import CandidateState, GeminiAssembler, TypedResponse
from sseguard.core.contract.gemini.assembler import decode_response as _decode_response
from sseguard.core.contract.gemini.partial import StreamedCall
from sseguard.core.contract.gemini.relay import ARRAY_CLOSE
from sseguard.core.contract.gemini.request import (
    function_declarations,
    parameters_schema,
)
from sseguard.core.contract.gemini.vocabulary import KINDS, REASONS
from sseguard.core.jsonarray import JsonArrayDecoder, JsonElement
from sseguard.core.sse import SSEDecoder, SSEEvent
from sseguard.core.verdict import Api, Ending, FindingKind

#: Candidate fields folded by the checker itself; the others are kept as given, the last one wins.
_FOLDED = frozenset({"content", "index", "finishReason"})
_BOM = b"\xef\xbb\xbf"
_WHITESPACE = b" \t\r\n"


_TYPED_MISS = (msgspec.ValidationError, *JSON_ERRORS)
#: The lane's record before there is a lane (``_lane_state`` refuses until one is learned).
_NO_RECORD = TypedResponse([])


class GeminiFrames:
    """Both framings behind the engine's decoder surface: the body's first byte tells which.

    ``[`` (or a bare ``{``) is the JSON-array framing, anything else SSE. Each array element comes out
    as an ``SSEEvent`` whose ``data`` is the element, so one checker serves both.
    """

    __slots__ = ("_array", "_head", "_sse")

    def __init__(self) -> None:
        self._sse: SSEDecoder | None = None
        self._array: JsonArrayDecoder | None = None
        self._head = b""  # whitespace (and a byte-order mark) before the first telling byte

    @property
    def sse(self) -> SSEDecoder | None:
        """The SSE decoder, once the body told it is SSE (all it reads goes there)."""
        return self._sse

    @property
    def framing(self) -> str | None:
        """``"sse"``, ``"array"``, or None while no telling byte has arrived."""
        return "sse" if self._sse is not None else "array" if self._array is not None else None

    def feed(self, data: bytes) -> list[SSEEvent]:
        if self._sse is not None:
            return self._sse.feed(data)
        if self._array is not None:
            return _events(self._array.feed(data))
        head = self._head + data
        rest = head[len(_BOM):] if head.startswith(_BOM) else head
        rest = rest.lstrip(_WHITESPACE)
        if not rest or (len(head) < len(_BOM) and _BOM.startswith(head)):
            self._head = head
            return []
        self._head = b""
        if rest[0] in b"[{":
            self._array = JsonArrayDecoder(closes=True)
            return _events(self._array.feed(head))
        self._sse = SSEDecoder()
        return self._sse.feed(head)

    def close(self) -> FrameTail:
        if self._sse is not None:
            return self._sse.close()
        if self._array is None:
            self._array = JsonArrayDecoder()  # only whitespace came: nothing, or a cut byte-order mark
            self._array.feed(self._head)
        return self._array.close()


def _events(elements: list[JsonElement]) -> list[SSEEvent]:
    return [SSEEvent(e.text, ARRAY_CLOSE if e.closes else "message", raw=e.raw) for e in elements]


def looks_like_gemini(obj: Any) -> bool:
    """A decoded record is a ``GenerateContentResponse``: candidates, or a prompt's feedback, with
    the response's own fields (``responseId``, ``modelVersion``, ``usageMetadata``)."""
    return isinstance(obj, dict) and (isinstance(obj.get("candidates"), list)
                                      or isinstance(obj.get("promptFeedback"), dict)) \
        and ("responseId" in obj or "modelVersion" in obj or "usageMetadata" in obj)


class GeminiChecker(CheckerBase):
    """Feed it one ``streamGenerateContent`` body, either framing; ``close()`` returns the ``Verdict``.

    ``request`` is the request body (``tools[].functionDeclarations`` enable the tool checks);
    ``markup`` names the tool-call markup families looked for in text and thought parts.
    """

    api = Api.GEMINI
    reasons = REASONS
    kinds = KINDS
    _leak_place = "candidate"

    def __init__(self, request: dict[str, Any] | None = None, *,
                 markup: str | Iterable[str] | None = "all", keep_text: bool = True) -> None:
        super().__init__(request, markup=markup, keep_text=keep_text)
        self._tools = ToolFacts(function_declarations(self._request.get("tools")), self._tool_entry)
        self._frames_in = GeminiFrames()
        self._decoder = self._frames_in
        self._asm = GeminiAssembler(keep_text=keep_text)
        self._blocked: str | None = None  # promptFeedback.blockReason
        self._last_usage: Any = None  # the usageMetadata of the last record
        # The lane's record as learned and the candidate its text goes to (``_lane_fold``).
        self._lane_record = _NO_RECORD
        self._lane_state_of: CandidateState | None = None
        self._lane_thought = False
        #: A function call whose arguments are still streaming (``partialArgs``), per candidate.
        self._streaming: dict[int, StreamedCall] = {}

    @staticmethod
    def _tool_entry(tool: dict[str, Any]) -> tuple[Any, Any]:
        """A function declaration (``function_declarations``: either spelling): its name and its
        parameters as JSON Schema."""
        return tool.get("name"), parameters_schema(tool)

    @property
    def framing(self) -> str | None:
        """Which framing the body used: ``"sse"`` (``?alt=sse``), ``"array"``, or None yet."""
        return self._frames_in.framing

    @property
    def saw_content(self) -> bool:
        return self._asm.saw_token

    @property
    def saw_done(self) -> bool:
        """Every candidate got its ``finishReason`` (or the prompt was blocked)."""
        return self._finished()

    # ── folding ───────────────────────────────────────────────────────────────────────────────
    def _on_event(self, event: SSEEvent) -> None:
        if self._decoder is self._frames_in and self._frames_in.sse is not None:
            # The body is SSE (its first event says so): read it with the SSE decoder itself from
            # here on, one call less per read.
            self._decoder = self._frames_in.sse
        data = event.data
        if event.event == ARRAY_CLOSE:
            self._frames -= 1  # the array's end is no record: frames count records, as in SSE
            return
        if data == "[DONE]" and event.event == "message":
            return  # chat's sentinel, appended by a gateway: neither content nor an ending
        self._events += 1
        if event.event == "error":
            self._on_error(data)
            return
        if event.event != "message":
            return  # Gemini names no events; another name is a vendor's keep-alive or metadata
        try:
            record = _decode_response(data)
        except _TYPED_MISS:
            pass  # not the common shape: the generic path below folds it or says what is wrong
        else:
            steady = (self._may_learn and len(record.candidates) == 1
                      and record.candidates[0].index in self._asm.candidates)
            if self._typed(record):
                self._chunks += 1
                if steady:
                    self._learn_gemini_lane(event, record)
                return
        obj = self._json_object(data, "record")
        if obj is None:
            return
        if "error" in obj:
            self._on_error(data, obj)
            return
        self._chunks += 1
        self._record(obj)

    def _learn_gemini_lane(self, event: SSEEvent, record: TypedResponse) -> None:
        """A record of one candidate already known with one text part (no signature) becomes
        the stream's lane; what ``_typed`` set from it is kept to be set again."""
        cand = record.candidates[0]
        parts = cand.content.parts
        if len(parts) != 1 or parts[0].thoughtSignature is not UNSET:
            return
        if self._learn_lane(event, parts[0].text,
                            ("candidates", 0, "content", "parts", 0, "text")):
            self._lane_state_of = self._asm.candidates[cand.index]
            self._lane_record = record
            self._lane_thought = parts[0].thought is True

    def _lane_state(self) -> bool:
        state = self._lane_state_of
        return (state is not None and state.finish is None
                and self._asm.candidates.get(state.index) is state)

    def _lane_fold(self, text: str) -> None:
        """The lane's record with ``text``, folded as ``_typed`` folds it."""
        self._events += 1
        self._chunks += 1
        record = self._lane_record
        self._take_head(record)
        asm = self._asm
        state = self._lane_state_of
        assert state is not None  # (``_lane_state``)
        role = record.candidates[0].content.role
        if role is not UNSET:
            state.role = role
        thought = self._lane_thought
        asm.add_text(state, text, thought, None)
        if text:
            self._leaks.scan(state.index, "thought" if thought else "text", text)

    def _take_head(self, record: TypedResponse) -> None:
        """A typed record's fields besides its candidates: the last given wins."""
        asm = self._asm
        response = asm.response
        usage = record.usageMetadata
        if usage is UNSET:
            self._last_usage = None
        else:
            self._last_usage = response["usageMetadata"] = usage
        if record.modelVersion is not UNSET:
            response["modelVersion"] = record.modelVersion
        if record.responseId is not UNSET:
            response["responseId"] = record.responseId
            asm.ids.see(record.responseId)
        if record.createTime is not UNSET:
            response["createTime"] = record.createTime

    def _typed(self, record: TypedResponse) -> bool:
        """Fold a record of the common shape as ``_record`` would; False (nothing folded) when one
        of its candidates finishes or has finished: those records take the generic path."""
        asm = self._asm
        states = asm.candidates
        for cand in record.candidates:
            state = states.get(cand.index)
            if cand.finishReason is not UNSET or (state is not None and state.finish is not None):
                return False
        self._take_head(record)
        scan = self._leaks.scan
        for cand in record.candidates:
            state = states.get(cand.index) or asm.candidate(cand.index)
            content = cand.content
            if content.role is not UNSET:
                state.role = content.role
            for part in content.parts:
                signature = part.thoughtSignature
                thought = part.thought is True
                asm.add_text(state, part.text, thought, None if signature is UNSET else signature)
                if part.text:
                    scan(state.index, "thought" if thought else "text", part.text)
        return True

    def _record(self, obj: dict[str, Any]) -> None:
        asm = self._asm
        usage = obj.get("usageMetadata")
        if usage is not None and not isinstance(usage, dict):
            self._find(FindingKind.CHUNK_SCHEMA, "usageMetadata is not an object")
        self._last_usage = usage
        for key, value in obj.items():
            if key != "candidates":
                asm.response[key] = value
        asm.ids.see(obj.get("responseId"))
        feedback = obj.get("promptFeedback")
        if isinstance(feedback, dict) and isinstance(feedback.get("blockReason"), str):
            self._blocked = feedback["blockReason"]
        candidates = obj.get("candidates")
        if candidates is None:
            return
        if not isinstance(candidates, list):
            self._find(FindingKind.CHUNK_SCHEMA, "candidates is not a list")
            return
        for cand in candidates:
            if not isinstance(cand, dict):
                self._find(FindingKind.CHUNK_SCHEMA, "a candidate is not an object")
                continue
            # Protocol-buffer JSON leaves out a zero: candidate 0 often comes without its index.
            index = cand.get("index", 0)
            if not is_int(index):
                self._find(FindingKind.CHUNK_SCHEMA, "candidate index is not an integer")
                continue
            self._candidate(asm.candidate(index), cand)

    def _candidate(self, state: CandidateState, cand: dict[str, Any]) -> None:
        content = cand.get("content")
        parts: Any = None
        if isinstance(content, dict):
            parts = content.get("parts")
            if isinstance(content.get("role"), str):
                state.role = content["role"]
            if parts is not None and not isinstance(parts, list):
                self._find(FindingKind.CHUNK_SCHEMA, f"candidate {state.index}: parts is not a list")
                parts = None
        elif content is not None:
            self._find(FindingKind.CHUNK_SCHEMA, f"candidate {state.index}: content is not an object")
        if parts:
            if state.finish is not None:
                if any(not (isinstance(p, dict) and p.get("text") == "") for p in parts):
                    self._once(f"late#{state.index}", FindingKind.EVENT_ORDER,
                               f"content for candidate {state.index} after its finishReason "
                               f"{state.finish}")
            else:
                for part in parts:
                    self._part(state, part)
        for key, value in cand.items():
            if key not in _FOLDED:
                state.extra[key] = value
        finish = cand.get("finishReason")
        if finish is None:
            return
        if not isinstance(finish, str):
            self._find(FindingKind.CHUNK_SCHEMA, f"candidate {state.index}: finishReason is not a "
                                                 "string")
            return
        if state.finish is None:
            state.finish = finish
            self._flag_streaming(state.index, "at its finishReason")
        self._finish_reason(finish, "finishReason", message=cand.get("finishMessage"))

    def _part(self, state: CandidateState, part: Any) -> None:
        if not isinstance(part, dict):
            self._find(FindingKind.CHUNK_SCHEMA, f"candidate {state.index}: a part is not an object")
            return
        known = self.kinds.blocks
        for key in part:
            if key not in known:
                self._unknown_kind(f"part:{key}")
        text = part.get("text")
        if text is not None:
            if not isinstance(text, str):
                self._find(FindingKind.CHUNK_SCHEMA, f"candidate {state.index}: text is not a string")
                return
            thought = part.get("thought") is True
            self._asm.add_text(state, text, thought, part.get("thoughtSignature"))
            if text:
                self._leaks.scan(state.index, "thought" if thought else "text", text)
            return
        call = part.get("functionCall")
        if call is not None:
            if isinstance(call, dict) and (state.index in self._streaming
                                           or "partialArgs" in call
                                           or call.get("willContinue") is True):
                self._streamed_call(state, part, call)
                return
            self._function_call(state, call)
        self._asm.add_part(state, part)

    def _streamed_call(self, state: CandidateState, part: dict[str, Any],
                       call: dict[str, Any]) -> None:
        """One piece of a call whose arguments stream (``partialArgs`` by ``jsonPath``, the call
        ``willContinue`` until its last piece; pieces after the first carry no name). The call is
        one part of the answer, and its arguments are checked once, when it is complete."""
        where = f"candidate {state.index}"
        for key in call:
            if key not in self.kinds.deltas:
                self._unknown_kind(f"functionCall:{key}")
        streamed = self._streaming.get(state.index)
        name = call.get("name")
        if streamed is None:
            if not isinstance(name, str) or not name:
                self._find(FindingKind.CHUNK_SCHEMA, f"{where}: a streamed functionCall begins "
                                                     "without a name")
                return
            streamed = StreamedCall(name, call.get("args"))
            self._streaming[state.index] = streamed
            whole = {k: v for k, v in part.items() if k != "functionCall"}
            whole["functionCall"] = streamed.call
            if isinstance(call.get("id"), str):
                streamed.call["id"] = call["id"]
            self._asm.add_part(state, whole)
        elif isinstance(name, str) and name and name != streamed.name:
            self._find(FindingKind.CHUNK_SCHEMA, f"{where}: a piece of function call "
                                                 f"{streamed.name!r} names {name!r}")
        problem = streamed.add(call.get("partialArgs"))
        if problem is not None:
            self._find(FindingKind.CHUNK_SCHEMA, f"{where} function call {streamed.name!r}: "
                                                 f"{problem}")
        if call.get("willContinue") is not True:
            del self._streaming[state.index]
            self._check_call(f"{where} function call {streamed.name!r}", streamed.name,
                             json.dumps(streamed.args), cut_off=False)

    def _flag_streaming(self, index: int, when: str) -> None:
        """A call still streaming its arguments where the candidate ends was cut off."""
        streamed = self._streaming.pop(index, None)
        if streamed is not None:
            self._find(FindingKind.TOOL_CALL_UNTERMINATED,
                       f"candidate {index} function call {streamed.name!r} still willContinue "
                       f"{when}: its arguments are cut off")

    def _function_call(self, state: CandidateState, call: Any) -> None:
        """A function call arrives whole: its name and arguments are checked where it came."""
        where = f"candidate {state.index}"
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            self._find(FindingKind.CHUNK_SCHEMA, f"{where}: functionCall without a name")
            return
        args = call.get("args", {})
        if not isinstance(args, dict):
            self._find(FindingKind.CHUNK_SCHEMA, f"{where}: functionCall args is not an object")
            return
        name = call["name"]
        self._check_call(f"{where} function call {name!r}", name, json.dumps(args), cut_off=False)

    # ── the verdict ───────────────────────────────────────────────────────────────────────────
    def _finished(self) -> bool:
        cands = self._asm.candidates
        if not cands:
            return self._blocked is not None
        return all(c.finish is not None for c in cands.values())

    def _clean_ending(self) -> Ending:
        if not self._asm.candidates and self._blocked is not None:
            self._finish_reason(self._blocked, "promptFeedback.blockReason", blocked=True)
            if self._error is not None:
                return Ending.ERROR_EVENT
        return Ending.COMPLETE if self._finished() else Ending.TRUNCATED

    def _final_findings(self, ending: Ending) -> None:
        for index in sorted(self._streaming):
            self._flag_streaming(index, "at the end of the stream")
        if ending not in FINISHED:
            return
        usage = self._last_usage
        if not isinstance(usage, dict):
            self._find(FindingKind.MISSING_USAGE, "the final record carries no usageMetadata")
        elif "candidatesTokenCount" not in usage and self._asm.answered:
            # Protocol-buffer JSON leaves a zero out: no count is only wrong after an answer.
            self._find(FindingKind.MISSING_USAGE,
                       "the final record's usageMetadata has no candidatesTokenCount")

    def _ids(self) -> tuple[str | None, str | None, bool]:
        return self._asm.ids.facts()

    def _message(self) -> dict[str, Any]:
        return self._asm.to_response()
