"""Fixtures shared by several test modules: the throw-away PostgreSQL server."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from support.postgres import find_bindir, postgres_server, require_bindir


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    """A fresh database on a PostgreSQL server started for this test session (skipped without the
    server binaries, except under ``CI=true``, where that fails)."""
    with postgres_server(require_bindir(os.environ, find_bindir())) as dsn:
        yield dsn
