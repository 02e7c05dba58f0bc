"""What a wire protocol is, as data: the ``Protocol`` descriptor every consumer reads.

Each ``contract/<protocol>/__init__.py`` exports one ``Protocol`` that owns every fact about its protocol, and
``contract/registry.py`` lists them one line each. Checker selection, ``check``, chaos, the proxy, the
strict transports, the probe, Locust and the pytest plugin read these fields and keep no table of their
own, so a fifth protocol is one descriptor (plus its chaos writer), never an edit to each consumer.

The fields are chosen so that protocols unlike the first three fit without a new consumer branch:

- ``Route.path`` is a template, and ``{model}`` in it says the model sits in the path, not the body;
  ``Route.streams`` says whether the path itself decides streaming (Gemini's ``:streamGenerateContent``
  against ``:generateContent``) or the body's ``stream`` field does (``None``);
- ``mounts`` lists every prefix a route is served under (``/v1``; Gemini adds ``/v1beta``), and a route
  may carry its own longer prefix (a Vertex path);
- ``Auth`` names the key header and its scheme, and a query parameter for APIs that take the key there
  (``?key=``, a secret to redact);
- ``framings`` says how records are framed on the wire: SSE, or one JSON array streamed element by
  element.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from sseguard.core._renamed import renamed
from sseguard.core.contract._base import CheckerBase
from sseguard.core.contract.request import Format
from sseguard.core.contract.usage import UsageFacts
from sseguard.core.contract.vocabulary import Kinds, Reasons
from sseguard.core.sse import SSEEvent
from sseguard.core.verdict import Api, Ending


class Framing(StrEnum):
    """How a protocol's records travel in a response body."""

    SSE = "sse"  # ``data:`` events (``event:`` names optional)
    JSON_ARRAY = "json_array"  # one JSON array, streamed element by element (Gemini without alt=sse)

    @property
    def media_type(self) -> str:
        """The ``Content-Type`` (without parameters) a body in this framing comes with."""
        return "text/event-stream" if self is Framing.SSE else "application/json"

    def is_stream(self, route: Route | None) -> bool:
        """Whether a body in this framing is a stream to check: SSE always is; a JSON body only on a
        route that streams by its path (elsewhere it is a whole, non-streamed answer)."""
        return self is Framing.SSE or (route is not None and route.streams is True)


class UpstreamError(StrEnum):
    """What the relay does with an error frame the upstream sent."""

    #: The client's SDK raises on it as it is: forward it, byte-identical, and end the stream.
    FORWARD = "forward"
    #: The client's SDK would not raise on it (or not for every client): send the guard's own frame.
    REPLACE = "replace"


_PARAM = re.compile(r"\\\{(\w+)\\\}")


@dataclass(frozen=True, slots=True)
class Route:
    """One request path a protocol answers at, relative to a mount (``/chat/completions``).

    ``{name}`` segments are parameters (``{model}``: the model is in the path). ``streams`` None means
    the body's stream field decides; True or False means the path alone does.
    """

    path: str
    streams: bool | None = None
    _pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        body = _PARAM.sub(lambda m: f"(?P<{m.group(1)}>[^/]+)", re.escape(self.path.lstrip("/")))
        object.__setattr__(self, "_pattern", re.compile(rf"(?:^|/){body}$"))

    @property
    def pattern(self) -> re.Pattern[str]:
        """Matches a request path that ends in this route (any base prefix before it)."""
        return self._pattern

    def fill(self, **params: str) -> str:
        """The path with its parameters filled in (``model=...``)."""
        return self.path.format(**params)


@dataclass(frozen=True, slots=True)
class Auth:
    """How a request carries its key: a header (with a scheme such as ``Bearer``) or a query field."""

    header: str
    scheme: str | None = None  # "Bearer": the header's value is "Bearer <key>"
    query: str | None = None  # a query parameter that may carry the key instead (a secret)

    def value(self, key: str) -> str:
        """The header value for ``key``."""
        return f"{self.scheme} {key}" if self.scheme else key


def never(event: SSEEvent) -> bool:
    """A relay predicate that holds for no event (no trailer, say)."""
    return False


