"""The optional extras and the modules each one brings, and one clear error when one is missing.

``pip install sseguard`` gives the parsers, checkers, proxy, probe, chaos, strict transports, engine
plugins and the CLI. What only one command needs — DuckDB and the statistics stack for ``analyze``,
psycopg for a PostgreSQL store, pyspark, tokenizers, Locust, OpenTelemetry — is an extra
(pyproject.toml). A feature that needs one calls :func:`require` before it imports anything of it,
so a missing extra is one line that says what to install (``MissingExtra``, a ``ConfigError``: exit
code 2 on the command line), never an ``ImportError`` traceback from deep inside.

Whether a module is installed is asked of the import system (``importlib.util.find_spec``), which
locates a module without importing it: the check costs no import time.
"""

from __future__ import annotations

import importlib.util

from sseguard.core.errors import ConfigError

#: Each extra of pyproject.toml and the top-level modules its packages install (import names, which
#: are not always the distribution names: ``psycopg[binary]`` imports as ``psycopg``).
EXTRAS: dict[str, tuple[str, ...]] = {
    "analyze": ("duckdb", "numpy", "scipy", "matplotlib"),
    "parquet": ("duckdb",),
    "postgres": ("psycopg",),
    "spark": ("pyspark",),
    "tokenizer": ("tokenizers",),
    "locust": ("locust",),
    "otel": ("opentelemetry.sdk", "opentelemetry.exporter.otlp"),
}


class MissingExtra(ConfigError):
    """A feature needs an extra that is not installed; the message names the extra to install."""

    def __init__(self, extra: str, module: str, needed_by: str) -> None:
        self.extra = extra
        self.module = module
        super().__init__(f"{needed_by} needs the [{extra}] extra (module {module!r} is not installed): "
                         f"pip install 'sseguard[{extra}]'")


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        # A finder that refuses the name (an import hook, a broken install) means it cannot be imported.
        return False


def missing(extra: str) -> str | None:
    """The first module of ``extra`` that is not installed; None when the extra is complete."""
    try:
        modules = EXTRAS[extra]
    except KeyError:
        raise ValueError(f"no extra named {extra!r}; known: {', '.join(EXTRAS)}") from None
    return next((m for m in modules if not _installed(m)), None)


def has(extra: str) -> bool:
    """Whether every module of ``extra`` is installed."""
    return missing(extra) is None


def require(extra: str, needed_by: str) -> None:
    """Raise :class:`MissingExtra` unless ``extra`` is installed; ``needed_by`` names the feature
    (``sseguard analyze``, ``a PostgreSQL store``) in the message."""
    module = missing(extra)
    if module is not None:
        raise MissingExtra(extra, module, needed_by)
