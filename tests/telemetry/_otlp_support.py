"""A loopback OTLP receiver for the tests: what an OpenTelemetry Collector would be handed.

The OTLP/HTTP receiver is a stdlib HTTP server in a thread of its own (the SDK exports from its own
threads, so the receiver must not depend on the test's event loop); the gRPC receiver is a ``grpc``
server with the ``opentelemetry-proto`` services. Both decode what they get with
``opentelemetry-proto`` into plain ``ReceivedSpan`` values and the metric points' names and attributes.
"""

from __future__ import annotations

import contextlib
import http.server
import importlib
import os
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import pytest


def _require(module: str) -> None:
    """CI installs ``sseguard[otel]`` with the test extras: there a missing module fails the tests."""
    if os.environ.get("CI"):
        importlib.import_module(module)
    else:
        pytest.importorskip(module, reason="needs pip install 'sseguard[otel]'")


_require("opentelemetry.sdk")

from opentelemetry.proto.collector.metrics.v1 import (  # noqa: E402
    metrics_service_pb2,
    metrics_service_pb2_grpc,
)
from opentelemetry.proto.collector.trace.v1 import (  # noqa: E402
    trace_service_pb2,
    trace_service_pb2_grpc,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue  # noqa: E402

from sseguard.core.contract import protocol  # noqa: E402
from sseguard.core.contract.request import BodySettings, Turn  # noqa: E402
from sseguard.core.verdict import Api  # noqa: E402

STATUS_UNSET, STATUS_OK, STATUS_ERROR = 0, 1, 2

#: Per protocol, what each injected ending gives: (error.type or None, finish reasons). Written out:
#: the contract tables decide these, and the test must not ask them.
EXPECTED: dict[str, dict[str, tuple[str | None, tuple[str, ...]]]] = {
    "chat": {
        "none": (None, ("stop",)), "truncated": ("truncated", ()), "no_done": ("no_done", ("stop",)),
        "no_finish": ("no_finish", ()), "cut_mid_frame": ("cut_mid_frame", ()),
        "transport_error": ("transport_error", ()), "error_event": ("error_event", ()),
        "http_error": ("http_error", ()), "empty": ("empty", ()),
        "tool_call_unterminated": ("truncated", ()), "stalled": ("stalled", ()),
    },
    "responses": {
        "none": (None, ("completed",)), "truncated": ("truncated", ()),
        "no_finish": ("no_finish", ()), "cut_mid_frame": ("cut_mid_frame", ()),
        "transport_error": ("transport_error", ()), "error_event": ("error_event", ("failed",)),
        "http_error": ("http_error", ()), "empty": ("empty", ()),
        "tool_call_unterminated": ("truncated", ()), "stalled": ("stalled", ()),
    },
    "messages": {
        "none": (None, ("end_turn",)), "truncated": ("truncated", ()),
        "no_done": ("no_done", ("end_turn",)), "no_finish": ("no_finish", ()),
        "cut_mid_frame": ("cut_mid_frame", ()), "transport_error": ("transport_error", ()),
        "error_event": ("error_event", ()), "http_error": ("http_error", ()), "empty": ("empty", ()),
        "tool_call_unterminated": ("truncated", ()), "stalled": ("stalled", ()),
    },
    "gemini": {
        "none": (None, ("STOP",)), "truncated": ("truncated", ()),
        "cut_mid_frame": ("cut_mid_frame", ()), "transport_error": ("transport_error", ()),
        "error_event": ("error_event", ()), "http_error": ("http_error", ()), "empty": ("empty", ()),
        "stalled": ("stalled", ()),
    },
}
#: The GenAI provider each protocol is named as.
PROVIDERS = {"chat": "openai", "responses": "openai", "messages": "anthropic", "gemini": "gcp.gemini"}


def request_of(api: str) -> dict[str, Any]:
    fmt = protocol(api).format
    return fmt.finish(fmt.render("", [Turn("user", "hi")], []), model="chaos-1", settings=BodySettings())


def path_of(api: str) -> str:
    if api == Api.GEMINI:
        return "/v1beta/models/chaos-1:streamGenerateContent?alt=sse"
    return protocol(api).served_paths()[0]


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return tuple(_value(x) for x in v.array_value.values)
    return getattr(v, kind) if kind else None


def _attrs(kvs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in kvs}


@dataclass
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    attributes: dict[str, Any]
    status: int
    status_message: str
    events: list[tuple[str, dict[str, Any]]]
    resource: dict[str, Any]


@dataclass
class ReceivedPoint:
    metric: str
    attributes: dict[str, Any]
    value: float  # a sum's value, a histogram's count


@dataclass
class Received:
    """Everything a receiver was sent, thread-safe."""

    spans: list[ReceivedSpan] = field(default_factory=list)
    points: list[ReceivedPoint] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add_traces(self, request: trace_service_pb2.ExportTraceServiceRequest) -> None:
        found = []
        for rs in request.resource_spans:
            resource = _attrs(rs.resource.attributes)
            for ss in rs.scope_spans:
                for s in ss.spans:
                    found.append(ReceivedSpan(
                        s.name, s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex(), s.kind,
                        _attrs(s.attributes), s.status.code, s.status.message,
                        [(e.name, _attrs(e.attributes)) for e in s.events], resource))
        with self.lock:
            self.spans.extend(found)

    def add_metrics(self, request: metrics_service_pb2.ExportMetricsServiceRequest) -> None:
        found = []
        for rm in request.resource_metrics:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    kind = m.WhichOneof("data")
                    for p in getattr(m, kind).data_points:
                        value = p.count if kind == "histogram" else \
                            (p.as_int if p.WhichOneof("value") == "as_int" else p.as_double)
                        found.append(ReceivedPoint(m.name, _attrs(p.attributes), value))
        with self.lock:
            self.points.extend(found)

    def wait_spans(self, count: int, timeout: float = 30.0) -> list[ReceivedSpan]:
        """The spans once at least ``count`` arrived (bounded: fails after ``timeout`` seconds)."""
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                if len(self.spans) >= count:
                    return list(self.spans)
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(self.spans)} spans arrived, {count} expected")
            time.sleep(0.05)


