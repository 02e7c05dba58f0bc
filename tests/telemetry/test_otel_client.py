"""The strict transports' spans: the real openai and anthropic SDKs on ``AsyncStrictTransport`` /
``StrictTransport`` with ``otel=``, against ``sseguard chaos``, exporting through the OpenTelemetry
SDK's OTLP/HTTP exporter to a receiver on loopback. Each span nests under the application's span
that was current when the request was sent, and says how the stream ended."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from _otlp_support import (
    EXPECTED,
    PROVIDERS,
    STATUS_ERROR,
    STATUS_UNSET,
    otlp_http_receiver,
    path_of,
    request_of,
)
from sseguard.chaos import ChaosConfig, run_chaos
from sseguard.client import AsyncStrictTransport, StrictTransport, ended_badly

MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture
def pipeline() -> Iterator[tuple[Any, Any, Any]]:
    """An application's own tracing set up (SDK, batch processor, OTLP/HTTP exporter): its tracer,
    sseguard's ``Telemetry`` on its providers, and what the receiver got."""
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from sseguard.telemetry.otel import Telemetry

    with otlp_http_receiver() as (endpoint, received):
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(BatchSpanProcessor(
            OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces"), schedule_delay_millis=100))
        meter_provider = MeterProvider(metric_readers=[PeriodicExportingMetricReader(
            OTLPMetricExporter(endpoint=f"{endpoint}/v1/metrics"), export_interval_millis=500)])
        yield tracer_provider.get_tracer("app"), Telemetry(tracer_provider, meter_provider), received
        tracer_provider.shutdown()
        meter_provider.shutdown()


def _spans(received: Any, count: int) -> tuple[dict[str, Any], list[Any]]:
    spans = received.wait_spans(count)
    apps = {s.name: s for s in spans if s.name.startswith("step ")}
    ours = [s for s in spans if not s.name.startswith("step ")]
    return apps, ours


async def test_openai_chat_spans_nest_under_the_applications_span(pipeline: Any) -> None:
    tracer, telemetry, received = pipeline
    faults = ["none", "truncated", "cut_mid_frame", "no_finish", "error_event"]
    async with run_chaos(ChaosConfig()) as srv:
        client = openai.AsyncOpenAI(
            base_url=srv.url, api_key="sk-test", max_retries=0,
            http_client=httpx2.AsyncClient(transport=AsyncStrictTransport(policy="strict",
                                                                          otel=telemetry)))
        for fault in faults:
            with tracer.start_as_current_span(f"step {fault}"):
                try:
                    stream = await client.chat.completions.create(
                        model="chaos-1", messages=MESSAGES, stream=True,  # type: ignore[arg-type]
                        extra_headers={"x-sseguard-inject": fault})
                    async for _ in stream:
                        pass
                except openai.APIError as exc:
                    assert fault != "none" and ended_badly(exc) is not None
        await client.close()
    apps, ours = _spans(received, 2 * len(faults))
    assert len(ours) == len(faults)
    for fault, span in zip(faults, ours, strict=True):
        step = apps[f"step {fault}"]
        assert (span.trace_id, span.parent_span_id) == (step.trace_id, step.span_id), fault
        assert span.name == "chat chaos-1"
        assert span.attributes["gen_ai.provider.name"] == "openai"
        assert span.attributes["server.address"] == "127.0.0.1"
        if fault == "none":
            assert span.status == STATUS_UNSET
            assert "error.type" not in span.attributes
            assert span.attributes["gen_ai.response.finish_reasons"] == ("stop",)
        else:
            assert span.status == STATUS_ERROR, fault
            assert span.attributes["error.type"] == fault
            assert span.attributes["gen_ai.response.finish_reasons"] == ()


async def test_anthropic_messages_span_on_the_sync_transport(pipeline: Any) -> None:
    tracer, telemetry, received = pipeline

    def ask(base: str, fault: str) -> str | None:
        client = anthropic.Anthropic(
            base_url=base, api_key="sk-test", max_retries=0,
            http_client=httpx2.Client(transport=StrictTransport(policy="strict", otel=telemetry)))
        with tracer.start_as_current_span(f"step {fault}"):
            try:
                with client.messages.stream(model="chaos-1", max_tokens=64, messages=MESSAGES,  # type: ignore[arg-type]
                                            extra_headers={"x-sseguard-inject": fault}) as stream:
                    for _ in stream:
                        pass
            except anthropic.APIError as exc:
                failed = ended_badly(exc)
                return None if failed is None else str(failed.verdict.ending)
            finally:
                client.close()
        return "passed"

    async with run_chaos(ChaosConfig()) as srv:
        base = srv.url.removesuffix("/v1")
        results = [await asyncio.to_thread(ask, base, fault) for fault in ("none", "truncated")]
    assert results == ["passed", "truncated"]
    apps, ours = _spans(received, 4)
    assert [s.attributes.get("error.type") for s in ours] == [None, "truncated"]
    assert [s.attributes["gen_ai.provider.name"] for s in ours] == ["anthropic", "anthropic"]
    assert ours[0].attributes["gen_ai.response.finish_reasons"] == ("end_turn",)
    assert ours[1].parent_span_id == apps["step truncated"].span_id


def test_otel_without_the_extra_is_a_config_error(monkeypatch: Any) -> None:
    import sys

    from sseguard.core.errors import ConfigError

    monkeypatch.setitem(sys.modules, "opentelemetry.sdk", None)  # as if the extra were missing
    with pytest.raises(ConfigError, match=r"sseguard\[otel\]"):
        StrictTransport(otel=True)


@pytest.mark.parametrize("api", ["chat", "responses", "messages", "gemini"])
async def test_every_ending_of_the_protocol_reaches_the_transports_span(api: str,
                                                                        pipeline: Any) -> None:
    """Straight from chaos through ``AsyncStrictTransport(otel=…)``, one request per ending: the
    span says what the proxy's does. A non-2xx answer is no stream the transport checks: no span."""
    _, telemetry, received = pipeline
    faults = [f for f in EXPECTED[api] if f != "http_error"]
    transport = AsyncStrictTransport(policy="strict", stall_timeout=2.0, otel=telemetry)
    async with run_chaos(ChaosConfig()) as srv, httpx2.AsyncClient(transport=transport) as http:
        origin = srv.url.removesuffix("/v1")
        for fault in [*faults, "http_error"]:
            try:
                async with http.stream("POST", f"{origin}{path_of(api)}", json=request_of(api),
                                       headers={"x-sseguard-inject": fault},
                                       timeout=30.0) as resp:
                    async for _ in resp.aiter_raw():
                        pass
            except httpx2.TransportError as exc:
                assert ended_badly(exc) is not None, fault
    spans = received.wait_spans(len(faults))
    assert len(spans) == len(faults)  # http_error: none
    for fault, span in zip(faults, spans, strict=True):
        error_type, reasons = EXPECTED[api][fault]
        assert span.attributes.get("error.type") == error_type, fault
        assert span.attributes["gen_ai.response.finish_reasons"] == reasons, fault
        assert span.attributes["gen_ai.provider.name"] == PROVIDERS[api]
        assert span.status == (STATUS_UNSET if error_type is None else STATUS_ERROR), fault
