"""What the installed SDKs know of each protocol, against what the descriptors' tables classify.

Providers add stream event types, content blocks, deltas and finish reasons every few weeks, and
their SDKs (openai, anthropic, google-genai) name them first, in their type definitions: the stream
event unions, the block and delta unions, the finish-reason literals and enums. This module reads
those definitions from the installed SDKs and looks each name up in the protocol descriptors
(``Protocol.reasons``, ``Protocol.kinds``): a name no table classifies is *drift*. CI installs the
latest SDKs and fails on drift (``tests/contract/test_sdk_drift.py``), so a release that adds a kind
becomes one named failing test; ``sseguard protocols --sdk-drift`` prints the same table.

An adapter module: it imports the SDKs (each lazily, and one that is not installed is skipped).
"""

from __future__ import annotations

import importlib.metadata
import typing
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from sseguard.core.contract.protocol import Protocol
from sseguard.core.contract.registry import protocol
from sseguard.core.verdict import Api

__all__ = ["UNCLASSIFIED", "SdkName", "drift", "sdk_names"]

#: The class of a name no table of its protocol classifies.
UNCLASSIFIED = "unclassified"


@dataclass(frozen=True, slots=True)
class SdkName:
    """One name an installed SDK defines for a protocol, and how the protocol's tables class it."""

    name: str
    api: Api
    what: str  # reason, blocked_reason, event, block, delta, field
    sdk: str  # "openai 3.63.0"
    cls: str  # finished / policy / failed for a reason, "known" for a kind, or UNCLASSIFIED

    @property
    def unclassified(self) -> bool:
        return self.cls == UNCLASSIFIED


def _literals(tp: Any) -> set[str]:
    """Every string literal inside a type (through Optional, Union, Annotated, aliases)."""
    if typing.get_origin(tp) is typing.Literal:
        return {a for a in typing.get_args(tp) if isinstance(a, str)}
    out: set[str] = set()
    for arg in typing.get_args(tp):
        out |= _literals(arg)
    return out


def _members(union: Any) -> list[Any]:
    """The classes of a (possibly Annotated) union type."""
    if typing.get_origin(union) is typing.Annotated:
        return _members(typing.get_args(union)[0])
    args = typing.get_args(union)
    if not args:
        return [union]
    return [m for a in args for m in _members(a)]


def _types(union: Any) -> set[str]:
    """The ``type`` literals of a union of pydantic models (each model's discriminator)."""
    out: set[str] = set()
    for model in _members(union):
        fields = getattr(model, "model_fields", {})
        if "type" in fields:
            out |= _literals(fields["type"].annotation)
    return out


def _version(dist: str) -> str:
    return f"{dist} {importlib.metadata.version(dist)}"


Found = Iterator[tuple[Api, str, str]]  # (protocol, what, name)


def _openai() -> Found:
    from openai.types import responses as r
    from openai.types.chat import chat_completion_chunk as c

    for name in _literals(c.Choice.model_fields["finish_reason"].annotation):
        yield Api.CHAT, "reason", name
    for name in c.ChoiceDelta.model_fields:
        yield Api.CHAT, "delta", name
    for name in c.ChatCompletionChunk.model_fields:
        yield Api.CHAT, "field", f"chunk.{name}"
    for name in c.Choice.model_fields:
        yield Api.CHAT, "field", f"choice.{name}"
    for name in _types(r.ResponseStreamEvent):
        yield Api.RESPONSES, "event", name
    for name in _types(r.ResponseOutputItem):
        yield Api.RESPONSES, "block", name
    details = r.Response.model_fields["incomplete_details"].annotation
    for name in _literals(_members(details)[0].model_fields["reason"].annotation):
        yield Api.RESPONSES, "reason", name


def _anthropic() -> Found:
    from anthropic import types as a
    from anthropic.types import beta as b

    for union in (a.RawMessageStreamEvent, b.BetaRawMessageStreamEvent):
        for name in _types(union):
            yield Api.MESSAGES, "event", name
    for union in (a.ContentBlock, b.BetaContentBlock):
        for name in _types(union):
            yield Api.MESSAGES, "block", name
    for union in (a.RawContentBlockDelta, b.BetaRawContentBlockDelta):
        for name in _types(union):
            yield Api.MESSAGES, "delta", name
    for literal in (a.StopReason, b.BetaStopReason):
        for name in _literals(literal):
            yield Api.MESSAGES, "reason", name


def _google_genai() -> Found:
    from google.genai import types as g

    for finish in g.FinishReason:
        yield Api.GEMINI, "reason", finish.value
    for blocked in g.BlockedReason:
        yield Api.GEMINI, "blocked_reason", blocked.value
    for field_name, info in g.Part.model_fields.items():
        yield Api.GEMINI, "block", info.alias or field_name
    for field_name, info in g.FunctionCall.model_fields.items():
        yield Api.GEMINI, "delta", info.alias or field_name


#: The SDKs read, by distribution name.
SDKS: dict[str, Callable[[], Found]] = {
    "openai": _openai,
    "anthropic": _anthropic,
    "google-genai": _google_genai,
}


def classify(p: Protocol, what: str, name: str) -> str:
    """How ``p``'s tables class one SDK name (``UNCLASSIFIED`` when none names it)."""
    if what in ("reason", "blocked_reason"):
        table = p.reasons.blocked if what == "blocked_reason" else p.reasons.table
        cls = table.get(name)
        return UNCLASSIFIED if cls is None else str(cls)
    kinds = {"event": p.kinds.events, "block": p.kinds.blocks, "delta": p.kinds.deltas,
             "field": p.kinds.fields}[what]
    return "known" if name in kinds else UNCLASSIFIED


def sdk_names(sdks: Iterable[str] = tuple(SDKS)) -> list[SdkName]:
    """Every name the installed SDKs define, with its class; an SDK not installed is skipped."""
    rows: dict[tuple[Api, str, str], SdkName] = {}
    for dist in sdks:
        try:
            version = _version(dist)
            found = list(SDKS[dist]())
        except (ImportError, importlib.metadata.PackageNotFoundError):
            continue
        for api, what, name in found:
            rows.setdefault((api, what, name), SdkName(name, api, what, version,
                                                       classify(protocol(api), what, name)))
    return sorted(rows.values(), key=lambda r: (r.api, r.what, r.name))


def drift(rows: Iterable[SdkName]) -> list[SdkName]:
    """The names no table classifies."""
    return [row for row in rows if row.unclassified]
