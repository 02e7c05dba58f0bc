"""The proxy's modules that code outside the package imported keep their old paths after the rooms
became folders (issue 46): the old name warns and is the very module of the new one."""

from __future__ import annotations

import subprocess
import sys

import pytest

#: Literal table: old path, new path, a name the module must still carry.
OLD_TO_NEW = [
    ("sseguard.proxy.app", "sseguard.proxy.driver.app", "serve_proxy"),
    ("sseguard.proxy.worker", "sseguard.proxy.driver.worker", "serve_worker"),
]


@pytest.mark.parametrize(("old", "new", "name"), OLD_TO_NEW, ids=[o for o, _, _ in OLD_TO_NEW])
def test_an_old_proxy_path_warns_and_is_the_new_module(old: str, new: str, name: str) -> None:
    code = (
        "import warnings, importlib\n"
        "warnings.simplefilter('error', DeprecationWarning)\n"
        f"new = importlib.import_module({new!r})\n"
        "try:\n"
        f"    importlib.import_module({old!r})\n"
        "except DeprecationWarning as e:\n"
        "    print('warned:', e)\n"
        "warnings.simplefilter('ignore', DeprecationWarning)\n"
        f"old = importlib.import_module({old!r})\n"
        "print('same:', old is new)\n"
        f"print('name:', hasattr(old, {name!r}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert f"warned: {old} moved to {new}" in out
    assert "same: True" in out and "name: True" in out


def test_the_public_names_of_sseguard_proxy_still_resolve() -> None:
    import sseguard.proxy
    from sseguard.proxy.config import ProxyConfig
    from sseguard.proxy.driver.app import RunningProxy, run_proxy

    assert sseguard.proxy.ProxyConfig is ProxyConfig
    assert sseguard.proxy.run_proxy is run_proxy and sseguard.proxy.RunningProxy is RunningProxy
    assert sorted(sseguard.proxy.__all__) == ["OnBadEnd", "ProxyConfig", "RunningProxy",
                                              "make_proxy_app", "run_proxy", "serve_proxy"]
