"""A local Spark for the tests that compare its answers with DuckDB's (one per test module: starting
one costs seconds)."""

from __future__ import annotations

import os
import shutil
from typing import Any

import pytest


def local_spark() -> Any:
    """A local Spark (2 cores). Spark needs a Java runtime: without one this is a skip on a developer's
    machine and a failure under ``CI=true`` (``.ci/run`` installs it), so the Spark proof cannot vanish
    from CI unnoticed."""
    from sseguard.analyze.backends import spark_session

    if shutil.which("java") is None:
        missing = "no java on PATH: Spark needs a Java runtime (apt-get install default-jre-headless)"
        if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
            pytest.fail(f"CI=true and {missing}")
        pytest.skip(missing)
    return spark_session("local[2]")
