"""OpenTelemetry for the proxy, the probe and the strict transports, in the GenAI conventions.

``genai`` says what a streamed call's span and metrics carry (plain values, no OpenTelemetry import);
``otel`` hands them to OpenTelemetry and sets the SDK up from the ``OTEL_*`` variables. OpenTelemetry
comes only with ``pip install 'sseguard[otel]'``: nothing here imports it until ``load()`` is called,
and ``load()`` turns its absence into a ``ConfigError`` that names the extra.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from sseguard.errors import ConfigError

__all__ = ["load"]


def load() -> ModuleType:
    """``sseguard.telemetry.otel``, or a ``ConfigError`` saying to install ``sseguard[otel]``."""
    try:
        importlib.import_module("opentelemetry.sdk")
    except ImportError:
        raise ConfigError("OpenTelemetry is not installed: pip install 'sseguard[otel]'") from None
    return importlib.import_module("sseguard.telemetry.otel")
