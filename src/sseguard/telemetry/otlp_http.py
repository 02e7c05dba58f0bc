"""The OTLP/HTTP span exporter ``configure`` sets up: the SDK's, configured by the same ``OTEL_*``
variables and sending the same request, written by ``otlp_spans.SpanEncoder`` (~24 µs a proxy's
span instead of ~56). Only the writing of the request is sseguard's: the SDK's client sends it (its
retries, headers, compression, TLS), and its size limit and self-metrics apply as they do there.

It relies on three of the SDK exporter's internals (``_client``, ``_metrics``,
``_max_request_size``; the ``[otel]`` extra pins the SDK to 1.45.x): where one is missing, the
exporter is the SDK's as it is (``span_exporter``)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.http._common import RequestPayloadTooLargeError
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from sseguard.telemetry.otlp_spans import SpanEncoder

_log = logging.getLogger(__name__)
_INTERNALS = ("_client", "_metrics", "_max_request_size", "_shutdown")


class EncodingSpanExporter(OTLPSpanExporter):
    """``OTLPSpanExporter`` (HTTP) whose request is written by ``SpanEncoder``."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._encoder = SpanEncoder()

    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        if self._shutdown:
            return super().export(spans)  # the SDK's own warning and FAILURE
        with self._metrics.export_operation(len(spans)) as result:
            try:
                body = self._encoder.encode(spans).SerializePartialToString()
            except Exception as error:  # a batch that cannot be written is dropped
                _log.error("spans not exported, their request could not be written: %s", error)
                result.error = error
                return SpanExportResult.FAILURE
            if 0 < self._max_request_size < len(body):
                _log.warning("spans not exported: their request is %d bytes, over the limit of "
                             "%d", len(body), self._max_request_size)
                # The SDK's own error: its self-metrics name the failure by the error's type.
                result.error = RequestPayloadTooLargeError(f"a span request of {len(body)} bytes")
                return SpanExportResult.FAILURE
            sent = self._client.export(body)
            if not sent.success:
                result.error = sent.error
                if sent.status_code is not None:
                    result.error_attrs = {"http.response.status_code": sent.status_code}
                return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS


def span_exporter() -> Any:
    """The exporter for ``OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf``."""
    exporter = EncodingSpanExporter()
    if all(hasattr(exporter, name) for name in _INTERNALS):
        return exporter
    _log.warning("the OpenTelemetry SDK's OTLP/HTTP exporter changed: its own encoder is used")
    return OTLPSpanExporter()
