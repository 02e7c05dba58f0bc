"""A package's lazily loaded public names (``sseguard._lazy``) are the very objects of their home
module, imported only when first asked for; any other name is the usual AttributeError."""

from __future__ import annotations

import subprocess
import sys

import pytest

import sseguard.proxy
import sseguard.testing
from sseguard._lazy import lazy_names


def test_a_lazy_name_is_the_object_of_its_home_module() -> None:
    from sseguard.proxy.config import ProxyConfig

    assert lazy_names("sseguard.proxy", {"ProxyConfig": "config"})("ProxyConfig") is ProxyConfig
    assert sseguard.proxy.ProxyConfig is ProxyConfig


def test_a_name_not_listed_is_an_attribute_error_naming_the_package() -> None:
    with pytest.raises(AttributeError, match=r"module 'sseguard.testing' has no attribute 'Nope'"):
        sseguard.testing.Nope  # noqa: B018 - the lookup is the test


def test_the_home_module_is_imported_only_when_its_name_is_asked_for() -> None:
    code = ("import sys, sseguard.testing as t; before = 'sseguard.testing._upstream' in sys.modules; "
            "t.ChaosUpstream; print(before, 'sseguard.testing._upstream' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         timeout=120).stdout
    assert out.split() == ["False", "True"]
