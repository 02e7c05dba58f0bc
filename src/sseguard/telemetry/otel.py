"""The OpenTelemetry adapter: ``genai``'s plans handed to the OpenTelemetry API, and the SDK set up
from the standard ``OTEL_*`` environment variables for the commands that emit (``--otel``).

Only this module and the span exporters it sets up (``otlp_*``) import OpenTelemetry, and only
``sseguard[otel]`` installs it: everything else reaches it through ``load()``, which names the
extra when it is missing.

A span is made once the call is over, with the times the adapter measured (``start_time``,
``end_time``), rather than opened at the request and carried along the stream: the relay's per-event
path stays exactly what it is with ``--otel`` off, and what a span costs is paid once per stream.
``opentelemetry-util-genai``'s handler does not fit that: it opens its span when the call starts and
reads the clock itself.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import metrics, propagate, trace
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.trace import SpanKind, Status, StatusCode

from sseguard import __version__
from sseguard.core.errors import ConfigError
from sseguard.core.redact import DEFAULT, Redactor
from sseguard.telemetry import genai

SCOPE = "sseguard"


class Telemetry:
    """Spans and metrics of streamed calls, on the given providers (default: the global ones, which
    is what an instrumented application has set up)."""

    def __init__(self, tracer_provider: trace.TracerProvider | None = None,
                 meter_provider: metrics.MeterProvider | None = None, *,
                 redactor: Redactor = DEFAULT, kind: SpanKind = SpanKind.CLIENT,
                 healthy_spans: float = 1.0) -> None:
        """``healthy_spans``: the share of streams that pass the policy which get a span (a span
        costs ~100 µs of CPU, most of a stream's telemetry); a failing stream always gets one, and
        every stream counts in the metrics."""
        if not 0.0 <= healthy_spans <= 1.0:
            raise ConfigError(f"the share of healthy streams' spans must be from 0 to 1, not "
                              f"{healthy_spans!r}")
        self._tracer = trace.get_tracer(SCOPE, __version__, tracer_provider)
        meter = metrics.get_meter(SCOPE, __version__, meter_provider)
        self._redactor = redactor
        self._kind = kind
        self._healthy_spans = healthy_spans
        self._draw = random.Random().random
        self._duration = meter.create_histogram(
            genai.DURATION_METRIC, unit="s", description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=genai.TIME_BUCKETS)
        self._ttfc = meter.create_histogram(
            genai.TTFC_METRIC, unit="s", description="Time to the first chunk of a streamed answer.",
            explicit_bucket_boundaries_advisory=genai.TIME_BUCKETS)
        self._tokens = meter.create_histogram(
            genai.TOKENS_METRIC, unit="{token}", description="Tokens used, by token type.",
            explicit_bucket_boundaries_advisory=genai.TOKEN_BUCKETS)
        # The endings are counted here and read by the SDK when it collects: one dict increment
        # per stream instead of a measurement through the SDK's attribute handling (~7 µs).
        self._ending_totals: dict[tuple[str, str, str], int] = {}
        meter.create_observable_counter(
            genai.ENDINGS_METRIC, callbacks=[self._observe_endings], unit="{stream}",
            description="Streams by protocol, how they ended and how they were healed.")

    def parent_from_headers(self, headers: object) -> object | None:
        """The trace context a request's ``traceparent`` (or the configured propagator's headers)
        carries, for the span of the call it asked for; None without one."""
        if not isinstance(headers, Mapping):
            return None
        ctx = propagate.extract(headers)
        return ctx if trace.get_current_span(ctx).get_span_context().is_valid else None

    def current(self) -> object:
        """The caller's current context (its active span), to nest a later span under."""
        return otel_context.get_current()

    def emit(self, call: genai.MeasuredCall, parent: object | None = None) -> None:
        """One span for ``call`` (under ``parent``: a context, default the current one) and its
        metric points."""
        both = genai.plan(call, self._redactor)
        plan = both.span
        if plan.error_type is not None or self._healthy_spans >= 1.0 \
                or self._draw() < self._healthy_spans:
            ctx = parent if isinstance(parent, otel_context.Context) else None
            span = self._tracer.start_span(plan.name, context=ctx, kind=self._kind,
                                           attributes=plan.attributes, start_time=plan.start_ns)
            for event in plan.events:
                span.add_event(event.name, event.attributes, timestamp=plan.end_ns)
            if plan.error_type is not None:
                span.set_status(Status(StatusCode.ERROR, plan.description))
            span.end(end_time=plan.end_ns)
        points = both.metrics
        attrs = points.attributes
        self._duration.record(points.duration_s, attrs)
        if points.ttfc_s is not None:
            self._ttfc.record(points.ttfc_s, attrs)
        for token_type, count in (("input", points.input_tokens), ("output", points.output_tokens)):
            if count is not None:
                self._tokens.record(count, {**attrs, genai.TOKEN_TYPE: token_type})
        ending = points.ending_attributes
        key = (str(ending[genai.PROTOCOL]), str(ending[genai.ENDING]), str(ending[genai.HEALED]))
        self._ending_totals[key] = self._ending_totals.get(key, 0) + 1

    def _observe_endings(self, options: CallbackOptions) -> Iterable[Observation]:
        # list(): one atomic copy under the GIL, while streams may still be counted.
        return [Observation(count, {genai.PROTOCOL: protocol, genai.ENDING: ending,
                                    genai.HEALED: healed})
                for (protocol, ending, healed), count in list(self._ending_totals.items())]


