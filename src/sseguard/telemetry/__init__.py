"""OpenTelemetry for the proxy, the probe and the strict transports, in the GenAI conventions.

``genai`` says what a streamed call's span and metrics carry (plain values, no OpenTelemetry import);
``otel`` hands them to OpenTelemetry and sets the SDK up from the ``OTEL_*`` variables. OpenTelemetry
comes only with ``pip install 'sseguard[otel]'``: nothing here imports it until ``load()`` is called,
and ``load()`` turns its absence into a ``MissingExtra`` (a ``ConfigError``) that names the extra.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from sseguard.extras import require

__all__ = ["load"]


def load() -> ModuleType:
    """``sseguard.telemetry.otel``, or a ``ConfigError`` saying to install ``sseguard[otel]``."""
    require("otel", "OpenTelemetry (--otel)")
    return importlib.import_module("sseguard.telemetry.otel")
