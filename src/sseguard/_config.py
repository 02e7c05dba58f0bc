"""Checks every adapter's configuration shares: listen addresses, numbers, strings.

The chaos server, the proxy and the probe each read flags and a TOML file; before this module each
kept its own ``parse_listen`` (which disagreed on ``:9000``) and its own number checks. One place keeps
the messages alike and the accepted forms the same. Every failure is a one-line ``ConfigError``.
"""

from __future__ import annotations

import math
from typing import Any

from sseguard.core.errors import ConfigError

#: Where a server listens when the address names only a port.
LOOPBACK = "127.0.0.1"


def parse_listen(spec: str, flag: str = "--listen") -> tuple[str, int]:
    """``127.0.0.1:9000``, ``[::1]:9000``, ``:9000`` or ``9000`` → (host, port); loopback by default."""
    text = spec.strip()
    host, port_text = LOOPBACK, text
    if text.startswith("["):
        end = text.find("]")
        if end == -1 or not text[end + 1:].startswith(":"):
            raise ConfigError(f"{flag} {spec!r} is not [IPv6]:PORT")
        host, port_text = text[1:end], text[end + 2:]
    elif ":" in text:
        head, _, port_text = text.rpartition(":")
        host = head or host
    elif not text.isdigit():
        raise ConfigError(f"{flag} {spec!r} is not HOST:PORT, :PORT or PORT (example: 127.0.0.1:8080)")
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ConfigError(f"{flag} {spec!r}: the port must be a number from 0 to 65535")
    return host, int(port_text)


def probability(value: Any, where: str) -> float:
    """A probability: a number from 0 to 1."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{where} must be a number between 0 and 1, not {value!r}")
    p = float(value)
    if not 0.0 <= p <= 1.0 or math.isnan(p):
        raise ConfigError(f"{where} must be between 0 and 1, not {value!r}")
    return p


def number(value: Any, where: str, *, minimum: float = 0.0) -> float:
    """A number ≥ ``minimum`` (a bool is not a number, nor is NaN)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise ConfigError(f"{where} must be a number, not {value!r}")
    if value < minimum:
        raise ConfigError(f"{where} must be ≥ {minimum:g}, not {value!r}")
    return float(value)


def integer(value: Any, where: str, *, minimum: int = 0) -> int:
    """A whole number ≥ ``minimum`` (a bool is not a number)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{where} must be an integer, not {value!r}")
    if value < minimum:
        raise ConfigError(f"{where} must be ≥ {minimum}, not {value!r}")
    return value


def string(value: Any, where: str) -> str:
    """A string, as a TOML value must be where text is expected."""
    if not isinstance(value, str):
        raise ConfigError(f"{where} must be a string, not {value!r}")
    return value


def seconds(value: Any, where: str) -> float:
    """A duration in seconds above 0."""
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value) or value <= 0:
        raise ConfigError(f"{where} must be a number of seconds above 0, not {value!r}")
    return float(value)


# Values that may be absent (None: not given, the next source decides) and may come as text.
def opt_string(value: Any, name: str) -> str | None:
    """A string, or None when not given."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{name} must be a string")
    return value


def opt_int(value: Any, name: str) -> int | None:
    """A whole number (text is read as one: flags and hand-written TOML), or None."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ConfigError(f"{name} must be a whole number")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} {value!r} is not a whole number") from None


def positive_int(value: Any, name: str) -> int | None:
    """A whole number ≥ 1, or None."""
    out = opt_int(value, name)
    if out is not None and out < 1:
        raise ConfigError(f"{name} must be at least 1")
    return out


def opt_float(value: Any, name: str) -> float | None:
    """A finite number (text is read as one), or None."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ConfigError(f"{name} must be a number")
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} {value!r} is not a number") from None
    if not math.isfinite(out):
        raise ConfigError(f"{name} must be finite")
    return out


def positive_float(value: Any, name: str) -> float | None:
    """A number above 0, or None."""
    out = opt_float(value, name)
    if out is not None and out <= 0:
        raise ConfigError(f"{name} must be positive")
    return out


def nonneg_float(value: Any, name: str) -> float | None:
    """A number ≥ 0, or None."""
    out = opt_float(value, name)
    if out is not None and out < 0:
        raise ConfigError(f"{name} must not be negative")
    return out
