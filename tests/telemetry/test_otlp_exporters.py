"""The span exporters ``configure`` sets up (OTLP/HTTP and gRPC, their requests written by
``SpanEncoder``) deliver to real OTLP receivers on 127.0.0.1 what the SDK made; the HTTP one keeps
the SDK's size limit (a request over it is not sent) and its answer after shutdown."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, Status, StatusCode
from tests.telemetry._otlp_support import otel_env, otlp_grpc_receiver, otlp_http_receiver

from sseguard.telemetry import otel, otlp_grpc, otlp_http


def _two_spans() -> Any:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "exporter-under-test"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("sseguard", "9.9")
    for n in range(2):
        span = tracer.start_span("chat asked-model", kind=SpanKind.CLIENT,
                                 attributes={"gen_ai.operation.name": "chat", "sseguard.stream.chunks": n,
                                             "gen_ai.response.finish_reasons": ("stop",)},
                                 start_time=1_000)
        span.add_event("sseguard.finding", {"sseguard.finding.kind": "truncated"}, timestamp=1_500)
        span.set_status(Status(StatusCode.ERROR, "the stream failed the policy: truncated"))
        span.end(end_time=2_000)
    return memory.get_finished_spans()


@pytest.mark.parametrize(("protocol", "receiver", "kind"), [
    ("http/protobuf", otlp_http_receiver, otlp_http.EncodingSpanExporter),
    ("grpc", otlp_grpc_receiver, otlp_grpc.EncodingSpanExporter)])
def test_the_exporter_delivers_what_the_sdk_made(protocol: str, receiver: Any, kind: type,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    with receiver() as (endpoint, received):
        for name, value in otel_env(endpoint, protocol).items():
            monkeypatch.setenv(name, value)
        exporter = otel._span_exporter(protocol)
        assert type(exporter) is kind
        try:
            assert exporter.export(_two_spans()) == SpanExportResult.SUCCESS
            spans = received.wait_spans(2)
        finally:
            exporter.shutdown()
    assert len(spans) == 2
    assert sorted(s.attributes["sseguard.stream.chunks"] for s in spans) == [0, 1]
    for span in spans:
        assert span.name == "chat asked-model"
        assert span.kind == 3  # SPAN_KIND_CLIENT
        assert span.attributes["gen_ai.operation.name"] == "chat"
        assert span.attributes["gen_ai.response.finish_reasons"] == ("stop",)
        assert span.status == 2  # STATUS_CODE_ERROR
        assert span.status_message == "the stream failed the policy: truncated"
        assert span.events == [("sseguard.finding", {"sseguard.finding.kind": "truncated"})]
        assert span.resource["service.name"] == "exporter-under-test"


def test_an_http_request_over_the_size_limit_is_not_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    with otlp_http_receiver() as (endpoint, received):
        for name, value in otel_env(endpoint).items():
            monkeypatch.setenv(name, value)
        exporter = otlp_http.EncodingSpanExporter(max_request_size=100)
        try:
            assert exporter.export(_two_spans()) == SpanExportResult.FAILURE
            # The same exporter with room for them sends them: the limit was the reason.
            roomy = otlp_http.EncodingSpanExporter(max_request_size=100_000)
            assert roomy.export(_two_spans()) == SpanExportResult.SUCCESS
            assert len(received.wait_spans(2)) == 2
            roomy.shutdown()
        finally:
            exporter.shutdown()
        assert exporter.export(_two_spans()) == SpanExportResult.FAILURE  # after shutdown
    assert len(received.spans) == 2