class _Handler(http.server.BaseHTTPRequestHandler):
    received: Received

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path == "/v1/traces":
            req = trace_service_pb2.ExportTraceServiceRequest()
            req.ParseFromString(body)
            self.received.add_traces(req)
            reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        elif self.path == "/v1/metrics":
            req_m = metrics_service_pb2.ExportMetricsServiceRequest()
            req_m.ParseFromString(body)
            self.received.add_metrics(req_m)
            reply = metrics_service_pb2.ExportMetricsServiceResponse().SerializeToString()
        else:
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def otlp_http_receiver() -> Iterator[tuple[str, Received]]:
    """An OTLP/HTTP protobuf receiver on 127.0.0.1: its endpoint (what
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` takes) and what it received."""
    received = Received()
    handler = type("Handler", (_Handler,), {"received": received})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


class _Traces(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, received: Received) -> None:
        self.received = received

    def Export(self, request: Any, context: Any) -> Any:
        self.received.add_traces(request)
        return trace_service_pb2.ExportTraceServiceResponse()


class _Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
    def __init__(self, received: Received) -> None:
        self.received = received

    def Export(self, request: Any, context: Any) -> Any:
        self.received.add_metrics(request)
        return metrics_service_pb2.ExportMetricsServiceResponse()


@contextlib.contextmanager
def otlp_grpc_receiver() -> Iterator[tuple[str, Received]]:
    """An OTLP/gRPC receiver on 127.0.0.1 (plaintext): its endpoint and what it received."""
    import grpc

    received = Received()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_Traces(received), server)
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(_Metrics(received), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"http://127.0.0.1:{port}", received
    finally:
        server.stop(grace=None).wait(10)


def otel_env(endpoint: str, protocol: str = "http/protobuf", **more: str) -> dict[str, str]:
    """The ``OTEL_*`` variables that send everything to ``endpoint`` at once (short intervals)."""
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
            "OTEL_EXPORTER_OTLP_INSECURE": "true", "OTEL_BSP_SCHEDULE_DELAY": "100",
            "OTEL_METRIC_EXPORT_INTERVAL": "500", **more}