@dataclass(slots=True)
class Pipeline:
    """The SDK providers a command set up (``configure``): its ``telemetry``, and ``shutdown``,
    which flushes what is pending and stops the exporters."""

    telemetry: Telemetry
    shutdown: Callable[[], None]


_PROTOCOLS = ("http/protobuf", "grpc")


def _protocol(signal: str, env: Mapping[str, str]) -> str:
    name = (env.get(f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
            or "http/protobuf").strip()
    if name not in _PROTOCOLS:
        raise ConfigError(f"OTEL_EXPORTER_OTLP_PROTOCOL={name!r}: sseguard exports with "
                          f"{' or '.join(_PROTOCOLS)}")
    return name


def _exporter_names(signal: str, env: Mapping[str, str]) -> set[str]:
    names = {n.strip() for n in env.get(f"OTEL_{signal}_EXPORTER", "otlp").split(",") if n.strip()}
    unknown = names - {"otlp", "console", "none"}
    if unknown:
        raise ConfigError(f"OTEL_{signal}_EXPORTER={','.join(sorted(unknown))}: sseguard exports "
                          "with otlp, console or none")
    return names - {"none"}


#: sseguard's one variable beside the standard ones: the share of passing streams given a span.
HEALTHY_SPANS_VAR = "SSEGUARD_OTEL_HEALTHY_SPANS"


def _healthy_spans(env: Mapping[str, str]) -> float:
    text = env.get(HEALTHY_SPANS_VAR, "").strip()
    if not text:
        return 1.0
    try:
        share = float(text)
    except ValueError:
        share = -1.0
    if not 0.0 <= share <= 1.0:
        raise ConfigError(f"{HEALTHY_SPANS_VAR}={text!r}: use a share from 0 to 1 (e.g. 0.1)")
    return share


def check_environment(env: Mapping[str, str] | None = None) -> None:
    """Raise ``ConfigError`` (one line) for an ``OTEL_*`` value sseguard cannot export with, so a
    command fails at its start rather than in its serving processes."""
    env = os.environ if env is None else env
    _healthy_spans(env)
    for signal in ("TRACES", "METRICS"):
        if "otlp" in _exporter_names(signal, env):
            _protocol(signal, env)


def configure(env: Mapping[str, str] | None = None, *, service_name: str = "sseguard",
              redactor: Redactor = DEFAULT) -> Pipeline:
    """Set up tracing and metrics as the ``OTEL_*`` variables say (endpoint, headers, protocol
    ``http/protobuf`` or ``grpc``, service name, resource attributes, batch and export intervals),
    make them the global providers, and return the ``Pipeline``.

    ``OTEL_SERVICE_NAME`` unset: the service is ``service_name``. ``OTEL_SDK_DISABLED=true`` and
    ``OTEL_TRACES_EXPORTER``/``OTEL_METRICS_EXPORTER=none`` turn a signal off, as everywhere."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import (
        ConsoleMetricExporter,
        MetricReader,
        PeriodicExportingMetricReader,
    )
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    env = os.environ if env is None else env
    healthy = _healthy_spans(env)
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return Pipeline(Telemetry(trace.NoOpTracerProvider(), metrics.NoOpMeterProvider(),
                                  redactor=redactor), lambda: None)
    attributes: dict[str, Any] = {}
    if not env.get("OTEL_SERVICE_NAME"):
        attributes["service.name"] = service_name
    resource = _resource_hashed_once(Resource.create(attributes))
    tracer_provider = TracerProvider(resource=resource)
    for name in _exporter_names("TRACES", env):
        span_exporter = ConsoleSpanExporter() if name == "console" else \
            _span_exporter(_protocol("TRACES", env))
        tracer_provider.add_span_processor(BatchSpanProcessor(span_exporter))
    readers: list[MetricReader] = []
    for name in _exporter_names("METRICS", env):
        metric_exporter = ConsoleMetricExporter() if name == "console" else \
            _metric_exporter(_protocol("METRICS", env))
        readers.append(PeriodicExportingMetricReader(metric_exporter))
    meter_provider = MeterProvider(resource=resource, metric_readers=readers)
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)

    def shutdown() -> None:
        tracer_provider.shutdown()
        meter_provider.shutdown()

    return Pipeline(Telemetry(tracer_provider, meter_provider, redactor=redactor,
                              healthy_spans=healthy), shutdown)


def _resource_hashed_once(resource: Any) -> Any:
    """``resource`` with its hash worked out once. The OTLP encoders group each exported span by
    its resource, and the SDK's ``Resource`` hashes by writing its attributes out as JSON every
    time: ~8 µs a span, in the exporter's thread. A resource is immutable, so one hash holds."""
    from opentelemetry.sdk.resources import Resource

    class HashedOnce(Resource):
        def __init__(self, attributes: Any, schema_url: str | None = None) -> None:
            super().__init__(attributes, schema_url)
            self._hash = super().__hash__()

        def __hash__(self) -> int:
            return self._hash

    return HashedOnce(resource.attributes, resource.schema_url)


def _span_exporter(protocol: str) -> Any:
    if protocol == "grpc":
        from sseguard.telemetry import otlp_grpc
        return otlp_grpc.span_exporter()
    from sseguard.telemetry import otlp_http
    return otlp_http.span_exporter()


def _metric_exporter(protocol: str) -> Any:
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
        return OTLPMetricExporter()
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
        OTLPMetricExporter as HttpMetricExporter,
    )
    return HttpMetricExporter()
