"""Prometheus for the tests: the Debian ``prometheus`` package's ``prometheus`` and ``promtool``
binaries (``.ci/run`` installs them). Under ``CI`` a missing binary fails the test rather than
skipping it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "sseguard-alerts.yml"


def binary(name: str) -> str:
    """The path of ``name`` (``prometheus``, ``promtool``): fail under CI, skip elsewhere."""
    found = shutil.which(name)
    if found is None:
        if os.environ.get("CI"):
            pytest.fail(f"{name} is not installed (apt-get install prometheus)")
        pytest.skip(f"{name} is not installed (apt-get install prometheus)")
    return found
