"""The resource ``configure`` gives its providers is hashed once: the OTLP encoders group every
exported span by its resource, and the SDK's ``Resource`` otherwise writes its attributes out as
JSON for each hash. It must stay equal, and hash equal, to the SDK's own resource of the same
attributes."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk import resources
from opentelemetry.sdk.resources import Resource

from sseguard.telemetry.otel import _resource_hashed_once


def test_a_hashed_once_resource_equals_and_hashes_as_the_sdk_s() -> None:
    plain = Resource({"service.name": "sseguard-proxy", "deployment.environment": "test"},
                     "https://opentelemetry.io/schemas/1.21.0")
    once = _resource_hashed_once(plain)
    assert once == plain and plain == once
    assert hash(once) == hash(plain)
    assert dict(once.attributes) == {"service.name": "sseguard-proxy",
                                     "deployment.environment": "test"}
    assert once.schema_url == "https://opentelemetry.io/schemas/1.21.0"
    grouped = {plain: "spans"}
    assert grouped[once] == "spans"
    assert once != Resource({"service.name": "another"})


def test_hashing_it_again_writes_no_json(monkeypatch: pytest.MonkeyPatch) -> None:
    once = _resource_hashed_once(Resource({"service.name": "sseguard-probe"}))
    calls: list[Any] = []
    real = resources.dumps

    def counting(*args: Any, **kwargs: Any) -> str:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(resources, "dumps", counting)
    for _ in range(3):
        hash(once)
    assert calls == []
    hash(Resource({"service.name": "sseguard-probe"}))
    assert len(calls) == 1  # the SDK's own resource writes JSON each time: the count can fail