#: Why an SSE stream failed, for the endings its events say nothing about: chat, messages and
#: responses word them alike (Gemini, whose stream may be a JSON array, speaks of records).
SSE_ENDING_MESSAGES: Mapping[Ending, str] = {
    Ending.CUT_MID_FRAME: "the upstream body stopped in the middle of an event",
    Ending.EMPTY: "the upstream sent no event at all",
}


@dataclass(frozen=True, slots=True)
class RelayTable:
    """What a guarding relay needs of a protocol (one engine in ``proxy/``, one table per protocol)."""

    #: The event that ends a good stream; held until the upstream ends its body.
    terminal: Callable[[SSEEvent], bool]
    #: Whether an event is an upstream error frame, and what to do with it (None: not an error).
    upstream_error: Callable[[SSEEvent], UpstreamError | None]
    #: ``(code, message, what was last sent) -> frame``: the error the client's SDK raises on.
    error_frame: Callable[[str, str, bytes], bytes]
    #: What ``--complete-done`` appends to a finished stream that only lacks it (b"": no such thing).
    sentinel: bytes
    #: Why a stream with this ending failed, in this protocol's words.
    messages: Mapping[Ending, str]
    #: Frames after the terminal event that are delivered with it (a tolerated trailer; none by
    #: default: only Responses has one).
    trailer: Callable[[SSEEvent], bool] = never
    #: ``(error frame, what was last sent) -> bytes``: what the client gets for an upstream error
    #: frame that is forwarded (``UpstreamError.FORWARD``) and ends the stream: the frame as it came,
    #: and whatever the protocol needs after it.
    forwarded: Callable[[SSEEvent, bytes], bytes] = field(default=lambda event, sent: event.raw)


@dataclass(frozen=True, slots=True)
class Outline:
    """Where an assembled answer keeps what a person is shown of it (``sseguard check``): its finish,
    its candidates (answers side by side, each with its own finish) and its blocks.

    Every field names a field of the assembled message (or of one candidate), so ``check`` words all
    protocols with one function; a candidate's text and tool calls are the ``Format.answer`` of a
    message holding that candidate alone.
    """

    #: The answer's own finish field, shown as one row of that name (``stop_reason``); None: none.
    finish: str | None = None
    #: A field whose ``reason`` qualifies the finish, shown after it in brackets (Responses'
    #: ``incomplete_details``).
    finish_detail: str | None = None
    #: The list of candidates (``choices``), each shown as one row; None: the answer is one.
    candidates: str | None = None
    #: How a candidate's row is named (``choice`` → ``choice 0``).
    candidate: str = "candidate"
    #: A candidate's finish field (``finish_reason``).
    candidate_finish: str | None = None
    #: ``(object, field)``: where the finish is when no candidate came (Gemini's blocked prompt:
    #: ``promptFeedback.blockReason``), shown as a row named for the field.
    unanswered: tuple[str, str] | None = None
    #: The list of blocks (content blocks, output items), each shown as one row; None: none.
    blocks: str | None = None
    #: How a block's row is named (``block`` → ``block 0``).
    block: str = "block"


