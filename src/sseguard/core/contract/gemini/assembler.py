"""The final ``GenerateContentResponse`` of a Gemini stream, folded from its records.

google-genai yields the records of ``generate_content_stream`` one by one and leaves joining them to
its caller; ADK's streaming aggregator and the SDK's chat history join them this way: adjacent text
parts of one kind (answer or thought) into one part, function calls and other parts whole in their
place, the last ``finishReason``, usage and model version.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from sseguard.core._renamed import renamed
from sseguard.core.contract.folding import IdWatch, Joined

__all__ = ["CandidateState", "GeminiAssembler", "TypedResponse", "decode_response"]

# ── the common record, typed: the checker's fast path decodes it straight into these ──────────


class Part(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A text part (answer or thought); a part with anything else fails to decode into it."""

    text: str
    thought: bool | UnsetType = UNSET
    thoughtSignature: Any = UNSET


class Content(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A candidate's content of text parts only."""

    parts: list[Part]
    role: str | UnsetType = UNSET


class TypedCandidate(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A candidate with content and index only (a finish, safety ratings… take the generic path)."""

    content: Content
    index: int = 0
    finishReason: str | UnsetType = UNSET


class TypedResponse(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """The common record (one ``GenerateContentResponse`` of the stream), typed: text parts only, no
    finish, nothing else (every other record, and any that is not quite this, takes the generic
    path, which says what is wrong with it). Not ``Record``: that is one request's facts."""

    candidates: list[TypedCandidate]
    usageMetadata: dict[str, Any] | UnsetType = UNSET
    modelVersion: Any = UNSET
    responseId: Any = UNSET
    createTime: Any = UNSET


#: Records of the common shape decode straight into structs: no dict lookups to fold them (and,
#: decoded JSON holding no cycle, no garbage-collector tracking: ``gc=False``).
decode_response = msgspec.json.Decoder(TypedResponse).decode



@dataclass(slots=True)
class CandidateState:
    """One candidate while it streams: its parts so far (text parts joined), its finish, the rest."""

    index: int
    parts: list[dict[str, Any]] = field(default_factory=list)
    texts: dict[int, Joined] = field(default_factory=dict)  # part position → its joined text
    joining: bool | None = None  # the last part is a text part still joining: is it a thought?
    role: str = "model"
    finish: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class GeminiAssembler:
    """Folds ``GenerateContentResponse`` records into the final one, as a client joining chunks would.

    Adjacent text parts of the same kind (answer or thought) are joined into one part; a function call
    and any other part (inline data, code) is kept whole in its place. ``finishReason``, the candidate's
    other fields, ``usageMetadata``, ``modelVersion`` and ``promptFeedback`` are the last given.
    ``keep_text=False`` keeps no text.
    """

    __slots__ = ("answered", "candidates", "ids", "keep_text", "response", "saw_token")

    def __init__(self, *, keep_text: bool = True) -> None:
        self.keep_text = keep_text
        self.candidates: dict[int, CandidateState] = {}
        self.response: dict[str, Any] = {}  # the record-level fields, last wins
        self.ids = IdWatch()
        self.saw_token = False  # any text, thought or function call
        self.answered = False  # answer text, a function call or another part (not only thoughts)

    def candidate(self, index: int) -> CandidateState:
        cand = self.candidates.get(index)
        if cand is None:
            cand = self.candidates[index] = CandidateState(index)
        return cand

    def add_text(self, cand: CandidateState, text: str, thought: bool, signature: Any) -> None:
        if cand.joining is not thought or (signature is not None
                                           and "thoughtSignature" in cand.parts[-1]):
            part: dict[str, Any] = {"text": ""}
            if thought:
                part["thought"] = True
            cand.parts.append(part)
            cand.texts[len(cand.parts) - 1] = Joined(self.keep_text)
            cand.joining = thought
        cand.texts[len(cand.parts) - 1].add(text)
        if signature is not None:
            cand.parts[-1]["thoughtSignature"] = signature
        if text:
            self.saw_token = True
            self.answered = self.answered or not thought

    def add_part(self, cand: CandidateState, part: dict[str, Any]) -> None:
        cand.parts.append(dict(part))
        cand.joining = None
        self.saw_token = self.answered = True

    def to_response(self) -> dict[str, Any]:
        """The final ``GenerateContentResponse`` (an empty dict when no record came)."""
        if not self.candidates and not self.response:
            return {}
        out: dict[str, Any] = {}
        if self.candidates:
            out["candidates"] = [self._candidate(self.candidates[i]) for i in sorted(self.candidates)]
        out.update(self.response)
        return out

    @staticmethod
    def _candidate(cand: CandidateState) -> dict[str, Any]:
        parts = [dict(part, text=cand.texts[i].text) if i in cand.texts else part
                 for i, part in enumerate(cand.parts)]
        out: dict[str, Any] = {"content": {"parts": parts, "role": cand.role}}
        if cand.finish is not None:
            out["finishReason"] = cand.finish
        out["index"] = cand.index
        out.update(cand.extra)
        return out

#: Old names → new (docs/design/vocabulary.md "Names": ``Record`` is one request's facts).
__getattr__ = renamed(__name__, {"Record": "TypedResponse", "decode_record": "decode_response"})
