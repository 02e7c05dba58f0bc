"""Finished spans written as an OTLP export request, for the exporters ``configure`` sets up.

The OTLP exporters' own encoder makes each span's messages on their own and then copies them into
the request's scope, resource and request messages, one level at a time, and builds every attribute
anew: ~56 µs a span of the proxy's 17 attributes, the largest part of what ``--otel`` costs a stream.
Here each span is written straight into its place in the request, and an attribute already written
with the same key and value (the operation, provider, models, server, ending … repeat from stream to
stream) is copied from the message made the first time: ~24 µs (13 where every value repeats); a
key whose values keep changing (ids, counts) is no longer looked up once it had ``KEY_LIMIT``. The
request is the same message field for field (``tests/telemetry/test_otlp_spans.py`` compares the
two on generated spans).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as SpanMessage
from opentelemetry.proto.trace.v1.trace_pb2 import SpanFlags
from opentelemetry.trace import SpanKind

_log = logging.getLogger(__name__)

_KINDS = {SpanKind.INTERNAL: SpanMessage.SPAN_KIND_INTERNAL,
          SpanKind.SERVER: SpanMessage.SPAN_KIND_SERVER,
          SpanKind.CLIENT: SpanMessage.SPAN_KIND_CLIENT,
          SpanKind.PRODUCER: SpanMessage.SPAN_KIND_PRODUCER,
          SpanKind.CONSUMER: SpanMessage.SPAN_KIND_CONSUMER}
_HAS_IS_REMOTE = SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
_IS_REMOTE = SpanFlags.SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK
#: Attribute messages kept for reuse at most; past it the cache starts again.
CACHE_LIMIT = 4096
#: Distinct values of one key kept at most: a key with more (a response id, byte and token counts)
#: is one whose values rarely repeat, and is no longer looked up or kept.
KEY_LIMIT = 32
#: The value types whose attribute messages are reused: equal values of these are the same value
#: (``1 == 1.0 == True`` is why the type is part of the key, and why mixed tuples are not kept).
_SCALARS = (str, bool, int, float)


class SpanEncoder:
    """Writes finished spans (the SDK's ``ReadableSpan``) as one ``ExportTraceServiceRequest``.
    One encoder per exporter: its attribute cache is used from the exporter's thread only."""

    def __init__(self, cache_limit: int = CACHE_LIMIT, key_limit: int = KEY_LIMIT) -> None:
        self._cache: dict[tuple[str, type, object], KeyValue] = {}
        self._cache_limit = cache_limit
        self._key_limit = key_limit
        self._kept: dict[str, int] = {}  # how many values of each key the cache holds

    def encode(self, spans: Sequence[Any]) -> ExportTraceServiceRequest:
        request = ExportTraceServiceRequest()
        # Grouped by resource, then instrumentation scope, in the order they first appear.
        resources: dict[Any, tuple[Any, dict[Any, Any]]] = {}
        for span in spans:
            resource = span.resource
            found = resources.get(resource)
            if found is None:
                resource_spans = request.resource_spans.add()
                resource_spans.resource.SetInParent()
                resource_spans.resource.attributes.extend(self._attributes(resource.attributes))
                resource_spans.schema_url = resource.schema_url
                found = resources[resource] = (resource_spans, {})
            resource_spans, scopes = found
            scope = span.instrumentation_scope or None
            scope_spans = scopes.get(scope)
            if scope_spans is None:
                scope_spans = scopes[scope] = resource_spans.scope_spans.add()
                scope_spans.scope.SetInParent()
                if scope is not None:
                    scope_spans.scope.name = scope.name
                    if scope.version:
                        scope_spans.scope.version = scope.version
                    scope_spans.scope.attributes.extend(self._attributes(scope.attributes))
                    if scope.schema_url:
                        scope_spans.schema_url = scope.schema_url
            self._write_span(scope_spans.spans.add(), span)
        return request

    def _write_span(self, message: SpanMessage, span: Any) -> None:
        context = span.get_span_context()
        message.trace_id = context.trace_id.to_bytes(16, "big")
        message.span_id = context.span_id.to_bytes(8, "big")
        if context.trace_state is not None:
            message.trace_state = ",".join(f"{k}={v}" for k, v in context.trace_state.items())
        parent = span.parent
        if parent:
            message.parent_span_id = parent.span_id.to_bytes(8, "big")
        message.flags = _flags(parent)
        message.name = span.name
        message.kind = _KINDS[span.kind]
        message.start_time_unix_nano = span.start_time or 0
        message.end_time_unix_nano = span.end_time or 0
        message.attributes.extend(self._attributes(span.attributes))
        message.dropped_attributes_count = span.dropped_attributes
        for event in span.events:
            written = message.events.add()
            written.name = event.name
            written.time_unix_nano = event.timestamp
            written.attributes.extend(self._attributes(event.attributes))
            written.dropped_attributes_count = event.dropped_attributes
        message.dropped_events_count = span.dropped_events
        for link in span.links:
            written_link = message.links.add()
            written_link.trace_id = link.context.trace_id.to_bytes(16, "big")
            written_link.span_id = link.context.span_id.to_bytes(8, "big")
            written_link.attributes.extend(self._attributes(link.attributes))
            written_link.dropped_attributes_count = link.dropped_attributes
            written_link.flags = _flags(link.context)
        message.dropped_links_count = span.dropped_links
        if span.status is not None:
            message.status.code = span.status.status_code.value
            if span.status.description:
                message.status.message = span.status.description

    def _attributes(self, attributes: Mapping[str, object] | None) -> list[KeyValue]:
        if not attributes:
            return []
        written = []
        cache, kept, key_limit = self._cache, self._kept, self._key_limit
        for key, value in attributes.items():
            reusable = kept.get(key, 0) < key_limit and (type(value) in _SCALARS or (
                type(value) is tuple and all(type(v) is str for v in value)))
            if reusable:
                cached = cache.get((key, type(value), value))
                if cached is not None:
                    written.append(cached)
                    continue
            try:
                pair = KeyValue(key=key)
                _write_value(pair.value, value)
            except (TypeError, ValueError) as error:
                _log.error("attribute %s not exported: %s", key, error)
                continue
            if reusable:
                if len(cache) >= self._cache_limit:
                    cache.clear()
                    kept.clear()
                cache[(key, type(value), value)] = pair
                kept[key] = kept.get(key, 0) + 1
            written.append(pair)
        return written


def _flags(parent: Any) -> int:
    return _HAS_IS_REMOTE | _IS_REMOTE if parent is not None and parent.is_remote else _HAS_IS_REMOTE


def _write_value(message: AnyValue, value: object) -> None:
    if value is None:
        message.SetInParent()
        return
    if isinstance(value, bool):
        message.bool_value = value
    elif isinstance(value, str):
        message.string_value = value
    elif isinstance(value, int):
        message.int_value = value
    elif isinstance(value, float):
        message.double_value = value
    elif isinstance(value, bytes):
        message.bytes_value = value
    elif isinstance(value, Sequence):
        array = message.array_value
        array.SetInParent()
        for item in value:
            _write_value(array.values.add(), item)
    elif isinstance(value, Mapping):
        kvlist = message.kvlist_value
        kvlist.SetInParent()
        for key, item in value.items():
            _write_value(kvlist.values.add(key=str(key)).value, item)
    else:
        raise TypeError(f"an attribute value of type {type(value).__name__}")
