"""Moved modules' old import paths (the core, the parsers' vendors, the proxy's rooms, the renamed
probe and analysis modules) still work, warn, and give the very module of the new path
(src/sseguard/_moved.py)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

#: Literal table: the paths that moved into sseguard.core, and a name each must still carry.
OLD_TO_NEW = [
    ("sseguard.sse", "sseguard.core.sse", "SSEDecoder"),
    ("sseguard.errors", "sseguard.core.errors", "ConfigError"),
    ("sseguard.policy", "sseguard.core.policy", "Policy"),
    ("sseguard.verdict", "sseguard.core.verdict", "Ending"),
    ("sseguard.record", "sseguard.core.record", "Record"),
    ("sseguard.redact", "sseguard.core.redact", "Redactor"),
    ("sseguard.reasoning", "sseguard.core.reasoning", "ThinkSplitter"),
    ("sseguard.jsonarray", "sseguard.core.jsonarray", None),
    ("sseguard.contract", "sseguard.core.contract", "StreamChecker"),
    ("sseguard.toolcalls", "sseguard.core.toolcalls", "FAMILIES"),
    ("sseguard.toolcalls.family", "sseguard.core.toolcalls.family", "Family"),
    ("sseguard.probe.engine", "sseguard.probe.request", "run_request"),
    ("sseguard.analyze.engines", "sseguard.analyze.backends", "DuckDBBackend"),
    # the families moved into toolcalls/vendors/, the JSON-array builder into toolcalls/grammars/
    ("sseguard.core.toolcalls.glm", "sseguard.core.toolcalls.vendors.glm", "GLMParser"),
    ("sseguard.core.toolcalls.dsml", "sseguard.core.toolcalls.vendors.dsml", "DSMLParser"),
    ("sseguard.core.toolcalls.harmony", "sseguard.core.toolcalls.vendors.harmony", "HarmonyParser"),
    ("sseguard.core.toolcalls.kv_tags", "sseguard.core.toolcalls.vendors.kv_tags", "hunyuan_tags"),
    ("sseguard.core.toolcalls.json_array", "sseguard.core.toolcalls.grammars.json_array_family",
     "json_array_family"),
    ("sseguard.toolcalls.hermes", "sseguard.core.toolcalls.vendors.hermes", "FAMILY"),
    # the proxy's rooms: the modules code outside the package imported
    ("sseguard.proxy.app", "sseguard.proxy.driver.app", "serve_proxy"),
    ("sseguard.proxy.worker", "sseguard.proxy.driver.worker", "serve_worker"),
]
#: The first warning an import raises names the outermost moved package it passes through.
FIRST_WARNING = {"sseguard.toolcalls.family": "sseguard.toolcalls moved to sseguard.core.toolcalls",
                 "sseguard.toolcalls.hermes": "sseguard.toolcalls moved to sseguard.core.toolcalls"}


@pytest.mark.parametrize(("old", "new", "name"), OLD_TO_NEW, ids=[o for o, _, _ in OLD_TO_NEW])
def test_an_old_path_warns_and_is_the_new_module(old: str, new: str, name: str | None) -> None:
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
        f"print('name:', {name!r} is None or hasattr(old, {name!r}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert f"warned: {FIRST_WARNING.get(old, f'{old} moved to {new}')}" in out
    assert "same: True" in out and "name: True" in out


def test_from_import_of_an_old_path_gives_the_same_class() -> None:
    with pytest.warns(DeprecationWarning, match="sseguard.core.errors"):
        old = importlib.import_module("sseguard.errors")
    from sseguard.core.errors import ConfigError

    assert old.ConfigError is ConfigError


def test_a_name_that_never_moved_is_not_answered() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("sseguard.no_such_module")
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("sseguard.toolcalls.no_such_family")
