"""``--resume``: the healing table, one entry per (protocol, dialect).

A stream that broke after content was forwarded can be continued where the server documents
continuation. Each entry says, for its protocol and dialect, everything the stream machine
(``machines/stream.py``) needs and nothing it has to branch on: the continuation state (``state``: what the
client has, how the continuation request is built from the original request and that — the
continued message's marking, the whitespace a prefill must drop —, and the ``Splice`` that rewrites
the continuation's frames into the client's stream: its opening frames dropped, the overlap trimmed,
a block the client saw open continued, the usage summed over the attempts), the ``Frames`` that hold
back what no continuation could go on from (tool calls; a Messages text block's stop), and whether
continuations go to another base (DeepSeek serves prefix completion only under ``/beta``:
``--resume-base-url``), and the request the upstream gets when the dialect needs it changed
(``openai-background`` runs it in the background, stored, so it can be read again). The dialects
themselves live in ``resume/chat.py`` (chat), ``resume/messages.py`` (Messages) and
``resume/background.py`` (Responses); keyed by the same ``Api`` as the repair writers' table
(``repair.WRITERS``).

Adding a dialect is one entry here. Pure (no I/O): ``driver/guarded.py`` builds a stream's entry, the
machine drives it, the driver (``driver/stream.py``) does the asking.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from sseguard.core.verdict import Api
from sseguard.proxy.machines.frames import Frames
from sseguard.proxy.machines.stream import Resume
from sseguard.proxy.resume.background import BackgroundResume, upstream_request
from sseguard.proxy.resume.chat import ChatResume, HeldToolCalls
from sseguard.proxy.resume.messages import HeldToolUse, MessagesResume


@dataclass(frozen=True, slots=True)
class ResumeDialect:
    """How one server continues one protocol's answers."""

    name: str  # as ``--resume`` names it
    api: Api
    #: ``(request_obj, continuations) -> state``: one client stream's continuation state.
    state: Callable[[dict[str, Any], int], Resume]
    #: The frames of a stream that may be continued (what they hold back is never forwarded early).
    frames: Callable[[], Frames]
    #: Continuations go to ``--resume-base-url`` (default: the upstream's base with ``/beta``).
    own_base: bool = False
    #: ``(request_obj, store_ok) -> the request the upstream gets``, or None when the dialect does
    #: not apply to it (``store_ok``: ``--resume-store-ok``); absent: the client's request as it is.
    upstream_request: Callable[[dict[str, Any], bool], dict[str, Any] | None] | None = None


#: Every dialect ``--resume`` knows, by name: one line each.
DIALECTS: Mapping[str, ResumeDialect] = MappingProxyType({d.name: d for d in (
    ResumeDialect("vllm", Api.CHAT, lambda obj, n: ChatResume(obj, n), HeldToolCalls),
    ResumeDialect("deepseek", Api.CHAT, lambda obj, n: ChatResume(obj, n, "deepseek"), HeldToolCalls,
            own_base=True),
    ResumeDialect("anthropic", Api.MESSAGES, MessagesResume, HeldToolUse),
    ResumeDialect("openai-background", Api.RESPONSES, BackgroundResume, Frames,
            upstream_request=upstream_request),
)})


def dialect_for(resume: str | None, api: Api) -> ResumeDialect | None:
    """The dialect ``--resume`` (normalised: comma-separated names) names for ``api``, or None."""
    if resume is None:
        return None
    for name in resume.split(","):
        dialect = DIALECTS.get(name)
        if dialect is not None and dialect.api is api:
            return dialect
    return None
