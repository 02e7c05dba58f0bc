"""``SpanEncoder`` writes the same OTLP request as the OTLP exporters' own encoder, byte for byte:
checked on spans the real SDK made from generated names, kinds, attributes of every type, events,
links, statuses, remote and local parents, trace states, two resources and two scopes, with the
encoder's attribute cache warm from earlier examples (filled past its limits, of all and of one key)."""

from __future__ import annotations

import math
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")
pytest.importorskip("opentelemetry.exporter.otlp.proto.common")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

from sseguard.telemetry.otlp_spans import SpanEncoder

_INT64 = st.integers(-(2**63), 2**63 - 1)
_FLOAT = st.floats(allow_nan=False)  # NaN is never equal to itself: compared apart below
_SCALAR = st.one_of(st.text(max_size=8), st.booleans(), _INT64, _FLOAT)
_VALUE = st.one_of(_SCALAR, st.tuples(st.text(max_size=4), st.text(max_size=4)),
                   st.lists(st.booleans(), max_size=3).map(tuple),
                   st.lists(_INT64, max_size=3).map(tuple), st.lists(_FLOAT, max_size=3).map(tuple))
# A few keys, so the same key comes with other values and types (1, 1.0 and True among them).
_ATTRIBUTES = st.dictionaries(st.sampled_from(["a", "b", "gen_ai.operation.name", "n"]), _VALUE,
                              max_size=4)
_IDS = st.integers(1, 2**64 - 1)
_SPAN = st.fixed_dictionaries({
    "name": st.text(max_size=10), "kind": st.sampled_from(list(SpanKind)),
    "attributes": _ATTRIBUTES, "times": st.tuples(st.integers(0, 2**62), st.integers(0, 2**40)),
    "events": st.lists(st.tuples(st.text(max_size=5), _ATTRIBUTES), max_size=2),
    "links": st.lists(st.tuples(_IDS, _IDS, st.booleans(), _ATTRIBUTES), max_size=2),
    "status": st.one_of(st.none(), st.sampled_from([Status(StatusCode.OK),
                                                    Status(StatusCode.ERROR, "it broke"),
                                                    Status(StatusCode.ERROR)])),
    "parent": st.one_of(st.none(), st.tuples(_IDS, _IDS, st.booleans(),
                                             st.sampled_from(["", "vendor=1", "a=b,c=d"]))),
    "provider": st.integers(0, 1), "scope": st.sampled_from([("sseguard", "1.0"), ("other", None)]),
})

_exported = InMemorySpanExporter()
_providers = [TracerProvider(resource=Resource({"service.name": name})) for name in ("one", "two")]
for _provider in _providers:
    _provider.add_span_processor(SimpleSpanProcessor(_exported))
_encoder = SpanEncoder(cache_limit=24, key_limit=8)


def _make(spec: dict[str, Any]) -> None:
    tracer = _providers[spec["provider"]].get_tracer(*spec["scope"])
    context = None
    if spec["parent"] is not None:
        trace_id, span_id, remote, state = spec["parent"]
        parent = SpanContext(trace_id << 64 | span_id, span_id, is_remote=remote,
                             trace_flags=TraceFlags(TraceFlags.SAMPLED),
                             trace_state=TraceState.from_header([state]) if state else None)
        context = trace.set_span_in_context(trace.NonRecordingSpan(parent))
    links = [Link(SpanContext(t, s, is_remote=r), attrs) for t, s, r, attrs in spec["links"]]
    start, length = spec["times"]
    span = tracer.start_span(spec["name"], context=context, kind=spec["kind"],
                             attributes=spec["attributes"], links=links, start_time=start)
    for name, attrs in spec["events"]:
        span.add_event(name, attrs, timestamp=start + 1)
    if spec["status"] is not None:
        span.set_status(spec["status"])
    span.end(end_time=start + length)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_SPAN, min_size=1, max_size=6))
def test_the_request_is_the_sdk_encoder_s_byte_for_byte(specs: list[dict[str, Any]]) -> None:
    _exported.clear()
    for spec in specs:
        _make(spec)
    spans = _exported.get_finished_spans()
    assert len(spans) == len(specs)
    ours = _encoder.encode(spans).SerializeToString(deterministic=True)
    assert ours == encode_spans(spans).SerializeToString(deterministic=True)


def test_a_nan_attribute_is_written_as_nan() -> None:
    _exported.clear()
    tracer = _providers[0].get_tracer("sseguard")
    span = tracer.start_span("x", attributes={"nan": math.nan, "ok": "yes"}, start_time=1)
    span.end(end_time=2)
    (finished,) = _exported.get_finished_spans()
    (attributes,) = [s.attributes for s in
                     _encoder.encode([finished]).resource_spans[0].scope_spans[0].spans]
    assert [a.key for a in attributes] == ["nan", "ok"]
    assert math.isnan(attributes[0].value.double_value)
    assert attributes[1].value.string_value == "yes"