@dataclass(frozen=True, slots=True)
class Protocol:
    """Every fact about one wire protocol (``docs/design/vocabulary.md``), in one place."""

    api: Api
    title: str  # how a person names it: "OpenAI Chat Completions"
    routes: tuple[Route, ...]  # the first is where a client asks for a stream
    auth: Auth
    #: Whether one decoded record (an SSE event's JSON data) could only come from this protocol.
    claims: Callable[[Mapping[str, Any]], bool]
    #: How requests, tools and answers are written (the probe and Locust render through it).
    format: Format
    #: The checker class: ``checker(request, markup=..., keep_text=...)``.
    checker: type[CheckerBase]
    #: The assembler class that folds the stream into the final message, as a client does.
    assembler: type[Any]
    relay: RelayTable
    #: ``error_body(message, type_=..., code=..., param=...)``: an HTTP error in this API's shape.
    error_body: Callable[..., dict[str, Any]]
    #: ``(status, message) -> body``: the error body a server of this API sends for an HTTP status.
    status_error: Callable[[int, str], dict[str, Any]]
    #: The finish (stop) reasons, each classified finished / policy / failed; one the table does
    #: not name is failed (``contract.vocabulary``). The checker, ``check``, ``analyze`` and the
    #: docs read this one table.
    reasons: Reasons
    #: The event, block and delta kinds the checker knows; any other passes and is recorded.
    kinds: Kinds
    #: Why the answer stopped, read from the assembled message: one entry per choice (None where the
    #: stream never said), in the protocol's own words.
    finish_of: Callable[[Mapping[str, Any]], list[str | None]]
    #: What the server said about its cache (and build) in the assembled message, in the protocol's
    #: own usage shape (``contract.usage``).
    usage_of: Callable[[Mapping[str, Any]], UsageFacts]
    #: The events (``type``s, or the ``[DONE]`` sentinel) that end a good stream.
    terminal_events: frozenset[str]
    #: The faults that end a stream badly without a client-side timeout (what the pytest plugin
    #: parametrizes over): every name must make a strict client raise.
    bad_endings: tuple[str, ...]
    #: Shapes of good streams real servers send that naive checkers misread (chaos dialect names).
    dialects: tuple[str, ...]
    #: Where the assembled answer keeps its finish, candidates and blocks (what ``check`` shows).
    outline: Outline
    #: Where the routes are served (the chaos server, the proxy's guarded paths).
    mounts: tuple[str, ...] = ("/v1",)
    #: Headers every request of this protocol carries (``anthropic-version``).
    headers: Mapping[str, str] = field(default_factory=dict)
    #: The body field that asks for a stream; None when the route decides (``Route.streams``).
    stream_field: str | None = "stream"
    #: The body field naming the model; None when the model is in the path.
    model_field: str | None = "model"
    framings: tuple[Framing, ...] = (Framing.SSE,)
    #: How OpenTelemetry's GenAI conventions name this protocol's calls: ``gen_ai.provider.name``
    #: and ``gen_ai.operation.name`` (``sseguard.telemetry``), and the field of the assembled
    #: answer that names the model that answered (``gen_ai.response.model``).
    genai_provider: str = "openai"
    genai_operation: str = "chat"
    response_model_field: str = "model"
    #: The query parameter (name, value) that asks for the SSE framing where a protocol has two
    #: (Gemini's ``alt=sse``); without it such a request gets its other framing. None: one framing.
    sse_query: tuple[str, str] | None = None

    def framing_for(self, query: Mapping[str, str]) -> Framing:
        """The framing a request with this query string is answered in (``framings[0]`` when the
        protocol has one; the SSE framing if ``sse_query`` asks for it, else the other one)."""
        if self.sse_query is None or len(self.framings) == 1:
            return self.framings[0]
        name, value = self.sse_query
        if query.get(name) == value:
            return Framing.SSE
        return next(f for f in self.framings if f is not Framing.SSE)

    @property
    def path(self) -> str:
        """The path a client asks for a stream at, relative to the base URL (``/chat/completions``)."""
        return self.routes[0].path

    def route_for(self, path: str) -> Route | None:
        """The route a request path (any base prefix, any query) asks for, or None."""
        path = path.split("?", 1)[0].rstrip("/")
        for route in self.routes:
            if route.pattern.search(path):
                return route
        return None

    def served_paths(self) -> tuple[str, ...]:
        """Every absolute path the routes are served at, one per mount and route."""
        return tuple(f"{mount}{route.path}" for route in self.routes for mount in self.mounts)


# ── helpers the protocols' relay tables share ───────────────────────────────────────────────────────


def dumps(obj: object) -> bytes:
    """JSON for a frame the guard writes (non-ASCII kept as it is, as the vendors send it)."""
    return json.dumps(obj, ensure_ascii=False).encode("utf-8")


def data_type(event: SSEEvent, wanted: frozenset[str]) -> str | None:
    """The ``type`` of an event's JSON data, when it is one of ``wanted`` (cheap pre-check first)."""
    data = event.data
    if not any(name in data for name in wanted):
        return None
    try:
        obj = json.loads(data)
    except ValueError:
        return None
    kind = obj.get("type") if isinstance(obj, dict) else None
    return kind if isinstance(kind, str) and kind in wanted else None

#: Old names → new (docs/design/vocabulary.md "Names": the proxy's relay is the machine).
__getattr__ = renamed(__name__, {"Relay": "RelayTable"})
