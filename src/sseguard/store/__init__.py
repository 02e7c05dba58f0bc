"""Where records go: a SQLite file by default, PostgreSQL for a fleet of proxies sharing one store.

``open_store("sseguard.db")`` / ``open_store("sqlite:///runs/sseguard.db")`` open (and create) a SQLite
file in WAL mode; ``open_store("postgresql://user@host/db")`` a PostgreSQL table. Writes are
synchronous; put a ``BatchWriter`` (a thread) in front of a store to write from an event loop, or a
``store.process.ProcessWriter`` (a process of its own, what the proxy uses) where the loop must not
share its GIL and core with the writing.
"""

from __future__ import annotations

from sseguard.core.errors import ConfigError
from sseguard.extras import require
from sseguard.store._base import STORE_SCHEMA_VERSION, RecordStore, safe_target
from sseguard.store.batch import BatchWriter
from sseguard.store.sqlite import SQLiteStore

__all__ = ["STORE_SCHEMA_VERSION", "BatchWriter", "RecordStore", "SQLiteStore", "is_store_url",
           "open_store"]

_POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_store_url(source: str) -> bool:
    """Whether ``source`` names a store by URL (as opposed to a file path, which may be JSONL)."""
    return source.startswith(("sqlite://", *_POSTGRES_SCHEMES))


def open_store(url_or_path: str) -> RecordStore:
    """Open the store a path or URL names, creating its table if needed.

    A plain path or ``sqlite:///relative.db`` / ``sqlite:////absolute.db`` → SQLite;
    ``postgresql://…`` or ``postgres://…`` → PostgreSQL. Anything else is a ``ConfigError``.
    """
    target = url_or_path.strip()
    if not target:
        raise ConfigError("empty store path or URL (use a file path, sqlite:///path or postgresql://…)")
    if target.startswith(_POSTGRES_SCHEMES):
        require("postgres", "a PostgreSQL store")
        from sseguard.store.postgres import PostgresStore  # psycopg loads only when asked for

        return PostgresStore(target)
    if target.startswith("sqlite://"):
        path = target.removeprefix("sqlite://")
        if not path.startswith("/") or path == "/":
            raise ConfigError(f"bad SQLite URL {safe_target(target)!r}: write sqlite:///relative.db "
                              "or sqlite:////absolute/path.db")
        return SQLiteStore(path[1:])
    if "://" in target:
        scheme = target.split("://", 1)[0]
        raise ConfigError(f"unknown store scheme {scheme!r} in {safe_target(target)!r} "
                          "(use a file path, sqlite:///path or postgresql://…)")
    return SQLiteStore(target)
