"""One streamed call's facts as OpenTelemetry's GenAI conventions name them: pure data, no OTel import.

The GenAI semantic conventions say what a model call's span and metrics carry
(``gen_ai.operation.name``, ``gen_ai.provider.name``, the request and response model,
``gen_ai.request.stream``, ``gen_ai.response.finish_reasons``, ``gen_ai.response.time_to_first_chunk``,
``gen_ai.usage.*``, ``error.type``) but leave streamed chunks as "TODO": nothing says how a stream
that just stopped is recorded, so instrumentations end such a span OK. Here a stream that fails the
policy ends ERROR with ``error.type`` set to what failed it (the ending — ``truncated``,
``cut_mid_frame``, ``stalled`` … — or the first finding the policy does not tolerate), every finding
is an event, and a stream the proxy healed says how (attempts, tokens, the bytes it resumed after).

An adapter (the proxy, the probe, the strict transports) describes a call as a ``MeasuredCall``; ``plan``
turns it into plain values that ``telemetry.otel`` hands to the OpenTelemetry API
as they are. Attribute names are written once, here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol as TypingProtocol

from sseguard.core._renamed import renamed
from sseguard.core.contract import protocol
from sseguard.core.policy import Policy
from sseguard.core.redact import DEFAULT, Redactor
from sseguard.core.verdict import Verdict

#: An attribute value as OpenTelemetry takes it.
Value = str | bool | int | float | tuple[str, ...]

# The GenAI conventions' names (semantic-conventions-genai).
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_STREAM = "gen_ai.request.stream"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_ID = "gen_ai.response.id"
FINISH_REASONS = "gen_ai.response.finish_reasons"
TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
CACHE_CREATION_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
TOKEN_TYPE = "gen_ai.token.type"
ERROR_TYPE = "error.type"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
HTTP_STATUS = "http.response.status_code"

# sseguard's own: what the conventions have no name for.
PROTOCOL = "sseguard.protocol"
ENDING = "sseguard.stream.ending"
POLICY = "sseguard.policy"
CHUNKS = "sseguard.stream.chunks"
BYTES = "sseguard.stream.bytes"
FINDING_KINDS = "sseguard.stream.findings"
CLIENT_GONE = "sseguard.client_disconnected"
HEALED = "sseguard.heal.how"
HEAL_ATTEMPTS = "sseguard.heal.attempts"
HEAL_TOKENS = "sseguard.heal.tokens"
HEAL_DIALECT = "sseguard.heal.dialect"
RESUMED_BYTES = "sseguard.heal.resumed_bytes"
FINDING_EVENT = "sseguard.finding"
FINDING_KIND = "sseguard.finding.kind"
FINDING_DETAIL = "sseguard.finding.detail"
FINDING_FRAME = "sseguard.finding.frame"
FINDING_OFFSET = "sseguard.finding.offset"
ATTEMPT_EVENT = "sseguard.heal.attempt"
ATTEMPT_BYTES = "sseguard.heal.attempt.bytes"

# The metrics: the conventions' three, and the endings counter the conventions lack.
DURATION_METRIC = "gen_ai.client.operation.duration"
TTFC_METRIC = "gen_ai.client.operation.time_to_first_chunk"
TOKENS_METRIC = "gen_ai.client.token.usage"
ENDINGS_METRIC = "sseguard.stream.endings"
#: The conventions' advised buckets for the two time histograms (seconds) and token usage.
TIME_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96,
                81.92)
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216,
                 67108864)

#: The ending a stream counts under when its client left first (as the proxy's ``/metrics`` do).
CLIENT_DISCONNECT = "client_disconnect"
#: Findings that become span events at most (the SDK keeps 128 events a span by default).
MAX_FINDING_EVENTS = 32
_DETAIL_MAX = 300


@dataclass(frozen=True, slots=True)
class Attempt:
    """An upstream attempt a healed stream replaced: how it ended and the body bytes it carried."""

    ending: str
    bytes: int


@dataclass(frozen=True, slots=True)
class MeasuredCall:
    """One streamed request, as its adapter measured it. Times: ``start_ns`` epoch nanoseconds,
    durations in seconds on a monotonic clock."""

    verdict: Verdict
    policy: Policy
    start_ns: int
    duration_s: float
    request_model: str | None = None
    ttfc_s: float | None = None
    server_address: str | None = None
    server_port: int | None = None
    client_gone: bool = False
    #: Healing (the proxy's ``--retry``/``--resume``): retry | resume | none; None when off.
    healed: str | None = None
    heal_attempts: int = 0
    heal_tokens: int = 0
    heal_dialect: str | None = None
    #: The attempts the client never saw as such (failed, or continued by a resume).
    attempts: tuple[Attempt, ...] = ()


@dataclass(frozen=True, slots=True)
class EventPlan:
    name: str
    attributes: dict[str, Value]


@dataclass(frozen=True, slots=True)
class SpanPlan:
    """What one call's span carries; ``error_type`` None means the span's status stays unset (OK)."""

    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Value]
    events: tuple[EventPlan, ...] = ()
    error_type: str | None = None
    description: str | None = None


@dataclass(frozen=True, slots=True)
class MetricsPlan:
    """What one call adds to the metrics, each value with the attributes it is recorded under."""

    duration_s: float
    attributes: dict[str, Value]
    ttfc_s: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    ending_attributes: dict[str, Value] = field(default_factory=dict)


class Emitter(TypingProtocol):
    """What an adapter hands its calls to (``telemetry.otel.Telemetry``): ``parent`` is an
    OpenTelemetry context (the caller's current one, or one read from a ``traceparent``)."""

    def emit(self, call: MeasuredCall, parent: object | None = None) -> None: ...

    def parent_from_headers(self, headers: object) -> object | None: ...

    def current(self) -> object:
        """The caller's current context, for a call whose span is made when it is over."""
        ...


def _failure(call: MeasuredCall) -> str | None:
    if call.client_gone:
        return None  # the client chose to stop: not the upstream's failure
    return call.policy.failure(call.verdict)


@dataclass(frozen=True, slots=True)
class CallSignals:
    """One call's span and metric points."""

    span: SpanPlan
    metrics: MetricsPlan


def plan(call: MeasuredCall, redactor: Redactor = DEFAULT) -> CallSignals:
    """The span of ``call`` (the conventions' attributes, sseguard's facts, findings and replaced
    attempts as events) and what it adds to the metrics: the duration, time-to-first-chunk and
    token histograms under the conventions' metric attributes, and the endings counter (by
    protocol, ending and healing).

    Free text (finding details, the error) goes through ``redactor``: a span leaves the process.
    Each attribute costs about 3 µs to make and export, per stream: the span carries what a
    reader needs and no fact twice (whether the stream passed is its status; the policy and a
    non-200 status are named only when they explain an error)."""
    verdict = call.verdict
    proto = protocol(verdict.api)
    failure = _failure(call)
    ending = CLIENT_DISCONNECT if call.client_gone else str(verdict.ending)
    usage = proto.usage_of(verdict.message)
    # The attributes the span and its metric points share (the conventions' metric attributes).
    base: dict[str, Value] = {OPERATION: proto.genai_operation, PROVIDER: proto.genai_provider}
    if call.request_model:
        base[REQUEST_MODEL] = call.request_model
    model = verdict.message.get(proto.response_model_field)
    if isinstance(model, str) and model:
        base[RESPONSE_MODEL] = model
    if call.server_address:
        base[SERVER_ADDRESS] = call.server_address
    if call.server_port is not None:
        base[SERVER_PORT] = call.server_port
    if failure is not None:
        base[ERROR_TYPE] = failure
    attrs = dict(base)
    attrs[REQUEST_STREAM] = True
    attrs[PROTOCOL] = str(verdict.api)
    attrs[FINISH_REASONS] = tuple(r for r in proto.finish_of(verdict.message) if r)
    if verdict.first_id:
        attrs[RESPONSE_ID] = verdict.first_id
    if call.ttfc_s is not None:
        attrs[TIME_TO_FIRST_CHUNK] = call.ttfc_s
    for name, value in ((INPUT_TOKENS, usage.prompt_tokens), (OUTPUT_TOKENS, usage.output_tokens),
                        (CACHE_READ_TOKENS, usage.cached_tokens),
                        (CACHE_CREATION_TOKENS, usage.cache_write_tokens)):
        if value is not None:
            attrs[name] = value
    attrs[ENDING] = ending
    attrs[CHUNKS] = verdict.chunks
    attrs[BYTES] = verdict.bytes
    if failure is not None:
        attrs[POLICY] = call.policy.name
    if verdict.http_status != 200:
        attrs[HTTP_STATUS] = verdict.http_status
    if verdict.findings:
        attrs[FINDING_KINDS] = tuple(str(f.kind) for f in verdict.findings)
    if call.client_gone:
        attrs[CLIENT_GONE] = True
    if call.healed is not None:
        attrs[HEALED] = call.healed
        attrs[HEAL_ATTEMPTS] = call.heal_attempts
        attrs[HEAL_TOKENS] = call.heal_tokens
        if call.heal_dialect:
            attrs[HEAL_DIALECT] = call.heal_dialect
        if call.healed == "resume":
            # The bytes of the broken upstream answers the continuations carried on from.
            attrs[RESUMED_BYTES] = sum(a.bytes for a in call.attempts)
    events = [_finding_event(f.to_dict(), redactor)
              for f in verdict.findings[:MAX_FINDING_EVENTS]]
    events += [EventPlan(ATTEMPT_EVENT, {ENDING: a.ending, ATTEMPT_BYTES: a.bytes})
               for a in call.attempts]
    asked = call.request_model
    span = SpanPlan(
        name=f"{proto.genai_operation} {asked}" if asked else proto.genai_operation,
        start_ns=call.start_ns, end_ns=call.start_ns + max(0, round(call.duration_s * 1e9)),
        attributes=attrs, events=tuple(events), error_type=failure,
        description=None if failure is None else _description(failure, verdict, redactor))
    points = MetricsPlan(
        duration_s=call.duration_s, attributes=base, ttfc_s=call.ttfc_s,
        input_tokens=usage.prompt_tokens, output_tokens=usage.output_tokens,
        ending_attributes={PROTOCOL: str(verdict.api), ENDING: ending, HEALED: call.healed or "none"})
    return CallSignals(span, points)


def span_of(call: MeasuredCall, redactor: Redactor = DEFAULT) -> SpanPlan:
    """``plan(call).span``."""
    return plan(call, redactor).span


def metrics_of(call: MeasuredCall) -> MetricsPlan:
    """``plan(call).metrics``."""
    return plan(call).metrics


def _finding_event(finding: dict[str, object], redactor: Redactor) -> EventPlan:
    attrs: dict[str, Value] = {FINDING_KIND: str(finding["kind"])}
    detail = finding.get("detail")
    if isinstance(detail, str) and detail:
        attrs[FINDING_DETAIL] = redactor.text(detail[:_DETAIL_MAX])
    for name, key in ((FINDING_FRAME, "frame"), (FINDING_OFFSET, "offset")):
        value = finding.get(key)
        if isinstance(value, int):
            attrs[name] = value
    return EventPlan(FINDING_EVENT, attrs)


def _description(failure: str, verdict: Verdict, redactor: Redactor) -> str:
    """The span status' message: what failed the stream, and the upstream's own words if any."""
    text = f"the stream failed the policy: {failure}"
    if verdict.error:
        text += f" ({' '.join(verdict.error.split())[:_DETAIL_MAX]})"
    return redactor.text(text)


def request_model(api: str, body: object, path: str) -> str | None:
    """The model a request asked for: its body's model field, or (Gemini) the path's
    ``/models/{model}:…`` segment."""
    field_name = protocol(api).model_field
    if field_name is not None:
        model = body.get(field_name) if isinstance(body, dict) else None
        return model if isinstance(model, str) and model else None
    _, found, rest = path.partition("/models/")
    model = rest.partition(":")[0] if found else ""
    return model or None

#: Old names → new (docs/design/vocabulary.md "Names").
__getattr__ = renamed(__name__, {"Call": "MeasuredCall", "Plan": "CallSignals"})
