"""The proxy's spans over a real OTLP pipeline: ``proxy --otel`` exports with the OpenTelemetry SDK's
own OTLP exporters (HTTP/protobuf and gRPC) to a receiver on loopback, in front of ``sseguard chaos``.

For every bad ending chaos injects, in each of the four protocols, the span is ERROR with
``error.type`` the ending and no finish reason it never got; a healthy stream's span carries no error
and its finish reason. The spans join the client's trace (``traceparent``), and a healed stream says
how it was healed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from typing import Any

import pytest

from _otlp_support import (
    EXPECTED,
    PROVIDERS,
    STATUS_ERROR,
    STATUS_UNSET,
    otel_env,
    otlp_grpc_receiver,
    otlp_http_receiver,
    path_of,
    request_of,
)
from sseguard.chaos import ChaosConfig, Fault, run_chaos
from support.proxy import chaos_proxy, raw_post

#: Strict (a missing sentinel fails too), no retry (every ending reaches the span as it came), and
#: a stall cut after 2 s.
OPTIONS: dict[str, Any] = {"otel": True, "policy": "strict", "retry": 0, "stall_timeout": 2.0}


@pytest.mark.parametrize("api", ["chat", "responses", "messages", "gemini"])
async def test_every_ending_of_the_protocol_reaches_the_span(api: str, monkeypatch: Any) -> None:
    with otlp_http_receiver() as (endpoint, received):
        for name, value in otel_env(endpoint, OTEL_SERVICE_NAME="guard-under-test").items():
            monkeypatch.setenv(name, value)
        injected = list(EXPECTED[api])
        async with chaos_proxy(**OPTIONS) as (_, px):
            for count, fault in enumerate(injected, 1):
                await raw_post(f"http://127.0.0.1:{px.port}{path_of(api)}", request_of(api),
                               inject=fault, timeout=30.0)
                spans = received.wait_spans(count)  # one request at a time: spans come in order
                span = spans[-1]
                error_type, reasons = EXPECTED[api][fault]
                attrs = span.attributes
                assert attrs["sseguard.protocol"] == api, fault
                assert attrs["gen_ai.provider.name"] == PROVIDERS[api]
                assert attrs["gen_ai.request.model"] == "chaos-1"
                assert attrs["gen_ai.request.stream"] is True
                assert attrs.get("gen_ai.response.finish_reasons", ()) == reasons, fault
                assert attrs.get("error.type") == error_type, fault
                if error_type is None:
                    assert span.status == STATUS_UNSET, fault
                    assert attrs["sseguard.stream.ending"] == "complete"
                    assert attrs["gen_ai.usage.output_tokens"] > 0
                    assert attrs["gen_ai.response.time_to_first_chunk"] > 0
                    assert attrs["gen_ai.response.id"]
                else:
                    assert span.status == STATUS_ERROR, fault
                    assert error_type in span.status_message
        assert span.resource["service.name"] == "guard-under-test"
        assert span.kind == 3  # CLIENT: the proxy's call to the model


async def test_a_finding_is_an_event_of_the_span(monkeypatch: Any) -> None:
    with otlp_http_receiver() as (endpoint, received):
        for name, value in otel_env(endpoint).items():
            monkeypatch.setenv(name, value)
        async with chaos_proxy(**OPTIONS) as (_, px):
            await raw_post(f"{px.url}/chat/completions", request_of("chat"),
                           inject="tool_call_unterminated")
        (span,) = received.wait_spans(1)
    kinds = [attrs["sseguard.finding.kind"] for name, attrs in span.events
             if name == "sseguard.finding"]
    assert kinds == ["tool_call_unterminated"]
    assert span.attributes["sseguard.stream.findings"] == ("tool_call_unterminated",)


async def test_the_span_joins_the_callers_trace(monkeypatch: Any) -> None:
    trace_id, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    with otlp_http_receiver() as (endpoint, received):
        for name, value in otel_env(endpoint).items():
            monkeypatch.setenv(name, value)
        async with chaos_proxy(**OPTIONS) as (_, px):
            await raw_post(f"{px.url}/chat/completions", request_of("chat"),
                           headers={"traceparent": f"00-{trace_id}-{parent}-01"})
        (span,) = received.wait_spans(1)
    assert (span.trace_id, span.parent_span_id) == (trace_id, parent)


async def test_exports_over_grpc(monkeypatch: Any) -> None:
    with otlp_grpc_receiver() as (endpoint, received):
        for name, value in otel_env(endpoint, "grpc").items():
            monkeypatch.setenv(name, value)
        async with chaos_proxy(**OPTIONS) as (_, px):
            for fault in ("none", "truncated", "cut_mid_frame"):
                await raw_post(f"{px.url}/chat/completions", request_of("chat"), inject=fault)
        spans = received.wait_spans(3)
    assert [s.attributes.get("error.type") for s in spans] == [None, "truncated", "cut_mid_frame"]
    assert [s.status for s in spans] == [STATUS_UNSET, STATUS_ERROR, STATUS_ERROR]


async def test_the_metrics_count_endings_by_protocol_and_healing(monkeypatch: Any) -> None:
    with otlp_http_receiver() as (endpoint, received):
        for name, value in otel_env(endpoint).items():
            monkeypatch.setenv(name, value)
        async with chaos_proxy(**OPTIONS) as (_, px):
            for fault in ("none", "truncated", "truncated"):
                await raw_post(f"{px.url}/chat/completions", request_of("chat"), inject=fault)
        # Leaving the block shut the proxy down, which flushed its metrics.
    endings = {(p.attributes["sseguard.stream.ending"], p.attributes["sseguard.heal.how"]): p.value
               for p in received.points if p.metric == "sseguard.stream.endings"}
    assert endings[("complete", "none")] == 1
    assert endings[("truncated", "none")] == 2
    durations = [p for p in received.points if p.metric == "gen_ai.client.operation.duration"]
    assert sum(p.value for p in durations) == 3
    assert {p.attributes.get("error.type") for p in durations} == {None, "truncated"}
    tokens = {p.attributes["gen_ai.token.type"] for p in received.points
              if p.metric == "gen_ai.client.token.usage"}
    assert tokens == {"input", "output"}
    assert any(p.metric == "gen_ai.client.operation.time_to_first_chunk" for p in received.points)


async def test_a_healed_stream_says_how(monkeypatch: Any) -> None:
    """Chaos truncates each conversation's first answer; ``--resume vllm`` continues it: the one
    span is OK, says it was resumed after the broken attempt's bytes, and has that attempt as an
    event."""
    with otlp_http_receiver() as (endpoint, received):
        for name, value in otel_env(endpoint).items():
            monkeypatch.setenv(name, value)
        async with chaos_proxy(ChaosConfig(first_answer=Fault.TRUNCATED), otel=True,
                               policy="strict", resume="vllm") as (_, px):
            await raw_post(f"{px.url}/chat/completions", request_of("chat"))
        (span,) = received.wait_spans(1)
    attrs = span.attributes
    assert span.status == STATUS_UNSET
    assert attrs["sseguard.stream.ending"] == "complete"
    assert attrs["sseguard.heal.how"] == "resume"
    assert attrs["sseguard.heal.attempts"] == 1
    assert attrs["sseguard.heal.dialect"] == "vllm"
    attempts = [a for name, a in span.events if name == "sseguard.heal.attempt"]
    assert [a["sseguard.stream.ending"] for a in attempts] == ["truncated"]
    assert attrs["sseguard.heal.resumed_bytes"] == attempts[0]["sseguard.heal.attempt.bytes"] > 0


async def test_a_retried_stream_says_how(monkeypatch: Any) -> None:
    with otlp_http_receiver() as (endpoint, received):
        for name, value in otel_env(endpoint).items():
            monkeypatch.setenv(name, value)
        async with chaos_proxy(ChaosConfig(first_answer=Fault.EMPTY), otel=True,
                               policy="strict", retry=2, retry_max_wait=1.0) as (_, px):
            await raw_post(f"{px.url}/chat/completions", request_of("chat"))
        (span,) = received.wait_spans(1)
    attrs = span.attributes
    assert (span.status, attrs["sseguard.heal.how"], attrs["sseguard.heal.attempts"]) == \
        (STATUS_UNSET, "retry", 1)
    assert [a["sseguard.stream.ending"] for name, a in span.events
            if name == "sseguard.heal.attempt"] == ["empty"]
    assert "sseguard.heal.resumed_bytes" not in attrs


async def test_healthy_spans_can_be_sampled_while_every_failure_keeps_its_span(
        monkeypatch: Any) -> None:
    """``SSEGUARD_OTEL_HEALTHY_SPANS=0``: no span for a stream that passed, one for every stream that
    failed; the metrics still count them all."""
    with otlp_http_receiver() as (endpoint, received):
        for name, value in otel_env(endpoint, SSEGUARD_OTEL_HEALTHY_SPANS="0").items():
            monkeypatch.setenv(name, value)
        async with chaos_proxy(**OPTIONS) as (_, px):
            for fault in ("none", "truncated", "none", "cut_mid_frame", "none"):
                await raw_post(f"{px.url}/chat/completions", request_of("chat"), inject=fault)
        spans = received.wait_spans(2)
    assert [s.attributes["error.type"] for s in spans] == ["truncated", "cut_mid_frame"]
    endings = {p.attributes["sseguard.stream.ending"]: p.value for p in received.points
               if p.metric == "sseguard.stream.endings"}
    assert endings == {"complete": 3, "truncated": 1, "cut_mid_frame": 1}


async def test_the_proxy_command_exports_from_each_worker_and_flushes_on_sigterm() -> None:
    """``sseguard proxy --otel --workers 2`` as a person runs it: the ``OTEL_*`` variables, SIGTERM
    to stop; every stream's span has reached the receiver once the command has exited."""
    with otlp_http_receiver() as (endpoint, received):
        async with run_chaos(ChaosConfig()) as srv:
            env = {**os.environ, **otel_env(endpoint, OTEL_BSP_SCHEDULE_DELAY="60000")}
            proc = subprocess.Popen(
                [sys.executable, "-c", "from sseguard.cli import main; main()", "proxy",
                 "--upstream", srv.url, "--listen", "127.0.0.1:0", "--store", "none", "--otel",
                 "--workers", "2", "--retry", "0", "--policy", "strict"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
            try:
                assert proc.stdout is not None
                line = await asyncio.to_thread(proc.stdout.readline)
                url = line.split()[4]
                for i in range(10):
                    await raw_post(f"{url}/chat/completions", request_of("chat"),
                                   inject="truncated" if i % 2 else "none")
                # The batch processor waits a minute between exports: only the shutdown flushes.
                assert received.spans == []
                proc.send_signal(signal.SIGTERM)
                _, err = await asyncio.to_thread(proc.communicate, timeout=60)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(timeout=30)
        assert proc.returncode == 0, err
        spans = received.wait_spans(10)
    assert len(spans) == 10
    assert sorted(str(s.attributes.get("error.type")) for s in spans) == ["None"] * 5 + ["truncated"] * 5
    assert {s.resource["service.name"] for s in spans} == {"sseguard-proxy"}
