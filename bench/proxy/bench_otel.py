"""What ``--otel`` costs per stream: the CPU of one call's span and metrics, OTLP export included.

A stream's telemetry is made once, when the stream is over (``sseguard.telemetry``), so its cost is a
fixed amount per stream, whatever the stream's length: this measures that amount, in one process,
with the SDK set up exactly as ``--otel`` sets it up (``telemetry.otel.configure``: batch span
processor, periodic metric reader, OTLP/HTTP exporters) and exporting to a sink in another process
that reads and drops what it gets (``bench_proxy.py --otlp-sink``). The process's CPU time (every
thread: the caller's span and metric calls and the exporter's encoding and sending) is divided by the
streams emitted; the exporter is flushed inside the measured time. ``bench_proxy.py --otel`` measures
the same cost as a share of the proxy's CPU per event.

``--healthy-spans 0.1`` measures with ``SSEGUARD_OTEL_HEALTHY_SPANS=0.1`` (a span for one passing
stream in ten; every failing stream and every metric point kept). ``--encoders`` measures only the
writing of the export request: the same spans through the SDK's OTLP encoder and sseguard's
``SpanEncoder`` (the span exporters ``--otel`` sets up), CPU µs per span, best of ``--repeats``.

Run: .venv/bin/python -m bench.proxy.bench_otel [--streams 5000] [--repeats 5] [--healthy-spans SHARE]
     [--encoders]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from sseguard.core.policy import Policy
from sseguard.core.verdict import Ending, Finding, FindingKind, Verdict
from sseguard.telemetry import genai, load

HEALTHY = Verdict(Ending.COMPLETE, message={
    "id": "chatcmpl-1", "model": "served-model", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "…"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 900, "completion_tokens": 100,
              "prompt_tokens_details": {"cached_tokens": 640}}},
    chunks=100, bytes=20_000, first_id="chatcmpl-1")
TRUNCATED = Verdict(Ending.TRUNCATED, findings=(
    Finding(FindingKind.TOOL_CALL_UNTERMINATED, "the arguments of call 0 never closed", 51, 9_000),),
    message={"model": "served-model"}, chunks=50, bytes=9_000, first_id="chatcmpl-2")


def varied(verdict: Verdict, count: int = 1000) -> list[Verdict]:
    """``count`` copies of ``verdict`` that differ as real streams do: their response id, chunks,
    bytes and token counts (what a span carries that does not repeat from stream to stream)."""
    out = []
    for n in range(count):
        message = dict(verdict.message)
        if "usage" in message:
            message["usage"] = {"prompt_tokens": 900 + n, "completion_tokens": 100 + n % 97,
                                "prompt_tokens_details": {"cached_tokens": 640 + n % 13}}
        out.append(replace(verdict, message=message, chunks=verdict.chunks + n % 89,
                           bytes=verdict.bytes + 7 * n, first_id=f"chatcmpl-{n}"))
    return out


def measure(telemetry: object, flush: object, verdict: Verdict, streams: int) -> float:
    """CPU µs per stream of ``streams`` emits (each with its own id, counts and times: ``varied``),
    the export flushed before the clock stops."""
    policy = Policy()
    emit = telemetry.emit  # type: ignore[attr-defined]
    verdicts = varied(verdict)
    start = time.process_time()
    for n in range(streams):
        emit(genai.MeasuredCall(verdict=verdicts[n % len(verdicts)], policy=policy,
                                start_ns=time.time_ns(), duration_s=1.0 + n % 1000 / 1000,
                                request_model="asked-model", ttfc_s=0.1 + n % 997 / 10_000,
                                server_address="127.0.0.1", server_port=8000))
    flush()  # type: ignore[operator]
    return (time.process_time() - start) * 1e6 / streams


def encoders(streams: int, repeats: int) -> None:
    """CPU µs per span of writing ``streams`` healthy spans (batches of 512, serialized) as an OTLP
    request: the SDK's encoder, then ``SpanEncoder``; the resource hashed once, as ``configure``'s."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from sseguard.telemetry.otel import Telemetry, _resource_hashed_once
    from sseguard.telemetry.otlp_spans import SpanEncoder

    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=_resource_hashed_once(Resource.create({})))  # as configure
    provider.add_span_processor(SimpleSpanProcessor(memory))
    measure(Telemetry(provider, MeterProvider()), provider.force_flush, HEALTHY, streams)
    spans = memory.get_finished_spans()
    for name, encode in (("the SDK's encode_spans", encode_spans),
                         ("SpanEncoder", SpanEncoder().encode)):
        runs = []
        for _ in range(repeats):
            start = time.process_time()
            for i in range(0, len(spans), 512):
                encode(spans[i:i + 512]).SerializePartialToString()
            runs.append((time.process_time() - start) * 1e6 / len(spans))
        print(f"{name}: {min(runs):.1f} µs CPU per span (best of {repeats} × {len(spans):,})",
              flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--healthy-spans", default="1")
    parser.add_argument("--encoders", action="store_true",
                        help="measure only the writing of the export request, SDK against sseguard")
    args = parser.parse_args()
    if args.encoders:
        encoders(args.streams, args.repeats)
        return
    sink = subprocess.Popen([sys.executable, "-m", "bench.proxy.bench_proxy", "--otlp-sink"],
                            stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2])
    try:
        assert sink.stdout is not None
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = sink.stdout.readline().split()[3]
        os.environ["OTEL_EXPORTER_OTLP_PROTOCOL"] = "http/protobuf"
        os.environ["SSEGUARD_OTEL_HEALTHY_SPANS"] = args.healthy_spans
        from opentelemetry import trace

        pipeline = load().configure(service_name="bench")
        provider = trace.get_tracer_provider()
        flush = provider.force_flush  # type: ignore[attr-defined]
        measure(pipeline.telemetry, flush, HEALTHY, 500)  # warm-up
        for name, verdict in (("healthy (complete, 100 chunks)", HEALTHY),
                              ("truncated, one finding", TRUNCATED)):
            runs = [measure(pipeline.telemetry, flush, verdict, args.streams)
                    for _ in range(args.repeats)]
            print(f"{name}: {statistics.median(runs):.0f} µs CPU per stream (median of "
                  f"{args.repeats} × {args.streams:,}; {min(runs):.0f}–{max(runs):.0f})", flush=True)
        pipeline.shutdown()
    finally:
        sink.terminate()
        sink.wait(10)


if __name__ == "__main__":
    main()
